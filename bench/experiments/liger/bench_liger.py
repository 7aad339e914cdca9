"""Liger-Kernel's main kernels, forward + backward, under kernelc and under real Triton, side by side.

    python3 bench/experiments/liger/bench_liger.py --liger DIR [--passes 3] [--ops rms_norm,swiglu,...]
    python3 bench/experiments/liger/bench_liger.py --liger DIR --impl kernelc --json FILE   # one process

``DIR`` is a Liger-Kernel checkout (its ``src/`` is put on the path; not part of this repository). The
driver runs one process per implementation per pass, alternating which goes first, and keeps for each op
the best median over the passes. In a ``kernelc`` process ``kernelc.compat.install()`` runs before Liger is
imported, so every ``triton`` import in Liger resolves to kernelc; a ``triton`` process imports the real one.
Both processes time with the same code, so only the kernels differ, two ways: CUDA events around each call of
forward + backward (the L2 cache flushed before each call, median of the repeats: wall time, host included), and
the GPU time of the kernels each call runs, summed from a torch.profiler trace of the repeats (the flush excluded).
These ops run 0.3-3 ms of GPU work behind several launches, so the event time moves with the host; the ratio is
taken on the kernel time. The shapes are those of
Liger's benchmark/scripts at their default model (llama_3_8b: hidden 4096, intermediate 14336, vocab
128256, 32 query / 8 kv heads of 128, bf16; cross entropy in fp32 as Liger's script) at 4096 tokens.
Writes results/liger_speed.json (+ .md) here and to $OUT/results when set.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
OPS = ("rms_norm", "layer_norm", "swiglu", "geglu", "rope", "cross_entropy", "fused_linear_cross_entropy")
BT, H, I, V, NQ, NKV, HD = 4096, 4096, 14336, 128256, 32, 8, 128


def _setup(op, torch, F):
    """(callable running forward + backward once, what it computes)."""
    dev, bf = "cuda", torch.bfloat16
    g = torch.Generator(device=dev).manual_seed(0)

    def rn(*shape, dtype=bf):
        return torch.randn(*shape, device=dev, dtype=dtype, generator=g)

    if op == "rms_norm":
        x, w = rn(BT, H).requires_grad_(), rn(H).requires_grad_()
        dy = rn(BT, H)
        return lambda: F.liger_rms_norm(x, w, 1e-6).backward(dy), f"x[{BT},{H}] bf16"
    if op == "layer_norm":
        x, w, b = rn(BT, H).requires_grad_(), rn(H).requires_grad_(), rn(H).requires_grad_()
        dy = rn(BT, H)
        return lambda: F.liger_layer_norm(x, w, b, 1e-6).backward(dy), f"x[{BT},{H}] bf16"
    if op in ("swiglu", "geglu"):
        a, b = rn(BT, I).requires_grad_(), rn(BT, I).requires_grad_()
        dy = rn(BT, I)
        fn = F.liger_swiglu if op == "swiglu" else F.liger_geglu
        return lambda: fn(a, b).backward(dy), f"a,b[{BT},{I}] bf16"
    if op == "rope":
        q = rn(1, BT, NQ, HD).transpose(1, 2).requires_grad_()
        k = rn(1, BT, NKV, HD).transpose(1, 2).requires_grad_()
        inv = 1.0 / (500000.0 ** (torch.arange(0, HD, 2, device=dev, dtype=torch.float32) / HD))
        fr = torch.outer(torch.arange(BT, device=dev, dtype=torch.float32), inv)
        emb = torch.cat([fr, fr], -1)
        cos, sin = emb.cos().to(bf)[None], emb.sin().to(bf)[None]
        dq, dk = rn(1, NQ, BT, HD), rn(1, NKV, BT, HD)

        def run():
            qo, ko = F.liger_rope(q, k, cos, sin)
            torch.autograd.backward((qo, ko), (dq, dk))
        return run, f"q[1,{NQ},{BT},{HD}] k[1,{NKV},{BT},{HD}] bf16 (transposed views)"
    if op == "cross_entropy":
        x = rn(BT, V, dtype=torch.float32).requires_grad_()
        t = torch.randint(V, (BT,), device=dev, generator=g)
        return lambda: F.liger_cross_entropy(x, t).backward(), f"logits[{BT},{V}] fp32"
    if op == "fused_linear_cross_entropy":
        x, w = (rn(BT, H) * 0.1).requires_grad_(), (rn(V, H) * 0.02).requires_grad_()
        t = torch.randint(V, (BT,), device=dev, generator=g)
        return lambda: F.liger_fused_linear_cross_entropy(x, w, t).backward(), f"x[{BT},{H}] W[{V},{H}] bf16"
    raise ValueError(f"unknown op {op!r} (expected one of {', '.join(OPS)})")


def _time(torch, fn, reps, warmup=3):
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        flush.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    return times


def _kernel_time(torch, fn, reps):
    """(GPU ms of the kernels one call runs, kernels per call), from a torch.profiler trace of `reps` calls."""
    from torch.profiler import ProfilerActivity, profile
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            flush.bitwise_not_()   # a kernel name the ops never launch, so the flush can be left out below
            fn()
        torch.cuda.synchronize()
    us, n = 0.0, 0
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and "bitwise_not" not in e.name:
            us += e.time_range.elapsed_us()
            n += 1
    if not n:
        raise RuntimeError("torch.profiler recorded no GPU activity")
    return us / 1000.0 / reps, n / reps


def one_process(impl, ops, reps, liger):
    import time
    sys.path.insert(0, os.path.join(liger, "src"))
    if impl == "kernelc":
        sys.path.insert(0, ROOT)
        import kernelc.compat
        kernelc.compat.install()
    import torch
    import triton
    from liger_kernel.transformers import functional as F
    rows = []
    for op in ops:
        t0 = time.perf_counter()
        try:
            fn, shape = _setup(op, torch, F)
            fn()   # first call: compile (and autotune)
            torch.cuda.synchronize()
            first = time.perf_counter() - t0
            ts = _time(torch, fn, reps)
            kms, kn = _kernel_time(torch, fn, reps)
            rows.append({"op": op, "shape": shape, "ms_median": statistics.median(ts), "ms_min": min(ts),
                         "kernel_ms": kms, "kernels_per_call": kn, "first_call_s": round(first, 3)})
        except Exception as e:   # reported, not hidden: the row says what failed
            rows.append({"op": op, "error": f"{type(e).__name__}: {str(e)[:400]}"})
        torch.cuda.empty_cache()
        print(impl, rows[-1], flush=True)
    return {"impl": impl, "triton_version": getattr(triton, "__version__", None),
            "triton_file": getattr(triton, "__file__", None), "rows": rows}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--liger", required=True, help="Liger-Kernel checkout (its src/ goes on the path)")
    ap.add_argument("--impl", choices=("kernelc", "triton"), help="one process of one implementation")
    ap.add_argument("--json", help="with --impl: write that process's rows here")
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--timeout", type=int, default=200, help="seconds per process")
    a = ap.parse_args(argv)
    ops = [o for o in a.ops.split(",") if o]
    if a.impl:
        res = one_process(a.impl, ops, a.reps, os.path.abspath(a.liger))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(res, f)
        return 0
    runs = {"kernelc": [], "triton": []}
    tmp = tempfile.mkdtemp()
    for p in range(a.passes):
        order = ("kernelc", "triton") if p % 2 == 0 else ("triton", "kernelc")
        for impl in order:
            out = os.path.join(tmp, f"{impl}{p}.json")
            cmd = [sys.executable, os.path.abspath(__file__), "--liger", a.liger, "--impl", impl, "--json", out,
                   "--ops", ",".join(ops), "--reps", str(a.reps)]
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
                sys.stdout.write(r.stdout[-4000:])
                if r.returncode:
                    sys.stdout.write(r.stderr[-3000:])
            except subprocess.TimeoutExpired:
                print(f"{impl} pass {p}: timed out after {a.timeout} s")
            if os.path.exists(out):
                runs[impl].append(json.load(open(out)))
    rows = []
    for op in ops:
        row = {"op": op}
        for impl in runs:
            ok = [r for run in runs[impl] for r in run["rows"] if r["op"] == op and "ms_median" in r]
            errs = [r["error"] for run in runs[impl] for r in run["rows"] if r["op"] == op and "error" in r]
            if ok:
                row["shape"] = ok[0]["shape"]
                row[f"{impl}_ms"] = round(min(r["ms_median"] for r in ok), 4)
                row[f"{impl}_ms_passes"] = [round(r["ms_median"], 4) for r in ok]
                row[f"{impl}_first_call_s"] = statistics.median(r["first_call_s"] for r in ok)
                ks = [r["kernel_ms"] for r in ok if "kernel_ms" in r]
                if ks:
                    row[f"{impl}_kernel_ms"] = round(statistics.median(ks), 4)
                    row[f"{impl}_kernel_ms_passes"] = [round(k, 4) for k in ks]
                    row[f"{impl}_kernels_per_call"] = ok[0].get("kernels_per_call")
            if errs:
                row[f"{impl}_error"] = errs[0]
        if row.get("kernelc_ms") and row.get("triton_ms"):
            row["triton_over_kernelc"] = round(row["triton_ms"] / row["kernelc_ms"], 3)   # > 1: kernelc faster
        if row.get("kernelc_kernel_ms") and row.get("triton_kernel_ms"):
            row["kernel_triton_over_kernelc"] = round(row["triton_kernel_ms"] / row["kernelc_kernel_ms"], 3)
        rows.append(row)
    sys.path.insert(0, ROOT)
    from bench import common
    common.write_results("liger_speed", rows, {"passes": a.passes, "reps": a.reps,
                                               "versions_seen": {k: [r["triton_version"] for r in v]
                                                                 for k, v in runs.items()}},
                         results_dir=os.path.join(HERE, "results"))
    md = ["| op | shape | kernel ms kernelc (passes) | kernel ms Triton (passes) | Triton/kernelc, kernels | "
          "event ms kernelc | event ms Triton | Triton/kernelc, events | first call s (kernelc, Triton) |\n"
          "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n"]
    for r in rows:
        md.append(f"| {r['op']} | {r.get('shape', '')} | {r.get('kernelc_kernel_ms', '-')} {r.get('kernelc_kernel_ms_passes', '')} | "
                  f"{r.get('triton_kernel_ms', '-')} {r.get('triton_kernel_ms_passes', '')} | "
                  f"{r.get('kernel_triton_over_kernelc', '-')} | {r.get('kernelc_ms', r.get('kernelc_error', '-'))} | "
                  f"{r.get('triton_ms', r.get('triton_error', '-'))} | {r.get('triton_over_kernelc', '-')} | "
                  f"{r.get('kernelc_first_call_s', '-')}, {r.get('triton_first_call_s', '-')} |\n")
    for d in filter(None, (os.path.join(HERE, "results"), os.environ.get("OUT") and
                           os.path.join(os.environ["OUT"], "results"))):
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "liger_speed.md"), "w") as f:
            f.write("".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
