"""A/B of the fp8 matmul example's two kernels on the same inputs, interleaved rounds: descriptors made in
the kernel (TMA) vs pointers (cp.async), per size and config; prints TFLOP/s and writes
bench/experiments/tma/results/ab_fp8_tma.json.

    python bench/experiments/tma/ab_fp8_tma.py
    AB_FP8_CONFIGS='[{"BLOCK_SIZE_M": 128, ...}]' AB_FP8_ONLY_TMA=1 AB_FP8_NAME=sweep_fp8_tma python bench/experiments/tma/ab_fp8_tma.py
"""
from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(HERE))))  # bench/experiments/<topic>/

import torch  # noqa: E402

from bench.common import write_results  # noqa: E402
from kernelc.testing import do_bench  # noqa: E402

CONFIGS = [dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=128, GROUP_SIZE_M=8, num_warps=8, num_stages=3),
           dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=128, GROUP_SIZE_M=8, num_warps=8, num_stages=4)]


def main():
    import json
    from examples.kernels import matmul_fp8 as K
    configs = json.loads(os.environ["AB_FP8_CONFIGS"]) if os.environ.get("AB_FP8_CONFIGS") else CONFIGS
    kernels = [("tma", K.matmul_fp8_tma_kernel)]
    if os.environ.get("AB_FP8_ONLY_TMA", "0") in ("", "0"):
        kernels.append(("pointers", K.matmul_fp8_kernel))
    if os.environ.get("AB_FP8_AUTOTUNED", "0") not in ("", "0"):
        kernels.append(("tma autotuned", None))  # matmul_fp8's default path: the autotuned descriptor kernel
    rows = []
    for n in (4096, 8192):
        a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()
        sa, sb = torch.tensor(0.75, device="cuda"), torch.tensor(1.25, device="cuda")
        tf = lambda ms: 2 * n ** 3 / ms / 1e9  # noqa: E731
        for cfg in configs:
            for rnd in range(2):
                for name, kern in kernels:
                    kw = dict(kernel=kern, **cfg) if kern is not None else {}
                    ms = do_bench(lambda: K.matmul_fp8(a, b, sa, sb, torch.bfloat16, **kw),
                                  warmup=25, rep=100, return_mode="median")
                    rows.append({"n": n, "kernel": name, "round": rnd, "config": repr(cfg), "tflops": tf(ms)})
                    print(f"{n} {name:8s} round {rnd} {cfg}: {tf(ms):.0f} TFLOP/s", flush=True)
        ref = do_bench(lambda: torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16, use_fast_accum=True),
                       warmup=25, rep=100, return_mode="median")
        rows.append({"n": n, "kernel": "cublas_fast_accum", "tflops": tf(ref)})
        print(f"{n} cublas fast accum {tf(ref):.0f}", flush=True)
    write_results(os.environ.get("AB_FP8_NAME", "ab_fp8_tma"), rows, results_dir=os.path.join(HERE, 'results'))


if __name__ == "__main__":
    main()
