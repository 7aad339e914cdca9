"""Tutorial 06's backward, timed the way its benchmark times it, under one implementation (a GPU is needed;
run once per implementation, each in its own process, and alternate them).

    python3 bench/experiments/tutorial_gaps/bwd06_bench.py --impl kernelc TUTORIAL_06.py --out k.json
    python3 bench/experiments/tutorial_gaps/bwd06_bench.py --impl triton  TUTORIAL_06.py --out t.json
        [--n-ctx 1024 4096] [--variants 64:0 64:1 128:0 128:1] [--tag NAME]

Per (``N_CTX``, HEAD_DIM, causal): the tutorial's ``attention`` forward once (fp16, batch 4, 32 heads,
``sm_scale`` 1.3, ``_attn_fwd``'s autotuner held to one config: the backward is what is measured), then
``o.backward(do, retain_graph=True)`` as the tutorial's ``bench_flash_attention`` times it: ``ms`` (the
implementation's ``do_bench``, the tutorial's number, host time included); and ``kernel_ms``: ``_attn_bwd``
alone, launched with the arguments the tutorial's ``backward`` gives it, 20 launches back to back between two
CUDA events (the GPU's queue stays full, so no host time), the median of 5 such runs; with ``--profile``,
``kernels_us``: the GPU time per kernel name of one ``o.backward`` (torch.profiler, 5 calls). TFLOP/s as the tutorial
counts them (2.5x the forward's two matmuls, half of them when causal). No CUDA graph: capturing
``o.backward`` fails (autograd runs the backward on its own thread) and a failed capture poisons the process's
random generator for every later row (H200 run S3, 2026-11-27). Before timing, the gradients of a small problem
(batch 1, 2 heads, ``N_CTX`` 1024) against torch autograd in fp32: the largest absolute error of dq, dk, dv,
o. ``--impl kernelc`` makes ``import triton`` resolve to kernelc (``kernelc.compat``); ``KERNELC_*`` knobs in
the environment apply (``--tag`` names the run). Nothing here is a test (docs/triton-tutorials.md, "06
backward at d64").
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# the tutorial's backward launch (06-fused-attention.py, _attention.backward)
BWD = dict(BLOCK_M1=32, BLOCK_N1=128, BLOCK_M2=128, BLOCK_N2=32, BLK_SLICE_FACTOR=2)
BWD_WARPS, BWD_STAGES, PRE_BLOCK, RCP_LN2 = 4, 5, 128, 1.4426950408889634


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("tutorial")
    ap.add_argument("--impl", choices=("kernelc", "triton"), required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tag", default="")
    ap.add_argument("--n-ctx", type=int, nargs="+", default=[1024, 4096])
    ap.add_argument("--variants", nargs="+", default=["64:0", "64:1", "128:0", "128:1"], help="HEAD_DIM:CAUSAL")
    ap.add_argument("--fwd-config", default="64x64x3x4", help="BMxBNxSTAGESxWARPS of _attn_fwd")
    ap.add_argument("--profile", action="store_true",
                    help="also the GPU time per kernel name of one o.backward (torch.profiler, mean of 5 calls)")
    args = ap.parse_args(argv)
    if args.impl == "kernelc":
        sys.path.insert(0, ROOT)
        from kernelc.compat import install
        install()
    import torch
    import triton
    spec = importlib.util.spec_from_file_location("tut06_bwd_bench", args.tutorial)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    bm, bn, s, w = (int(x) for x in args.fwd_config.split("x"))
    tuner = mod._attn_fwd
    cfg = next(c for c in tuner.configs if c.kwargs.get("BLOCK_M") == bm and c.kwargs.get("BLOCK_N") == bn
               and c.num_stages == s and c.num_warps == w)
    tuner.configs = [cfg]
    knobs = {k: v for k, v in os.environ.items() if k.startswith("KERNELC_")}
    rows = []
    sm_scale = 1.3
    for var in args.variants:
        D, causal = (int(x) for x in var.split(":"))
        causal = bool(causal)
        base = {"impl": args.impl, "tag": args.tag, "knobs": knobs, "head_dim": D, "causal": causal,
                "gpu": torch.cuda.get_device_name()}
        # correctness first, on a small problem
        try:
            torch.manual_seed(0)
            q, k, v = (torch.randn((1, 2, 1024, D), dtype=torch.float16, device="cuda") * 0.5 for _ in range(3))
            do = torch.randn_like(q)
            t0 = time.perf_counter()
            qa, ka, va = (t.clone().requires_grad_() for t in (q, k, v))
            o = mod.attention(qa, ka, va, causal, sm_scale, False)
            o.backward(do)
            torch.cuda.synchronize()
            compile_s = time.perf_counter() - t0
            qr, kr, vr = (t.float().requires_grad_() for t in (q, k, v))
            ref = torch.nn.functional.scaled_dot_product_attention(qr, kr, vr, is_causal=causal, scale=sm_scale)
            ref.backward(do.float())
            err = {n: float((g.grad.float() - r.grad).abs().max()) for n, g, r in
                   (("dq", qa, qr), ("dk", ka, kr), ("dv", va, vr))}
            err["o"] = float((o.detach().float() - ref.detach()).abs().max())
            base["max_abs_err"] = err
            base["first_call_s"] = compile_s
        except Exception as e:  # noqa: BLE001 -- a failure is a result
            base["check_error"] = f"{type(e).__name__}: {e}"[:500]
        for N in args.n_ctx:
            row = dict(base, n_ctx=N, batch=4, heads=32)
            try:
                torch.manual_seed(0)
                q, k, v = (torch.randn((4, 32, N, D), dtype=torch.float16, device="cuda", requires_grad=True)
                           for _ in range(3))
                o = mod.attention(q, k, v, causal, sm_scale, False)
                do = torch.randn_like(o)
                fn = lambda: o.backward(do, retain_graph=True)  # noqa: E731 -- the tutorial's benchmark
                flops = 2.5 * 2 * 2.0 * 4 * 32 * N * N * D * (0.5 if causal else 1.0)
                row["ms"] = triton.testing.do_bench(fn)
                row["tflops"] = flops * 1e-12 / (row["ms"] * 1e-3)
                if args.profile:
                    try:
                        row["kernels_us"] = _per_kernel_us(torch, fn)
                    except Exception as e:  # noqa: BLE001
                        row["profile_error"] = f"{type(e).__name__}: {e}"[:500]
                try:
                    launch = _bwd_kernel(mod, o, q, k, v, do, causal, sm_scale)
                    row["kernel_ms"] = _queued_ms(torch, launch)
                    row["kernel_tflops"] = flops * 1e-12 / (row["kernel_ms"] * 1e-3)
                except Exception as e:  # noqa: BLE001 -- the tutorial's number above still stands
                    row["kernel_error"] = f"{type(e).__name__}: {e}"[:500]
                del o, do, q, k, v
            except Exception as e:  # noqa: BLE001
                row["error"] = f"{type(e).__name__}: {e}"[:500]
            rows.append(row)
            print(json.dumps(row), flush=True)
            torch.cuda.empty_cache()
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)
    return 0


def _queued_ms(torch, launch, n: int = 20, reps: int = 5) -> float:
    """Milliseconds per launch of ``n`` launches queued back to back between two events, the median of ``reps``."""
    launch()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(n):
            launch()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) / n)
    return sorted(times)[len(times) // 2]


def _per_kernel_us(torch, fn, calls: int = 5) -> dict:
    """{kernel name: GPU microseconds per call} of ``calls`` calls of ``fn`` under torch.profiler (the
    backward's kernels: Delta's ``_attn_bwd_preprocess``, ``_attn_bwd`` and torch's own element-wise ones)."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    out = {}
    for ev in prof.key_averages():
        t = getattr(ev, "device_time_total", None)
        if t is None:
            t = getattr(ev, "cuda_time_total", 0)
        if t and ev.key:  # (CPU-side runtime calls carry no device time)
            out[ev.key] = round(t / calls, 2)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _bwd_kernel(mod, o, q, k, v, do, causal, sm_scale):
    """``_attn_bwd`` launched as the tutorial's ``backward`` launches it (its inputs prepared once)."""
    import torch
    M = o.grad_fn.saved_tensors[4]
    B, H, N, D = q.shape
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    arg_k = (k * (sm_scale * RCP_LN2)).detach()
    delta = torch.empty_like(M)
    mod._attn_bwd_preprocess[(N // PRE_BLOCK, B * H)](o, do, delta, B, H, N, BLOCK_M=PRE_BLOCK, HEAD_DIM=D)
    grid = (N // BWD["BLOCK_N1"], 1, B * H)
    qd, vd = q.detach(), v.detach()

    # the 3.6 text's backward has no CAUSAL (it is causal whatever the caller says); later texts take it
    extra = {"CAUSAL": causal} if "CAUSAL" in getattr(mod._attn_bwd, "arg_names", ()) else {}

    def launch():
        mod._attn_bwd[grid](qd, arg_k, vd, sm_scale, do, dq, dk, dv, M, delta,
                            q.stride(0), q.stride(1), q.stride(2), q.stride(3), H, N, **BWD, HEAD_DIM=D,
                            num_warps=BWD_WARPS, num_stages=BWD_STAGES, **extra)
    return launch


if __name__ == "__main__":
    sys.exit(main())
