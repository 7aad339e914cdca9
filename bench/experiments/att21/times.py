"""Per scope of a kprof profile of ``profile_attention.py``: each kernel's time a launch (CUPTI), the scope's time a
call (the sum of its kernels' times a launch over launches a call) and TFLOP/s at issue 27's FLOP counts
(forward 4 Z H N^2 D, backward 2.5x; causal half).

    python3 bench/experiments/att21/times.py PROFILE.hatchet [--iters 3] [--batch 4 --heads 32 --seq 4096] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import re


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("profile")
    ap.add_argument("--iters", type=int, default=3, help="calls a scope made (profile_attention.py --iters)")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    d = json.load(open(args.profile))
    root = d[0] if isinstance(d, list) else d
    rows = []
    for sc in root.get("children", []):
        name = sc["frame"]["name"]
        m = re.search(r"_d(\d+)_(full|causal)$", name)
        if not m:
            continue
        D, causal = int(m.group(1)), m.group(2) == "causal"
        flop = 4.0 * args.batch * args.heads * args.seq ** 2 * D * (0.5 if causal else 1.0)
        flop *= 2.5 if name.startswith("bwd") else 1.0
        kernels, total = [], 0.0
        for k in sc.get("children", []):
            met = k.get("metrics", {})
            t, n = met.get("time (ns)", 0.0), max(1, met.get("count", 1))
            kernels.append(dict(kernel=k["frame"]["name"], launches=n, us_per_launch=t / n / 1e3))
            total += t
        ms = total / args.iters / 1e6
        rows.append(dict(scope=name, ms_per_call=ms, tflops=flop / ms / 1e9 if ms else None, kernels=kernels))
        print(f"{name:32s} {ms:8.3f} ms a call  {flop / ms / 1e9 if ms else 0:7.1f} TFLOP/s")
        for k in kernels:
            print(f"    {k['us_per_launch']:10.1f} us x{k['launches']:<3d} {k['kernel'][:90]}")
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
