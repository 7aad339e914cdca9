"""Launch one kernel of interest a few times under one implementation, so that Nsight Compute can read the
same kernel compiled by kernelc and by Triton 3.6 (a GPU is needed; one process per implementation):

    ncu --clock-control none --set full -k regex:rope --launch-skip 3 --launch-count 1 -o rope_kernelc \\
        python3 bench/experiments/tutorial_gaps/ncu_targets.py --impl kernelc --target rope

Targets (``--target``):
- ``t03:BMxBNxBKxSxW``: tutorial 03's ``matmul_kernel`` at one config, fp16, M=N=K=4096 (``--size``);
- ``t09p:BMxBNxBKxSxW``: tutorial 09's ``matmul_kernel_persistent`` at one config (GROUP_SIZE_M 8), M = N = 8192,
  K = ``--size`` (default 4096), B given as the transpose of a row-major (N, K) tensor, one program per SM;
- ``mb:PREFIX``: the bench_memory_bound case whose name starts with PREFIX (examples/kernels/memory_bound.py,
  the same source under both implementations, at the bench's sizes);
- ``ln05dx``: tutorial 05's ``_layer_norm_bwd_dx_fused`` at M=4096 rows of N=``--size`` (default 16384),
  launched as the tutorial launches it;
- ``fwd06:D:CAUSAL[:fp8]``: tutorial 06's forward (``_attn_fwd`` held to ``--config BMxBNxSxW``), batch 4, 32
  heads, ``--size`` tokens; ``fp8``: e5m2 inputs with V transposed in memory, as the tutorial's fp8 benchmark
  prepares them (the check is then against SDPA of the rounded inputs, in fp8 output units);
- ``bwd06:D:CAUSAL``: tutorial 06's backward kernel ``_attn_bwd`` alone (``-k regex:'^_attn_bwd$'``), launched as
  the tutorial's ``backward`` launches it (bwd06_bench.py), batch 4, 32 heads, ``--size`` tokens; the check is the
  tutorial's whole backward against torch's own attention backward in fp16.

Tutorials are read from ``--tutorials`` (Triton's text, not part of this repository). Each launch is checked
once against torch before the timed launches, and the per-launch time from CUDA events is printed, so a run
without ncu is also a plain timing.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))


def _load(path: str, name: str, kernels_only: bool):
    if kernels_only:
        sys.path.insert(0, HERE)
        from tutorial_sweep import kernel_module
        p = os.path.join(tempfile.mkdtemp(prefix="ncu_"), f"{name}.py")
        with open(p, "w") as f:
            f.write(kernel_module(path))
        path = p
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _fn(k):
    # an autotuner's JIT function, launched at one config (a JIT function's own ``fn`` is the Python function)
    return k.fn if hasattr(k, "configs") else k


def target_t03(a, torch, triton):
    mod = _load(os.path.join(a.tutorials, "03-matrix-multiplication.py"), "k03", True)
    bm, bn, bk, s, w = (int(x) for x in a.config.split("x"))
    n = a.size or 4096
    A = torch.randn((n, n), device="cuda", dtype=torch.float16)
    B = torch.randn((n, n), device="cuda", dtype=torch.float16)
    C = torch.empty((n, n), device="cuda", dtype=torch.float16)
    grid = (triton.cdiv(n, bm) * triton.cdiv(n, bn),)
    k = _fn(mod.matmul_kernel)

    def run():
        k[grid](A, B, C, n, n, n, A.stride(0), A.stride(1), B.stride(0), B.stride(1), C.stride(0), C.stride(1),
                BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8, ACTIVATION="",
                num_stages=s, num_warps=w)
    run()
    torch.cuda.synchronize()
    err = (C.float() - (A @ B).float()).abs().max().item()
    return run, f"max_err {err:.3g}", 2.0 * n ** 3


def target_t09p(a, torch, triton):
    mod = _load(os.path.join(a.tutorials, "09-persistent-matmul.py"), "k09", True)
    bm, bn, bk, s, w = (int(x) for x in a.config.split("x"))
    M = N = 8192
    K = a.size or 4096
    A = torch.randn((M, K), device="cuda", dtype=torch.float16)
    B = torch.randn((N, K), device="cuda", dtype=torch.float16).T
    C = torch.empty((M, N), device="cuda", dtype=torch.float16)
    sms = torch.cuda.get_device_properties("cuda").multi_processor_count
    grid = (min(sms, triton.cdiv(M, bm) * triton.cdiv(N, bn)),)
    k = _fn(mod.matmul_kernel_persistent)

    def run():
        k[grid](A, B, C, M, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1), C.stride(0), C.stride(1),
                BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8, NUM_SMS=sms, num_stages=s,
                num_warps=w)
    run()
    torch.cuda.synchronize()
    err = (C.float() - (A @ B).float()).abs().max().item()
    return run, f"max_err {err:.3g}", 2.0 * M * N * K


def target_mb(a, torch, triton, prefix):
    sys.path.insert(0, ROOT)
    import bench.bench_memory_bound as BM
    from bench.common import triton_twin
    from examples.kernels import memory_bound as K
    m = K if a.impl == "kernelc" else triton_twin("memory_bound")
    name, (make, call, ref, nbytes) = next((n, c) for n, c in BM.cases().items() if n.startswith(prefix))
    args = make()
    args = args if isinstance(args, tuple) else (args,)
    out = call(m, *args)
    torch.cuda.synchronize()
    want = ref(*args)
    outs, wants = (out, want) if isinstance(out, tuple) else ((out,), (want,))
    err = max((o.float() - r.float()).abs().max().item() for o, r in zip(outs, wants))
    return (lambda: call(m, *args)), f"{name} max_err {err:.3g}", None


def target_ln05dx(a, torch, triton):
    mod = _load(os.path.join(a.tutorials, "05-layer-norm.py"), "k05", True)
    M, N = 4096, a.size or 16384
    x = torch.randn((M, N), device="cuda", dtype=torch.float16)
    w = torch.rand((N,), device="cuda", dtype=torch.float16)
    b = torch.rand((N,), device="cuda", dtype=torch.float16)
    dy = 0.1 * torch.randn_like(x)
    eps = 1e-5
    mean = x.float().mean(1)
    rstd = 1.0 / torch.sqrt(x.float().var(1, unbiased=False) + eps)
    # as the tutorial's backward sizes it
    GROUP_SIZE_M = 64
    if N <= 8192:
        GROUP_SIZE_M = 96
    if N <= 4096:
        GROUP_SIZE_M = 128
    if N <= 1024:
        GROUP_SIZE_M = 256
    BLOCK = triton.next_power_of_2(N)
    num_warps = min(max(BLOCK // 256, 1), 8)
    locks = torch.zeros(2 * GROUP_SIZE_M, dtype=torch.int32, device="cuda")
    _dw = torch.zeros((GROUP_SIZE_M, N), dtype=x.dtype, device="cuda")
    _db = torch.zeros((GROUP_SIZE_M, N), dtype=x.dtype, device="cuda")
    dx = torch.empty_like(dy)
    k = _fn(mod._layer_norm_bwd_dx_fused)

    def run():
        locks.zero_()
        k[(M,)](dx, dy, _dw, _db, x, w, mean, rstd, locks, x.stride(0), N, GROUP_SIZE_M=GROUP_SIZE_M,
                BLOCK_SIZE_N=BLOCK, num_warps=num_warps)
    run()
    torch.cuda.synchronize()
    xhat = (x.float() - mean[:, None]) * rstd[:, None]
    wdy = w.float() * dy.float()
    c1 = (xhat * wdy).sum(1, keepdim=True) / N
    c2 = wdy.sum(1, keepdim=True) / N
    ref = (wdy - (xhat * c1 + c2)) * rstd[:, None]
    err = (dx.float() - ref).abs().max().item()
    return run, f"GROUP_SIZE_M {GROUP_SIZE_M} BLOCK {BLOCK} warps {num_warps} max_err {err:.3g}", None


def target_fwd06(a, torch, triton, d, causal, fp8=False):
    mod = _load(os.path.join(a.tutorials, "06-fused-attention.py"), "k06", False)
    bm, bn, s, w = (int(x) for x in a.config.split("x"))
    tuner = mod._attn_fwd
    cfg = next(c for c in tuner.configs if c.kwargs.get("BLOCK_M") == bm and c.kwargs.get("BLOCK_N") == bn
               and c.num_stages == s and c.num_warps == w)
    tuner.configs = [cfg]
    tuner.cache.clear()
    B, H, N = 4, 32, a.size or 4096
    q, k, v = (torch.randn((B, H, N, d), dtype=torch.float16, device="cuda") for _ in range(3))
    if fp8:  # as the tutorial's benchmark prepares its fp8 provider (V transposed in memory)
        q, k = q.to(torch.float8_e5m2), k.to(torch.float8_e5m2)
        v = v.permute(0, 1, 3, 2).contiguous().permute(0, 1, 3, 2).to(torch.float8_e5m2)
    run = lambda: mod.attention(q, k, v, bool(causal), 1.3, False)  # noqa: E731
    o = run()
    torch.cuda.synchronize()
    if N > 4096:  # SDPA would materialise N x N for the fp8 case's V view
        return run, "max_err not checked (N > 4096)", 4.0 * B * H * N * N * d * (0.5 if causal else 1.0)
    ref = torch.nn.functional.scaled_dot_product_attention(*(t.to(torch.float16) for t in (q, k, v)),
                                                           is_causal=bool(causal), scale=1.3)
    err = (o.float() - ref.float()).abs().max().item()
    return run, f"max_err {err:.3g}", 4.0 * B * H * N * N * d * (0.5 if causal else 1.0)


def target_bwd06(a, torch, triton, d, causal):
    mod = _load(os.path.join(a.tutorials, "06-fused-attention.py"), "k06b", False)
    tuner = mod._attn_fwd  # the forward only makes o and M: one config
    tuner.configs = [next(c for c in tuner.configs if c.kwargs.get("BLOCK_M") == 64 and c.kwargs.get("BLOCK_N") == 64
                          and c.num_stages == 3 and c.num_warps == 4)]
    tuner.cache.clear()
    sys.path.insert(0, HERE)
    from bwd06_bench import _bwd_kernel
    B, H, N = 4, 32, a.size or 4096
    q, k, v = (torch.randn((B, H, N, d), dtype=torch.float16, device="cuda", requires_grad=True) for _ in range(3))
    o = mod.attention(q, k, v, bool(causal), 1.3, False)
    do = torch.randn_like(o)
    o.backward(do, retain_graph=True)
    qr, kr, vr = (t.detach().clone().requires_grad_() for t in (q, k, v))
    torch.nn.functional.scaled_dot_product_attention(qr, kr, vr, is_causal=bool(causal), scale=1.3).backward(do)
    err = max((x.grad.float() - y.grad.float()).abs().max().item() for x, y in ((q, qr), (k, kr), (v, vr)))
    run = _bwd_kernel(mod, o, q, k, v, do, bool(causal), 1.3)
    run()
    torch.cuda.synchronize()
    return run, f"max_grad_err {err:.3g}", 2.5 * 4.0 * B * H * N * N * d * (0.5 if causal else 1.0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--impl", choices=("kernelc", "triton"), required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--tutorials", default=os.path.join(ROOT, ".ext", "tutorials"))
    ap.add_argument("--config", default="128x256x64x3x8")
    ap.add_argument("--size", type=int, default=0)
    ap.add_argument("--reps", type=int, default=6)
    a = ap.parse_args(argv)
    if a.impl == "kernelc":
        sys.path.insert(0, ROOT)
        from kernelc.compat import install
        install()
    import torch
    import triton
    torch.manual_seed(0)
    kind, _, rest = a.target.partition(":")
    if kind == "t03":
        if rest:
            a.config = rest
        run, note, flops = target_t03(a, torch, triton)
    elif kind == "t09p":
        if rest:
            a.config = rest
        run, note, flops = target_t09p(a, torch, triton)
    elif kind == "mb":
        run, note, flops = target_mb(a, torch, triton, rest)
    elif kind == "ln05dx":
        run, note, flops = target_ln05dx(a, torch, triton)
    elif kind == "fwd06":
        d, causal, *dt = rest.split(":")
        run, note, flops = target_fwd06(a, torch, triton, int(d), int(causal), dt == ["fp8"])
    elif kind == "bwd06":
        d, causal = (int(x) for x in rest.split(":"))
        run, note, flops = target_bwd06(a, torch, triton, d, causal)
    else:
        ap.error(f"unknown target {a.target!r}")
    times = []
    for _ in range(a.reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        run()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1))
    best = min(times)
    extra = f" {flops / best * 1e-9:.1f} TFLOP/s" if flops else ""
    print(f"{a.impl} {a.target} {note}: best {best * 1e3:.1f} us of {a.reps}{extra}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
