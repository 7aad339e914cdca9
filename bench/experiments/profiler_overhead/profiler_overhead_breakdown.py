"""Where kprof's per-launch cost goes: the tiny-launch loop of bench_profiler_overhead.py under
pieces of the CUPTI setup, each in a fresh process.

    python bench/experiments/profiler_overhead/profiler_overhead_breakdown.py

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

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))  # bench/experiments/<topic>/
sys.path.insert(0, ROOT)

VARIANTS = ("none", "activity", "activity+extcorr", "activity+drvapi", "activity+drvkind", "activity+extcorr+drvapi",
            "activity+noop_cb", "kprof", "proton")


def _setup(variant: str):
    if variant == "none":
        return lambda: {}
    if variant == "kprof":
        import profiler
        profiler.start("/tmp/kprof_breakdown")
        return lambda: {"files": profiler.finalize()}
    if variant == "proton":
        import triton.profiler as proton
        proton.start("/tmp/proton_breakdown")
        return lambda: proton.finalize() and {}
    from cupti import cupti
    seen = [0]
    kinds = {}
    threads = set()
    DRIVER = int(cupti.ActivityKind.DRIVER)

    def requested():
        return 8 << 20, 0

    def completed(activities):
        seen[0] += len(activities)
        for a in activities:
            k = int(a.kind)
            kinds[k] = kinds.get(k, 0) + 1
            if k == DRIVER and len(threads) < 8:
                threads.add(int(a.thread_id))

    cupti.activity_register_callbacks(requested, completed)
    cupti.activity_enable(cupti.ActivityKind.CONCURRENT_KERNEL)
    if "extcorr" in variant:
        cupti.activity_enable(cupti.ActivityKind.EXTERNAL_CORRELATION)
        cupti.activity_push_external_correlation_id(cupti.ExternalCorrelationKind.CUSTOM0, 7)
    if "drvapi" in variant or "drvkind" in variant:
        from profiler.backends.cupti import CuptiBackend
        launch = set(CuptiBackend(cupti)._launch_cbids())
        if "drvkind" in variant:   # every driver API recorded, then all but the launch ids switched off
            cupti.activity_enable(cupti.ActivityKind.DRIVER)
            for cbid in range(1, 1200):
                if cbid not in launch:
                    try:
                        cupti.activity_enable_driver_api(cbid, 0)
                    except Exception:
                        pass
        else:                      # only the launch ids switched on
            for cbid in launch:
                try:
                    cupti.activity_enable_driver_api(cbid, 1)
                except Exception as e:
                    kinds.setdefault("errors", []).append(f"{cbid}: {e}") if len(kinds.get("errors", [])) < 3 else None
    if variant == "activity+noop_cb":
        # a Python callback that only counts, on the same driver launch ids kprof enables
        from profiler.backends.cupti import CuptiBackend
        calls = [0, None]

        def noop(userdata, domain, cbid, data):
            calls[0] += 1
            if calls[1] is None:
                calls[1] = type(data).__name__

        sub = cupti.subscribe(noop, None)
        probe = CuptiBackend(cupti)
        for cbid in probe._launch_cbids():
            try:
                cupti.enable_callback(1, sub, cupti.CallbackDomain.DRIVER_API, cbid)
            except Exception:
                pass

        def done_cb():
            cupti.activity_flush_all(1)
            return {"callbacks": calls[0], "data_type": calls[1]}
        return done_cb

    def done():
        import threading
        cupti.activity_flush_all(1)
        return {"records": seen[0], "by_kind": {str(k): v for k, v in kinds.items()},
                "driver_thread_ids": sorted(threads), "main_ident": threading.get_ident()}
    return done


def child(variant: str, result: str) -> None:
    from bench.bench_profiler_overhead import TINY_ADDS, TINY_ROUNDS, TINY_WARMUP, tiny_loop
    best, done = tiny_loop(lambda: _setup(variant))
    info = done() or {}
    info["launches"] = TINY_WARMUP + TINY_ROUNDS * TINY_ADDS
    json.dump({"us": best, "info": info}, open(result, "w"))


def main() -> int:
    from bench.common import write_results
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    rows = []
    best = {}
    infos = {}
    for _round in range(3):
        for v in VARIANTS:
            res = f"/tmp/breakdown_{v.replace('+', '_')}.json"
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", v, res], env=env,
                               capture_output=True, text=True, timeout=300)
            if r.returncode != 0:
                print(f"{v}: failed\n{r.stderr[-1500:]}")
                continue
            d = json.load(open(res))
            us = d["us"]
            best[v] = min(best.get(v, us), us)
            infos[v] = d.get("info")
    base = best.get("none")
    for v in VARIANTS:
        if v in best:
            ratio = round(best[v] / base, 3) if base else None
            rows.append({"variant": v, "us_per_add": round(best[v], 3), "ratio": ratio,
                         "added_us": round(best[v] - base, 3) if base else None, "info": infos.get(v)})
            print(f"{v:20s} {best[v]:7.3f} us/add  {ratio}x  (+{best[v] - base:.3f} us)  {infos.get(v)}")
    write_results("profiler_overhead_breakdown", rows, results_dir=os.path.join(HERE, 'results'))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
    else:
        sys.exit(main())
