"""Issue 23's "done when" on the overhead side, per workload, from this session's one-process runs: kprof over
the CUPTI floor, kprof over Proton and the control, each as the steady median pair ratio with its sign-test 95%
interval (raw too), and whether each criterion is shown by the rule fixed before the runs:

* within 2% of the floor: kprof/floor's upper bound < 1.02;
* not above Proton: kprof/proton's upper bound <= 1.00;
* the control: none/none (unprofiled blocks of consecutive rounds, the in-process analog of the spread between
  unprofiled processes) reads within 1% of 1.

    python3 bench/experiments/profiler_overhead/issue23_status.py [--out bench/results/NAME.json]

Sources are the results files named in SOURCES (a multi-way run's ``comparisons``; a two-way ``--against proton``
run's ``kprof`` entry).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
RES = os.path.join(ROOT, "bench", "results")

# (workload, comparison) -> (call, results file relative to bench/results)
SOURCES = {
    ("train", "kprof/floor"): ("R1 (s19)", "profiler_overhead_s19_r1_train_multi_h200.json"),
    ("train", "kprof/proton"): ("R1 (s19)", "profiler_overhead_s19_r1_train_multi_h200.json"),
    ("train", "none/none"): ("R1 (s19)", "profiler_overhead_s19_r1_train_multi_h200.json"),
    ("tiny", "kprof/floor"): ("R4 (s19)", "profiler_overhead_s19_r4_tiny_multi_h200.json"),
    ("tiny", "kprof/proton"): ("R4 (s19)", "profiler_overhead_s19_r4_tiny_multi_h200.json"),
    ("tiny", "none/none"): ("R4 (s19)", "profiler_overhead_s19_r4_tiny_multi_h200.json"),
    ("encoder", "kprof/floor"): ("R3 (s19)", "profiler_overhead_s19_r3_encoder_multi_h200.json"),
    ("encoder", "none/none"): ("R3 (s19)", "profiler_overhead_s19_r3_encoder_multi_h200.json"),
    ("encoder", "kprof/proton"): ("R0 (s19)", "s19_R0_h200/ovh18_r3/overhead_s18_r3_encoder_kprof_vs_proton.json"),
}


def _entry(wl, comp):
    call, rel = SOURCES[wl, comp]
    path = os.path.join(RES, rel)
    if not os.path.exists(path):
        return {"call": call, "file": rel, "missing": True}
    s = json.load(open(path))["summary"][wl]
    c = (s.get("comparisons") or {}).get(comp)
    if c is None and comp == "kprof/proton":   # a two-way kprof --against proton run
        e = s["profilers"]["kprof"]
        c = {"pairs": e["pairs"], "warm": e["warm"], "warm_sign_ci": e["warm_sign_ci"],
             "steady": e.get("warm_steady"), "steady_sign_ci": e.get("warm_steady_sign_ci")}
    if c is None:
        return {"call": call, "file": rel, "missing": True}
    return dict(c, call=call, file=rel)


def _met(comp, e):
    if e.get("missing") or e.get("steady") is None:
        return None
    if comp == "none/none":
        return abs(e["steady"] - 1) < 0.01
    if not e.get("steady_sign_ci"):   # too few pairs for an interval: not shown
        return False
    hi = e["steady_sign_ci"][1]
    return hi < 1.02 if comp == "kprof/floor" else hi <= 1.00


def status() -> dict:
    out = {}
    for wl in ("encoder", "train", "tiny"):
        out[wl] = {}
        for comp in ("kprof/floor", "kprof/proton", "none/none"):
            e = _entry(wl, comp)
            e["met"] = _met(comp, e)
            out[wl][comp] = e
    return out


def table(st: dict) -> str:
    rows = ["| workload | kprof / floor, steady [95%] (raw) | kprof / Proton, steady [95%] (raw) | control none/none, "
            "steady [95%] | pairs | calls |", "|---|---|---|---|---|---|"]

    def cell(e):
        if e.get("missing"):
            return "not run"
        mark = {True: "met", False: "not shown", None: "?"}[e["met"]]
        ci = e.get("steady_sign_ci")
        ci = f"[{ci[0]:.4f}, {ci[1]:.4f}]" if ci else "[no interval]"
        return f"{e['steady']:.4f} {ci} ({e['warm']:.4f}): **{mark}**"
    for wl, d in st.items():
        pairs = "/".join(str(d[c].get("pairs", "-")) for c in ("kprof/floor", "kprof/proton", "none/none"))
        calls = ", ".join(sorted({d[c]["call"] for c in d if not d[c].get("missing")})) or "-"
        rows.append(f"| {wl} | {cell(d['kprof/floor'])} | {cell(d['kprof/proton'])} | {cell(d['none/none'])} | "
                    f"{pairs} | {calls} |")
    return "\n".join(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    st = status()
    print(table(st))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"rules": {"kprof/floor": "steady upper bound < 1.02", "kprof/proton": "steady upper bound <= 1.00",
                                 "none/none": "steady median within 1% of 1"}, "status": st}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
