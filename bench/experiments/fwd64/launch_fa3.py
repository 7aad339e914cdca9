"""Launch ``attention_fa3``'s forward a few times at one bench variant, so that Nsight Compute reads one launch
(a GPU is needed):

    ncu --clock-control none --set full --import-source yes -k regex:attn_fwd_fa3 --launch-skip 2 --launch-count 1 \\
        -o fa3_d64_causal python3 bench/experiments/fwd64/launch_fa3.py --variant fa3 --head-dim 64 --causal

``--variant``: ``fa3`` (the default forward) or a name of ``bench.bench_attention.FWD_VARIANTS`` (fp16/bf16 ones).
Batch 4, 32 heads, ``--seq`` tokens. The output is checked once against SDPA; the per-launch time from CUDA
events is printed, so a run without ncu is also a plain timing.
"""
from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)


def main(argv=None):
    import torch
    from bench.bench_attention import variant_forward
    from examples.kernels import attention_fa3 as AF
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--variant", default="fa3")
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--dtype", choices=["fp16", "bf16"], default="fp16")
    p.add_argument("--causal", action="store_true")
    p.add_argument("--launches", type=int, default=5)
    a = p.parse_args(argv)
    dt = torch.float16 if a.dtype == "fp16" else torch.bfloat16
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(4, 32, a.seq, a.head_dim, device="cuda", dtype=dt, generator=g) for _ in range(3))
    scale = a.head_dim ** -0.5
    if a.variant == "fa3":
        fwd = first = lambda *x: AF.attention(*x)  # noqa: E731
    else:
        fwd, first = variant_forward(a.variant)
    o = first(q, k, v, a.causal, scale)
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=a.causal, scale=scale)
    err = ((o.float() - want.float()).abs().max() / want.float().abs().max()).item()
    print(f"{a.variant} D={a.head_dim} N={a.seq} {a.dtype} causal={a.causal}: relative max error {err:.3g}")
    flop = 4 * 4 * 32 * a.seq * a.seq * a.head_dim * (0.5 if a.causal else 1.0)
    for _ in range(a.launches):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fwd(q, k, v, a.causal, scale)
        e.record()
        e.synchronize()
        ms = s.elapsed_time(e)
        print(f"  {ms:.4f} ms  {flop / ms / 1e9:.1f} TFLOP/s")
    return 0 if err < 2e-2 else 1


if __name__ == "__main__":
    sys.exit(main())
