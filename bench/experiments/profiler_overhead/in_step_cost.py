"""kprof's Python per scope and per kernelc launch hook *inside real steps*, against the same calls in a tight loop
and in a loop that evicts the caches between calls (issue 23: on an H200 host kprof's scopes and hook cost
~440 us of a `train` step, ~12 us per event, where a tight loop gave ~1-2 us).

Under a running kprof session (default options) each of ``scope.__enter__``, ``scope.__exit__`` and kprof's kernelc
``enter``/``exit`` hooks is wrapped by a timer (``perf_counter_ns`` around the call; the wrapper's own cost is
measured on a no-op and given as ``timer_ns``).  ``--steps`` steps of the workload run so wrapped; then the same
calls repeat with the last real arguments (the last launch record, the step's scope names), back to back
("tight") and with ~``--evict-mb`` MB of memory streamed between two calls ("evicted").  Per event: mean ns inside
the call.  If the in-step figure is the tight one, kprof's cost in a step is not in these calls.  The timeline's
clock (``context._clock``) is wrapped too ("clock": its reads inside those calls, whose figures then include the
clock wrapper's own cost, ~2 ``timer_ns`` per read).

    python3 bench/experiments/profiler_overhead/in_step_cost.py [--workload train] [--steps 40] [--out FILE.json]
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
import time

# it times kprof's calls by wrapping the Python methods of profiler.scope and the hook: the C ones (the default
# native_scopes=auto) cannot be wrapped, so this measures the Python ones unless told otherwise
os.environ.setdefault("KPROF_NATIVE_SCOPES", "off")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)
if "--tree" in sys.argv:   # kprof (and the workloads) from another source tree, e.g. main's for an A/B
    sys.path.insert(0, os.path.abspath(sys.argv[sys.argv.index("--tree") + 1]))


class Timed:
    """Wraps ``fn``; sums the ns inside it and counts calls (``on`` False: counts nothing); ``keep``: every
    call's ns in ``samples`` too (percentiles: a mean 6x the tight loop's is either every call slower or a
    few very slow ones)."""

    def __init__(self, fn, keep=False, tag=None):
        self.fn, self.ns, self.n, self.on, self.last = fn, 0, 0, True, None
        self.samples = [] if keep else None
        self.tags = [] if keep and tag else None   # tag(args) per kept sample (e.g. a scope with metrics or not)
        pc = time.perf_counter_ns
        put = self.samples.append if keep else None
        tput = self.tags.append if self.tags is not None else None

        def w(*a):
            if not self.on:
                return fn(*a)
            t0 = pc()
            r = fn(*a)
            d = pc() - t0
            self.ns += d
            self.n += 1
            self.last = a
            if put is not None:
                put(d)
                if tput is not None:
                    tput(tag(a))
            return r
        self.w = w

    def by_tag(self):
        if not self.tags:
            return None
        out = {}
        for t, d in zip(self.tags, self.samples):
            t = str(t)
            out.setdefault(t, []).append(d)
            if ":" in t:   # "kind:site": by kind too
                out.setdefault(t.split(":", 1)[0], []).append(d)
        return {k: _dist(v) for k, v in out.items()}

    def take(self):
        ns, n = self.ns, self.n
        self.ns = self.n = 0
        if self.samples is not None:
            self.samples.clear()
        if self.tags is not None:
            self.tags.clear()
        return ns, n


def _dist(xs):
    """Percentiles of per-call ns, the mean without the slowest 1%, and the slowest 1%'s share of the sum."""
    if not xs:
        return None
    xs = sorted(xs)
    n = len(xs)
    q = lambda f: xs[min(n - 1, int(f * n))]   # noqa: E731
    k = max(1, n // 100)
    return {"n": n, "p10": q(0.1), "p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "max": xs[-1],
            "mean": round(sum(xs) / n, 1), "mean_wo_top1pct": round(sum(xs[:-k]) / (n - k), 1),
            "top1pct_share": round(sum(xs[-k:]) / max(sum(xs), 1), 3)}


def _control_work(state=[0, {}, [], []]):   # noqa: B006 -- the state is the point: it lives across calls
    """About what a scope entry does in Python (a dict lookup on a tuple key, two list appends, attribute
    and list work on a shared state), kprof's code not involved: its cost in the step against the tight
    loop says how much of kprof's in-step figure is any Python code run at that point."""
    d, a, b = state[1], state[2], state[3]
    key = (state[0] & 7, "x")
    v = d.get(key)
    if v is None:
        v = d[key] = len(d)
    a.append(v)
    b.append(time.time_ns())
    if len(a) > 4096:
        a.clear()
        b.clear()
    state[0] += 1
    return v


class Paired:
    """Wraps ``fn`` and times, at each call, ``fn`` and :func:`_control_work` one after the other, the order
    alternating: per-call ns of fn first / second and of the control first / second.  If the first of the two
    is slow whichever it is, the in-step cost is where the call lands (the caches torch's launch left), not
    what fn does."""

    def __init__(self, fn):
        self.fn, self.i = fn, 0
        self.s = {"fn_first": [], "fn_second": [], "ctl_first": [], "ctl_second": []}
        pc = time.perf_counter_ns
        s = self.s

        def w(*a):
            self.i += 1
            # the order from a hash of the call's index, not its parity: a step makes an even number of
            # calls (train: 22 scope entries, 14 launches), so parity would tie each order to the same call
            # sites (R1 of session 19 was confounded so)
            if (self.i * 2654435761 >> 13) & 1:
                t0 = pc()
                r = fn(*a)
                t1 = pc()
                _control_work()
                t2 = pc()
                s["fn_first"].append(t1 - t0)
                s["ctl_second"].append(t2 - t1)
            else:
                t0 = pc()
                _control_work()
                t1 = pc()
                r = fn(*a)
                t2 = pc()
                s["ctl_first"].append(t1 - t0)
                s["fn_second"].append(t2 - t1)
            return r
        self.w = w

    def result(self):
        return {k: _dist(v) for k, v in self.s.items()}


class CpuTimed:
    """Wraps ``fn``: per call the wall ns and the thread's CPU ns (``thread_time_ns``, a system call, so
    both include its cost, measured as ``self_ns``): wall well above CPU is time the thread did not run
    (another thread held the GIL, the core was taken); CPU as high as wall is work or stalls on this core."""

    def __init__(self, fn):
        self.fn, self.wall, self.cpu = fn, [], []
        pc, tt = time.perf_counter_ns, time.thread_time_ns

        def w(*a):
            c0, t0 = tt(), pc()
            r = fn(*a)
            t1, c1 = pc(), tt()
            self.wall.append(t1 - t0)
            self.cpu.append(c1 - c0)
            return r
        self.w = w


def _placed(path):
    """Where the profile put the GPU time: kernels right under the root (no scope) against all, and kernelc
    kernels with their launch description (a hook that failed leaves them without one)."""
    try:
        from profiler.format import read_profile
        root, _ = read_profile(path)
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}
    out = {"kernel_ns": 0, "root_kernel_ns": 0, "kernelc_frames": 0, "kernels": 0}

    def walk(node, depth):
        for ch in node.children:
            m = ch.metrics or {}
            if "device_type" in m:
                out["kernels"] += int(m.get("count", 0) or 0)
                t = int(m.get("time (ns)", 0) or 0)
                out["kernel_ns"] += t
                if depth == 0:
                    out["root_kernel_ns"] += t
                if (ch.extra or {}).get("kind") == "kernel":
                    out["kernelc_frames"] += 1
            walk(ch, depth + 1)
    walk(root, 0)
    return out


