"""The pointer attention tutorial (examples/kernels/attention.py) under the compiler's automatic
choices on sm_90a -- its q/k/v tiles turned into TMA copies (passes/pointer_tiles.py) and, having two
dots in its loop, warp-specialised at 8 warps (codegen/warp_specialize.py) -- against each switched
off in its own process (``KERNELC_WARP_SPECIALIZE=0``, ``KERNELC_AUTO_TMA=0``) and against warp
specialisation forced on at every warp count (``KERNELC_WARP_SPECIALIZE=1``: the evidence for the
``auto`` policy's 8-warp condition), for a few launch configurations, next to torch SDPA.
B=4 H=32 L=4096 D=128 fp16, causal and not; interleaved rounds.

    python bench/experiments/tma/ab_attention_auto_tma.py       # writes results/ab_attention_auto_tma.json
"""
from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))  # bench/experiments/<topic>/
sys.path.insert(0, ROOT)

# (BLOCK_M, BLOCK_N, num_warps, num_stages); the first is attention()'s default
CONFIGS = ((128, 64, 4, 2), (128, 128, 8, 2), (128, 64, 8, 3))
VARIANTS = (("auto-TMA + warp-specialised (default)", {}),
            ("auto-TMA, KERNELC_WARP_SPECIALIZE=0", {"KERNELC_WARP_SPECIALIZE": "0"}),
            ("auto-TMA, KERNELC_WARP_SPECIALIZE=1", {"KERNELC_WARP_SPECIALIZE": "1"}),
            ("cp.async, KERNELC_AUTO_TMA=0", {"KERNELC_AUTO_TMA": "0"}))


def child(causal: int) -> None:
    """One variant (the environment decides): TFLOP/s of each configuration and of SDPA."""
    import json

    import torch
    from examples.kernels import attention as A
    from kernelc.testing import do_bench
    Z, H, N, D = 4, 32, 4096, 128
    torch.manual_seed(0)
    q, k, v = (torch.randn(Z, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
    flops = 4 * Z * H * N * N * D * (0.5 if causal else 1.0)
    tf = lambda ms: flops / ms / 1e9  # noqa: E731
    sdpa = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))  # noqa: E731
    want = sdpa().float()
    out = {}
    for bm, bn, w, s in CONFIGS:
        run = lambda: A.attention(q, k, v, causal=bool(causal), BLOCK_M=bm, BLOCK_N=bn,  # noqa: E731
                                  num_warps=w, num_stages=s)
        err = (run().float() - want).abs().max().item()
        out[f"{bm}x{bn} w{w} s{s}"] = {"tflops": tf(do_bench(run, warmup=25, rep=100, return_mode="median")),
                                      "max_abs_err_vs_sdpa": err}
    out["sdpa"] = {"tflops": tf(do_bench(sdpa, warmup=25, rep=100, return_mode="median"))}
    print(json.dumps(out))


def main() -> None:
    from bench.common import ab_rounds, write_results
    rows = ab_rounds(__file__, (0, 1), VARIANTS, "kernel")
    for r in rows:
        r["causal"] = bool(r.pop("n"))
    write_results("ab_attention_auto_tma", rows, results_dir=os.path.join(HERE, 'results'))


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(int(sys.argv[2]))
    else:
        main()
