"""Issue 23, session 26: kprof against Proton with each profiler in its own processes (``--fine-order solo``), judged
by the rule fixed in request_s26_ovh26_r2.sh before any run (docs/performance.md, "kprof against Proton, each in its
own process").

    python3 bench/experiments/profiler_overhead/solo_verdict.py RESULTS.json [RESULTS2.json] [--out VERDICT.json]

Each file is one call (one ``reconcile_profilers overhead --fine-order solo`` run: processes of kprof and of Proton,
interleaved).  In every process the profiler P is compared with ``base`` (unprofiled) inside adjacent pairs, and
none/none2 is that process's control; a process's P/base is its profiler's overhead in its own state.

The rule, per call:
- pairs: every process's blocks after its first ``SKIP`` (2); kprof's pooled over the call's kprof processes,
  Proton's over its Proton processes; m_K, m_P their medians;
- the figure is kprof/Proton = m_K / m_P; its interval [lo_K / hi_P, hi_K / lo_P] from each median's 97.5%
  sign-test interval (the two hold together with at least 95%: Bonferroni; no assumption on the shape of either);
- the control is met if the call's none/none2 pairs pooled over all its processes have their 95% sign-test
  interval inside [0.99, 1.01] AND in every process, for each state switched into inside a P/base pair (P: its
  start; base: its stop), the median in-pair gap of the control pairs padded for it is within 25% of P/base's;
- "not above Proton: shown" if the control is met, the figure's upper bound is <= 1.00 and every kprof process's
  median over every Proton process's median (the cross pairings) is < 1.00; "above Proton: shown" if the lower
  bound is > 1.00 and every cross pairing is > 1.00; otherwise not decided;
- void if a process is missing (the call did not end by itself: only a partial file), there is not at least one
  process of each profiler, or a sampled profile of kprof or Proton is missing or empty.
Over the calls: the criterion is shown if every call given shows the same verdict (two calls: R2 and R3); with one
call the verdict is reported as that call's alone.
Reported, not deciding: the Hodges-Lehmann shift between kprof's and Proton's pair ratios (Mann-Whitney 95%), each
process's P/base and control, each process's unprofiled step (base, ms: kprof's processes against Proton's), the
settle step over the timed step, the in-pair switch times.
"""
import json
import math
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
if ROOT not in sys.path:   # run as a script from the tree's root (the request): bench importable
    sys.path.insert(0, ROOT)

SKIP = 2          # blocks left out at each process's start (--settle-pairs 2)
Z975 = 2.2414     # two-sided 97.5%: the normal quantile at 0.9875
GAP_TOL = 0.25
CONTROL = (0.99, 1.01)


def _ci(xs, z):
    from bench.reconcile_profilers import _order_stat_ci
    xs = sorted(xs)
    if not xs:
        return None, None, None
    r = _order_stat_ci(len(xs), z)
    m = statistics.median(xs)
    return (m, None, None) if r is None else (m, xs[r[0]], xs[r[1]])


def _rnd(v, k=4):
    return None if v is None else round(v, k)


def _load(path):
    if path.endswith(".gz"):
        import gzip
        d = json.load(gzip.open(path, "rt"))
    else:
        d = json.load(open(path))
    return d, bool(d.get("partial"))


def process_figures(c):
    """One process (a child of the run): its profiler, P/base and none/none2 pairs, gaps, base ms."""
    from bench.reconcile_profilers import fine_pair_ratios
    multi = c.get("multi") or []
    names = list(multi[0]["order"]) if multi else []
    p = names[0] if names else c.get("profiler")
    _, pr = fine_pair_ratios(multi, p, "base", SKIP)
    _, ctl = fine_pair_ratios(multi, "none", "none2", SKIP)
    gaps = c.get("swap_gap_ms") or {}
    base = [m for r in multi[SKIP:] for s, m in zip(r.get("segments") or [], r.get("seg_ms") or []) if s == "base"]
    rel = {}
    for r in multi[SKIP:]:
        for n, a, b in zip(r.get("segments") or [], r.get("settle_ms") or [], r.get("seg_ms") or []):
            if a and b:
                rel.setdefault(n, []).append(a / b)
    m, lo, hi = _ci(pr, 1.96)
    cm, clo, chi = _ci(ctl, 1.96)
    g_p, g_c = gaps.get(f"{p}/base"), gaps.get("none/none2")
    # the switch into P (its start) and into base (its stop) differ; the control's pairs took them in turn, each
    # padded to the median switch into its state: each must match (within GAP_TOL)
    into = {x: gaps[f"into {x}"] for x in (p, "base") if f"into {x}" in gaps}
    if into:
        matched = all(a and b and abs(b / a - 1) <= GAP_TOL for a, b in into.values())
    else:
        matched = bool(g_p and g_c and abs(g_c / g_p - 1) <= GAP_TOL)
    return {"profiler": p, "round": c.get("round"), "blocks": len(multi), "pairs": pr, "control_pairs": ctl,
            "P/base": [_rnd(m), _rnd(lo), _rnd(hi)], "none/none2": [_rnd(cm), _rnd(clo), _rnd(chi)],
            "n_pairs": len(pr), "gap_ms": {"P/base": g_p, "none/none2": g_c, **{f"into {x}": v for x, v in into.items()}},
            "gap_matched": matched,
            "base_ms": _rnd(statistics.median(base), 4) if base else None,
            "settle_over_timed": {n: round(statistics.median(v), 3) for n, v in rel.items()},
            "out_bytes": (c.get("out_bytes") or {}).get(p), "setup_s": c.get("setup_s"), "wall_s": c.get("wall_s")}


