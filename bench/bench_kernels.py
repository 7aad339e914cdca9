"""Kernel speed, side by side on one GPU in one run: kernelc vs Triton (same kernel source) vs torch.

    python bench/bench_kernels.py [names...]   # vector_add softmax layernorm matmul attention
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from bench.common import triton_twin, write_results  # noqa: E402
from kernelc.testing import do_bench  # noqa: E402


def bench(fn):
    return do_bench(fn, warmup=25, rep=100, return_mode="median")


def row(name, metric, ours, tri, ref, unit, ref_name):
    return {"benchmark": name, "unit": unit, "kernelc": metric(ours), "triton": metric(tri) if tri else None,
            ref_name: metric(ref) if ref else None,
            "kernelc/triton": (tri / ours) if tri else None, f"kernelc/{ref_name}": (ref / ours) if ref else None}


def vector_add(rows):
    from examples.kernels import vector_add as K
    T = triton_twin("vector_add")
    n = 1 << 28
    x, y = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
    gbs = lambda ms: 3 * n * 4 / ms / 1e6  # noqa: E731
    ours, tri, ref = bench(lambda: K.add(x, y)), bench(lambda: T.add(x, y)), bench(lambda: x + y)
    rows.append(row("vector add 2^28 fp32", gbs, ours, tri, ref, "GB/s", "torch"))


def softmax(rows):
    from examples.kernels import softmax as K
    T = triton_twin("softmax")
    for M, N in ((4096, 4096), (8192, 1024)):
        x = torch.randn(M, N, device="cuda")
        gbs = lambda ms: 2 * M * N * 4 / ms / 1e6  # noqa: E731
        ours, tri, ref = bench(lambda: K.softmax(x)), bench(lambda: T.softmax(x)), bench(lambda: torch.softmax(x, 1))
        rows.append(row(f"softmax {M}x{N} fp32", gbs, ours, tri, ref, "GB/s", "torch"))


def layernorm(rows):
    from examples.kernels import layernorm as K
    T = triton_twin("layernorm")
    M, N = 4096, 8192
    x = torch.randn(M, N, device="cuda", dtype=torch.float16)
    w, b = torch.rand(N, device="cuda", dtype=torch.float16), torch.rand(N, device="cuda", dtype=torch.float16)
    gbs = lambda ms: 2 * M * N * 2 / ms / 1e6  # noqa: E731
    ours = bench(lambda: K.layer_norm(x, w, b))
    tri = bench(lambda: T.layer_norm(x, w, b))
    ref = bench(lambda: torch.nn.functional.layer_norm(x, (N,), w, b))
    rows.append(row(f"layernorm fwd {M}x{N} fp16", gbs, ours, tri, ref, "GB/s", "torch"))


def matmul(rows):
    from examples.kernels import matmul as K
    T = triton_twin("matmul")
    for n, dt in ((4096, torch.float16), (8192, torch.float16), (4096, torch.bfloat16), (8192, torch.bfloat16)):
        a = torch.randn(n, n, device="cuda", dtype=dt)
        b = torch.randn(n, n, device="cuda", dtype=dt)
        tf = lambda ms: 2 * n ** 3 / ms / 1e9  # noqa: E731
        ours = bench(lambda: K.matmul(a, b))
        tri = bench(lambda: T.matmul(a, b))
        ref = bench(lambda: torch.matmul(a, b))
        best = K.matmul_autotuned.best_config
        r = row(f"matmul {str(dt).replace('torch.', '').replace('float16', 'fp16').replace('bfloat16', 'bf16')} {n}^3",
                tf, ours, tri, ref, "TFLOP/s", "cublas")
        r["config"] = repr(best)
        rows.append(r)


def attention(rows):
    from examples.kernels import attention as K
    T = triton_twin("attention")
    Z, H, N, D = 4, 32, 4096, 128
    q, k, v = (torch.randn(Z, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
    for causal in (False, True):
        flops = 4 * Z * H * N * N * D * (0.5 if causal else 1.0)
        tf = lambda ms: flops / ms / 1e9  # noqa: E731
        ours = bench(lambda: K.attention(q, k, v, causal=causal))
        tri = bench(lambda: T.attention(q, k, v, causal=causal))
        ref = bench(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal))
        rows.append(row(f"attention fwd {Z}x{H}x{N}x{D} fp16{' causal' if causal else ''}", tf, ours, tri, ref,
                        "TFLOP/s", "sdpa"))


ALL = {"vector_add": vector_add, "softmax": softmax, "layernorm": layernorm, "matmul": matmul,
       "attention": attention}

if __name__ == "__main__":
    names = sys.argv[1:] or list(ALL)
    rows = []
    for name in names:
        try:
            ALL[name](rows)
        except Exception as e:  # one failing benchmark must not hide the others
            import traceback
            traceback.print_exc()
            rows.append({"benchmark": name, "error": f"{type(e).__name__}: {str(e)[:300]}"})
    write_results("kernels", rows)
