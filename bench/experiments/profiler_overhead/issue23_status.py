"""Issue 23's "done when" on the overhead side, per workload: kprof over the CUPTI floor, kprof over Proton and
the control that goes with each, every figure a median ratio with its sign-test 95% interval, and whether each
criterion is shown by the rules below (fixed before the runs they judge).

Two designs feed it (docs/performance.md, "## Profiler overhead"):

* **fine** (session 20, ``reconcile_profilers overhead --fine``): one kprof session per process, its segments of
  ~3 ms (one step of the encoder or ``train``) switched between the states kprof, floor (kprof's
  kernel/memcpy/memset activity kinds only) and none/none2 (all off); the figure is the median over blocks of
  each block's A/B ratio.  The control is none/none2: two states that are the same, measured as every other
  comparison is.  kprof/floor comes from it.
* **pairs** (session 22, ``--fine --fine-order pairs``): the fine design's states in blocks of 8 adjacent pairs
  (kprof/floor, none/none2), each comparison made inside its pair; the figure is the median over blocks of each
  block's geometric mean of its pair ratios.
* **pairs-all** (session 24): the pairs design's runs, the figure the median over *all* adjacent pairs with its
  sign-test interval (pairs are independent units: consecutive pair ratios' rank autocorrelation is within +-0.07
  in s22 R2 and s23 R1, ``enc_pairs_power.py``; the pair median is robust to the heavy tails that widen a block's
  mean of 4 pairs).  Fixed as the deciding figure before s24's R1 ran.
* **swap** (designed in session 25, ``--fine-order swap --against proton``): the pairs design's blocks with the
  states kprof, Proton, none, none2, each profiler segment bracketed by its own start and stop (untimed), the switches
  into none/none2 padded to the median profiler-to-profiler switch; judged as pairs-all (the median over all pairs),
  its control none/none2 counted only where its in-pair gap is within 25% of kprof/Proton's (``swap_gap_ms``).
  kprof/Proton and its control come from it where its file exists, else from the block design.
* **solo** (session 26, ``--fine-order solo --profilers kprof,proton``): each profiler in its own processes, in its
  own state (kprof's CUPTI initialised once, as a user's process), each process's P/base pairs (base unprofiled)
  and none/none2 control; kprof/Proton is the ratio of the pooled medians of kprof's and Proton's processes with
  the Bonferroni combination of their 97.5% sign-test intervals; judged per call and over the calls by
  ``solo_verdict.py`` (its rule, fixed before s26's R2); read from its verdict file where it exists.
* **block** (session 19, ``--against floor,proton,none``): one block per profiler per round, each profiler
  started and finalized around its block; the steady ratio (each block's first segment out).  Proton cannot be
  switched at a fine grain (its ``deactivate`` keeps its CUPTI subscriber, callbacks and activity kinds on), so
  kprof/Proton comes from this design, and its control is none/none of consecutive rounds.

Rules:

* within 2% of the floor: kprof/floor's upper bound < 1.02 (the fine design's kprof/floor without settle is itself
  an upper bound: switching kprof on leaves ~170 us behind in each segment, R3 of session 20; with settle -- untimed
  steps after each switch, ``--fine-settle`` -- it is not, and a whole interval above 1.02 is then shown not to hold);
* not above Proton: kprof/proton's upper bound <= 1.00;
* the control's spread < 1%: its whole 95% interval inside [0.99, 1.01] (the method reads within 1% of the truth
  where nothing differs, at 95%; session 19's rule, the median alone within 1%, is kept as ``median_within_1pct``).

    python3 bench/experiments/profiler_overhead/issue23_status.py [--out bench/results/NAME.json]
"""
from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
RES = os.path.join(ROOT, "bench", "results")