def call_verdict(path):
    if not os.path.exists(path):
        return {"file": os.path.basename(path), "verdict": "void: no results file", "order": [], "processes": []}
    d, partial = _load(path)
    procs = [process_figures(c) for c in d.get("children") or [] if c.get("multi")]
    out = {"file": os.path.basename(path), "partial": partial,
           "order": [p["profiler"] for p in procs]}
    void = []
    if partial:
        void.append("the call did not end by itself (partial file)")
    want = len([r for r in d.get("rows") or [] if r.get("profiler") in ("kprof", "proton") and "error" in r])
    if want:
        void.append(f"{want} process(es) failed or were skipped")
    K = [p for p in procs if p["profiler"] == "kprof"]
    P = [p for p in procs if p["profiler"] == "proton"]
    if not K or not P:
        void.append("not a process of each profiler")
    for p in procs:
        if not p["out_bytes"] or any(not b for b in p["out_bytes"]):
            void.append(f"{p['profiler']} (round {p['round']}) profile missing or empty")
    xk = [v for p in K for v in p["pairs"]]
    xp = [v for p in P for v in p["pairs"]]
    ctl = [v for p in procs for v in p["control_pairs"]]
    mk, lok, hik = _ci(xk, Z975)
    mp, lop, hip = _ci(xp, Z975)
    cm, clo, chi = _ci(ctl, 1.96)
    out["processes"] = [{k: v for k, v in p.items() if k not in ("pairs", "control_pairs")} for p in procs]
    out["kprof/base"] = {"pairs": len(xk), "median": _rnd(mk), "ci97.5": [_rnd(lok), _rnd(hik)]}
    out["proton/base"] = {"pairs": len(xp), "median": _rnd(mp), "ci97.5": [_rnd(lop), _rnd(hip)]}
    out["none/none2"] = {"pairs": len(ctl), "median": _rnd(cm), "ci95": [_rnd(clo), _rnd(chi)]}
    fig = lo = hi = None
    if mk and mp:
        fig = mk / mp
        if None not in (lok, hik, lop, hip):
            lo, hi = lok / hip, hik / lop
    out["kprof/proton"] = {"median_ratio": _rnd(fig), "ci95_bonferroni": [_rnd(lo), _rnd(hi)]}
    cross = [statistics.median(a["pairs"]) / statistics.median(b["pairs"]) for a in K for b in P
             if a["pairs"] and b["pairs"]]
    out["cross_pairings"] = [_rnd(v) for v in cross]
    if xk and xp:   # reported, not deciding
        from bench.reconcile_profilers import _hl_over
        est, hlo, hhi = _hl_over(xk, xp)
        out["hl_kprof_over_proton_%"] = [est, hlo, hhi]
    bk = [p["base_ms"] for p in K if p["base_ms"]]
    bp = [p["base_ms"] for p in P if p["base_ms"]]
    if bk and bp:   # reported, not deciding: processes' host speed differs (s25 R1: up to ~40%)
        out["base_ms_kprof_procs_over_proton_procs"] = _rnd(statistics.median(bk) / statistics.median(bp))
    if void:
        out["verdict"] = "void: " + "; ".join(void)
        return out
    out["control_met"] = bool(clo is not None and clo >= CONTROL[0] and chi <= CONTROL[1]
                              and all(p["gap_matched"] for p in procs))
    if not out["control_met"]:
        out["verdict"] = "not decided (control not met)"
    elif hi is not None and hi <= 1.00 and cross and all(v < 1.00 for v in cross):
        out["verdict"] = "not above Proton: shown"
    elif lo is not None and lo > 1.00 and cross and all(v > 1.00 for v in cross):
        out["verdict"] = "above Proton: shown"
    else:
        out["verdict"] = "not decided (interval or a cross pairing spans 1.00)"
    return out


def combine(calls):
    vs = [c["verdict"] for c in calls]
    if len(calls) == 1:
        return f"{vs[0]} (one call)"
    if all(v == vs[0] for v in vs) and vs[0].endswith("shown"):
        return f"{vs[0]} ({len(calls)} calls)"
    return "not decided over the calls: " + " | ".join(vs)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    out_path = None
    if "--out" in argv:
        i = argv.index("--out")
        out_path = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    calls = [call_verdict(p) for p in argv]
    res = {"calls": calls, "verdict": combine(calls) if calls else None}
    for c in calls:
        print(f"{c['file']}: order {','.join(c['order'])}")
        for p in c["processes"]:
            print(f"  {p['profiler']:6s} r{p['round']}  P/base {p['P/base']}  none/none2 {p['none/none2']}  "
                  f"pairs {p['n_pairs']}  gaps {p['gap_ms']}  base {p['base_ms']} ms  settle/timed "
                  f"{p['settle_over_timed'].get(p['profiler'])}")
        if "kprof/base" not in c:
            print(f"  verdict: {c['verdict']}")
            continue
        print(f"  kprof/base {c['kprof/base']}  proton/base {c['proton/base']}")
        print(f"  control none/none2 {c['none/none2']}  met {c.get('control_met')}")
        print(f"  kprof/proton {c['kprof/proton']}  cross {c['cross_pairings']}  HL% "
              f"{c.get('hl_kprof_over_proton_%')}  base kprof:proton procs {c.get('base_ms_kprof_procs_over_proton_procs')}")
        print(f"  verdict: {c['verdict']}")
    print(f"VERDICT: {res['verdict']}")
    if out_path:
        with open(out_path, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