def _swap_wrappers(scopes, khooks, enter, exit_, henter, hexit, cur):
    """Put ``enter``/``exit_`` on scope and ``henter``/``hexit`` in kernelc's hook lists in place of ``cur``'s four."""
    scopes.scope.__enter__, scopes.scope.__exit__ = enter, exit_
    khooks._enter_hooks[khooks._enter_hooks.index(cur[0])] = henter
    khooks._exit_hooks[khooks._exit_hooks.index(cur[1])] = hexit


def _paired_steps(w, sync, steps, scopes, hooks, khooks, t_enter, t_exit, h_enter, h_exit):
    """``steps`` steps with scope entry and the hooked launch's entry paired with the control (:class:`Paired`)."""
    pe, px = Paired(t_enter.fn), Paired(t_exit.fn)
    he, hx = Paired(h_enter.fn), Paired(h_exit.fn)
    _swap_wrappers(scopes, khooks, pe.w, px.w, he.w, hx.w, (h_enter.w, h_exit.w))
    try:
        for _ in range(steps):
            w.step()
        sync()
    finally:
        _swap_wrappers(scopes, khooks, t_enter.w, t_exit.w, h_enter.w, h_exit.w, (he.w, hx.w))
    # and the control alone, back to back
    tight = []
    pc = time.perf_counter_ns
    for _ in range(20000):
        t0 = pc()
        _control_work()
        tight.append(pc() - t0)
    return {"scope_enter": pe.result(), "scope_exit": px.result(), "hook_enter": he.result(),
            "hook_exit": hx.result(), "control_tight": _dist(tight)}


