"""Kernel speed, side by side on one GPU in one run: kernelc vs Triton (same kernel source) vs torch.

    python bench/bench_kernels.py [names...]   # vector_add softmax layernorm matmul matmul_tma
    # matmul_persistent matmul_device_desc matmul_fp8 attention attention_tma  (BENCH_RESULTS_NAME: results file name)
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
        r = row(f"matmul {str(dt).replace('torch.', '').replace('bfloat16', 'bf16').replace('float16', 'fp16')} {n}^3",
                tf, ours, tri, ref, "TFLOP/s", "cublas")
        r["config"] = repr(best)
        rows.append(r)


def matmul_tma(rows):
    """The tensor-descriptor matmul (examples/kernels/matmul_tma.py): on sm_90a TMA loads into an S-stage
    ring read in place by wgmma, TMA store epilogue. Autotuned over 128x128x64 / 128x256x64 blocks, 4/8
    warps, 3/4 stages; Triton runs the same source with its own host TensorDescriptor."""
    _descriptor_matmul(rows, "matmul_tma")


def _descriptor_matmul(rows, module, name=None):
    """kernelc vs Triton (the same example file ``module``.py) vs cuBLAS, fp16/bf16 at 4096^3 and 8192^3;
    the example module has ``<name>(a, b)`` and ``<name>_autotuned`` (``name`` defaults to ``module``)."""
    import importlib
    name = name or module
    K = importlib.import_module(f"examples.kernels.{module}")
    try:
        T = triton_twin(module)
    except Exception:  # no Triton (or it rejects the kernel): kernelc and cuBLAS only
        import traceback
        traceback.print_exc()
        T = None
    for n, dt in ((4096, torch.float16), (8192, torch.float16), (4096, torch.bfloat16), (8192, torch.bfloat16)):
        a = torch.randn(n, n, device="cuda", dtype=dt)
        b = torch.randn(n, n, device="cuda", dtype=dt)
        tf = lambda ms: 2 * n ** 3 / ms / 1e9  # noqa: E731
        ours = bench(lambda: getattr(K, name)(a, b))
        tri = bench(lambda: getattr(T, name)(a, b)) if T is not None else None
        ref = bench(lambda: torch.matmul(a, b))
        r = row(f"{name} {str(dt).replace('torch.', '').replace('bfloat16', 'bf16').replace('float16', 'fp16')} "
                f"{n}^3", tf, ours, tri, ref, "TFLOP/s", "cublas")
        r["config"] = repr(getattr(K, name + "_autotuned").best_config)
        if T is not None:
            r["triton_config"] = repr(getattr(T, name + "_autotuned").best_config)
        r["max_abs_err_vs_cublas"] = (getattr(K, name)(a, b).float() - torch.matmul(a, b).float()).abs().max().item()
        rows.append(r)


def matmul_fp8(rows):
    """e4m3 x e4m3 -> fp32 accumulate, per-tensor scales in the epilogue, bf16 out: vs torch._scaled_mm.

    B is column-major (``b_nk.t()``), the layout torch._scaled_mm takes. Our kernel and Triton's accumulate
    fp8 products in the tensor cores' fp8 accumulator (Triton's default), which is cuBLAS's
    ``use_fast_accum=True``: that is the reference column; cuBLAS without fast accumulation (torch's
    default) is reported too. ``matmul_fp8`` takes the descriptor kernel (TMA, maps built in the kernel) for
    these aligned operands; ``kernelc_pointers`` is the pointer (cp.async) kernel on the same inputs.
    """
    from examples.kernels import matmul_fp8 as K
    _triton_scratch_allocator()
    try:
        T = triton_twin("matmul_fp8")
    except Exception:  # no Triton, or it rejects the kernel: report kernelc and cuBLAS only
        import traceback
        traceback.print_exc()
        T = None
    for n in (4096, 8192):
        a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()  # [K, N], column-major
        sa = torch.tensor(0.75, device="cuda")
        sb = torch.tensor(1.25, device="cuda")
        out = torch.bfloat16
        tf = lambda ms: 2 * n ** 3 / ms / 1e9  # noqa: E731
        ours = bench(lambda: K.matmul_fp8(a, b, sa, sb, out))
        tri = bench(lambda: T.matmul_fp8(a, b, sa, sb, out)) if T is not None else None
        ref = bench(lambda: torch._scaled_mm(a, b, sa, sb, out_dtype=out, use_fast_accum=True))
        slow = bench(lambda: torch._scaled_mm(a, b, sa, sb, out_dtype=out))
        r = row(f"matmul fp8e4m3 {n}^3 (scaled, bf16 out)", tf, ours, tri, ref, "TFLOP/s", "cublas_fast_accum")
        r["cublas"] = tf(slow)
        r["kernelc_pointers"] = tf(bench(lambda: K.matmul_fp8(a, b, sa, sb, out, kernel=K.matmul_fp8_autotuned)))
        r["config"] = repr(K.matmul_fp8_tma_autotuned.best_config)
        want = torch._scaled_mm(a, b, sa, sb, out_dtype=out, use_fast_accum=True).float()
        got = K.matmul_fp8(a, b, sa, sb, out).float()
        r["max_rel_err_vs_cublas"] = ((got - want).abs().max() / want.abs().max()).item()
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


def matmul_persistent(rows):
    """The persistent tensor-descriptor matmul (examples/kernels/matmul_persistent.py): one program per SM
    walks the output tiles through the same TMA ring. Autotuned over 128x128x64 / 128x256x64 / 256x128x64
    blocks; Triton runs the same source."""
    _descriptor_matmul(rows, "matmul_persistent")


def matmul_device_desc(rows):
    """The persistent matmul on descriptors made in the kernel (``matmul_descriptor_persistent``): each
    program builds its three CUtensorMaps on the device (kernelc: at its entry, in global scratch the
    launcher provides; Triton: in the scratch of ``triton.set_allocator``), then runs the same tile loop."""
    _triton_scratch_allocator()
    _descriptor_matmul(rows, "matmul_persistent", "matmul_descriptor_persistent")


def _triton_scratch_allocator():
    """Triton needs a global-scratch allocator for descriptors made in a kernel (kernelc's launcher has its own)."""
    try:
        import triton
        triton.set_allocator(lambda size, alignment, stream: torch.empty(size, device="cuda", dtype=torch.int8))
    except Exception:  # no Triton: kernelc and the library reference only
        pass


ATTN_TMA_CONFIGS = [dict(BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=2),
                    dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3),
                    dict(BLOCK_M=128, BLOCK_N=64, num_warps=4, num_stages=2),
                    dict(BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=3)]


