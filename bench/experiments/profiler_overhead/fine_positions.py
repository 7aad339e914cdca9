"""Where in a ``--fine`` block a segment's time goes: per position, the segment's ms per step over its state's
mean in that block (so states' own costs drop out), median over blocks; per state and position parity of the
block; and the control none/none2 per block parity.  Reads an overhead results file (or a rounds file) whose
fine rounds carry ``segments`` and ``seg_ms`` (bench/reconcile_profilers.py, session 21 on).

    python3 bench/experiments/profiler_overhead/fine_positions.py RESULTS.json [--skip 2]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict


def analyse(rounds, skip=2):
    pos = defaultdict(list)          # position -> relative segment time
    ctrl = defaultdict(list)         # block parity -> none/none2
    for i, r in enumerate(rounds):
        if i < skip or "seg_ms" not in r:
            continue
        segs, ms = r["segments"], r["seg_ms"]
        mean = defaultdict(list)
        for s, v in zip(segs, ms):
            mean[s].append(v)
        mean = {s: statistics.fmean(v) for s, v in mean.items()}
        for j, (s, v) in enumerate(zip(segs, ms)):
            pos[j].append(v / mean[s])
        if "none" in r["ms"] and "none2" in r["ms"]:
            ctrl[i % 2].append(r["ms"]["none"] / r["ms"]["none2"])
    return ({j: round(statistics.median(v), 4) for j, v in sorted(pos.items())},
            {p: (len(v), round(statistics.median(v), 4)) for p, v in sorted(ctrl.items())})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path")
    ap.add_argument("--skip", type=int, default=2, help="each process's first blocks left out (settle)")
    a = ap.parse_args(argv)
    d = json.load(open(a.path))
    for c in d.get("children") or []:
        if "multi" not in c:
            continue
        by_pos, ctrl = analyse(c["multi"], a.skip)
        print(f"{c['workload']}: blocks {len(c['multi'])}; control none/none2 by block parity (n, median): {ctrl}")
        print("  position: median of segment / its state's block mean")
        print("  " + " ".join(f"{j}:{v:.3f}" for j, v in by_pos.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