def _cpu_steps(w, sync, steps, scopes, hooks, khooks, t_enter, t_exit, h_enter, h_exit):
    """``steps`` steps with wall and thread CPU ns per call (:class:`CpuTimed`), and the wrapper's own cost."""
    ce, cx, he, hx = CpuTimed(t_enter.fn), CpuTimed(t_exit.fn), CpuTimed(h_enter.fn), CpuTimed(h_exit.fn)
    _swap_wrappers(scopes, khooks, ce.w, cx.w, he.w, hx.w, (h_enter.w, h_exit.w))
    try:
        for _ in range(steps):
            w.step()
        sync()
    finally:
        _swap_wrappers(scopes, khooks, t_enter.w, t_exit.w, h_enter.w, h_exit.w, (he.w, hx.w))
    noop = CpuTimed(lambda: None)
    for _ in range(5000):
        noop.w()
    out = {k: {"wall": _dist(t.wall), "cpu": _dist(t.cpu)} for k, t in
           (("scope_enter", ce), ("scope_exit", cx), ("hook_enter", he), ("hook_exit", hx))}
    out["self_ns"] = {"wall": _dist(noop.wall), "cpu": _dist(noop.cpu)}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="train")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--evict-mb", type=float, default=48.0)
    ap.add_argument("--evict-n", type=int, default=300, help="calls of the evicted loop (0: skip it)")
    ap.add_argument("--samples", action="store_true", help="per-call percentiles in the step (every call kept), "
                    "then --paired-steps steps with each call paired with a control of Python work, then "
                    "--cpu-steps steps with wall and thread CPU time per call")
    ap.add_argument("--paired-steps", type=int, default=20)
    ap.add_argument("--cpu-steps", type=int, default=20)
    ap.add_argument("--tree", default=None, help="import profiler/ and bench/ from this source tree (read "
                    "before argparse: see the top of the file)")
    ap.add_argument("--device", default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    import torch
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    import profiler
    from profiler import scopes, hooks, context
    from kernelc.runtime import hooks as khooks
    from bench.reconcile_profilers import WORKLOADS, WARMUP
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    w = WORKLOADS[args.workload](device, profiler.scope)
    for _ in range(WARMUP[args.workload] if device == "cuda" else 2):
        w.step()
    sync()
    out_base = os.path.join(tempfile.mkdtemp(), "in_step")
    profiler.start(out_base)
    for _ in range(5):
        w.step()
    sync()

    keep = args.samples
    # a scope entry with metrics (train's attn and mlp) goes through the session: percentiles apart
    t_enter = Timed(scopes.scope.__enter__, keep,
                    tag=lambda a: ("metrics:" if a[0].metrics else "plain:") + a[0].name)
    t_exit = Timed(scopes.scope.__exit__, keep)
    scopes.scope.__enter__, scopes.scope.__exit__ = t_enter.w, t_exit.w
    h_enter, h_exit = Timed(hooks._enter, keep), Timed(hooks._exit, keep)
    # the timeline's clock (cupti.get_timestamp in API-record mode), read inside the calls above; with the launch
    # API records turned on lazily, arm them now (as the first scope would): arming replaces context._clock
    if getattr(context, "_arming_clock", None) is not None and context._clock is context._arming_clock:
        context._arming_clock()
    clk = Timed(context._clock, keep) if context._clock is not None else None
    if clk is not None:
        context._clock = clk.w
    ie, ix = khooks._enter_hooks.index(hooks._enter), khooks._exit_hooks.index(hooks._exit)
    khooks._enter_hooks[ie], khooks._exit_hooks[ix] = h_enter.w, h_exit.w
    noop = Timed(lambda *a: None)
    res = {"workload": args.workload, "device": device, "steps": args.steps, "tree": args.tree,
           "profiler_file": profiler.__file__,
           "torch": torch.__version__, "python": sys.version.split()[0],
           "clock": getattr(context._clock, "__qualname__", repr(context._clock))}
    try:
        gc.collect()
        gc.disable()
        t0 = time.perf_counter_ns()
        for _ in range(args.steps):
            w.step()
        sync()
        step_ns = (time.perf_counter_ns() - t0) / args.steps
        res["step_us_instrumented"] = round(step_ns / 1e3, 1)
        ins = {}
        for k, t in (("scope_enter", t_enter), ("scope_exit", t_exit), ("hook_enter", h_enter), ("hook_exit", h_exit),
                     ("clock", clk)):
            if t is None:
                continue
            dist = _dist(t.samples) if t.samples else None
            tags = t.by_tag()
            ns, n = t.take()
            ins[k] = {"per_step": round(n / args.steps, 2), "mean_ns": round(ns / n, 1) if n else None,
                      "us_per_step": round(ns / args.steps / 1e3, 1)}
            if dist:
                ins[k]["dist_ns"] = dist
            if tags:
                ins[k]["dist_by_kind_ns"] = tags
        res["in_step"] = ins
        if args.samples:
            res["in_step_paired"] = _paired_steps(w, sync, args.paired_steps, scopes, hooks, khooks, t_enter,
                                                  t_exit, h_enter, h_exit)
            res["in_step_cpu"] = _cpu_steps(w, sync, args.cpu_steps, scopes, hooks, khooks, t_enter, t_exit,
                                            h_enter, h_exit)
        # the timer's own cost, as seen from inside (one perf_counter_ns and the call of a no-op)
        for _ in range(20000):
            noop.w()
        res["timer_ns"] = round(noop.ns / noop.n, 1)

        # the same calls again, back to back and with the caches evicted between calls
        rec = h_enter.last[0] if h_enter.last else None
        scope_names = ["layernorm", "attn", "mlp", "forward"]
        evict = bytearray(int(args.evict_mb * (1 << 20)))

        def one_scope(i):
            s = scopes.scope(scope_names[i & 3])
            s.__enter__()
            s.__exit__(None, None, None)

        def one_metrics_scope(i):
            s = scopes.scope(scope_names[i & 3], metrics={"flops": 12345678})
            s.__enter__()
            s.__exit__(None, None, None)

        def one_launch(i):
            h_enter.w(rec)
            h_exit.w(rec)

        def loop(fn, n, ev):
            for t in (t_enter, t_exit, h_enter, h_exit) + ((clk,) if clk is not None else ()):
                t.take()
            for i in range(n):
                if ev:
                    bytes(evict)   # streams evict_mb through the caches
                fn(i)
            if keep and not ev:
                res.setdefault("tight_dist_ns", {}).update(
                    {k: _dist(t.samples) for k, t in (("scope_enter", t_enter), ("scope_exit", t_exit),
                                                      ("hook_enter", h_enter), ("hook_exit", h_exit), ("clock", clk))
                     if t is not None and t.samples})
            return {k: round(t.ns / t.n, 1) for k, t in (("scope_enter", t_enter), ("scope_exit", t_exit),
                                                          ("hook_enter", h_enter), ("hook_exit", h_exit),
                                                          ("clock", clk)) if t is not None and t.n}
        res["tight_metrics_scope"] = loop(one_metrics_scope, 20000, False)
        res.pop("tight_dist_ns", None)
        res["tight"] = loop(one_scope, 20000, False)
        if args.evict_n:
            res["evicted"] = loop(one_scope, args.evict_n, True)
        if rec is not None:
            res["tight"].update(loop(one_launch, 20000, False))
            if args.evict_n:
                res["evicted"].update(loop(one_launch, args.evict_n, True))
    finally:
        gc.enable()
        scopes.scope.__enter__, scopes.scope.__exit__ = t_enter.fn, t_exit.fn
        if clk is not None and context._clock is clk.w:
            context._clock = clk.fn
        khooks._enter_hooks[ie], khooks._exit_hooks[ix] = hooks._enter, hooks._exit
        profiler.finalize()
    res["placed"] = _placed(out_base + ".hatchet")
    res["timeline_clock"] = os.environ.get("KPROF_CUPTI_TIMELINE_CLK", "cupti")
    print(json.dumps(res))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
