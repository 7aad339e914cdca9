"""What a ``profiler.scope`` and a hooked kernelc launch cost *inside a step* of other work, against the same
path in a tight loop (issue 23: on an H200 each scope or hooked launch cost ~10 us of main-thread CPU in the
`train` step, several times its tight-loop cost).

A "step" here is ``--ops`` small torch CPU ops (dispatcher, allocator, Python objects: the host work of a
launch-bound step) with ``--events`` scope enters/exits (or fake hooked launches) spread over it.  Blocks of
steps alternate (ABAB) between kprof's real path (timelines on, a session active as kprof's cupti session:
``scope_key`` of the real Session class, a real ProfileData) and a no-op (``contextlib.nullcontext``, what the
bench's ``kprof-noscope`` puts in its place); the per-event cost is (A - B) / events, median over pairs.  The
same is timed in a tight loop.  The clock is ``time.perf_counter_ns`` unless ``--clock`` names another.

    PYTHONPATH=. python3 bench/experiments/profiler_overhead/scope_in_step.py [--out FILE.json]
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(HERE))))


def _session_like():
    """An object kprof's scope path treats as the cupti session (no host timing, no trace)."""
    from profiler.session import Session
    from profiler.tree import ProfileData
    s = object.__new__(Session)
    s.context = "shadow"
    s.data = ProfileData(trace=False)
    return s


def _work(ops, xs):
    # torch's host path per op: dispatcher, TensorImpl allocation, a Python tensor object
    y = xs[0]
    for i in range(ops):
        y = y + xs[i & 7]
    return y


def run(args) -> dict:
    import torch
    import profiler
    from profiler import context, session
    torch.set_num_threads(1)
    xs = [torch.randn(args.numel) for _ in range(8)]
    per = max(1, args.ops // args.events)
    names = [f"s{i % 6}" for i in range(args.events)]
    metrics = {"flops": 123456789}

    def step_scoped(scope):
        for i in range(args.events):
            with scope(names[i], metrics if (args.metrics and i % 4 == 0) else None):
                _work(per, xs)

    def null(name, metrics=None):
        return contextlib.nullcontext()

    def block(scope):
        t0 = time.perf_counter_ns()
        for _ in range(args.steps):
            step_scoped(scope)
        return time.perf_counter_ns() - t0

    clock = time.perf_counter_ns
    context.timelines_on(clock)
    old = session.active, session.timing
    session.active = (_session_like(),)
    out = {"per_event_in_step_ns": [], "pairs": []}
    try:
        for _ in range(3):   # warm
            block(profiler.scope), block(null)
        for r in range(args.pairs):
            order = (profiler.scope, null) if r % 2 == 0 else (null, profiler.scope)
            t = {}
            for sc in order:
                t[sc is null] = block(sc)
                context.timelines_on(clock)   # keep the timeline short, as a block's is
            d = (t[False] - t[True]) / (args.steps * args.events)
            out["pairs"].append([t[False], t[True]])
            out["per_event_in_step_ns"].append(d)

        def tight(n, scope):
            for i in range(n):
                with scope(names[i % 6], None):
                    pass
        tl = []
        for _ in range(7):
            t0 = time.perf_counter_ns(); tight(20000, profiler.scope); a = time.perf_counter_ns() - t0
            t0 = time.perf_counter_ns(); tight(20000, null); b = time.perf_counter_ns() - t0
            tl.append((a - b) / 20000)
    finally:
        session.active, session.timing = old
        context.timelines_off()
    ev = out.pop("per_event_in_step_ns")
    step_ns = statistics.median(p[1] for p in out["pairs"]) / args.steps
    return {"per_event_in_step_ns": round(statistics.median(ev), 1),
            "per_event_in_step_q": [round(x, 1) for x in statistics.quantiles(ev, n=4)],
            "per_event_tight_ns": round(statistics.median(tl), 1),
            "step_us_null": round(step_ns / 1e3, 1), "events_per_step": args.events, "ops_per_step": args.ops,
            "numel": args.numel, "metrics": args.metrics, "pairs": len(ev), "load_avg": os.getloadavg()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=400)
    ap.add_argument("--events", type=int, default=22)
    ap.add_argument("--numel", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--pairs", type=int, default=30)
    ap.add_argument("--metrics", action="store_true", help="every 4th scope with metrics (train's attn/mlp)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    gc.freeze()
    res = run(args)
    print(json.dumps(res))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
