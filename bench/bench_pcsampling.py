"""Overhead of instruction sampling: kprof's pcsampling vs Proton's, on the same matmul + softmax loop.

    python bench/bench_pcsampling.py [--iters 50] [--period 10] [--workloads kernelc,triton,torch] [--sweep-periods 12,14]

One run, each variant in its own process (CUPTI state is per process, and only one PC-sampling
client can own a context):

    baseline            the loop, no profiler
    kprof_timing        profiler.start()  (CUPTI kernel timing only)            reference
    kprof_pcsampling    profiler.start(mode="pcsampling:period=N")  session: timing + samples
    kprof_pcsampling_continuous   the same with collection=continuous (samples per kernel function)
    kprof_sampler       PCSampler(period=N), drain after every launch
    kprof_sampler_d8    PCSampler(period=N, drain_every=8)
    proton_timing       proton.start(name)                                       reference
    proton_pcsampling   proton.start(name, backend="cupti", mode="pcsampling")  (Proton's period: 2^10)

A workload is ``iters`` x (fp16 2048^3 matmul + fp32 4096x4096 softmax): ``kernelc`` (the kernelc
example kernels), ``triton`` (the same files compiled by Triton, Proton's home ground) or ``torch``
(torch.matmul + torch.softmax).  The profiler starts before one warm-up iteration (so module loads
happen under it, as Proton needs), then the loop is timed between two device synchronisations.
``overhead_x`` = loop time / baseline loop time; ``finalize_s`` is the time to stop and write.
Results: bench/results/pcsampling_overhead.json (and $OUT/results/).  Target: kprof <= 5x.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

VARIANTS = ("baseline", "kprof_timing", "kprof_pcsampling", "kprof_pcsampling_continuous", "kprof_sampler",
            "kprof_sampler_d8", "proton_timing", "proton_pcsampling")


def make_loop(workload: str):
    import torch
    if workload == "torch":
        a = torch.randn(2048, 2048, device="cuda", dtype=torch.float16)
        b = torch.randn(2048, 2048, device="cuda", dtype=torch.float16)
        x = torch.randn(4096, 4096, device="cuda")
        return lambda: (torch.matmul(a, b), torch.softmax(x, 1))
    if workload == "triton":
        from bench.common import triton_twin
        M, S = triton_twin("matmul"), triton_twin("softmax")
    else:
        from examples.kernels import matmul as M, softmax as S
    from examples.workloads import MATMUL_CONFIG
    a = torch.randn(2048, 2048, device="cuda", dtype=torch.float16)
    b = torch.randn(2048, 2048, device="cuda", dtype=torch.float16)
    x = torch.randn(4096, 4096, device="cuda")
    return lambda: (M.matmul(a, b, **MATMUL_CONFIG), S.softmax(x))


def child(variant: str, workload: str, iters: int, period: int) -> dict:
    import torch
    loop = make_loop(workload)
    loop()  # compile (kernelc's/Triton's caches) before anything is timed
    torch.cuda.synchronize()
    out: dict = {"variant": variant, "workload": workload}
    tmp = tempfile.mkdtemp(prefix="pcs_bench_")
    stop = None
    if variant in ("kprof_timing", "kprof_pcsampling", "kprof_pcsampling_continuous"):
        import profiler
        mode = f"pcsampling:period={period}" if variant.startswith("kprof_pcsampling") else None
        if variant.endswith("continuous"):
            mode += ":collection=continuous"
        sid = profiler.start(os.path.join(tmp, "kprof"), mode=mode)

        def stop():
            paths = profiler.finalize(sid)
            if mode and paths:
                from profiler.format import read_profile
                summary = (read_profile(paths[0])[0].extra or {}).get("pcsampling") or {}
                out["samples"] = summary.get("samples")
                out["info"] = {k: summary.get(k) for k in ("effective_period", "kernels", "unmatched_launches",
                                                           "warnings", "error") if summary.get(k) is not None}
    elif variant in ("kprof_sampler", "kprof_sampler_d8"):
        from profiler.pcsampling import PCSampler
        s = PCSampler(period=period, drain_every=8 if variant.endswith("d8") else 1)
        if not s.start():
            out["note"] = s.error

        def stop():
            s.close()
            out["samples"] = s.table.total_samples()
            out["info"] = {k: v for k, v in s.info().items() if k in ("effective_period", "dropped_samples",
                                                                      "get_data_calls", "warnings")}
            s.profile()
    elif variant.startswith("proton"):
        import triton.profiler as proton
        name = os.path.join(tmp, "proton")
        if variant == "proton_pcsampling":
            try:
                proton.start(name, backend="cupti", mode="pcsampling", hook="triton")
            except (TypeError, ValueError, RuntimeError) as e:  # older Protons: a backend of its own
                out["note"] = f"mode=pcsampling refused ({e}); backend=cupti_pcsampling"
                proton.start(name, backend="cupti_pcsampling", hook="triton")
        else:
            proton.start(name, hook="triton")

        def stop():
            proton.finalize()
    loop()  # warm-up under the profiler (module loads, first-launch work)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        loop()
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    if stop is not None:
        stop()
    t2 = time.perf_counter()
    out.update(loop_s=t1 - t0, finalize_s=t2 - t1)
    return out


def run_child(variant: str, workload: str, iters: int, period: int) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", variant, "--workloads", workload,
           "--iters", str(iters), "--period", str(period)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=420, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"variant": variant, "workload": workload, "error": "timed out"}
    lines = [ln for ln in r.stdout.strip().splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
        return {"variant": variant, "workload": workload, "error": f"exit {r.returncode}: {' | '.join(tail)}"}
    res = json.loads(lines[-1])
    err = [ln for ln in r.stderr.splitlines() if "kprof:" in ln or "PROTON" in ln.upper()]
    if err:
        res.setdefault("note", err[0][:200])
    return res


def _note(res: dict) -> str:
    if res.get("error"):
        return str(res["error"])
    parts = [str(res["note"])] if res.get("note") else []
    if res.get("info"):
        parts.append(json.dumps(res["info"]))
    return "; ".join(parts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--period", type=int, default=10)
    ap.add_argument("--workloads", default="kernelc")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--sweep-periods", default="",
                    help="also run kprof_pcsampling at these periods, e.g. 12,14,16 (rows kprof_pcsampling@pN)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.workloads, args.iters, args.period)))
        return 0
    from bench.common import write_results
    rows = []
    for workload in args.workloads.split(","):
        base = None
        runs = [(v, args.period) for v in args.variants.split(",")]
        runs += [("kprof_pcsampling", int(p)) for p in args.sweep_periods.split(",") if p]
        for variant, period in runs:
            res = run_child(variant, workload, args.iters, period)
            variant = variant if period == args.period else f"{variant}@p{period}"
            if variant == "baseline" and "loop_s" in res:
                base = res["loop_s"]
            row = {"workload": workload, "variant": variant,
                   "per_iter_us": round(res["loop_s"] / args.iters * 1e6, 1) if "loop_s" in res else None,
                   "overhead_x": round(res["loop_s"] / base, 2) if base and "loop_s" in res else None,
                   "finalize_s": round(res.get("finalize_s", 0.0), 3) if "finalize_s" in res else None,
                   "samples": res.get("samples"), "note": _note(res)}
            rows.append(row)
            print(f"  {workload:8s} {variant:18s} {row['per_iter_us']} us/iter  x{row['overhead_x']}  {row['note']}",
                  flush=True)
    kp = {r["workload"]: r["overhead_x"] for r in rows if r["variant"] == "kprof_pcsampling"}
    pp = {r["workload"]: r["overhead_x"] for r in rows if r["variant"] == "proton_pcsampling"}
    write_results("pcsampling_overhead", rows, extra={
        "iters": args.iters, "period": args.period, "target": "kprof_pcsampling overhead_x <= 5",
        "summary": {w: {"kprof_pcsampling_x": kp.get(w), "proton_pcsampling_x": pp.get(w)} for w in kp}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
