"""What kprof's own Python costs per scope and per kernelc launch while the cupti backend profiles
(issue 23, job 1: train's cost over the CUPTI floor), measured on CPU.

On a GPU in API-record mode (the default) kprof's per-launch work beyond CUPTI's floor is:

* CUPTI's driver-API activity record of each launch, copy and memset (C, in libcupti: not measurable
  here; the overhead bench's ``floor-api`` profiler measures it on a GPU);
* per ``profiler.scope`` entry and exit: the scope trie lookup, the thread's timeline (a CUPTI clock
  read and two list appends), the session's scope hook (metrics, host timing when a session needs it);
* per kernelc launch: the ``LaunchRecord`` kernelc builds once any hook is registered, kprof's enter and
  exit hooks (the description cache, a ``KernelLaunch`` object, two timeline entries);
* nothing per torch launch.

This script times each of these paths with the same objects kprof uses, with ``time.perf_counter_ns``
standing in for CUPTI's clock (``cupti.get_timestamp`` needs a driver), and counts how many scopes and
kernelc launches one step of ``examples/train.py`` ("tiny" size, CPU interpreter: the same code
path and counts per layer as "small") makes, so that the per-step cost can be put next to the GPU step
time (20-21 ms on H200).

    PYTHONPATH=. python3 bench/experiments/profiler_overhead/per_launch_path.py [--out results/per_launch_path.json]
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)


def _ns_per_op(fn, n=20000, reps=7):
    """Median over ``reps`` of the ns per call of ``fn(n)`` (which runs n iterations itself)."""
    out = []
    for _ in range(reps):
        gc.disable()
        t0 = time.perf_counter_ns()
        fn(n)
        out.append((time.perf_counter_ns() - t0) / n)
        gc.enable()
    return round(statistics.median(out), 1)


def _fake_record(metadata: bool):
    from kernelc.runtime import hooks as khooks

    class Compiled:
        shared = 0
        cache_key = "k" * 64
        signature = {"x": "*fp32"}
        n_regs = 32
        n_spills = 0

    class Fn:
        __name__ = "ln_kernel"
        arg_names = ["x", "y", "N", "BLOCK"]
        constexpr_names = {"BLOCK"}
        file = __file__
        first_line = 1
        src = "def ln_kernel(x, y, N, BLOCK): pass\n"
        launch_metadata = staticmethod(lambda grid, meta, args: {"flops": 5 * args["N"], "bytes": 8 * args["N"]}) \
            if metadata else None

    fn, ck = Fn(), Compiled()

    def make():
        return khooks.LaunchRecord("ln_kernel", (8192, 1, 1), 4, 1, ck.shared, 0, "cuda", ck, ck.cache_key, fn,
                                   (1, 2, 768, 1024), [False, False, False, True], fn.launch_metadata)
    return make


def measure() -> dict:
    import profiler
    from profiler import context, hooks, session
    res = {}

    # -- scopes ------------------------------------------------------------------------------------
    sc = profiler.scope("layernorm")
    scm = profiler.scope("attn", metrics={"flops": 123456789})

    def scopes(n, s=sc):
        for _ in range(n):
            with s:
                pass
    res["scope_no_session_ns"] = _ns_per_op(scopes)
    context.timelines_on(time.perf_counter_ns)
    res["scope_timelines_ns"] = _ns_per_op(scopes)
    # a session active as kprof's cupti session is (no host timing: `timing` empty)
    fake = type("S", (), {})()
    from profiler.tree import ProfileData
    fake.data = ProfileData(trace=False)
    fake.scope_key = lambda node, name, pykey: node
    old = session.active, session.timing
    session.active = (fake,)
    res["scope_timelines_session_ns"] = _ns_per_op(scopes)
    res["scope_metrics_timelines_session_ns"] = _ns_per_op(lambda n: scopes(n, scm))
    session.active, session.timing = old
    res["timeline_entries_per_scope"] = 2

    # -- kernelc launches ----------------------------------------------------------------------------
    for md in (False, True):
        make = _fake_record(md)
        tag = "metadata" if md else "plain"
        res[f"launch_record_{tag}_ns"] = _ns_per_op(lambda n: [make() for _ in range(n)])
        hooks._cupti, hooks._python, hooks._idle = True, False, False
        hooks.describe(make())   # the first launch of a configuration builds its description (not timed)

        def launches(n):
            enter, exit_ = hooks._enter, hooks._exit
            for _ in range(n):
                r = make()
                enter(r)
                exit_(r)
        res[f"launch_record_hooks_{tag}_ns"] = _ns_per_op(launches)
        hooks._cupti, hooks._idle = False, True
    context.timelines_off()
    return res


def count_train_step() -> dict:
    """Scopes entered and kernelc launches per step of examples/train.py: the "tiny" size with the "small"
    size's 4 layers (CPU interpreter; the counts depend on the layer count only)."""
    os.environ.setdefault("KERNELC_INTERPRET", "1")
    from kernelc.runtime import hooks as khooks
    from examples.train import SIZES, Trainer
    from profiler import context
    t = Trainer(dict(SIZES["tiny"], layers=SIZES["small"]["layers"]), "cpu")
    t.step()
    counts = {"scopes": 0, "kernelc_launches": 0}
    orig = context.push

    def push(name):
        counts["scopes"] += 1
        return orig(name)
    context.push = push
    h = khooks.register(enter=lambda rec: counts.__setitem__("kernelc_launches", counts["kernelc_launches"] + 1))
    try:
        t.step()
    finally:
        khooks.unregister(h)
        context.push = orig
    return counts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    res = {"ns": measure()}
    try:
        res["train_step"] = count_train_step()
    except Exception as e:  # the counts need torch and kernelc's interpreter
        res["train_step"] = {"error": f"{type(e).__name__}: {e}"}
    c = res["train_step"]
    if "scopes" in c:
        ns = res["ns"]
        scope_cost = c["scopes"] * ns["scope_timelines_session_ns"]
        launch_cost = c["kernelc_launches"] * ns["launch_record_hooks_plain_ns"]
        res["per_train_step_us"] = {"scopes": round(scope_cost / 1e3, 1), "kernelc_launches": round(launch_cost / 1e3, 1),
                                    "of_a_20ms_step_%": round(100 * (scope_cost + launch_cost) / 20e6, 3)}
    res["load_avg"] = os.getloadavg()
    print(json.dumps(res, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
