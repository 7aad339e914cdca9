"""The block-pointer matmul (tests/block_kernels.py ``bp_matmul``, Triton's block-pointer style) with its
loads and store turned into TMA (the default on sm_90a) vs kept as masked loads (``KERNELC_TMA=0``), each
variant in its own process (the switch is read at compile time), interleaved rounds, cuBLAS alongside.

    python bench/experiments/tma/ab_block_pointer_tma.py        # writes results/ab_block_pointer_tma.json
"""
from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))  # bench/experiments/<topic>/
sys.path.insert(0, ROOT)

CONFIGS = [dict(BM=128, BN=128, BK=64, num_warps=4, num_stages=4), dict(BM=128, BN=256, BK=64, num_warps=8, num_stages=3)]


def child(n: int) -> None:
    """One variant (the environment decides): TFLOP/s per config, and cuBLAS, as JSON on stdout."""
    import torch
    from kernelc.testing import do_bench
    from tests import block_kernels as KS
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)
    tf = lambda ms: 2 * n ** 3 / ms / 1e9  # noqa: E731
    out = {}
    for cfg in CONFIGS:
        cfg = dict(cfg)
        grid = (n // cfg["BM"], n // cfg["BN"])
        run = lambda: KS.bp_matmul[grid](a, b, c, n, n, n, a.stride(0), a.stride(1), b.stride(0), b.stride(1),  # noqa: E731
                                         c.stride(0), c.stride(1), **cfg)
        ck = run()
        torch.testing.assert_close(c.float(), (a.float() @ b.float()), atol=0.5, rtol=1e-2)
        key = f"{cfg['BM']}x{cfg['BN']}x{cfg['BK']} w{cfg['num_warps']} s{cfg['num_stages']}"
        out[key] = {"tflops": tf(do_bench(run, warmup=25, rep=100, return_mode="median")),
                    "tma": "UTMALDG" in ck.asm["sass"]}
    out["cublas"] = {"tflops": tf(do_bench(lambda: torch.matmul(a, b), warmup=25, rep=100, return_mode="median"))}
    print(json.dumps(out))


def main() -> None:
    from bench.common import ab_rounds, write_results
    rows = ab_rounds(__file__, (4096, 8192), (("tma", {}), ("masked loads (KERNELC_TMA=0)", {"KERNELC_TMA": "0"})),
                     "config")
    for r in rows:  # cuBLAS is the same in both processes: its own variant
        if r["config"] == "cublas":
            r["variant"] = "cublas"
    write_results("ab_block_pointer_tma", rows, results_dir=os.path.join(HERE, 'results'))


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(int(sys.argv[2]))
    else:
        main()
