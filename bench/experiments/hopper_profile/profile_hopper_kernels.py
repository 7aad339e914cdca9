"""The Hopper kernels of bench_kernels (descriptor attention, TMA matmul) in a loop, to be run under kprof
with instruction sampling so `kprof-analyze` says where their time goes:

    python -m kprof -m pcsampling -o DIR -n hopper bench/experiments/hopper_profile/profile_hopper_kernels.py
    kprof-analyze DIR/hopper.hatchet
"""
from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(HERE))))  # bench/experiments/<topic>/

import torch  # noqa: E402

import profiler  # noqa: E402
from examples.kernels import attention_tma, matmul_tma  # noqa: E402


def main(iters: int = 5):
    Z, H, N, D = 4, 32, 4096, 128
    q, k, v = (torch.randn(Z, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    for _ in range(iters):
        with profiler.scope("attention_tma"):
            attention_tma.attention(q, k, v, BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=2)
        with profiler.scope("attention_tma_causal"):
            attention_tma.attention(q, k, v, causal=True, BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=2)
        with profiler.scope("matmul_tma"):
            matmul_tma.matmul_tma(a, b, BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=64, num_warps=8, num_stages=3)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
