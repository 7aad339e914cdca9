"""(att24) The D=128 backward's default (ds under 4x dQ's bytes) and cuDNN's backward, each in its own
``profiler.scope``, for kprof's instruction sampling: where ds's dK/dV loop waits at N 4096 and 16384.

    python -m kprof -m pcsampling -o DIR -n NAME bench/experiments/att24/pcs.py --seq 16384 --causal 0
    python -m analyzer DIR/NAME.hatchet --top 0 --no-check --lines 12
"""
from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

import torch  # noqa: E402

import profiler  # noqa: E402
from examples.kernels import attention as A  # noqa: E402
from examples.kernels import attention_bwd as B  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=1)
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--causal", type=int, nargs="+", default=[0])
    ap.add_argument("--cudnn", type=int, default=1)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    Z, H, N, D = args.batch, args.heads, args.seq, 128
    dev = args.device
    torch.manual_seed(0)
    q, k, v, do = (torch.randn(Z, H, N, D, device=dev, dtype=torch.float16) for _ in range(4))
    scale = D ** -0.5
    for causal in map(bool, args.causal):
        tag = f"n{N}_{'causal' if causal else 'full'}"
        o, lse = A.attention_fwd(q, k, v, causal, scale, return_lse=True)
        for _ in range(args.iters):
            with profiler.scope(f"bwd_default_{tag}"):
                B.attention_bwd(do, q, k, v, o, lse, causal, scale)
        if args.cudnn and dev == "cuda":
            from torch.nn.attention import SDPBackend, sdpa_kernel
            qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                og = torch.nn.functional.scaled_dot_product_attention(qg, kg, vg, is_causal=causal, scale=scale)
                for _ in range(args.iters):
                    with profiler.scope(f"bwd_cudnn_{tag}"):
                        og.backward(do, retain_graph=True)
            del qg, kg, vg, og
    if dev == "cuda":
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