def attention_tma(rows):
    """Attention through tensor descriptors (examples/kernels/attention_tma.py), best of a few configs for
    each compiler (the same configs for both), vs torch SDPA."""
    from examples.kernels import attention_tma as K
    try:
        T = triton_twin("attention_tma")
    except Exception:
        import traceback
        traceback.print_exc()
        T = None
    Z, H, N, D = 4, 32, 4096, 128
    q, k, v = (torch.randn(Z, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
    for causal in (False, True):
        flops = 4 * Z * H * N * N * D * (0.5 if causal else 1.0)
        tf = lambda ms: flops / ms / 1e9  # noqa: E731

        def best(mod):
            out = []
            for cfg in ATTN_TMA_CONFIGS:
                try:
                    out.append((bench(lambda: mod.attention(q, k, v, causal=causal, **cfg)), cfg))
                except Exception as e:
                    print(f"attention_tma {cfg}: {type(e).__name__}: {str(e)[:200]}", flush=True)
            return min(out, key=lambda x: x[0]) if out else (None, None)
        ours, cfg = best(K)
        tri, tcfg = best(T) if T is not None else (None, None)
        ref = bench(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal))
        r = row(f"attention_tma fwd {Z}x{H}x{N}x{D} fp16{' causal' if causal else ''}", tf, ours, tri, ref,
                "TFLOP/s", "sdpa")
        r["config"], r["triton_config"] = repr(cfg), repr(tcfg)
        want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal).float()
        r["max_abs_err_vs_sdpa"] = (K.attention(q, k, v, causal=causal, **cfg).float() - want).abs().max().item()
        rows.append(r)


ALL = {"vector_add": vector_add, "softmax": softmax, "layernorm": layernorm, "matmul": matmul,
       "matmul_tma": matmul_tma, "matmul_persistent": matmul_persistent,
       "matmul_device_desc": matmul_device_desc, "matmul_fp8": matmul_fp8,
       "attention": attention, "attention_tma": attention_tma}

if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description="kernelc's example kernels against Triton, torch and cuBLAS on one GPU; "
                                             "writes bench/results/$BENCH_RESULTS_NAME.json (default kernels)")
    ap.add_argument("names", nargs="*", metavar="NAME", help=f"benchmarks to run (default: all): {', '.join(ALL)}")
    names = ap.parse_args().names or list(ALL)
    unknown = [n for n in names if n not in ALL]
    if unknown:
        ap.error(f"unknown benchmark {', '.join(map(repr, unknown))} (expected one of {', '.join(ALL)})")
    rows = []
    for name in names:
        try:
            ALL[name](rows)
        except Exception as e:  # one failing benchmark must not hide the others
            import traceback
            traceback.print_exc()
            rows.append({"benchmark": name, "error": f"{type(e).__name__}: {str(e)[:300]}"})
    write_results(os.environ.get("BENCH_RESULTS_NAME", "kernels"), rows)
