"""The s25 request's rules applied to its swap runs (request_s25_proton.sh): per workload kprof/Proton and the
control none/none2, medians over all pairs with sign-test 95% intervals, the in-pair gaps and the profiles' sizes.

    python3 bench/experiments/profiler_overhead/swap_verdict.py DIR   # DIR holds profiler_overhead_s25_swap_*.json
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
if ROOT not in sys.path:   # run as a script from the tree's root (the request): bench importable
    sys.path.insert(0, ROOT)


def verdict(path, wl):
    """The rules of request_s25_proton.sh for one workload's results file; a dict with the figures and a verdict."""
    d = json.load(open(path))
    s = (d.get("summary") or {}).get(wl) or {}
    fp = s.get("fine_pairs") or {}
    ch = next((c for c in d.get("children") or [] if c.get("workload") == wl), {})
    kp, ctl = fp.get("kprof/proton"), fp.get("none/none2")
    gaps = ch.get("swap_gap_ms") or {}
    sizes = ch.get("out_bytes") or {}
    out = {"workload": wl, "kprof/proton": kp, "none/none2": ctl, "gap_ms": gaps, "out_bytes": sizes,
           "partial": bool(d.get("partial"))}
    # reported, not deciding: each state's settle step (the first after its start) over its timed step, medians
    rel = {}
    for r in (ch.get("multi") or [])[2:]:
        for n, a_, b_ in zip(r.get("segments") or [], r.get("settle_ms") or [], r.get("seg_ms") or []):
            if a_ and b_:
                rel.setdefault(n, []).append(a_ / b_)
    out["settle_over_timed"] = {n: round(sorted(v)[len(v) // 2], 3) for n, v in rel.items()}
    # reported, not deciding: ~1000 starts and finalizes of each profiler in one process -- a cost that grows with
    # them (a session registry, hooks left behind) would move the later half's figures and switch times
    multi = (ch.get("multi") or [])[2:]
    half = len(multi) // 2
    if half >= 2:
        import statistics
        from bench.reconcile_profilers import fine_pair_ratios
        out["halves"] = {}
        for name, part in (("first", multi[:half]), ("second", multi[half:])):
            _, pr = fine_pair_ratios(part, "kprof", "proton")
            _, pc = fine_pair_ratios(part, "none", "none2")
            g = [x for r in part for x in (r.get("gap_ms") or [])]
            out["halves"][name] = {"kprof/proton": round(statistics.median(pr), 4) if pr else None,
                                   "none/none2": round(statistics.median(pc), 4) if pc else None,
                                   "gap_ms": round(statistics.median(g), 3) if g else None}
    void = []
    if d.get("partial") or not kp or not ctl:
        void.append("run did not end by itself / no comparisons")
    for p in ("kprof", "proton"):
        if not sizes.get(p) or any(not b for b in sizes[p]):
            void.append(f"{p} profile missing or empty")
    a, b = gaps.get("kprof/proton"), gaps.get("none/none2")
    out["gap_matched"] = bool(a and b and abs(b / a - 1) <= 0.25)
    if void:
        out["verdict"] = "void: " + "; ".join(void)
        return out
    lo, hi = ctl["pair_sign_ci"]
    out["control_met"] = bool(lo is not None and lo >= 0.99 and hi <= 1.01 and out["gap_matched"])
    klo, khi = kp["pair_sign_ci"]
    if not out["control_met"]:
        out["verdict"] = "not decided (control not met)"
    elif khi is not None and khi <= 1.00:
        out["verdict"] = "not above Proton: shown"
    elif klo is not None and klo > 1.00:
        out["verdict"] = "above Proton: shown"
    else:
        out["verdict"] = "not decided (interval spans 1.00)"
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    root = argv[0] if argv else "."
    res = []
    for wl in ("tiny", "encoder", "train"):
        p = os.path.join(root, f"profiler_overhead_s25_swap_{wl}_h200.json")
        if not os.path.exists(p):
            rounds = [f for f in os.listdir(root) if f.startswith(f"profiler_overhead_s25_swap_{wl}_h200") and "rounds" in f]
            print(f"{wl}: no results file (rounds file: {rounds or 'none'})")
            continue
        v = verdict(p, wl)
        res.append(v)
        for k in ("kprof/proton", "none/none2"):
            c = v[k] or {}
            print(f"{wl} {k}: PAIRS {c.get('pairs')} {c.get('pair_median')} {c.get('pair_sign_ci')} blocks "
                  f"{c.get('blocks')} {c.get('block_median')} {c.get('block_sign_ci')}")
        print(f"{wl} gaps ms {v['gap_ms']} matched {v['gap_matched']}; profile bytes "
              f"{ {k: sorted(set(x))[:3] for k, x in v['out_bytes'].items()} }; settle/timed {v['settle_over_timed']}; "
              f"halves {v.get('halves')}; VERDICT {v['verdict']}")
    with open(os.path.join(root, "swap_verdict.json"), "w") as f:
        json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