S20_FINE = "profiler_overhead_s20_r2_fine_h200.json"
# session 21: the shipped kprof (launch API records from the first scope on), 12-ms segments with ~1 ms of settle
S21_TINY = "profiler_overhead_s21_r1_tiny_lazy_h200.json"
# the encoder: 2-step segments, one untimed step after each switch, blocks of R1 and R2 pooled (the rule of R2's
# request); train: 1-step segments with settle (R3's request, run in call R2)
S21_ENC = "profiler_overhead_s21_enc_settle_pooled_h200.json"
S21_TRAIN = "profiler_overhead_s21_r3_train_settle_h200.json"
# session 22: the encoder with --fine-order pairs (1-step segments, settle), call R2 (R1's files were lost, R3 not run)
S22_ENC = "profiler_overhead_s22_r2_enc_pairs_h200.json.gz"
# session 23: the encoder's pairs run R1 (the session's pool by R1's rule: R1 alone, R2 had no room for it); train
# with kprof's scopes and kernelc hook in C: the final call's standard four states (kprof/floor and its control in one
# process) where it exists, else R2's kprof/floor (states kprof, kprof-py, floor, none: no control) and R1's
# control (the first C version, same design)
S23_ENC = "profiler_overhead_s23_r1_enc_pairs_h200.json.gz"
S23_TRAIN_R2 = "profiler_overhead_s23_r2_train_ab_h200.json"
S23_TRAIN_R1 = "profiler_overhead_s23_r1_train_fine_h200.json"
S23_TRAIN_FINAL = "profiler_overhead_s23_final_train_h200.json"
# session 24: the encoder in one ~105-s process of the pairs design, judged by the median over all pairs (R1's rule)
S24_ENC = "profiler_overhead_s24_r1_enc_pairs_h200.json.gz"
# session 24: train in the same design, final call F (merged main b73a4478; R2's run was cut by its timeout)
S24_TRAIN = "profiler_overhead_s24_f_train_pairs_h200.json"
# session 25's design for kprof/Proton (run next session): one file per workload, named by the request (gzipped
# where over bench/results' 128 KiB)
# bench/experiments/profiler_overhead/request_s25_proton.sh
S25_SWAP = "profiler_overhead_s25_swap_{}_h200.json"
# session 26's design for kprof/Proton on the encoder: solo_verdict.py's file over the calls R2 and R3
S26_SOLO = "profiler_overhead_s26_solo_verdict_h200.json"
# session 27: the same design and rule, a new pair of calls (a: kprof,proton order; b: proton,kprof), twice s26's
# budget per call; judged over the two new calls only (request_s27_solo_encoder.sh's header, fixed in s26)
S27_SOLO = "profiler_overhead_s27_solo_verdict_h200.json"
# (workload, criterion) -> (call, results file relative to bench/results, comparison in it, design), or a list of
# such: the first whose file exists
SOURCES = {
    ("encoder", "kprof/floor"): [("R1 (s24)", S24_ENC, "kprof/floor", "pairs-all"),
                                 ("R1 (s23)", S23_ENC, "kprof/floor", "pairs")],
    ("encoder", "control (fine)"): [("R1 (s24)", S24_ENC, "none/none2", "pairs-all"),
                                    ("R1 (s23)", S23_ENC, "none/none2", "pairs")],
    ("encoder", "kprof/proton"): [("solo (s27)", S27_SOLO, "kprof/proton", "solo"),
                                  ("solo (s26)", S26_SOLO, "kprof/proton", "solo"),
                                  ("swap (s25)", S25_SWAP.format("encoder"), "kprof/proton", "swap"),
                                  ("swap (s25)", S25_SWAP.format("encoder") + ".gz", "kprof/proton", "swap"),
                                  ("R0 (s19)", "s19_R0_h200/ovh18_r3/overhead_s18_r3_encoder_kprof_vs_proton.json",
                                   "kprof/proton", "block")],
    ("encoder", "control (block)"): [("solo (s27)", S27_SOLO, "none/none2", "solo"),
                                     ("solo (s26)", S26_SOLO, "none/none2", "solo"),
                                     ("swap (s25)", S25_SWAP.format("encoder"), "none/none2", "swap"),
                                     ("swap (s25)", S25_SWAP.format("encoder") + ".gz", "none/none2", "swap"),
                                     ("R3 (s19)", "profiler_overhead_s19_r3_encoder_multi_h200.json", "none/none",
                                      "block")],
    ("train", "kprof/floor"): [("F (s24)", S24_TRAIN, "kprof/floor", "pairs-all"),
                               ("final (s23)", S23_TRAIN_FINAL, "kprof/floor", "fine"),
                               ("R2 (s23)", S23_TRAIN_R2, "kprof/floor", "fine")],
    ("train", "control (fine)"): [("F (s24)", S24_TRAIN, "none/none2", "pairs-all"),
                                  ("final (s23)", S23_TRAIN_FINAL, "none/none2", "fine"),
                                  ("R1 (s23)", S23_TRAIN_R1, "none/none2", "fine")],
    ("train", "kprof/proton"): [("swap (s25)", S25_SWAP.format("train"), "kprof/proton", "swap"),
                                ("swap (s25)", S25_SWAP.format("train") + ".gz", "kprof/proton", "swap"),
                                ("R1 (s19)", "profiler_overhead_s19_r1_train_multi_h200.json", "kprof/proton", "block")],
    ("train", "control (block)"): [("swap (s25)", S25_SWAP.format("train"), "none/none2", "swap"),
                                   ("swap (s25)", S25_SWAP.format("train") + ".gz", "none/none2", "swap"),
                                   ("R1 (s19)", "profiler_overhead_s19_r1_train_multi_h200.json", "none/none", "block")],
    ("tiny", "kprof/floor"): ("R1 (s21)", S21_TINY, "kprof/floor", "fine"),
    ("tiny", "control (fine)"): ("R1 (s21)", S21_TINY, "none/none2", "fine"),
    ("tiny", "kprof/proton"): [("swap (s25)", S25_SWAP.format("tiny"), "kprof/proton", "swap"),
                               ("swap (s25)", S25_SWAP.format("tiny") + ".gz", "kprof/proton", "swap"),
                               ("R4 (s19)", "profiler_overhead_s19_r4_tiny_multi_h200.json", "kprof/proton", "block")],
    ("tiny", "control (block)"): [("swap (s25)", S25_SWAP.format("tiny"), "none/none2", "swap"),
                                  ("swap (s25)", S25_SWAP.format("tiny") + ".gz", "none/none2", "swap"),
                                  ("R4 (s19)", "profiler_overhead_s19_r4_tiny_multi_h200.json", "none/none", "block")],
}
CRITERIA = ("kprof/floor", "control (fine)", "kprof/proton", "control (block)")


