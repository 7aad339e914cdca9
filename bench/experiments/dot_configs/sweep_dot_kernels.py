"""Config sweep for the dot-heavy kernels (matmul, attention): kernelc and Triton on the same
configs, to see where each compiler's best lies. Writes bench/results/sweep_dot_kernels.json."""
from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(HERE))))  # bench/experiments/<topic>/

import torch  # noqa: E402

from bench.common import triton_twin, write_results  # noqa: E402
from kernelc.testing import do_bench  # noqa: E402

MATMUL = [  # BM, BN, BK, warps, stages
    (128, 128, 64, 4, 3), (128, 128, 64, 4, 4), (128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (256, 128, 64, 8, 3),
    (128, 128, 64, 8, 4), (128, 256, 32, 8, 4),
]
ATTN = [(128, 64, 8, 2), (128, 128, 8, 2), (128, 64, 4, 2), (128, 128, 8, 3)]


def main():
    from examples.kernels import attention as KA
    from examples.kernels import matmul as KM
    TM, TA = triton_twin("matmul"), triton_twin("attention")
    rows = []
    n = 4096
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    tf = lambda ms: 2 * n ** 3 / ms / 1e9  # noqa: E731
    for BM, BN, BK, w, s in MATMUL:
        cfg = dict(BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN, BLOCK_SIZE_K=BK, GROUP_SIZE_M=8, num_warps=w, num_stages=s)
        r = {"kernel": "matmul 4096^3 fp16", "config": f"{BM}x{BN}x{BK} w{w} s{s}"}
        for name, mod in (("kernelc", KM), ("triton", TM)) if not os.environ.get("SWEEP_ONLY_KERNELC") else (("kernelc", KM),):
            try:
                r[name] = tf(do_bench(lambda: mod.matmul(a, b, kernel=mod.matmul_kernel, **cfg), warmup=10, rep=40,
                                      return_mode="median"))
            except Exception as e:
                r[name] = f"{type(e).__name__}"
        rows.append(r)
        print(r, flush=True)
    Z, H, N, D = 4, 32, 4096, 128
    q, k, v = (torch.randn(Z, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
    for BM, BN, w, s in ATTN:
        for causal in (False,):
            flops = 4 * Z * H * N * N * D
            r = {"kernel": "attention 4x32x4096x128", "config": f"{BM}x{BN} w{w} s{s}"}
            for name, mod in (("kernelc", KA), ("triton", TA)) if not os.environ.get("SWEEP_ONLY_KERNELC") else (("kernelc", KA),):
                try:
                    ms = do_bench(lambda: mod.attention(q, k, v, causal=causal, BLOCK_M=BM, BLOCK_N=BN, num_warps=w,
                                                        num_stages=s), warmup=10, rep=40, return_mode="median")
                    r[name] = flops / ms / 1e9
                except Exception as e:
                    r[name] = f"{type(e).__name__}"
            rows.append(r)
            print(r, flush=True)
    tag = os.environ.get("SWEEP_TAG", "")
    for r in rows:
        r["variant"] = tag
    write_results("sweep_dot_kernels" + (f"_{tag}" if tag else ""), rows, results_dir=os.path.join(HERE, 'results'))


if __name__ == "__main__":
    main()
