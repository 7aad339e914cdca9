"""Per pair of an overhead results file with per-step times (``--step-probe``, one step a segment): how much of
the profiled block's excess over its unprofiled block is the first step (the profiler was started just before
it; in the unprofiled block the first step is special too: the GPU is idle after the sync before every block), as
% of the block, and the excess of the remaining steps.  A start-up cost paid at every block start is an artifact
of starting the profiler before each block; a profiled run pays it once.

    python3 bench/experiments/profiler_overhead/first_step.py RESULTS.json [...]
"""
import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
from bench.reconcile_profilers import _sequence  # noqa: E402


def main(paths) -> int:
    for path in paths:
        d = json.load(open(path))
        for wl in sorted({r["workload"] for r in d["children"]}):
            print("==", os.path.basename(path), wl)
            for prof in sorted({r["profiler"] for r in d["children"] if r["workload"] == wl}):
                first, rest = [], []
                for r in d["children"]:
                    sched = r.get("sched") or []
                    if r["profiler"] != prof or r["workload"] != wl or not sched or "seg_us" not in (sched[0][1] or {}):
                        continue
                    seq = _sequence(r)
                    for i in range(0, len(seq), 2):
                        blk = {seq[i][0]: sched[i][1]["seg_us"], seq[i + 1][0]: sched[i + 1][1]["seg_us"]}
                        u, p = blk["u"], blk["p"]
                        if len(u) < 3 or len(p) < 3:
                            continue
                        mu = statistics.fmean(u[1:])
                        first.append(100 * (p[0] - u[0]) / mu / len(u))
                        rest.append(100 * (statistics.fmean(p[1:]) / mu - 1))
                if len(rest) < 2:
                    continue
                se = lambda x: statistics.pstdev(x) / math.sqrt(len(x))  # noqa: E731
                print(f"  {prof:13s} pairs {len(rest):3d}  step 0's excess, % of the block {statistics.fmean(first):+.2f} "
                      f"(se {se(first):.2f});  steps 1+: {statistics.fmean(rest):+.2f}% (se {se(rest):.2f}), "
                      f"median {statistics.median(rest):+.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
