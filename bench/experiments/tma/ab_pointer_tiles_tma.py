"""The masked-pointer tutorial matmul (examples/kernels/matmul.py ``matmul_masked``) with its loads
turned into TMA copies by the compiler (the default on sm_90a, passes/pointer_tiles.py) vs kept as
cp.async loads (``KERNELC_AUTO_TMA=0``), next to the tutorial's ``% M`` matmul and torch (cuBLAS). Each
variant runs in its own process (the switch is read at compile time), interleaved rounds.

    python bench/experiments/tma/ab_pointer_tiles_tma.py        # writes results/ab_pointer_tiles_tma.json
"""
from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))  # bench/experiments/<topic>/
sys.path.insert(0, ROOT)


def child(n: int) -> None:
    """One variant (the environment decides): TFLOP/s of matmul_masked, matmul (one config) and torch."""
    import torch
    from examples.kernels import matmul as MM
    from kernelc.testing import do_bench
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    tf = lambda ms: 2 * n ** 3 / ms / 1e9  # noqa: E731
    ref = a.float() @ b.float()
    cfg = dict(MM.MASKED_DEFAULT_CONFIG)
    out = {}
    for name, run in (("matmul_masked", lambda: MM.matmul_masked(a, b)),
                      ("matmul (% M)", lambda: MM.matmul(a, b, **cfg))):
        torch.testing.assert_close(run().float(), ref, atol=0.5, rtol=1e-2)
        out[name] = {"tflops": tf(do_bench(run, warmup=25, rep=100, return_mode="median"))}
    out["torch"] = {"tflops": tf(do_bench(lambda: torch.matmul(a, b), warmup=25, rep=100, return_mode="median"))}
    print(json.dumps(out))


def main() -> None:
    from bench.common import ab_rounds, write_results
    rows = ab_rounds(__file__, (4096, 8192), (("auto-TMA", {}), ("cp.async (KERNELC_AUTO_TMA=0)",
                                                              {"KERNELC_AUTO_TMA": "0"})), "kernel")
    write_results("ab_pointer_tiles_tma", rows, results_dir=os.path.join(HERE, 'results'))


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(int(sys.argv[2]))
    else:
        main()
