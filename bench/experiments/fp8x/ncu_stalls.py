"""Two Nsight Compute ``--page source --csv`` exports of one kernel (kernelc's and Triton's build) side by side:
warp-state samples by stall reason, the hottest SASS lines, and the share of samples on the loop's waits for a
TMA ring stage (``SYNCS.PHASECHK.TRANS64.TRYWAIT`` and the branch that retries it) -- the measurement behind
docs/triton-tutorials.md, "06's fp8 d64: the ring's wait" (GPU call H11, request fp8x).

    python3 bench/experiments/fp8x/ncu_stalls.py KERNELC_source.csv TRITON_source.csv [--top 12]
"""
from __future__ import annotations

import argparse
import collections
import csv
import sys


def load(path):
    rows = list(csv.reader(open(path)))
    hi = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    head = rows[hi]
    idx = {k: j for j, k in enumerate(head)}
    stalls = [k for k in head if k.startswith("stall_") and "Not Issued" not in k]
    out = []
    for r in rows[hi + 1:]:
        if not r or not r[0].startswith("0x"):
            continue
        c = {k[6:]: float(r[idx[k]] or 0) for k in stalls}
        out.append((r[idx["Source"]].strip(), c, int(float(r[idx["Instructions Executed"]] or 0))))
    return out


def ring_wait_samples(rows) -> float:
    """Samples on each TRYWAIT executed as often as the hottest one (the loop's) and on its retry branch."""
    top = max(n for _, _, n in rows)
    total = 0.0
    for i, (src, c, n) in enumerate(rows):
        if "SYNCS.PHASECHK.TRANS64.TRYWAIT" in src and n == top:
            total += sum(c.values())
            # the retry branch: the first branch after it (ptxas may schedule a few instructions between)
            j = next((j for j in range(i + 1, min(i + 6, len(rows))) if "BRA" in rows[j][0]), None)
            if j is not None:
                total += sum(rows[j][1].values())
    return total


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernelc")
    ap.add_argument("triton")
    ap.add_argument("--top", type=int, default=12)
    a = ap.parse_args(argv)
    data = {"kernelc": load(a.kernelc), "triton": load(a.triton)}
    tot = {k: collections.Counter() for k in data}
    for k, rows in data.items():
        for _, c, _ in rows:
            tot[k].update(c)
    n = {k: sum(t.values()) for k, t in tot.items()}
    print(f"{'samples':28s} {n['kernelc']:10.0f} {n['triton']:10.0f}")
    for reason in sorted(tot["kernelc"], key=lambda r: -tot["kernelc"][r]):
        a_, b_ = tot["kernelc"][reason], tot["triton"][reason]
        if a_ or b_:
            print(f"  {reason:26s} {a_:10.0f} {b_:10.0f}   {a_ / n['kernelc']:6.1%} {b_ / n['triton']:6.1%}")
    for k, rows in data.items():
        w = ring_wait_samples(rows)
        print(f"{k}: ring-stage wait in the loop {w:.0f} samples, {w / n[k]:.1%} of the kernel's")
    for k, rows in data.items():
        print(f"== {k}: hottest lines")
        for src, c, ex in sorted(rows, key=lambda x: -sum(x[1].values()))[:a.top]:
            top3 = {r: int(v) for r, v in sorted(c.items(), key=lambda x: -x[1])[:3] if v}
            print(f"  {sum(c.values()):9.0f} {src[:64]:64s} {top3}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
