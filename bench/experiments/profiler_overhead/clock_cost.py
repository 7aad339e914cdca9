"""What one timeline entry's clock read costs on a GPU host: ``cupti.get_timestamp`` (kprof's timeline clock in
API-record mode, through cupti-python) against ``time.perf_counter_ns`` (what the CPU micro-benchmark
``per_launch_path.py`` stood in with), with CUPTI idle and with kprof's session running.  Issue 23: kprof's Python
measured ~2% of a `train` step on an H200 (2026-11-28, s16 R1a), several times the CPU estimate.

    python3 bench/experiments/profiler_overhead/clock_cost.py [--out FILE.json]
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def per_call_ns(fn, n=20000, reps=5):
    best = []
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        best.append((time.perf_counter_ns() - t0) / n)
    return round(sorted(best)[len(best) // 2], 1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    import torch
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    from cupti import cupti
    res = {"perf_counter_ns": per_call_ns(time.perf_counter_ns), "cupti_get_timestamp_idle": per_call_ns(cupti.get_timestamp)}
    import profiler
    from profiler import context
    profiler.start(os.path.join(os.environ.get("TMPDIR", "/tmp"), "clock_cost"))
    res["cupti_get_timestamp_session"] = per_call_ns(cupti.get_timestamp)
    res["context_clock_session"] = per_call_ns(context._clock) if context._clock else None

    def scope_pair():
        with profiler.scope("s"):
            pass
    res["scope_enter_exit_session"] = per_call_ns(scope_pair, n=5000)
    res["scope_enter_exit_session_metrics"] = per_call_ns(lambda: profiler.scope("m", metrics={"flops": 1}).__enter__().__exit__(None, None, None), n=5000)
    profiler.finalize()
    res["scope_enter_exit_no_session"] = per_call_ns(scope_pair, n=5000)
    print(json.dumps(res))
    if args.out:
        json.dump(res, open(args.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
