"""How often the fp8 forward's conditional rescale runs: for the A/B's inputs (normal fp16 Q, K quantised to e4m3,
the default's 64-row programs of 128-key blocks, 4 warps of 16 rows), the share of (warp, key block) trips in which a
row of the warp moves its exponent reference (its new max above the reference by more than the slack), i.e. the trips
where the guarded build runs the accumulator's multiplies; slack 0 is the default's loop (any rise of a row max).
``python3 bench/experiments/cr29/rescale_rate.py [--seq N] [--heads H] [--causal] [--cpu]``"""
from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)


def rate(q, k, slack, causal, bm=64, bn=128, warp_rows=16):
    import torch
    N, D = q.shape
    s = (q @ k.T) * (D ** -0.5 * 1.44269504)
    if causal:
        s = s.masked_fill(torch.ones(N, N, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    blocks = s.view(N, N // bn, bn).amax(-1)  # [rows, key blocks]: each block's row max
    ref = torch.full((N,), float("-inf"), device=s.device)
    moved = []
    for j in range(N // bn):
        if causal:  # a program stops at its diagonal block
            live = torch.arange(N, device=s.device) // bm * bm + bm > j * bn
        else:
            live = torch.ones(N, dtype=torch.bool, device=s.device)
        new = torch.maximum(ref, blocks[:, j])
        mv = (new > ref + slack) & live & (j > 0)  # the first block sets the reference (alpha 0 on l = 1, acc = 0)
        ref = torch.where(new > ref + slack, new, ref)
        moved.append((mv.view(-1, warp_rows).any(-1), (live & (j > 0)).view(-1, warp_rows).any(-1)))
    hit = sum(m.sum().item() for m, _ in moved)
    trips = sum(t.sum().item() for _, t in moved)
    return hit / max(trips, 1)


def main():
    import torch
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=16384)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--cpu", action="store_true")
    a = ap.parse_args()
    from examples.kernels import attention as A
    dev = "cpu" if a.cpu else "cuda"
    g = torch.Generator(device=dev).manual_seed(0)
    out = {}
    for h in range(a.heads):
        q, k = (torch.randn(a.seq, 128, generator=g, device=dev).half() for _ in range(2))
        (q8, qs), (k8, ks) = A.quantize_fp8(q), A.quantize_fp8(k)
        qf, kf = q8.float() * qs, k8.float() * ks
        for slack in (0, 8):
            out.setdefault(f"slack{slack}", []).append(round(rate(qf, kf, slack, a.causal), 5))
    print(json.dumps(dict(N=a.seq, causal=a.causal, heads=a.heads, share_of_warp_trips_rescaling=out)))


if __name__ == "__main__":
    main()
