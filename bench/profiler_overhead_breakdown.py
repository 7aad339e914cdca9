"""Where kprof's per-launch cost goes: the tiny-launch loop of bench_profiler_overhead.py under
pieces of the CUPTI setup, each in a fresh process.

    python bench/profiler_overhead_breakdown.py

Variants: ``none``; ``activity`` (CUPTI concurrent-kernel records only, no callbacks);
``activity+extcorr`` (plus one pushed external correlation id and its records); ``activity+noop_cb``
(plus a Python subscriber callback that does nothing, on kprof's launch callback ids);
``kprof`` (profiler.start()); ``proton``.  Prints microseconds per ``torch.add`` and the ratio to
``none``; writes bench/results/profiler_overhead_breakdown.json.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

VARIANTS = ("none", "activity", "activity+extcorr", "activity+noop_cb", "kprof", "proton")


def _setup(variant: str):
    if variant == "none":
        return lambda: None
    if variant == "kprof":
        import profiler
        profiler.start("/tmp/kprof_breakdown")
        return lambda: profiler.finalize()
    if variant == "proton":
        import triton.profiler as proton
        proton.start("/tmp/proton_breakdown")
        return lambda: proton.finalize()
    from cupti import cupti
    seen = [0]

    def requested():
        return 8 << 20, 0

    def completed(activities):
        seen[0] += len(activities)

    cupti.activity_register_callbacks(requested, completed)
    cupti.activity_enable(cupti.ActivityKind.CONCURRENT_KERNEL)
    if variant == "activity+extcorr":
        cupti.activity_enable(cupti.ActivityKind.EXTERNAL_CORRELATION)
        cupti.activity_push_external_correlation_id(cupti.ExternalCorrelationKind.UNKNOWN, 7)
    if variant == "activity+noop_cb":
        from profiler.backends.cupti import CuptiBackend

        def noop(userdata, domain, cbid, data):
            return None

        sub = cupti.subscribe(noop, None)
        D = cupti.DriverApiTraceCbid
        for n in ("cuLaunchKernel", "cuLaunchKernelEx"):
            if hasattr(D, n):
                cupti.enable_callback(1, sub, cupti.CallbackDomain.DRIVER_API, int(getattr(D, n)))
        _ = CuptiBackend  # same import cost as kprof

    def done():
        cupti.activity_flush_all(1)
    return done


def child(variant: str, result: str) -> None:
    import torch
    a = torch.zeros(1, device="cuda")
    b = torch.ones(1, device="cuda")
    c = torch.empty_like(a)
    torch.cuda.synchronize()
    done = _setup(variant)
    for _ in range(500):
        torch.add(a, b, out=c)
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(5000):
            torch.add(a, b, out=c)
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) / 5000 * 1e6)
    done()
    json.dump({"us": best}, open(result, "w"))


def main() -> int:
    from bench.common import write_results
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    rows = []
    best = {}
    for _round in range(2):
        for v in VARIANTS:
            res = f"/tmp/breakdown_{v.replace('+', '_')}.json"
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", v, res], env=env,
                               capture_output=True, text=True, timeout=300)
            if r.returncode != 0:
                print(f"{v}: failed\n{r.stderr[-1500:]}")
                continue
            us = json.load(open(res))["us"]
            best[v] = min(best.get(v, us), us)
    base = best.get("none")
    for v in VARIANTS:
        if v in best:
            ratio = round(best[v] / base, 3) if base else None
            rows.append({"variant": v, "us_per_add": round(best[v], 3), "ratio": ratio,
                         "added_us": round(best[v] - base, 3) if base else None})
            print(f"{v:20s} {best[v]:7.3f} us/add  {ratio}x  (+{best[v] - base:.3f} us)")
    write_results("profiler_overhead_breakdown", rows)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
    else:
        sys.exit(main())
