"""Tutorial 06's forward, one autotune config at a time, timed the way its benchmark times it, under one
implementation (a GPU is needed; run once per implementation, each in its own process).

    python3 bench/experiments/tutorial_gaps/fwd06_configs.py --impl kernelc TUTORIAL_06.py --out k.json
    python3 bench/experiments/tutorial_gaps/fwd06_configs.py --impl triton  TUTORIAL_06.py --out t.json

The tutorial's ``attention`` function is called as its benchmark calls it (fp16, or ``--fp8``, batch 4, 32 heads,
``sm_scale`` 1.3) with ``_attn_fwd``'s autotuner restricted to one config. Per config: ``ms`` (the
implementation's ``do_bench``, as the tutorial), ``ms_graph`` (``do_bench_cudagraph``: no host time),
``host_us`` (host time to issue one call, averaged over 50 calls issued back to back), the largest error
against torch's attention, and TFLOP/s as the tutorial counts them. ``--impl kernelc`` makes ``import triton``
resolve to kernelc (``kernelc.compat``). Nothing here is a test (docs/triton-tutorials.md, "06 d64 forward").
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("tutorial")
    ap.add_argument("--impl", choices=("kernelc", "triton"), required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--n-ctx", type=int, default=1024)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--causal", type=int, default=0)
    ap.add_argument("--ws", type=int, default=0)
    ap.add_argument("--fp8", action="store_true",
                    help="the tutorial's fp8 forward (FP8_OUTPUT): q, k, v rounded to float8_e5m2, v transposed in "
                         "memory, as its benchmark prepares them; the error is against torch's attention of the "
                         "rounded inputs")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="also run N calls of the first config under cProfile and write OUT.prof.txt")
    ap.add_argument("--configs", nargs="*", default=["128x64x2x4", "128x64x3x4", "128x64x4x4", "64x64x3x4",
                                                     "128x32x3x4", "64x32x3x4"], help="BMxBNxSTAGESxWARPS")
    args = ap.parse_args(argv)
    if args.impl == "kernelc":
        sys.path.insert(0, ROOT)
        from kernelc.compat import install
        install()
    import torch
    import triton
    spec = importlib.util.spec_from_file_location("tut06_fwd_configs", args.tutorial)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    tuner = mod._attn_fwd
    pool = list(tuner.configs)
    B, H, N, D = 4, 32, args.n_ctx, args.head_dim
    torch.manual_seed(0)
    q, k, v = (torch.randn((B, H, N, D), dtype=torch.float16, device="cuda", requires_grad=True) for _ in range(3))
    sm_scale = 1.3
    if args.fp8:  # as tutorial 06's benchmark does for its fp8 provider
        q, k = q.detach().to(torch.float8_e5m2), k.detach().to(torch.float8_e5m2)
        v = v.detach().permute(0, 1, 3, 2).contiguous().permute(0, 1, 3, 2).to(torch.float8_e5m2)
    ref = torch.nn.functional.scaled_dot_product_attention(q.detach().half(), k.detach().half(), v.detach().half(),
                                                           is_causal=bool(args.causal), scale=sm_scale)
    flops = 4.0 * B * H * N * N * D * (0.5 if args.causal else 1.0)
    rows = []
    for name in args.configs:
        bm, bn, s, w = (int(x) for x in name.split("x"))
        cfg = next((c for c in pool if c.kwargs.get("BLOCK_M") == bm and c.kwargs.get("BLOCK_N") == bn
                    and c.num_stages == s and c.num_warps == w), None)
        row = {"impl": args.impl, "config": name, "n_ctx": N, "head_dim": D, "causal": bool(args.causal),
               "ws": bool(args.ws), "fp8": args.fp8}
        if cfg is None:
            row["error"] = "not in the tutorial's config list"
            rows.append(row)
            print(json.dumps(row), flush=True)
            continue
        tuner.configs = [cfg]
        tuner.cache.clear()
        fn = lambda: mod.attention(q, k, v, bool(args.causal), sm_scale, bool(args.ws))  # noqa: E731
        try:
            o = fn()
            torch.cuda.synchronize()
            row["max_abs_err"] = float((o.float() - ref.float()).abs().max())
            row["ms"] = triton.testing.do_bench(fn)
            row["tflops"] = flops * 1e-12 / (row["ms"] * 1e-3)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(50):
                fn()
            row["host_us"] = (time.perf_counter() - t0) / 50 * 1e6
            torch.cuda.synchronize()
            try:
                row["ms_graph"] = triton.testing.do_bench_cudagraph(fn)
                row["tflops_graph"] = flops * 1e-12 / (row["ms_graph"] * 1e-3)
            except Exception as e:  # noqa: BLE001 -- a capture failure is a result too
                row["graph_error"] = f"{type(e).__name__}: {e}"[:300]
            row["kernel_ms_cold"], row["kernel_ms_warm"] = _kernel_times(fn)
            if args.profile and not rows:
                _profile(fn, args.profile, args.out + ".prof.txt")
        except Exception as e:  # noqa: BLE001
            row["error"] = f"{type(e).__name__}: {e}"[:500]
        rows.append(row)
        print(json.dumps(row), flush=True)
    tuner.configs = pool
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)
    return 0


def _kernel_times(fn, n=30):
    """The forward kernel's own GPU time, as torch.profiler records it, after an L2 flush (the tutorial's
    do_bench pattern: a 256 MB zero_ then the call) and back to back without one: tells the kernel's cold-cache
    time from the host time that do_bench's events also see when the host is the slower side."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    cache = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    out = []
    for flush in (True, False):
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(n):
                if flush:
                    cache.zero_()
                fn()
            torch.cuda.synchronize()
        # the kernel's own row (device time, one count per launch), not the CPU-side op that launched it
        rows = [a for a in prof.key_averages() if "_attn_fwd" in a.key and a.device_time_total > 0 and a.count >= n]
        out.append(min(a.device_time_total / a.count for a in rows) / 1000 if rows else None)
    return out


def _profile(fn, n, path):
    """Where one call's host time goes: cProfile over n calls, sorted by own time and by cumulative time."""
    import cProfile
    import io
    import pstats
    import torch
    torch.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    buf = io.StringIO()
    buf.write(f"{n} calls\n")
    for key in ("tottime", "cumulative"):
        pstats.Stats(prof, stream=buf).sort_stats(key).print_stats(45)
    with open(path, "w") as f:
        f.write(buf.getvalue())


if __name__ == "__main__":
    sys.exit(main())
