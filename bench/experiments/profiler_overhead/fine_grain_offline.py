"""How far apart two unprofiled stretches may be and still read alike: the control's spread by design,
from the per-segment times a multi-way run already kept (``--step-probe``: ``seg_us`` per block).

CPU only; reads ``bench/results/*.json`` of ``reconcile_profilers overhead --against ... --step-probe``.
For each workload's unprofiled blocks (first segment out, as the steady estimator does):

- ``alt k``: the block's segments dealt alternately to A and B in runs of ``k`` segments; the sd over
  blocks of log(sum B / sum A) is what an A/A control interleaved at that grain reads, per block;
- ``halves``: first half against second half (two adjacent stretches of half a block);
- ``rounds``: one unprofiled block against the next one (a round apart: the multi-way control now).

Usage: ``python3 bench/experiments/profiler_overhead/fine_grain_offline.py [RESULTS.json ...]``
"""
import json
import math
import os
import statistics as st
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DEFAULT = ["profiler_overhead_s19_r4_tiny_multi_h200", "profiler_overhead_s19_r3_encoder_multi_h200",
           "profiler_overhead_s19_r1_train_multi_h200"]


def segments(path, arm="none"):
    d = json.load(open(path))
    out = []
    for c in d["children"]:
        for r in c.get("multi") or []:
            s = (r.get("sched") or {}).get(arm)
            if s and s.get("seg_us") and len(s["seg_us"]) > 2:
                out.append(s["seg_us"][1:])
    return out


def alt_sd(segs, k):
    lr = []
    for sg in segs:
        n = len(sg) // (2 * k) * (2 * k)
        if n == 0:
            continue
        a = sum(sg[i] for i in range(n) if (i // k) % 2 == 0)
        b = sum(sg[i] for i in range(n) if (i // k) % 2 == 1)
        lr.append(math.log(b / a))
    return (100 * st.pstdev(lr), 100 * st.mean(lr), len(lr)) if len(lr) > 2 else None


def main(argv):
    paths = argv or [os.path.join(ROOT, "bench", "results", n + ".json") for n in DEFAULT]
    out = {}
    for p in paths:
        segs = segments(p)
        if not segs:
            continue
        name = os.path.basename(p).rsplit(".", 1)[0]
        seg_ms = st.median([x for sg in segs for x in sg]) / 1e3
        row = {"blocks": len(segs), "segs_per_block": len(segs[0]), "seg_ms": round(seg_ms, 2), "alt": {}}
        print(f"{name}: {len(segs)} unprofiled blocks, {len(segs[0])} segments of ~{seg_ms:.2f} ms")
        for k in (1, 2, 4, 8, 16):
            r = alt_sd(segs, k)
            if r:
                row["alt"][k] = {"sd_pct": round(r[0], 2), "mean_pct": round(r[1], 2)}
                print(f"  alt k={k:2d} (runs of ~{k * seg_ms:.0f} ms): sd of the block's A/A ratio {r[0]:.2f}%, mean {r[1]:+.2f}%")
        lr = [math.log(sum(sg[len(sg) // 2:]) / sum(sg[:len(sg) // 2])) for sg in segs]
        row["halves"] = {"sd_pct": round(100 * st.pstdev(lr), 2), "mean_pct": round(100 * st.mean(lr), 2)}
        print(f"  halves: second over first sd {100 * st.pstdev(lr):.2f}%, mean {100 * st.mean(lr):+.2f}%")
        bm = [sum(sg) for sg in segs]
        lr = [math.log(bm[i + 1] / bm[i]) for i in range(len(bm) - 1)]
        row["rounds"] = {"sd_pct": round(100 * st.pstdev(lr), 2)}
        print(f"  one block against the next unprofiled one (a round apart): sd {100 * st.pstdev(lr):.2f}%")
        out[name] = row
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
