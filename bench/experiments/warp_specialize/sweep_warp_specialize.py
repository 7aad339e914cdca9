"""Config sweep of the Hopper TMA kernels with and without warp specialisation, kernelc vs Triton on the
same configs (Triton only in the default pass). Run once per setting:

    KERNELC_WARP_SPECIALIZE=0 SWEEP_TAG=ws0 python bench/experiments/warp_specialize/sweep_warp_specialize.py
    SWEEP_TAG=ws1 python bench/experiments/warp_specialize/sweep_warp_specialize.py

SWEEP_PARTS=matmul,attention picks what runs (default both); SWEEP_MATMUL_N=4096 limits the matmul sizes.
Writes bench/results/sweep_warp_specialize_<tag>.json."""
from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(HERE))))  # bench/experiments/<topic>/

import torch  # noqa: E402

from bench.common import triton_twin, write_results  # noqa: E402
from kernelc.testing import do_bench  # noqa: E402

MATMUL = [(128, 128, 64, 4, 3), (128, 128, 64, 4, 4), (128, 256, 64, 8, 3), (128, 256, 64, 8, 4),
          (256, 128, 64, 8, 3), (128, 128, 64, 8, 4)]
ATTN = [(128, 128, 8, 2), (128, 64, 8, 3), (128, 64, 4, 2), (128, 128, 8, 3), (128, 64, 8, 2)]


def _run(fn):
    try:
        return do_bench(fn, warmup=10, rep=50, return_mode="median")
    except Exception as e:
        print(f"  {type(e).__name__}: {str(e)[:160]}", flush=True)
        return None


def main():
    from examples.kernels import attention_tma as KA
    from examples.kernels import matmul_persistent as KP
    from examples.kernels import matmul_tma as KM
    with_triton = not os.environ.get("SWEEP_ONLY_KERNELC")
    twins = {}
    if with_triton:
        for name in ("matmul_tma", "matmul_persistent", "attention_tma"):
            try:
                twins[name] = triton_twin(name)
            except Exception as e:
                print(f"no Triton twin of {name}: {e}")
    rows = []
    parts = os.environ.get("SWEEP_PARTS", "matmul,attention").split(",")
    sizes = [int(x) for x in os.environ.get("SWEEP_MATMUL_N", "4096,8192").split(",")] if "matmul" in parts else []
    for n in sizes:
        a = torch.randn(n, n, device="cuda", dtype=torch.float16)
        b = torch.randn(n, n, device="cuda", dtype=torch.float16)
        tf = lambda ms: 2 * n ** 3 / ms / 1e9 if ms else None  # noqa: E731
        cublas = tf(_run(lambda: torch.matmul(a, b)))
        for BM, BN, BK, w, s in MATMUL:
            cfg = dict(BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN, BLOCK_SIZE_K=BK, GROUP_SIZE_M=8, num_warps=w, num_stages=s)
            for kname, mod, fn in (("matmul_tma", KM, "matmul_tma"), ("matmul_persistent", KP, "matmul_persistent")):
                r = {"kernel": f"{kname} {n}^3 fp16", "config": f"{BM}x{BN}x{BK} w{w} s{s}", "cublas": cublas}
                kern = getattr(mod, fn + "_kernel")
                r["kernelc"] = tf(_run(lambda: getattr(mod, fn)(a, b, kernel=kern, **cfg)))
                if kname in twins:
                    T = twins[kname]
                    r["triton"] = tf(_run(lambda: getattr(T, fn)(a, b, kernel=getattr(T, fn + "_kernel"), **cfg)))
                rows.append(r)
                print(r, flush=True)
    Z, H, N, D = 4, 32, 4096, 128
    q, k, v = (torch.randn(Z, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
    for causal in (False, True) if "attention" in parts else ():
        flops = 4 * Z * H * N * N * D * (0.5 if causal else 1.0)
        tf = lambda ms: flops / ms / 1e9 if ms else None  # noqa: E731
        sdpa = tf(_run(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)))
        for BM, BN, w, s in ATTN:
            cfg = dict(BLOCK_M=BM, BLOCK_N=BN, num_warps=w, num_stages=s)
            r = {"kernel": f"attention_tma 4x32x4096x128{' causal' if causal else ''}",
                 "config": f"{BM}x{BN} w{w} s{s}", "sdpa": sdpa}
            r["kernelc"] = tf(_run(lambda: KA.attention(q, k, v, causal=causal, **cfg)))
            if "attention_tma" in twins:
                r["triton"] = tf(_run(lambda: twins["attention_tma"].attention(q, k, v, causal=causal, **cfg)))
            rows.append(r)
            print(r, flush=True)
    tag = os.environ.get("SWEEP_TAG", "")
    for r in rows:
        r["variant"] = tag
        r["KERNELC_WARP_SPECIALIZE"] = os.environ.get("KERNELC_WARP_SPECIALIZE", "auto")
    write_results("sweep_warp_specialize" + (f"_{tag}" if tag else ""), rows, results_dir=os.path.join(HERE, 'results'))


if __name__ == "__main__":
    main()
