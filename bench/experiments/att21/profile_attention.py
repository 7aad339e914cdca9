"""Issue 27's attention kernels in a loop, each in its own ``profiler.scope``, to be run under kprof with instruction
sampling so that ``kprof-analyze`` diagnoses every one (the analyzer's "no false alarm on these kernels"):

    python -m kprof -m pcsampling -o DIR -n attn bench/experiments/att21/profile_attention.py [--iters 2]
    kprof-analyze DIR/attn.hatchet --top 0 --no-check

Forward fp16 (the shipped defaults: FA3 order at D=128, the pointer forward at D=64), fp8 (the pointer forward, key
order), backward (default dQ modes: the separate pass at D=128, fused at D=64; and ``dq_mode="ds"`` at D=128), causal
and not, B=4, H=32, N=4096; cuDNN's backward beside them. ``--only`` picks groups (fwd, fp8, bwd, ds, dq128:
the separate pass with 128-key dQ steps, pf: the default with L1_PF, bwd64, cudnn). Each launch's FLOPs are printed so
that a diagnosis can be judged against the kernel's achieved FLOP/s.
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
from examples.kernels import attention_fa3 as AF  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=2)
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--only", nargs="*", default=["fwd", "fp8", "bwd", "ds", "dq128", "bwd64", "cudnn"])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--head-dims", type=int, nargs="+", default=[128, 64])
    ap.add_argument("--causal", type=int, nargs="+", default=[0, 1])
    args = ap.parse_args()
    Z, H, N = args.batch, args.heads, args.seq
    dev = args.device
    torch.manual_seed(0)
    for D in args.head_dims:
        q, k, v, do = (torch.randn(Z, H, N, D, device=dev, dtype=torch.float16) for _ in range(4))
        scale = D ** -0.5
        for causal in map(bool, args.causal):
            tag = f"d{D}_{'causal' if causal else 'full'}"
            flop = 4.0 * Z * H * N * N * D * (0.5 if causal else 1.0)
            print(f"{tag}: forward {flop / 1e9:.1f} GFLOP, backward {2.5 * flop / 1e9:.1f} GFLOP", flush=True)
            if "fwd" in args.only:
                fwd = (lambda: AF.attention(q, k, v, causal, scale)) if D == 128 else \
                    (lambda: A.attention_fwd(q, k, v, causal, scale))
                for _ in range(args.iters):
                    with profiler.scope(f"fwd_fp16_{tag}"):
                        fwd()
            if "fp8" in args.only and D == 128:
                (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in (q, k, v))
                vko = A.fp8_v_key_order(v8.transpose(-1, -2).contiguous())
                for _ in range(args.iters):
                    with profiler.scope(f"fwd_fp8_{tag}"):
                        A.attention_fp8(q8, k8, vko, qs, ks, vs, causal, scale, key_order=True)
                del q8, k8, v8, vko
            modes = [m for m, want in ((None, "bwd" if D == 128 else "bwd64"), ("ds", "ds"), ("dq128", "dq128"),
                                       ("pf", "pf")) if want in args.only and (m is None or D == 128)]
            if modes:
                o, lse = A.attention_fwd(q, k, v, causal, scale, return_lse=True)
                for mode in modes:
                    name = B.default_dq_mode(D, causal) if mode is None else mode
                    # dq128: the separate pass with 128-key steps in its dQ kernel, (128, 128, 8, 2) (spill-free,
                    # 225 KB on sm_90a; never timed before)
                    kw = dict(dq_mode="separate", dq_config=dict(BLOCK_N=128)) if mode == "dq128" else \
                        dict(dkdv_config=dict(L1_PF=True)) if mode == "pf" else dict(dq_mode=mode)
                    for _ in range(args.iters):
                        with profiler.scope(f"bwd_{name}_{tag}"):
                            B.attention_bwd(do, q, k, v, o, lse, causal, scale, **kw)
            if "cudnn" in args.only and dev == "cuda":
                # cuDNN's backward (SDPA's best backend on the H200) through autograd, for its kernel times
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