def _entry(wl, crit, sources=None):
    src = (sources or SOURCES)[wl, crit]
    if isinstance(src, list):   # the first whose file exists (the last one otherwise: reported missing)
        src = next((x for x in src if os.path.exists(os.path.join(RES, x[1]))), src[-1])
    call, rel, comp, design = src
    base = {"call": call, "file": rel, "comparison": comp, "design": design}
    path = os.path.join(RES, rel)
    if not os.path.exists(path):
        return dict(base, missing=True)
    if path.endswith(".gz"):
        import gzip
        data = json.load(gzip.open(path, "rt"))
    else:
        data = json.load(open(path))
    if design == "solo":   # solo_verdict.py's file: the first call's figure, met by the verdict over the calls
        calls = [c for c in data.get("calls") or [] if c.get(comp)]
        if not calls:
            return dict(base, missing=True)
        c0 = calls[0]
        if comp == "kprof/proton":
            v, ci, n = c0[comp]["median_ratio"], c0[comp]["ci95_bonferroni"], c0["kprof/base"]["pairs"]
        else:
            v, ci, n = c0[comp]["median"], c0[comp]["ci95"], c0[comp]["pairs"]
        return dict(base, pairs=n, value=v, ci=ci, settle=True, verdict=data.get("verdict"),
                    calls_verdicts=[c.get("verdict") for c in calls], control_met=[c.get("control_met") for c in calls],
                    call_figures=[c[comp] for c in calls])
    s = data["summary"].get(wl)
    # a fine run with settle (untimed steps after each switch) times no switch's after-effect: not an upper bound
    settle = any((c.get("fine") or {}).get("settle_steps") for c in data.get("children") or []
                 if c.get("workload") == wl)
    if s is None:
        return dict(base, missing=True)
    if design in ("pairs", "pairs-all", "swap"):   # --fine-order pairs (session 22), swap (session 25)
        c = (s.get("fine_pairs") or {}).get(comp)
        if c is None:
            return dict(base, missing=True)
        if design == "swap":   # pairs-all, and the control's in-pair gap as kprof/Proton's (within 25%)
            g = next(((ch.get("swap_gap_ms") or {}) for ch in data.get("children") or [] if ch.get("workload") == wl), {})
            a, b = g.get("kprof/proton"), g.get("none/none2")
            return dict(base, pairs=c["pairs"], value=c["pair_median"], ci=c["pair_sign_ci"], raw=c["block_median"],
                        raw_ci=c["block_sign_ci"], settle=True, gap_ms=g,
                        gap_matched=bool(a and b and abs(b / a - 1) <= 0.25))
        if design == "pairs-all":   # the median over all pairs decides (session 24); the block figure beside it
            return dict(base, pairs=c["pairs"], value=c["pair_median"], ci=c["pair_sign_ci"],
                        raw=c["block_median"], raw_ci=c["block_sign_ci"], settle=bool(settle))
        return dict(base, pairs=c["blocks"], value=c["block_median"], ci=c["block_sign_ci"],
                    raw=c["pair_median"], raw_ci=c["pair_sign_ci"], settle=bool(settle))
    c = (s.get("comparisons") or {}).get(comp)
    if c is None and comp == "kprof/proton":   # a two-way kprof --against proton run
        e = s["profilers"]["kprof"]
        c = {"pairs": e["pairs"], "warm": e["warm"], "warm_sign_ci": e["warm_sign_ci"],
             "steady": e.get("warm_steady"), "steady_sign_ci": e.get("warm_steady_sign_ci")}
    if c is None:
        return dict(base, missing=True)
    # the figure: a fine run starts its profiler once (no start-up in any block): its block ratio; a block run:
    # the steady ratio (each block's first segment, the profiler's start-up, out)
    if design == "fine":
        value, ci = c["warm"], c.get("warm_sign_ci")
    else:
        value, ci = c.get("steady"), c.get("steady_sign_ci")
    return dict(base, pairs=c["pairs"], value=value, ci=ci, raw=c["warm"], raw_ci=c.get("warm_sign_ci"),
                settle=bool(settle))


def _met(crit, e):
    if e.get("missing") or e.get("value") is None:
        return None
    ci = e.get("ci")
    if e.get("design") == "solo":   # solo_verdict.py decided it, by its rule, over the calls
        if crit.startswith("control"):
            return all(e.get("control_met") or [False])
        v = e.get("verdict") or ""
        two = not v.endswith("(one call)")   # the rule: shown over the two calls, one call's reported as such
        e["shown_above"] = v.startswith("above Proton: shown") and two
        return v.startswith("not above Proton: shown") and two
    if crit.startswith("control"):
        e["median_within_1pct"] = abs(e["value"] - 1) < 0.01
        if e.get("design") == "swap" and not e.get("gap_matched"):   # its pairs not spaced as kprof/Proton's
            return False
        return bool(ci) and ci[0] >= 0.99 and ci[1] <= 1.01
    if not ci:   # too few pairs for an interval: not shown
        return False
    if crit == "kprof/floor":
        # the whole interval above +2%: shown not to hold -- except in the fine design, whose kprof/floor is an
        # upper bound (R3, 2026-11-29: switching kprof on leaves ~170 us in the segment it opens)
        bound = e.get("design") in ("fine", "pairs", "pairs-all") and not e.get("settle")
        e["shown_above"] = ci[0] > 1.02 and not bound
        if bound:
            e["upper_bound"] = True
        return ci[1] < 1.02
    e["shown_above"] = ci[0] > 1.00
    return ci[1] <= 1.00


def status(sources=None) -> dict:
    out = {}
    for wl in ("encoder", "train", "tiny"):
        out[wl] = {}
        for crit in CRITERIA:
            e = _entry(wl, crit, sources)
            e["met"] = _met(crit, e)
            out[wl][crit] = e
    return out


def table(st: dict) -> str:
    rows = ["| workload | kprof / floor (fine or pairs) [95%] | control none/none2 (fine or pairs) [95%] | kprof / Proton (solo, "
            "else swap, else block) [95%] | its control (solo, swap: none/none2, block: none/none) [95%] | blocks or pairs | calls |",
            "|---|---|---|---|---|---|---|"]

    def cell(e):
        if e.get("missing"):
            return "not run"
        mark = {True: "met", False: "not shown", None: "?"}[e["met"]]
        if e.get("shown_above"):
            mark = "not met (the whole interval above)"
        elif e.get("upper_bound") and not e["met"]:
            mark = "not shown (an upper bound)"
        elif e.get("design") == "solo" and (e.get("verdict") or "").endswith("(one call)") \
                and not e["comparison"].startswith("none"):
            mark = f"one call of the two: {e['verdict'][:-len(' (one call)')]}"
        ci = e.get("ci")
        ci = f"[{ci[0]:.4f}, {ci[1]:.4f}]" if ci else "[no interval]"
        return f"{e['value']:.4f} {ci}: **{mark}**"
    for wl, d in st.items():
        pairs = "/".join(str(d[c].get("pairs", "-")) for c in CRITERIA)
        calls = ", ".join(sorted({d[c]["call"] for c in d if not d[c].get("missing")})) or "-"
        rows.append(f"| {wl} | " + " | ".join(cell(d[c]) for c in CRITERIA) + f" | {pairs} | {calls} |")
    return "\n".join(rows)


# What a figure of a design does not say by itself (docs/performance.md, session 25's section)
NOTES = {"solo": "kprof and Proton each in its own processes (s26): the figure shown is the first call's; 'met' "
                 "is solo_verdict.py's verdict over the calls (both must show it)",
         "swap": "kprof's segments ran on a CUPTI re-initialised after cupti.finalize() (Proton cannot subscribe "
                 "beside it), whose per-launch cost rises with each re-initialisation (s25 R1, R2: CUPTI's calls alone "
                 "grow as much; kprof without finalize stayed at 0.6 us a launch over 377 cycles): kprof/Proton here is not kprof's cost as a user pays "
                 "it, and the encoder's 'above' is reported, not taken as decided"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    st = status()
    print(table(st))
    used = {e.get("design") for crit in st.values() for e in crit.values() if isinstance(e, dict)}
    notes = {d: n for d, n in NOTES.items() if d in used}
    for d, n in notes.items():
        print(f"note ({d}): {n}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"rules": {"kprof/floor": "upper bound < 1.02", "kprof/proton": "upper bound <= 1.00",
                                 "control": "95% interval inside [0.99, 1.01]",
                                 "figure": "fine: median block ratio; pairs: median block value of adjacent-pair "
                                           "ratios; pairs-all: median over all adjacent pairs; block: steady "
                                           "median pair ratio"},
                       "status": st, "notes": notes}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
