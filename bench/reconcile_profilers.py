"""kprof vs Proton vs torch.profiler on the same training steps: per-kernel counts and times
(``reconcile``), and each profiler's overhead against an unprofiled control and the CUPTI floor
(``overhead``).

Workloads (each run in its own process; the profiler starts after the warm-up steps):

* ``encoder``: a 4-layer ``torch.nn.TransformerEncoder`` (d_model 512, 8 heads, batch 16 x 256 tokens,
  bf16 autocast, fused AdamW) plus two kernelc kernels per step (layer norm and softmax of
  ``examples/kernels``), scopes around forward/backward/optimizer: a step kprof's benches never tuned on;
* ``train``: ``examples/train.py``'s ``Trainer`` ("small");
* ``tiny``: 1-element ``torch.add`` launches (launch-bound).

``reconcile`` prints and writes, per kernel name (memcpy by direction, memset), count and total time in
each profiler, and the difference of kprof's to torch.profiler's; rows whose difference is above 1% are
flagged.  Each profiler profiles the same number of steps after the same warm-up, so counts must match
exactly; times come from different processes, so each profiler runs ``--rounds`` times and the spread
of a kernel's time between one profiler's own rounds is reported next to the cross-profiler difference.

``reconcile`` also runs ``cupti``: CUPTI's own records decoded by cupti-python (no kprof, no Kineto),
the reference the others are compared with.

``overhead`` measures each profiler's cost against an unprofiled control and the CUPTI floor, one
process per profiler and round (``--rounds``, default 1: rounds interleaved, order rotated), and a
closing control process after the last.  Each process is pinned to a fixed
core set (``--cpus``; torch's threads too), warms up, then times ``--pre`` unprofiled blocks before
anything initialises CUPTI (``cold``), then alternates profiled and unprofiled blocks (AB, BA, ...) until
its share of ``--budget`` is spent; the profiler is started before and finalized after each of its
blocks, outside the timing, and the garbage collector runs only between blocks.  Per profiler it reports
``warm`` (profiled block over the unprofiled block next to it: the cost while the profiler is on),
``residue`` (unprofiled blocks after CUPTI was first initialised over the cold ones: what CUPTI leaves
behind in the process) and ``full`` = warm x residue (the cost against a process that never profiled);
medians with bootstrap 95% intervals.  Next to them: ``warm_bracket`` (each profiled block over the
unprofiled blocks on both sides), ``warm_cpu`` (the same ratio of the process's CPU time), each process's
own A/A control (adjacent unprofiled blocks), and per block the scheduler's counters (run-queue wait, the
pinned cores' other load, steal) and, for kprof, what its callbacks did on CUPTI's thread inside the block.  ``none`` (no profiler) is the control: its spread is the
resolution.  Profilers: ``none``, ``floor`` (CUPTI kernel/memcpy/memset records dropped by a cupti-python
callback, nothing else), ``floor-raw`` (the same records dropped by libcupti's own buffer callbacks, so
without cupti-python's Python object per record), ``floor-api`` (floor-raw plus kprof's driver-API records,
dropped unread), ``floor-sub`` (floor-raw plus a CUPTI subscriber with the graph-node resource callbacks, as
kprof has), ``kprof`` and its variants (``kprof-ext``: CUPTI external correlation ids,
``kprof-deferred``: cupti-python's record objects kept and decoded at the flush, ``kprof-split``:
cupti-python's records split into columns as each buffer completes (the default before 2026-11-27),
``kprof-raw``: buffers
taken from libcupti, no Python per record until the flush, ``kprof-nohook``: no kernelc launch hook,
``kprof-nosub``: the graph-node resource callbacks left off, ``kprof-nopy``: no kernelc hook and
``profiler.scope`` a no-op, i.e. only what CUPTI does for kprof, ``kprof-noscope``: ``profiler.scope`` a
no-op only (these three are measurements, not options);
see profiler/options.py), ``proton``, ``torch``.

``--step-probe ITERS`` times a fixed pure-Python loop on the main thread between segments of each block (a
segment: one step, or ~3 ms of the tiny loop's launches) and keeps every segment's and probe's time; the summary
adds the ratios with each segment scaled by its core's speed around it (``warm_probe``, ``warm_probe_fit``: the
speed to the power that makes the control's successive blocks agree best, per workload), next to the raw ones.

The table printed at the end gives, per profiler, the median pair ratio with its sign-test 95% interval
(distribution-free), raw and ``probe-fit``, and the cost over the floor as the Hodges-Lehmann shift of the
pair ratios (the median of all kprof-pair / floor-pair log ratios) with its Mann-Whitney 95% interval: a
few pairs caught in a slow phase of the host move it less than a ratio of medians with a bootstrap.
``--reanalyse FILE`` rebuilds the summaries and the table from a results file's raw blocks (no run).

``--fine MS`` (with ``--profilers kprof``) is the design that gets the control under 1% (2026-11-29,
docs/performance.md): the host's cores change speed by several percent over tenths of a second, so blocks
that ran a round apart differ by 4-19%, while ~3-ms stretches next to each other agree to ~1.5%.  One kprof
session per process; segments of ~MS ms (at least one step) switch between kprof, floor (kprof's activity
kinds only), none and none2 (all off; the same state under two names: the control), in an order in which
every state follows every other equally often (``FINE_CIRCUIT``); each switch is left out of the timing.  Every
pair of states is compared block by block, the figure the median block ratio with its sign-test interval.

Every statistic leaves out the first ``--settle-pairs`` (default 4) pairs of each process: pooled over the earlier
runs, `train`'s first three pairs sat 0.7-2.2% below their process's median.  The table's ``control processes``
line splits the control's spread into what each control process's own pairs explain (the standard error of its
median) and a chi-square test of anything between processes (``control_noise``), and says how many pairs a
process needs for a spread below 1%.  ``--probe-beta WL=B`` fixes probe-fit's exponent before the run.

    python bench/reconcile_profilers.py reconcile [--workloads encoder,train] [--steps 60] [--rounds 2]
    python bench/reconcile_profilers.py overhead [--workloads encoder,train,tiny] [--budget 500] [--quick]
    python bench/reconcile_profilers.py overhead --reanalyse bench/results/profiler_overhead_s7_h100_quiet.json
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

WARMUP = {"encoder": 15, "train": 10, "tiny": 500}
STEPS = {"encoder": 60, "train": 40, "tiny": 5000}
# overhead: share of --budget per workload, and the block length each aims at
BUDGET_SHARE = {"encoder": 0.4, "train": 0.35, "tiny": 0.25}
BLOCK_S = {"encoder": 0.4, "train": 0.5, "tiny": 0.2}
# kprof variants: the profiler.options knobs (and start() arguments) each one sets
KPROF_VARIANTS = {
    "kprof": ({}, {}),
    "kprof-ext": ({"cupti_attribution": "external-correlation"}, {}),
    "kprof-deferred": ({"cupti_records": "deferred"}, {}),
    "kprof-raw": ({"cupti_records": "raw"}, {}),
    "kprof-split": ({"cupti_records": "split"}, {}),
    "kprof-nohook": ({}, {"hook": None}),
    "kprof-nosub": ({}, {}),   # measurement only: the graph-node resource callbacks left off (see _start)
    "kprof-nopy": ({}, {"hook": None}),   # measurement only: no kernelc hook and profiler.scope a no-op (_start)
    "kprof-noscope": ({}, {}),   # measurement only: profiler.scope a no-op, the kernelc hook kept (_start)
    "kprof-cupticlk": ({"cupti_timeline_clock": "cupti"}, {}),   # timelines on cupti.get_timestamp (before s18)
}
# profilers --against may compare in one process: the floors re-register their CUPTI buffer callbacks
# when a kprof or Proton start has registered its own since, and floor-sub's subscriber lives for its
# block only; Proton's finalize releases CUPTI altogether (cuptiFinalize), so whatever starts next
# starts CUPTI afresh (see _start)
AGAINST_OK = set(KPROF_VARIANTS) | {"floor", "floor-raw", "floor-api", "floor-sub", "proton"}


# -- workloads ---------------------------------------------------------------------------------
class Encoder:
    """The issue-23 step: TransformerEncoder + two kernelc kernels, bf16 autocast, fused AdamW."""

    def __init__(self, device, scope):
        import torch
        from examples.kernels import layernorm as k_ln
        from examples.kernels import softmax as k_sm
        torch.manual_seed(0)
        self.torch, self.k_ln, self.k_sm, self.scope = torch, k_ln, k_sm, scope
        layer = torch.nn.TransformerEncoderLayer(512, 8, dim_feedforward=2048, batch_first=True, device=device)
        self.model = torch.nn.TransformerEncoder(layer, 4, enable_nested_tensor=False).to(device)
        fused = {"fused": True} if device == "cuda" else {}
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, **fused)
        b, t = (16, 256) if device == "cuda" else (2, 16)
        self.x = torch.randn(b, t, 512, device=device)
        self.w = torch.ones(512, device=device)
        self.bias = torch.zeros(512, device=device)
        self.device = device

    def step(self):
        torch = self.torch
        with self.scope("forward"):
            with torch.autocast(self.device, dtype=torch.bfloat16):
                h = self.model(self.x)
            # the two kernelc kernels of the step (fp32 in, no autograd: they feed the loss only)
            y, _, _ = self.k_ln.layer_norm(h.float().reshape(-1, 512).contiguous(), self.w, self.bias, 1e-5)
            p = self.k_sm.softmax(y)
            loss = h.float().pow(2).mean() + p.mean()
        with self.scope("backward"):
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
        with self.scope("optimizer"):
            self.opt.step()


class Train:
    def __init__(self, device, scope):
        from examples.train import SIZES, Trainer
        self.trainer = Trainer(SIZES["small" if device == "cuda" else "tiny"], device)

    def step(self):
        self.trainer.step()


class Tiny:
    def __init__(self, device, scope):
        import torch
        self.torch = torch
        self.a = torch.zeros(1, device=device)
        self.b = torch.ones(1, device=device)
        self.c = torch.empty_like(self.a)

    def step(self):
        self.torch.add(self.a, self.b, out=self.c)


WORKLOADS = {"encoder": Encoder, "train": Train, "tiny": Tiny}


# -- profilers ---------------------------------------------------------------------------------
def _scope_fn(prof):
    if prof in KPROF_VARIANTS:
        import profiler
        return profiler.scope
    if prof == "proton":
        import triton.profiler as proton
        return proton.scope
    if prof == "torch":
        from torch.profiler import record_function
        return record_function
    return lambda name: contextlib.nullcontext()


def _enable_kinds(cupti, kinds):
    """Enable ``kinds``; the returned stop() flushes and disables them (the two floors' shared tail)."""
    for kind in kinds:
        cupti.activity_enable(kind)

    def stop():
        cupti.activity_flush_all(1)
        for kind in kinds:
            cupti.activity_disable(kind)
    return stop


def _start(prof, out):
    """Start ``prof`` writing to ``out`` (no suffix); returns a stop function."""
    if prof in KPROF_VARIANTS:
        import profiler
        from profiler import options
        knobs, kwargs = KPROF_VARIANTS[prof]
        for k in {k for kn, _ in KPROF_VARIANTS.values() for k in kn}:   # another variant's, from --against
            options.set_override(k, None)
        for k, v in knobs.items():
            options.set_override(k, v)
        if _BUFFER[0]:
            options.set_override("cupti_buffer_bytes", _BUFFER[0])
        _nosub(prof == "kprof-nosub")
        _noscope(prof in ("kprof-nopy", "kprof-noscope"))
        _CB_OWNER[0] = "kprof"
        sid = profiler.start(out, **kwargs)
        b = profiler.session.get(sid).backend
        _BACKEND[0] = b
        # what is really in effect (a variant CUPTI cannot do falls back, and says so in `skipped`)
        _STATE.update(backend=getattr(b, "name", "?"), external=bool(getattr(b, "external", False)),
                      raw=getattr(b, "rawbufs", None) is not None, deferred=bool(getattr(b, "deferred", False)),
                      light=bool(getattr(b, "light", False)), skipped=list(getattr(b, "skipped", []))[:5])
        return lambda: profiler.finalize()
    if _REAL_SCOPE[0] is not None:   # after a kprof-nopy block (--against): scopes are kprof's again
        _noscope(False)
    if prof == "proton":
        import triton.profiler as proton
        _STATE.clear()
        _STATE["backend"] = "proton"
        if _CB_OWNER[0] not in (None, "proton"):
            # kprof or a floor used cupti-python's libcupti in this process, and Proton loads its own copy:
            # CUPTI lets one copy attach to the driver at a time (Proton's subscribe failed with error 39,
            # MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, on an H200 2026-11-29), so detach cupti-python's first
            # (it attaches again at its next call)
            from cupti import cupti
            cupti.finalize()
        _CB_OWNER[0] = "proton"
        # code that looks profiler.scope up at each use (the train workload) opens Proton's scopes for
        # the block, as it would be instrumented for Proton; the encoder was built with the scope of the
        # run's profiler (see _scope_fn)
        _swap_scope(proton.scope)
        proton.start(out, hook="triton")

        def stop():
            try:
                proton.finalize()
            finally:
                _noscope(False)
        return stop
    if prof == "torch":
        from torch.profiler import ProfilerActivity, profile
        p = profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU])
        p.__enter__()

        def stop():
            p.__exit__(None, None, None)
            p.export_chrome_trace(out + ".json")
        return stop
    if prof == "floor":
        from cupti import cupti
        kinds = (cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.MEMCPY, cupti.ActivityKind.MEMSET)
        if _CB_OWNER[0] != "floor":
            size = _BUFFER[0] or (8 << 20)
            cb = (lambda: (size, 0), lambda activities: None)
            _KEEP.append(cb)
            cupti.activity_register_callbacks(*cb)
            _CB_OWNER[0] = "floor"
        return _enable_kinds(cupti, kinds)
    if prof == "floor-raw":
        from cupti import cupti

        from profiler.backends import cupti_raw
        kinds = (cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.MEMCPY, cupti.ActivityKind.MEMSET)
        if _FLOOR_REGISTERED and _CB_OWNER[0] != "floor-raw":   # a kprof start registered its own since
            _FLOOR_REGISTERED[0].register()
        elif not _FLOOR_REGISTERED:
            # libcupti's own buffer callbacks (as kprof's cupti_records="raw"): each completed buffer
            # dropped, no Python per record -- the floor without cupti-python's record objects
            cupti.activity_register_callbacks(lambda: (8 << 20, 0), lambda activities: None)  # loads libcupti
            lib = cupti_raw.find_libcupti()
            raw = cupti_raw.RawBuffers(lib, _BUFFER[0] or (8 << 20), 0, lambda: raw.take())
            raw.register()
            _FLOOR_REGISTERED.append(raw)
        _CB_OWNER[0] = "floor-raw"
        return _enable_kinds(cupti, kinds)
    if prof == "floor-api":
        # floor-raw plus the driver-API activity records kprof places launches with (the same ids,
        # profiler.backends.cupti.launch_cbids), all dropped unread: what CUPTI itself costs kprof per
        # launch, without any kprof code
        from cupti import cupti

        from profiler.backends.cupti import launch_cbids
        stop = _start("floor-raw", out)
        ids = []
        for cbid in launch_cbids(cupti):
            try:   # ids this driver does not trace are refused (ERROR_INVALID_PARAMETER), as kprof skips them
                cupti.activity_enable_driver_api(cbid, 1)
                ids.append(cbid)
            except Exception:
                pass

        def stop_api():
            stop()
            for cbid in ids:
                cupti.activity_enable_driver_api(cbid, 0)
        return stop_api
    if prof == "floor-sub":
        # floor-raw plus what kprof subscribes to besides records: a CUPTI subscriber (a no-op Python
        # callback) with the graph-node resource callbacks on, as kprof's default has -- whether a
        # subscriber alone costs anything per launch (the floor has none)
        from cupti import cupti
        stop = _start("floor-raw", out)
        cb = lambda userdata, domain, cbid, data: None   # noqa: E731
        _KEEP.append(cb)
        sub = cupti.subscribe(cb, None)
        R = cupti.CallbackIdResource
        for cbid in (R.GRAPHNODE_CREATED, R.GRAPHNODE_CLONED):
            try:
                cupti.enable_callback(1, sub, cupti.CallbackDomain.RESOURCE, int(cbid))
            except Exception:
                pass

        def stop_sub():
            stop()
            cupti.unsubscribe(sub)
        return stop_sub
    if prof == "cupti":
        return _raw_cupti(out + ".cupti.json")
    return lambda: None


_KEEP: list = []   # callbacks handed to CUPTI stay referenced


_FLOOR_REGISTERED: list = []   # floor-raw's RawBuffers, made once
_CB_OWNER = [None]   # whose activity buffer callbacks CUPTI has now: "floor", "floor-raw" or "kprof"


def _null_scope(name, metrics=None, **kw):
    return contextlib.nullcontext()


def _noscope(on: bool) -> None:
    """``kprof-nopy`` (a measurement, not an option): ``profiler.scope`` replaced by a no-op for the block,
    so that with ``hook=None`` no kprof Python runs per step and only what CUPTI does for kprof is left.
    It reaches code that looks ``profiler.scope`` up at each use (examples/train.py: the ``train``
    workload); the encoder's scope function is bound at its construction and keeps kprof's."""
    import profiler
    real = _REAL_SCOPE[0] or profiler.scope
    _REAL_SCOPE[0] = real
    profiler.scope = _null_scope if on else real


_REAL_SCOPE: list = [None]


def _dyn_scope(name, metrics=None):
    """The scope of whichever profiler the block runs (``profiler.scope``, swapped for Proton's in its blocks)."""
    import profiler
    return profiler.scope(name, metrics)


def _swap_scope(fn) -> None:
    """``profiler.scope`` is ``fn`` until the next ``_noscope`` (a Proton block: Proton's own scopes)."""
    import profiler
    _REAL_SCOPE[0] = _REAL_SCOPE[0] or profiler.scope
    profiler.scope = fn


def _nosub(on: bool) -> None:
    """``kprof-nosub`` (a measurement, not an option): kprof's CUPTI subscriber without the graph-node
    resource callbacks, to see what enabling them costs per launch (graph kernels then lose their scope)."""
    from profiler.backends import cupti as kc
    cls = kc.CuptiBackend
    if on and "_orig_enable_callbacks" not in cls.__dict__:
        cls._orig_enable_callbacks = cls._enable_callbacks

        def enable(self, on_, _orig=cls._orig_enable_callbacks):
            g = (self.GRAPHNODE_CREATED, self.GRAPHNODE_CLONED)
            self.GRAPHNODE_CREATED = self.GRAPHNODE_CLONED = -1   # enable_callback refuses -1: skipped
            try:
                _orig(self, on_)
            finally:
                self.GRAPHNODE_CREATED, self.GRAPHNODE_CLONED = g
        cls._enable_callbacks = enable
    elif not on and "_orig_enable_callbacks" in cls.__dict__:
        cls._enable_callbacks = cls._orig_enable_callbacks
        del cls._orig_enable_callbacks
_BACKEND: list = [None]   # the kprof backend of the profiled block running (its in-loop stats are read)
_STATE: dict = {}   # the kprof backend's mode as started (overhead children report it)
_BUFFER = [0]   # overhead --buffer: CUPTI buffer bytes for floor and kprof (0: their defaults)


def _raw_cupti(path):
    """The reference for ``reconcile``: CUPTI's kernel/memcpy/memset records decoded by cupti-python's
    own attributes (no kprof code, no Kineto), summed per key on CUPTI's thread."""
    from cupti import cupti
    sums = defaultdict(lambda: [0, 0])

    def requested():
        return 8 << 20, 0

    def completed(activities):
        for a in activities:
            kind = int(a.kind)
            if kind == int(cupti.ActivityKind.MEMSET):
                k = "[memset]"
            elif kind == int(cupti.ActivityKind.MEMCPY):
                k = "[memcpy " + cupti.ActivityMemcpyKind(int(a.copy_kind)).name + "]"
            else:
                k = "mangled:" + str(a.name)
            sums[k][0] += int(a.end) - int(a.start)
            sums[k][1] += 1

    cupti.activity_register_callbacks(requested, completed)
    for kind in (cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.MEMCPY, cupti.ActivityKind.MEMSET):
        cupti.activity_enable(kind)

    def stop():
        cupti.activity_flush_all(1)
        for kind in (cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.MEMCPY, cupti.ActivityKind.MEMSET):
            cupti.activity_disable(kind)
        with open(path, "w") as f:
            json.dump(dict(sums), f)
    return stop


def child(workload: str, prof: str, out: str, steps: int, warmup: int, device: str) -> dict:
    """Warm up unprofiled, start ``prof``, run ``steps`` steps, stop it (``reconcile``)."""
    import torch
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    w = WORKLOADS[workload](device, _scope_fn(prof))
    for _ in range(warmup):
        w.step()
    sync()
    stop = _start(prof, out)
    t0 = time.perf_counter()
    for _ in range(steps):
        w.step()
    sync()
    dt = time.perf_counter() - t0
    stop()
    return {"step_ms": dt * 1e3 / steps, "steps": steps, "kprof_state": dict(_STATE) or None}


def _pin(cpus, threads):
    """Pin this process (and the threads it starts later: torch's, CUPTI's) to ``cpus``."""
    if cpus and hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, cpus)
        except OSError:
            pass
    import torch
    if threads:
        torch.set_num_threads(threads)
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None


def _sched():
    """This process's scheduler counters now: ``(main thread CPU ns, main thread runqueue-wait ns,
    all threads' CPU ns, all threads' wait ns, main thread involuntary switches)`` (waits from
    /proc/.../schedstat; None where /proc does not say).  A block's wait is time its threads were
    runnable but not running: the host's contention, which no profiler causes."""
    try:
        with open("/proc/self/schedstat") as f:   # the main thread (the thread group leader)
            wait = int(f.read().split()[1])
        twait = 0
        for t in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{t}/schedstat") as f:
                    twait += int(f.read().split()[1])
            except (OSError, ValueError, IndexError):
                continue
        nvcsw = None
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("nonvoluntary_ctxt_switches"):
                    nvcsw = int(line.split()[1])
        # CPU time from the clocks (exact; schedstat's run time of a running thread lags up to a tick)
        return (time.thread_time_ns(), wait, time.process_time_ns(), twait, nvcsw)
    except (OSError, ValueError, IndexError):
        return None


def _cores(cpus):
    """``(busy ticks, steal ticks, MHz or None)`` summed over ``cpus`` from /proc/stat (and cpufreq where
    the machine has it), or None: with the process's own CPU time, the other work on its cores."""
    if not cpus:
        return None
    want = {f"cpu{c}" for c in cpus}
    busy = steal = 0
    try:
        with open("/proc/stat") as f:
            for line in f:
                parts = line.split()
                if parts and parts[0] in want:
                    v = [int(x) for x in parts[1:9]]
                    busy += v[0] + v[1] + v[2] + v[5] + v[6]   # user nice system irq softirq
                    steal += v[7]
    except (OSError, ValueError, IndexError):
        return None
    mhz = []
    for c in cpus:
        try:
            with open(f"/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_cur_freq") as f:
                mhz.append(int(f.read()) / 1e3)
        except (OSError, ValueError):
            break
    return busy, steal, (sum(mhz) / len(mhz) if mhz and len(mhz) == len(cpus) else None)


_TICK_MS = 1e3 / (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)


def _sched_delta(a, b, ca=None, cb=None):
    if a is None or b is None:
        return None
    out = {"main_run_ms": (b[0] - a[0]) / 1e6, "main_wait_ms": (b[1] - a[1]) / 1e6,
           "all_run_ms": (b[2] - a[2]) / 1e6, "all_wait_ms": (b[3] - a[3]) / 1e6,
           "main_nvcsw": None if a[4] is None or b[4] is None else b[4] - a[4]}
    if ca is not None and cb is not None:
        # the pinned cores' busy time (all processes; ticks) and steal; MHz sampled at both ends
        out["cores_busy_ms"] = (cb[0] - ca[0]) * _TICK_MS
        out["cores_steal_ms"] = (cb[1] - ca[1]) * _TICK_MS
        if ca[2] is not None and cb[2] is not None:
            out["mhz"] = round((ca[2] + cb[2]) / 2)
    return out


def _thread_cpu():
    """CPU ns per thread name (``/proc/self/task/*/comm``; threads of one name summed), or None: with
    the block's wall time, which thread did the work (main, autograd, CUPTI's, torch's pool)."""
    out = {}
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    for t in tasks:
        try:
            with open(f"/proc/self/task/{t}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/self/task/{t}/schedstat") as f:
                run = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        if int(t) == os.getpid():
            name = "main"
        out[name] = out.get(name, 0) + run
    return out


def _probe_us():
    """Microseconds for a fixed pure-Python loop on the main thread, just before a block: if blocks
    slow down with it, the CPU itself was slower (clock, a busy SMT sibling), not the profiler."""
    t0 = time.perf_counter_ns()
    x = 0
    for i in range(20000):
        x += i * i
    return (time.perf_counter_ns() - t0) / 1e3


def _speed_probe(iters: int) -> int:
    """``--step-probe``: nanoseconds for ``iters`` iterations of a fixed pure-Python loop on the calling
    thread, run between segments of a block (a segment: one step, or a few launches of ``tiny``).  The
    host's vCPUs change speed by 20-35% over tens to hundreds of milliseconds, per core (2026-11-27), so a
    probe on the same thread just before and after a segment of a few ms measures the speed the segment ran
    at, where a 1 ms probe before a 0.4 s block or a loop on another core could not."""
    t0 = time.perf_counter_ns()
    x = 0
    for i in range(iters):
        x += i * i
    return time.perf_counter_ns() - t0


def _ref_counter(path: str, cpu: int) -> None:
    """``--ref-cpu``: the reference process.  Pinned to its own core, it runs a fixed pure-Python loop for
    the whole run and publishes its iteration count in an 8-byte shared file; a child reads the count at
    both ends of each block.  Counts per second over exactly the block's window measure the host CPU's
    speed during that block, where the 1 ms probe before it could not (the speed changes on a scale of
    blocks, 2026-11-27).  It only helps if the speed moves on all cores at once
    (``bench/experiments/profiler_overhead/host_speed_corr.py`` measures that)."""
    import ctypes
    import mmap
    try:
        os.sched_setaffinity(0, {cpu})
    except (OSError, AttributeError):
        pass
    fd = os.open(path, os.O_RDWR)
    m = mmap.mmap(fd, 8)
    # one aligned 8-byte store per update (struct.pack_into's byte copy let a reader see a torn count,
    # 2026-11-27: negative rates)
    cell = ctypes.c_int64.from_buffer(m)
    n = x = 0
    while True:
        for i in range(100):
            x += i * i
        n += 1
        cell.value = n
        if n & 0xFFFF == 0 and os.getppid() == 1:   # the parent is gone: stop
            return


class _RefReader:
    """A child's view of the reference count (None where the run has no reference process)."""

    def __init__(self, path):
        import ctypes
        import mmap
        self.m = self.cell = None
        if path:
            fd = os.open(path, os.O_RDWR)
            self.m = mmap.mmap(fd, 8)
            self.cell = ctypes.c_int64.from_buffer(self.m)   # one aligned 8-byte load per read

    def read(self):
        return self.cell.value if self.cell is not None else None


def _start_ref(cpu):
    """Start the reference counter on core ``cpu``; returns (shared file path, process)."""
    fd, path = tempfile.mkstemp(prefix="kprof_ref_")
    os.write(fd, bytes(8))
    os.close(fd)
    code = f"import sys; sys.path.insert(0, {ROOT!r}); from bench.reconcile_profilers import _ref_counter; " \
           f"_ref_counter({path!r}, {int(cpu)})"
    proc = subprocess.Popen([sys.executable, "-c", code])
    import atexit
    atexit.register(proc.kill)   # also when the run stops on an error
    r = _RefReader(path)
    t0 = time.time()
    while r.read() == 0 and time.time() - t0 < 30:   # started counting
        time.sleep(0.05)
    return path, proc


class _Instr:
    """Instructions retired in user space by every thread of this process over a block: per-thread hardware
    counters (perf_event_open through ctypes), opened before the block and read after it.  A count of work,
    not time, so it does not move with the host CPU's clock the way block times do.  ``ok`` is False where
    the machine has no PMU (most VMs without one: ENOENT) or forbids it (perf_event_paranoid)."""

    _NR = {"x86_64": 298, "aarch64": 241}

    def __init__(self):
        import ctypes
        import platform
        import struct
        self.nr = self._NR.get(platform.machine())
        self.libc = ctypes.CDLL(None, use_errno=True)
        attr = bytearray(128)
        struct.pack_into("IIQ", attr, 0, 0, 128, 1)           # PERF_TYPE_HARDWARE, size, INSTRUCTIONS
        struct.pack_into("Q", attr, 40, (1 << 5) | (1 << 6))  # exclude_kernel, exclude_hv
        self.attr = (ctypes.c_char * 128).from_buffer(attr)
        self._keep = attr
        fd = self._open(0)
        self.ok = fd is not None
        if fd is not None:
            os.close(fd)

    def _open(self, tid):
        if self.nr is None:
            return None
        fd = self.libc.syscall(self.nr, self.attr, tid, -1, -1, 0)
        return fd if fd >= 0 else None

    def start(self):
        fds = []
        for t in os.listdir("/proc/self/task"):
            fd = self._open(int(t))
            if fd is not None:
                fds.append(fd)
        return fds

    @staticmethod
    def stop(fds):
        total = 0
        for fd in fds:
            try:
                total += int.from_bytes(os.read(fd, 8), "little")
            except OSError:
                pass
            os.close(fd)
        return total


class _Nvml:
    """The GPU's SM clock (MHz) through libnvidia-ml's C API (ctypes; no package): sampled at each
    block's start and end, to see whether the GPU's clock moves with the step time.  ``mhz()`` is None
    where NVML is not there."""

    def __init__(self):
        self.lib = self.handle = None
        try:
            import ctypes
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            if lib.nvmlInit_v2() != 0:
                return
            handle = ctypes.c_void_p()
            bus = None
            try:
                import torch
                pr = torch.cuda.get_device_properties(torch.cuda.current_device())
                bus = f"{pr.pci_domain_id:08x}:{pr.pci_bus_id:02x}:{pr.pci_device_id:02x}.0".encode()
            except Exception:
                pass
            if bus is None or lib.nvmlDeviceGetHandleByPciBusId_v2(bus, ctypes.byref(handle)) != 0:
                if lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(handle)) != 0:
                    return
            self.lib, self.handle, self._v = lib, handle, ctypes.c_uint()
            self._byref = ctypes.byref
        except Exception:
            self.lib = None

    def mhz(self):
        if self.lib is None:
            return None
        if self.lib.nvmlDeviceGetClockInfo(self.handle, 1, self._byref(self._v)) != 0:   # NVML_CLOCK_SM
            return None
        return int(self._v.value)


def _pin_threads(cpus):
    """``--pin-threads``: the main thread on the first of ``cpus``, every other thread of the process
    (torch's autograd thread, CUPTI's, the pools) on the rest; applied again before each block, for
    threads started since.  The step's threads then stop migrating between the cores."""
    if not cpus or len(cpus) < 2 or not hasattr(os, "sched_setaffinity"):
        return
    main = os.getpid()
    for t in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(t), cpus[:1] if int(t) == main else cpus[1:])
        except OSError:
            pass


def _hold_cpu_latency():
    """``--cpu-latency0``: ask the kernel for zero wake-up latency (no deep C-states) while the process
    lives, through /dev/cpu_dma_latency (root only); True if it took."""
    try:
        fd = os.open("/dev/cpu_dma_latency", os.O_WRONLY)
        os.write(fd, (0).to_bytes(4, "little"))
        _HELD.append(fd)   # the request holds as long as the file stays open
        return True
    except OSError:
        return False


_HELD: list = []


def _step_seconds(w, sync) -> float:
    """Seconds a step of ``w`` takes now: at least 3 steps and 50 ms, synchronized (sizes the fine segments)."""
    t0 = time.perf_counter()
    n = 0
    while n < 3 or time.perf_counter() - t0 < 0.05:
        w.step()
        n += 1
    sync()
    return (time.perf_counter() - t0) / n


def child_overhead(spec: dict) -> dict:
    """One process of ``overhead``: pin, warm up, calibrate the block, ``pre`` cold blocks, then
    profiled/unprofiled pairs (AB, BA, ...) until ``deadline`` (wall clock; at least ``min_pairs``)."""
    import gc
    t_begin = time.time()
    phases = {}   # setup: seconds from t_begin at the end of each phase (where start-up time goes)
    cpus = _pin(spec.get("cpus"), spec.get("threads"))
    latency0 = _hold_cpu_latency() if spec.get("cpu_latency0") else None
    pin_threads = bool(spec.get("pin_threads"))
    import torch
    device, prof, wl = spec["device"], spec["profiler"], spec["workload"]
    _BUFFER[0] = spec.get("buffer", 0)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    if device == "cuda":
        torch.cuda.init()
    phases["torch"] = round(time.time() - t_begin, 2)
    against = spec.get("against")
    others = [a for a in (against or "").split(",") if a]   # more than one: a multi-way run (_multi_rounds)
    # Proton against another profiler in one process: each block opens its own profiler's scopes
    # --fine switches profiler.scope itself between segments: the workload must look it up at each use too
    w = WORKLOADS[wl](device, _dyn_scope if (against and "proton" in [prof, *others]) or spec.get("fine")
                      else _scope_fn(prof))
    phases["workload"] = round(time.time() - t_begin, 2)
    for _ in range(spec["warmup"]):
        w.step()
    sync()
    phases["warmup"] = round(time.time() - t_begin, 2)
    gc.collect()
    gc.freeze()  # what the warm-up allocated is never scanned again
    steps = spec.get("steps") or 0
    step_s = None
    if not steps:  # calibrate: steps for a block of block_s
        t0 = time.perf_counter()
        n = 0
        while n < 3 or time.perf_counter() - t0 < min(0.2, spec["block_s"] / 2):
            w.step()
            n += 1
        sync()
        step_s = (time.perf_counter() - t0) / n
        steps = max(spec.get("min_steps", 3), int(spec["block_s"] / step_s))
    # --step-probe: a speed probe between segments of seg_steps steps (about --probe-seg-ms each); a block
    # is a whole number of segments
    probe_iters = int(spec.get("step_probe") or 0)
    seg_steps = 0
    if probe_iters:
        if step_s is None:
            t0 = time.perf_counter()
            for _ in range(3):
                w.step()
            sync()
            step_s = (time.perf_counter() - t0) / 3
        seg_steps = max(1, int(round(spec.get("probe_seg_ms", 3.0) / 1e3 / step_s)))
        steps = max(seg_steps, steps // seg_steps * seg_steps)
        _speed_probe(probe_iters)   # the loop's code warm

    sched = []   # per timed block: ("u" or "p", _sched_delta) -- the host's contention, block by block
    ref = _RefReader(spec.get("ref_path"))
    nvml = _Nvml() if device == "cuda" else None
    try:
        instr = _Instr()
        instr = instr if instr.ok else None
    except Exception:   # no libc through ctypes, an odd platform: no instruction counts
        instr = None

    def block(kind="u"):
        gc.collect()
        gc.disable()
        try:
            sync()
            if pin_threads:
                _pin_threads(cpus)
            probe = _probe_us()
            c0 = _cores(cpus)
            th0 = _thread_cpu()
            g0 = nvml.mhz() if nvml else None
            fds = instr.start() if instr else None
            s0 = _sched()
            r0 = ref.read()
            seg_ns = probes_ns = None
            if seg_steps:
                # probe, segment, probe, segment, ..., probe: each segment's time next to the speed of the
                # same core (thread) just before and after it; the block's time leaves the probes out
                perf = time.perf_counter_ns
                seg_ns, probes_ns = [], [_speed_probe(probe_iters)]
                t0 = time.perf_counter()
                for _ in range(steps // seg_steps):
                    a = perf()
                    for _ in range(seg_steps):
                        w.step()
                    seg_ns.append(perf() - a)
                    probes_ns.append(_speed_probe(probe_iters))
                t_issued = time.perf_counter()
                sync()
                t1 = time.perf_counter()
                t = (sum(seg_ns) / 1e9 + (t1 - t_issued)) * 1e3 / steps
            else:
                t0 = time.perf_counter()
                for _ in range(steps):
                    w.step()
                t_issued = time.perf_counter()
                sync()
                t1 = time.perf_counter()
                t = (t1 - t0) * 1e3 / steps
            r1 = ref.read()
            d = _sched_delta(s0, _sched(), c0, _cores(cpus))
            n_instr = instr.stop(fds) if instr else None
            if d is not None:
                if n_instr:
                    d["instr"] = n_instr
                # the GPU work still queued when the last step was issued (large: the GPU, not the host,
                # set the pace), the CPU probe, the GPU clock at both ends, CPU ms per thread name
                d["tail_ms"] = round((t1 - t_issued) * 1e3, 3)
                d["probe_us"] = round(probe, 1)
                if seg_ns is not None:   # raw per-segment and per-probe times (us), kept for re-analysis
                    d["seg_us"] = [round(x / 1e3, 1) for x in seg_ns]
                    d["seg_probe_us"] = [round(x / 1e3, 1) for x in probes_ns]
                if r0 is not None and r1 >= r0:   # the reference core's loop iterations per second in the block
                    d["ref_rate"] = round((r1 - r0) / (t1 - t0), 1)
                g1 = nvml.mhz() if nvml else None
                if g0 is not None and g1 is not None:
                    d["gpu_mhz"] = [g0, g1]
                th1 = _thread_cpu()
                if th0 is not None and th1 is not None:
                    d["threads_ms"] = {k: round((v - th0.get(k, 0)) / 1e6, 2) for k, v in th1.items()
                                       if v - th0.get(k, 0) > 0}
            sched.append((kind, d))
            return t
        finally:
            gc.enable()

    stops = []
    out_bytes = {}   # profiler -> bytes of each block's profile
    loop_stats = []   # kprof: what its callbacks did on CUPTI's thread during each profiled block

    state = {}

    def profiled(i, p=prof):
        _BACKEND[0] = None
        stop = _start(p, f"{spec['out']}_{i}" if p == prof else f"{spec['out']}_{p}_{i}")
        t = block("p")
        b = _BACKEND[0]
        if p == prof:   # the measured profiler's state (with --against the other one starts too)
            state.update(_STATE)
        if b is not None and hasattr(b, "stats") and p == prof:   # before the flush: only what ran inside the block
            loop_stats.append(b.stats())
        t0 = time.perf_counter()
        stop()
        stops.append(time.perf_counter() - t0)
        if p in KPROF_VARIANTS or p == "proton":   # what the block's profile holds (a profile that lost its
            path = (f"{spec['out']}_{i}" if p == prof else f"{spec['out']}_{p}_{i}") + ".hatchet"   # records is small)
            out_bytes.setdefault(p, []).append(os.path.getsize(path) if os.path.exists(path) else None)
        return t

    cold = [block() for _ in range(spec["pre"])]
    phases["cold"] = round(time.time() - t_begin, 2)
    # first profiled block(s) not counted: first-use costs (imports, CUPTI's first records) are not the
    # steady state of a profiled run
    prime = [profiled(f"prime{j}") for j in range(spec.get("prime", 1))]
    if against:
        for o in others:
            for j in range(spec.get("prime", 1)):
                if o == "none":
                    block()
                else:
                    profiled(f"prime{j}", o)

    def base(i):
        """The other block of a pair: unprofiled, or with --against, under that profiler."""
        return profiled(i, against) if against else block()
    phases["prime"] = round(time.time() - t_begin, 2)
    stops.clear()
    loop_stats.clear()
    sched.clear()
    t_setup = time.time() - t_begin
    if spec.get("fine") and spec.get("fine_order") in ("swap", "solo"):
        # --fine-order swap: kprof against --against (Proton) pair by pair, each segment bracketed by its
        # profiler's start and stop (_swap_rounds); solo: the one profiler against "base", an unprofiled
        # state in its own pairs, so the process holds one profiler only, in its own state (no other
        # profiler's CUPTI to finalize first)
        fstep = _step_seconds(w, sync)
        seg = max(1, int(round(spec["fine"] / 1e3 / fstep)))
        settle = max(1, int(round((spec.get("fine_settle") or 0) / 1e3 / fstep)))
        order_name = spec["fine_order"]
        names = (prof, "base", "none", "none2") if order_name == "solo" else (prof, against, "none", "none2")
        sizes = {}

        def start(n):
            if n in ("base", "none", "none2"):
                return None
            path = f"{spec['out']}_swap_{n}"
            st_ = _start(n, path)

            def stop_():
                st_()
                if len(sizes.setdefault(n, [])) < 8:   # the profile holds what it should (a few checked)
                    f = path + ".hatchet"
                    sizes[n].append(os.path.getsize(f) if os.path.exists(f) else None)
            return stop_
        spec = dict(spec, steps_per_block=seg * 4 * spec["fine_cycles"], cold_ms=cold, setup_s=round(t_setup, 2))
        multi = _swap_rounds(w, names, start, spec, seg, sync, settle)
        return {"workload": wl, "profiler": prof, "steps_per_block": seg * 4 * spec["fine_cycles"], "cold_ms": cold,
                "prime_ms": prime, "multi": multi, "stop_s": stops, "setup_s": round(t_setup, 2),
                "wall_s": round(time.time() - t_begin, 2), "cpus": cpus, "threads": torch.get_num_threads(),
                "kprof_state": state, "setup_phases_s": phases, "loop_stats": [], "cpu_latency0": latency0,
                "pin_threads": pin_threads, "step_probe": 0, "seg_steps": seg,
                "fine": {"seg_ms": spec["fine"], "seg_steps": seg, "cycles": spec["fine_cycles"], "sync": True,
                         "settle_steps": settle, "order": order_name, "states": list(names)},
                "swap_gap_ms": swap_gap_summary(multi, names), "against": None, "out_bytes": sizes}
    if spec.get("fine"):
        # --fine: one session, states switched every segment of ~fine ms (_fine_rounds)
        fstep = _step_seconds(w, sync)
        seg = max(1, int(round(spec["fine"] / 1e3 / fstep)))
        settle_ms = spec.get("fine_settle") or 0
        spec["fine_settle_steps"] = max(1, int(round(settle_ms / 1e3 / fstep))) if settle_ms > 0 else 0
        # steps per state per block (circuit: kprof's 8 segments, 6 for the rest; pairs: 4 each)
        per_state = seg * spec["fine_cycles"] * (4 if spec.get("fine_order") == "pairs" else 6)
        spec = dict(spec, steps_per_block=per_state, cold_ms=cold, setup_s=round(t_setup, 2))
        multi = _fine_rounds(w, prof, spec, seg, sync)
        # whether kprof's launch API records were on (lazy: only once a scope or a kernelc launch ran)
        state["api_armed"] = getattr(_BACKEND[0], "api_wanted", None)
        from profiler import _native
        state["native"] = _native.status   # kprof's scopes and kernelc hook in C, or why not
        return {"workload": wl, "profiler": prof, "steps_per_block": per_state, "cold_ms": cold,
                "prime_ms": prime, "multi": multi, "stop_s": stops, "setup_s": round(t_setup, 2),
                "wall_s": round(time.time() - t_begin, 2), "cpus": cpus, "threads": torch.get_num_threads(),
                "kprof_state": state, "setup_phases_s": phases, "loop_stats": loop_stats,
                "cpu_latency0": latency0, "pin_threads": pin_threads, "step_probe": 0, "seg_steps": seg,
                "fine": {"seg_ms": spec["fine"], "seg_steps": seg, "cycles": spec["fine_cycles"],
                         "sync": spec.get("fine_sync", True), "settle_steps": spec.get("fine_settle_steps", 0),
                         "order": spec.get("fine_order") or "circuit",
                         "states": list(spec.get("fine_states") or FINE_STATES)}, "against": None, "out_bytes": out_bytes}
    if len(others) > 1:
        spec = dict(spec, steps_per_block=steps, cold_ms=cold, setup_s=round(t_setup, 2))   # for _dump_rounds
        multi = _multi_rounds([prof, *others], lambda i, p: block() if p == "none" else profiled(i, p),
                              spec, sched)
        return {"workload": wl, "profiler": prof, "steps_per_block": steps, "cold_ms": cold, "prime_ms": prime,
                "multi": multi, "stop_s": stops, "setup_s": round(t_setup, 2),
                "wall_s": round(time.time() - t_begin, 2), "cpus": cpus, "threads": torch.get_num_threads(),
                "kprof_state": state, "setup_phases_s": phases, "loop_stats": loop_stats,
                "cpu_latency0": latency0, "pin_threads": pin_threads,
                "step_probe": probe_iters, "seg_steps": seg_steps, "against": against, "out_bytes": out_bytes}
    pairs, unprof, prof_ms = [], [], []
    i = 0
    while True:
        t_pair = time.time()
        if i % 2 == 0:
            a = base(i)
            b = profiled(i)
        else:
            b = profiled(i)
            a = base(i)
        unprof.append(a)
        prof_ms.append(b)
        pairs.append(b / a)
        i += 1
        left = spec["deadline"] - time.time()
        # an even number of pairs: as many AB as BA, so a block's position in its pair cancels
        if i % 2 == 0 and (i >= spec.get("max_pairs", 1000) or
                           (i >= spec["min_pairs"] and left < 2 * (time.time() - t_pair) * 1.1)):
            break
    return {"workload": wl, "profiler": prof, "steps_per_block": steps, "cold_ms": cold, "prime_ms": prime,
            "unprof_ms": unprof,
            "prof_ms": prof_ms, "warm": pairs, "stop_s": stops, "setup_s": round(t_setup, 2),
            "wall_s": round(time.time() - t_begin, 2), "cpus": cpus, "threads": torch.get_num_threads(),
            "kprof_state": state, "setup_phases_s": phases, "loop_stats": loop_stats,
            "sched": sched, "cpu_latency0": latency0, "pin_threads": pin_threads,
            "step_probe": probe_iters, "seg_steps": seg_steps, "against": against, "out_bytes": out_bytes}


FINE_STATES = ("kprof", "floor", "none", "none2")


def _per_workload(text, wl, cast, what):
    """``--fine 12`` (every workload) or ``--fine tiny=12,encoder=30``: the value for ``wl`` (None if not named)."""
    if text is None or str(text).strip() == "":
        return None
    text = str(text)
    if "=" not in text:
        try:
            return cast(text)
        except ValueError:
            raise SystemExit(f"{what}: bad value {text!r}") from None
    out = None
    for part in text.split(","):
        k, _, v = part.partition("=")
        if k.strip() not in WORKLOADS:
            raise SystemExit(f"{what}: unknown workload {k.strip()!r} in {text!r}")
        try:
            val = cast(v)
        except ValueError:
            raise SystemExit(f"{what}: bad value {v!r} for {k.strip()}") from None
        if k.strip() == wl:
            out = val
    return out


def _fine_states_arg(text):
    """``--fine-states``: four known states, kprof first (it gets the block's 8 segments; the summary's pairs are
    read from it)."""
    names = [x.strip() for x in str(text).split(",") if x.strip()]
    bad = [x for x in names if x not in FINE_PARTS]
    if len(names) != 4 or len(set(names)) != 4 or names[0] != "kprof" or bad:
        raise SystemExit(f"--fine-states: four different states, kprof first, of {', '.join(FINE_PARTS)}; got {text!r}")
    return tuple(names)
# --fine-states: what each state has on, of kprof's parts: ``core`` its kernel/memcpy/memset activity kinds;
# ``api`` the launch API records (and external correlation where kprof uses it); ``cb`` its CUPTI callbacks;
# ``sess`` the session active (its scopes' work, the kernelc hook in, ``profiler.scope`` kprof's).  States other
# than the default four take kprof apart, one part at a time (issue 23: what kprof pays per launch on the tiny loop)
# ``native``: scopes and the kernelc hook in C (knob native_scopes) rather than their Python code; ``kprof-py`` is
# kprof with the Python ones (both in one process: what the C code saves, issue 23)
FINE_PARTS = {"kprof": ("core", "api", "cb", "sess", "native"), "floor": ("core",), "none": (), "none2": (),
              "api": ("core", "api"), "kprof-noapi": ("core", "cb", "sess", "native"),
              "kprof-nocb": ("core", "api", "sess", "native"), "kprof-nosess": ("core", "api", "cb", "native"),
              "kprof-py": ("core", "api", "cb", "sess")}
_PARTS_OFF = ("api", "cb", "sess", "core", "native")   # the order parts are switched off in
_PARTS_ON = ("native", "core", "api", "cb", "sess")    # ... and on


class _FineStates:
    """``--fine``: the states of one kprof session that segments switch between (a measurement, not an
    option; it reaches into the CUPTI backend as the ``kprof-*`` variants do):

    * ``kprof``: everything kprof's default start turns on -- the kernel/memcpy/memset activity kinds (into
      its raw buffers), the launch API records, external correlation, its CUPTI callbacks, the session
      active (its scopes' work and the kernelc hook installed) and ``profiler.scope`` kprof's;
    * ``floor``: kprof's kernel/memcpy/memset activity kinds only (CUPTI's records into the same raw buffers,
      nothing else: the floor without cupti-python's record objects, i.e. ``floor-raw``), the session
      inactive, the hook out, ``profiler.scope`` a no-op;
    * ``none``, ``none2``: every kind, API record and callback off (the subscriber stays, with nothing
      enabled), the session inactive, the hook out, ``profiler.scope`` a no-op.  The two are the same state:
      ``none/none2`` is the control of this design, measured exactly as the other comparisons are;
    * ``--fine-states`` may name others (:data:`FINE_PARTS`): ``api`` (the floor plus the launch API records),
      ``kprof-noapi``, ``kprof-nocb``, ``kprof-nosess`` (kprof without one part).

    ``go(state)`` switches and returns the nanoseconds the switch took (kept out of the segments' time: a
    profiled run switches once, not per segment)."""

    def __init__(self, backend):
        import profiler
        from cupti import cupti
        from profiler import session as S
        self.c, self.b, self.S, self.profiler = cupti, backend, S, profiler
        self.sess = [s for s in S._sessions.values() if s.backend is backend]
        ext = int(getattr(cupti.ActivityKind, "EXTERNAL_CORRELATION", -1))
        self.core_kinds = [k for k in backend.kinds if int(k) != ext]
        self.ext = bool(getattr(backend, "external", False))
        self.light = bool(getattr(backend, "light", False))
        self.real_scope = self.native_scope = _REAL_SCOPE[0] or profiler.scope
        self.cur = "kprof"

    def _core(self, on):
        f = self.c.activity_enable if on else self.c.activity_disable
        for k in self.core_kinds:
            f(k)

    def _api(self, on):
        # kprof turns its API records on at the first scope or kernelc launch (cupti_api_records="lazy"):
        # until then its state has them off, as a profiled run would
        if self.light and getattr(self.b, "api_wanted", True):
            self.b._enable_api_records(1 if on else 0)
        if self.ext:
            (self.c.activity_enable if on else self.c.activity_disable)(self.c.ActivityKind.EXTERNAL_CORRELATION)

    def _cb(self, on):
        self.b._enable_callbacks(1 if on else 0)

    def _sess(self, on):
        for s in self.sess:
            s.active = bool(on)
        self.S._refresh()   # the kernelc hook in or out, the scopes' hot-path state
        self.profiler.scope = self.real_scope if on else _null_scope

    def _native(self, on):
        # switched on before and off after the session's part: the scope class and the hook the session uses next
        from profiler import hooks, scopes
        self.real_scope = self.native_scope if on else scopes._PyScope
        hooks._use_native = bool(on)
        if hooks.installed():   # kprof <-> kprof-py: the session stays active
            hooks._uninstall()
            hooks._install()
            self.profiler.scope = self.real_scope

    def go(self, state):
        t0 = time.perf_counter_ns()
        want, have = set(FINE_PARTS[state]), set(FINE_PARTS[self.cur])
        for part in _PARTS_OFF:
            if part in have and part not in want:
                getattr(self, "_" + part)(False)
        for part in _PARTS_ON:
            if part in want and part not in have:
                getattr(self, "_" + part)(True)
        self.cur = state
        return time.perf_counter_ns() - t0


# An Eulerian circuit of the complete directed graph on the 4 states (indices into FINE_STATES): each ordered
# pair of different states is adjacent exactly once, the wrap from the last to the first included, so every
# state follows every other equally often and what a segment leaves to the next (queued GPU work, caches)
# falls on every state alike.  R1 (2026-11-29) had a rotation in which none2 followed kprof and none never
# did: on `train` none2/none read 1.023 [1.004, 1.045].
FINE_CIRCUIT = (0, 1, 2, 3, 0, 2, 1, 3, 2, 0, 3, 1)


def _fine_order(names, block):
    """The segments' states of one ``--fine`` block: the circuit closed on its first state (13 segments: every
    ordered pair of different states adjacent once), then the same reversed (every pair once more; a linear
    drift within the block then weighs every state alike: each state's mean position is the block's middle).
    The first state has 8 segments, the others 6; each state's value is per step.  (Swapping kprof/floor and
    none/none2 in odd blocks was tried on the encoder, s21 R3: the control read the same in both parities, so
    the order stays fixed; each segment's time is kept, ``seg_ms``, for such checks.)"""
    fwd = [names[i] for i in FINE_CIRCUIT] + [names[FINE_CIRCUIT[0]]]
    return fwd + fwd[::-1]


# --fine-order pairs: a cycle of 8 adjacent pairs, b a b' a b a' b' a' with a = (s2, s3), a' = (s3, s2) (the control,
# none/none2) and b = (s0, s1), b' = (s1, s0) (kprof/floor): each comparison is made inside its pair, between two
# segments a few ms apart (the encoder's segments' residuals are autocorrelated, lag 1 ~0.5: s21 R3); each state
# comes first in half of its pairs, and each control pair follows a kprof-last and a floor-last pair equally often.
FINE_PAIRS = ((0, 1), (2, 3), (1, 0), (2, 3), (0, 1), (3, 2), (1, 0), (3, 2))
FINE_LEAD_STEPS = 3   # --fine-order pairs: untimed steps at a block's start (its collection, the rounds file)


def _fine_pairs_order(names, block, cycles=1):
    """--fine-order pairs: block ``block``'s segments, ``cycles`` times :data:`FINE_PAIRS` flattened, the cycle's
    start moved on by one pair per block (what a block's start leaves behind, s21 R3: its first two segments 7.5%
    and 4.9% slow, falls on every pair and order alike over 8 blocks)."""
    k = block % len(FINE_PAIRS)
    cyc = FINE_PAIRS[k:] + FINE_PAIRS[:k]
    return [names[i] for pair in cyc for i in pair] * cycles


def fine_pair_ratios(rounds, a, b, skip=0):
    """Adjacent-pair ratios ``a``/``b`` of a ``--fine`` run's blocks (those with ``seg_ms``; the first ``skip``
    left out): with ``--fine-order pairs`` each pair (segments 2j, 2j+1) holding ``a`` and ``b``; in a circuit
    block every two adjacent segments holding them.  Returns ``(per_block, per_pair)``: each block's geometric mean
    of its pair ratios, and every pair ratio."""
    import math
    blocks, pairs = [], []
    for r in rounds[skip:]:
        segs, ms = r.get("segments"), r.get("seg_ms")
        if not segs or not ms:
            continue
        step = 2 if r.get("pairs") else 1
        got = []
        for j in range(0, len(segs) - 1, step):
            x, y = segs[j], segs[j + 1]
            if {x, y} == {a, b} and ms[j] > 0 and ms[j + 1] > 0:
                got.append(ms[j] / ms[j + 1] if x == a else ms[j + 1] / ms[j])
        if got:
            pairs.extend(got)
            blocks.append(math.exp(sum(math.log(v) for v in got) / len(got)))
    return blocks, pairs


def fine_pairs_summary(children, skip=0):
    """Per comparison (kprof/floor and the control none/none2, or the run's first/second and third/fourth
    states): the median block value (:func:`fine_pair_ratios`) with its sign-test 95% interval, and the median
    pair ratio with its.  None where no child has per-segment times."""
    out = {}
    for c in children:
        rounds = c.get("multi") or []
        if not rounds or "seg_ms" not in rounds[0]:
            continue
        names = list(rounds[0]["order"])
        for a, b in ((names[0], names[1]), (names[2], names[3]) if len(names) > 3 else (None, None)):
            if a is None:
                continue
            e = out.setdefault(f"{a}/{b}", {"blocks": [], "pairs": []})
            bl, pr = fine_pair_ratios(rounds, a, b, skip)
            e["blocks"].extend(bl)
            e["pairs"].extend(pr)
    res = {}
    for k, e in out.items():
        bm, blo, bhi = _sign_ci(e["blocks"])
        pm, plo, phi = _sign_ci(e["pairs"])
        rnd = lambda v: None if v is None else round(v, 4)
        res[k] = {"blocks": len(e["blocks"]), "block_median": rnd(bm), "block_sign_ci": [rnd(blo), rnd(bhi)],
                  "pairs": len(e["pairs"]), "pair_median": rnd(pm), "pair_sign_ci": [rnd(plo), rnd(phi)]}
    return res or None


def _fine_rounds(w, prof, spec, seg_steps, sync):
    """``--fine``: one kprof session for the whole run; blocks of ``fine_cycles`` times :func:`_fine_order`'s 26
    segments of ``seg_steps`` steps (~``--fine`` ms).  Each segment is timed from its state's switch (the
    switch itself left out: a profiled run switches once) to the end of a synchronize after its last step
    (``--fine-sync 1``: it holds its own GPU work and leaves none queued for the next) or to its last step's
    return (``--fine-sync 0``: the queue runs on, as in a pipelined run).  kprof's raw records are held undecoded
    for the whole run (no in-loop decoding, which a run past kprof's 64 MB bound does on CUPTI's thread); they
    are decoded at the stop, outside the blocks, as the block design's stop did.  A block's value per state
    is its segments' ms per step.  Returned in the multi-way form (:func:`_multi_split` makes every pair of
    states a comparison; none/none2 is the control)."""
    import gc
    names = list(spec.get("fine_states") or FINE_STATES)
    stop = _start(prof, f"{spec['out']}_fine")
    b = _BACKEND[0]
    rb = getattr(b, "rawbufs", None)
    if rb is not None:
        rb.max_bytes = 1 << 62
    st = _FineStates(b)
    cycles = spec["fine_cycles"]
    rounds, i = [], 0
    perf = time.perf_counter_ns
    try:
        while True:
            t_round = time.time()
            gc.collect()
            gc.disable()
            pairs = spec.get("fine_order") == "pairs"
            order = _fine_pairs_order(names, i, cycles) if pairs else _fine_order(names, i) * cycles
            try:
                sync()
                l0 = b.stats() if hasattr(b, "stats") else {}
                sums = dict.fromkeys(names, 0)
                sw = dict.fromkeys(names, 0)
                segs = []   # each segment's ns, in order (where in the block a state's time goes)
                seg_sync = spec.get("fine_sync", True)
                settle = spec.get("fine_settle_steps", 0)
                if pairs:   # untimed: what the block's collection and rounds file leave behind falls here
                    for _ in range(FINE_LEAD_STEPS):
                        w.step()
                    sync()
                for n in order:
                    sw[n] += st.go(n)
                    if settle:   # untimed steps after the switch: what switching leaves behind falls there
                        for _ in range(settle):
                            w.step()
                        if seg_sync:
                            sync()
                    t0 = perf()
                    for _ in range(seg_steps):
                        w.step()
                    if seg_sync:
                        sync()
                    dt = perf() - t0
                    sums[n] += dt
                    segs.append(dt)
                l1 = b.stats() if hasattr(b, "stats") else {}
            finally:
                gc.enable()
            k = {n: order.count(n) for n in names}
            rounds.append({"order": names, "ms": {n: sums[n] / 1e6 / (k[n] * seg_steps) for n in names},
                           "segments": order, "pairs": pairs, "seg_ms": [round(x / 1e6 / seg_steps, 7) for x in segs],
                           "sched": dict.fromkeys(names), "switch_us": {n: round(sw[n] / 1e3 / k[n], 2) for n in names},
                           "loop": {x: v - l0.get(x, 0) for x, v in l1.items() if isinstance(v, int)}})
            i += 1
            if spec.get("rounds_path"):
                _dump_rounds(spec, names, rounds)
            left = spec["deadline"] - time.time()
            if i % 2 == 0 and (i >= spec.get("max_pairs", 1000) or
                               (i >= spec["min_pairs"] and left < 2 * (time.time() - t_round) * 1.1 + 0.5)):
                break
    finally:
        st.go("kprof")
        t0 = time.perf_counter()
        stop()
        if rounds:
            rounds[-1]["stop_s"] = round(time.perf_counter() - t0, 3)
    return rounds


SWAP_STATES = ("kprof", "proton", "none", "none2")


def _spin_until(t_end, perf=time.perf_counter_ns):
    """Busy-wait to ``t_end`` (perf ns): the none states' stand-in for a stop and a start (the host busy, as in
    a profiler's start, not asleep)."""
    while perf() < t_end:
        pass


def _swap_rounds(w, names, start, spec, seg_steps, sync, settle=1, perf=time.perf_counter_ns):
    """``--fine-order swap``: kprof against Proton in one process, pair by pair (``solo``: one profiler
    against the unprofiled state "base", ``names`` ``(P, base, none, none2)``; ``start`` returns None for base).  Proton cannot be switched per
    segment (its deactivate keeps CUPTI on, and beside kprof's libcupti its subscribe fails), but its finalize
    unsubscribes and finalizes CUPTI (Triton 3.6, ``CuptiProfiler::doStop``); so every segment of a profiler is
    bracketed by its own start and stop, both untimed, and the two profilers are symmetric.

    Blocks of :data:`FINE_PAIRS` (``names``: ``(A, B, none, none2)``; A/B and the control none/none2 compared
    inside each pair).  A segment: the previous state's stop and this one's ``start(name)`` (a stop function,
    or None for the unprofiled states), ``settle`` untimed steps and a synchronize (a profiler's first step after
    its start is not its steady cost: Proton's 59.7 ms against ~22 on `train`, s19 R1), then ``seg_steps`` timed
    steps closed by a synchronize.  So that the control's two segments are as far apart as A's and B's, every
    switch into an unprofiled state spins until it has taken the median of the profiler-to-profiler switches so
    far inside pairs (``gap_ms`` keeps every switch's time, ``pad_ms`` the spin).  With ``split`` (solo) the
    in-pair switches into A (A's start) and into B (A's stop) are two different lengths (kprof's 3 and 7 ms on the
    encoder, C2), whose pooled median jumps between them with a single outlier: the block's control pairs then
    take them in turn, each padded to the median switch into its state (``pad_for``).  Returned in the
    multi-way/pairs form (:func:`fine_pairs_summary` reads it)."""
    import gc
    import statistics
    split = spec.get("fine_order") == "solo"
    rounds, i = [], 0
    prof_gaps = []   # ns of switches from one profiler to another (A->B, B->A)
    into = {names[0]: [], names[1]: []}   # the same, by the state switched into (split)
    unprof = set(names[2:])
    stop, cur = None, None
    try:
        while True:
            t_round = time.time()
            order = _fine_pairs_order(names, i, spec.get("fine_cycles", 1))
            gc.collect()
            gc.disable()
            try:
                for _ in range(FINE_LEAD_STEPS):   # untimed: what the block's collection leaves behind falls here
                    w.step()
                sync()
                segs, gaps, pads, sets, pad_for = [], [], [], [], []
                for pos, n in enumerate(order):
                    t0 = perf()
                    if stop is not None:
                        prev, stop = stop, None   # not run twice if the next start fails
                        prev()
                    stop = start(n)
                    # split: the block's control pairs mimic the switch into A, into B, into A, ... in turn
                    like = names[(sum(1 for x in order[:pos] if x in unprof) // 2) % 2] \
                        if split and n in unprof else None
                    pad_for.append(like)
                    if n in unprof and prof_gaps:
                        target = statistics.median((into[like] if like and into[like] else prof_gaps)[-64:])
                        t1 = perf()
                        _spin_until(t0 + target, perf)
                        pads.append(perf() - t1)
                    else:
                        pads.append(0)
                    g = perf() - t0
                    if pos % 2 and cur not in unprof and n not in unprof:   # inside a pair: the gap compared
                        prof_gaps.append(g)
                        into[n].append(g)
                    gaps.append(g)
                    cur = n
                    t0 = perf()
                    for _ in range(settle):
                        w.step()
                    sync()
                    sets.append(perf() - t0)   # kept, not compared: whether a start's after-effect outlasts it
                    t0 = perf()
                    for _ in range(seg_steps):
                        w.step()
                    sync()
                    segs.append(perf() - t0)
            finally:
                gc.enable()
            k = {n: order.count(n) for n in names}
            sums = dict.fromkeys(names, 0)
            for n, dt in zip(order, segs):
                sums[n] += dt
            rounds.append({"order": list(names), "ms": {n: sums[n] / 1e6 / (k[n] * seg_steps) for n in names},
                           "segments": order, "pairs": True, "swap": True,
                           "seg_ms": [round(x / 1e6 / seg_steps, 7) for x in segs],
                           "gap_ms": [round(x / 1e6, 3) for x in gaps], "pad_ms": [round(x / 1e6, 3) for x in pads],
                           "settle_ms": [round(x / 1e6 / settle, 7) for x in sets],
                           "sched": dict.fromkeys(names)})
            if split:
                rounds[-1]["pad_for"] = pad_for
            i += 1
            if spec.get("rounds_path"):
                _dump_rounds(spec, list(names), rounds)
            left = spec["deadline"] - time.time()
            if i % 2 == 0 and (i >= spec.get("max_pairs", 1000) or
                               (i >= spec["min_pairs"] and left < 2 * (time.time() - t_round) * 1.1 + 0.5)):
                break
    finally:
        if stop is not None:
            stop()
    return rounds


def swap_gap_summary(rounds, names):
    """The in-pair switch (the gap between a pair's two timed segments, ms): median per comparison -- the
    control's should match A/B's (the rule's precondition: within 25%)."""
    import statistics
    out = {}
    for a, b in ((names[0], names[1]), (names[2], names[3])):
        g = []
        for r in rounds:
            segs, gaps = r.get("segments") or [], r.get("gap_ms") or []
            for j in range(0, len(segs) - 1, 2):
                if {segs[j], segs[j + 1]} == {a, b} and j + 1 < len(gaps):
                    g.append(gaps[j + 1])
        out[f"{a}/{b}"] = round(statistics.median(g), 3) if g else None
    if any("pad_for" in r for r in rounds):   # split (solo): per state switched into, [A/B's, the control's]
        a, b = names[0], names[1]
        for x in (a, b):
            cmp_, ctl = [], []
            for r in rounds:
                segs, gaps, pf = r.get("segments") or [], r.get("gap_ms") or [], r.get("pad_for") or []
                for j in range(0, len(segs) - 1, 2):
                    if j + 1 >= len(gaps):
                        continue
                    if {segs[j], segs[j + 1]} == {a, b} and segs[j + 1] == x:
                        cmp_.append(gaps[j + 1])
                    elif {segs[j], segs[j + 1]} == {names[2], names[3]} and j + 1 < len(pf) and pf[j + 1] == x:
                        ctl.append(gaps[j + 1])
            out[f"into {x}"] = [round(statistics.median(v), 3) if v else None for v in (cmp_, ctl)]
    return out


def _multi_order(names, i):
    """Block order of round ``i`` of a multi-way run: a rotation of ``names``, reversed in odd rounds, the
    rotation moving on every two rounds -- so any two profilers swap places between rounds 2j and 2j+1 (as
    many AB as BA for every pair) and each profiler takes every position equally often."""
    k = (i // 2) % len(names)
    rot = names[k:] + names[:k]
    return rot if i % 2 == 0 else rot[::-1]


def _multi_rounds(names, run, spec, sched):
    """Rounds of one block per profiler in ``names`` (order :func:`_multi_order`) until ``spec``'s deadline
    (an even number of rounds, at least ``min_pairs``); ``run(i, name)`` runs one block and returns its ms
    per step, and appends the block's counters to ``sched``.  Returned: per round, the profiler order and
    each block's ms and counters (:func:`_multi_split` turns them into pair comparisons)."""
    rounds = []
    i = 0
    while True:
        t_round = time.time()
        order = _multi_order(names, i)
        ms, blk = {}, {}
        for p in order:
            n0 = len(sched)
            ms[p] = run(i, p)
            blk[p] = sched[n0][1] if len(sched) > n0 else None
        rounds.append({"order": order, "ms": ms, "sched": blk})
        sched.clear()
        i += 1
        if spec.get("rounds_path"):   # every round on disk as it ends: a run killed by an outer timeout keeps them
            _dump_rounds(spec, names, rounds)
        left = spec["deadline"] - time.time()
        if i % 2 == 0 and (i >= spec.get("max_pairs", 1000) or
                           (i >= spec["min_pairs"] and left < 2 * (time.time() - t_round) * 1.1)):
            break
    return rounds


def _dump_rounds(spec, names, rounds):
    """The multi-way child's rounds so far, as a results file ``--reanalyse`` reads (one child, ``partial``)."""
    r = {"workload": spec["workload"], "profiler": spec["profiler"], "multi": rounds,
         "cold_ms": spec.get("cold_ms") or [], "stop_s": [], "setup_s": spec.get("setup_s", 0.0), "wall_s": 0.0,
         "round": 0, "steps_per_block": spec.get("steps_per_block") or 1, "against": spec["against"],
         "partial": True}
    path = spec["rounds_path"]
    with open(path + ".tmp", "w") as f:
        json.dump({"partial": True, "children": [r]}, f)
    os.replace(path + ".tmp", path)


def _multi_split(r):
    """A multi-way child's rounds as one two-profiler result per pair of profilers (``A/B``: A's blocks are
    the "profiled" ones, B's the reference), in the shape :func:`summarize` reads, with each pair's
    block order kept in ``order``; for ``none``, ``none/none``: its blocks of rounds 2j and 2j+1 (the
    control: two unprofiled blocks of the same run, ~one round apart)."""
    rounds = r["multi"]
    names = list(rounds[0]["order"])
    names = [r["profiler"]] + [n for n in names if n != r["profiler"]]
    out = []
    for ia, a in enumerate(names):
        for b in names[ia + 1:]:
            v = dict(r)
            v.pop("multi")
            v["profiler"] = f"{a}/{b}"
            v["unprof_ms"] = [x["ms"][b] for x in rounds]
            v["prof_ms"] = [x["ms"][a] for x in rounds]
            v["warm"] = [x["ms"][a] / x["ms"][b] for x in rounds]
            v["order"] = ["p" if x["order"].index(a) < x["order"].index(b) else "u" for x in rounds]
            v["sched"] = [(k, x["sched"][n]) for x, o in zip(rounds, v["order"])
                          for k, n in ((("p", a), ("u", b)) if o == "p" else (("u", b), ("p", a)))]
            v["stop_s"] = []
            out.append(v)
    if "none" in names:
        v = dict(r)
        v.pop("multi")
        v["profiler"] = "none/none"
        pairs = [(rounds[j], rounds[j + 1]) for j in range(0, len(rounds) - 1, 2)]
        v["unprof_ms"] = [x["ms"]["none"] for x, _ in pairs]
        v["prof_ms"] = [y["ms"]["none"] for _, y in pairs]
        v["warm"] = [y / x for x, y in zip(v["unprof_ms"], v["prof_ms"])]
        v["order"] = ["u"] * len(pairs)
        v["sched"] = [(k, d) for x, y in pairs for k, d in (("u", x["sched"]["none"]), ("p", y["sched"]["none"]))]
        v["stop_s"] = []
        out.append(v)
    return out


# -- reading the three profiles ----------------------------------------------------------------
_COPY = re.compile(r"(HtoD|DtoH|DtoD|HtoH|PtoP|Peer)", re.I)


def _demangle(name: str) -> str:
    try:
        from cubintools.demangle import demangle
    except ImportError:
        from profiler.backends.demangle import demangle
    return demangle(name) if name.startswith("_Z") else name


def _key(name: str, kind: str) -> str:
    if kind == "memcpy":
        m = _COPY.search(name.replace("Host", "H").replace("Device", "D").replace(" to ", "to"))
        return f"[memcpy {m.group(1).upper() if m else '?'}]"
    if kind == "memset":
        return "[memset]"
    return " ".join(_demangle(name).split())


def _kind(name: str) -> str:
    low = name.lower()
    if low.startswith("memcpy"):
        return "memcpy"
    if low.startswith("memset"):
        return "memset"
    return "kernel"


def hatchet_kernels(path: str) -> dict:
    """kprof's or Proton's profile: {key: [ns, count]} over GPU frames."""
    from profiler.format import read_profile
    root, _ = read_profile(path)
    out = defaultdict(lambda: [0, 0])
    for node, _ in root.walk():
        m = node.metrics
        if "time (ns)" not in m or str(m.get("device_type", "")).upper() not in ("CUDA", "1"):
            continue
        e = node.extra or {}
        name = e.get("kernel") if e.get("kind") == "kernel" and e.get("kernel") else node.name
        k = _key(name, _kind(node.name))
        out[k][0] += m["time (ns)"]
        out[k][1] += m.get("count", 0)
    return dict(out)


def torch_kernels(path: str) -> dict:
    data = json.load(open(path))
    events = data["traceEvents"] if isinstance(data, dict) else data
    out = defaultdict(lambda: [0, 0])
    for e in events:
        if e.get("ph") != "X":
            continue
        cat = e.get("cat")
        if cat == "kernel":
            k = _key(e["name"], "kernel")
        elif cat == "gpu_memcpy":
            k = _key("memcpy " + e["name"], "memcpy")
        elif cat == "gpu_memset":
            k = "[memset]"
        else:
            continue
        out[k][0] += int(round(float(e.get("dur", 0)) * 1000))
        out[k][1] += 1
    return dict(out)


def cupti_kernels(path: str) -> dict:
    out = defaultdict(lambda: [0, 0])
    for k, (ns, n) in json.load(open(path)).items():
        if k.startswith("mangled:"):
            k = _key(k[len("mangled:"):], "kernel")
        elif k.startswith("[memcpy"):
            k = _key(k[1:-1].replace("_", " "), "memcpy")
        out[k][0] += ns
        out[k][1] += n
    return dict(out)


def _run_child(workload, prof, out, steps, warmup, device, pairs=0):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("KERNELC_INTERPRET", None)
    cmd = [sys.executable, os.path.abspath(__file__), "_child", workload, prof, out, str(steps), str(warmup), device, str(pairs)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=ROOT)
    if p.returncode != 0:
        raise RuntimeError(f"{workload}/{prof} failed (rc {p.returncode}):\n{p.stdout[-1500:]}\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def reconcile(args) -> int:
    from bench.common import write_results
    tmp = tempfile.mkdtemp(prefix="kprof_reconcile_")
    all_rows, summaries = [], {}
    profs = [p for p in args.profilers.split(",") if p]
    for wl in args.workloads.split(","):
        steps = args.steps or STEPS[wl]
        warm = WARMUP[wl]
        data = {p: [] for p in profs}
        states = {}
        for rnd in range(args.rounds):
            order = profs[rnd % len(profs):] + profs[:rnd % len(profs)]
            for p in order:
                out = os.path.join(tmp, f"{wl}_{p}_{rnd}")
                if args.spawn == "fork" and _FORK["ctx"] is not None:
                    r = _run_forked_child({"mode": "reconcile", "workload": wl, "profiler": p, "out": out,
                                           "steps": steps, "warmup": warm, "device": args.device,
                                           "deadline": time.time() + 600})
                else:
                    r = _run_child(wl, p, out, steps, warm, args.device)
                if r.get("kprof_state"):
                    states[p] = r["kprof_state"]
                data[p].append(torch_kernels(out + ".json") if p == "torch" else
                               cupti_kernels(out + ".cupti.json") if p == "cupti" else hatchet_kernels(out + ".hatchet"))
        # per key: mean time over rounds, count (must agree across rounds), own-round spread
        agg = {}
        for p, runs in data.items():
            keys = set().union(*runs)
            agg[p] = {k: (statistics.mean(r.get(k, [0, 0])[0] for r in runs),
                          sorted({r.get(k, [0, 0])[1] for r in runs}),
                          (max(r.get(k, [0, 0])[0] for r in runs) - min(r.get(k, [0, 0])[0] for r in runs))
                          / max(1, statistics.mean(r.get(k, [0, 0])[0] for r in runs))) for k in keys}
        ref = "cupti" if "cupti" in agg else "torch" if "torch" in agg else profs[0]
        keys = sorted(set().union(*(agg[p] for p in profs)), key=lambda k: -agg[ref].get(k, (0,))[0])
        total = {p: sum(v[0] for v in agg[p].values()) for p in profs}
        for k in keys:
            row = {"workload": wl, "kernel": k if len(k) <= 80 else k[:55] + "..." + k[-22:]}
            for p in profs:
                ns, cnt, spread = agg[p].get(k, (0, [0], 0))
                row[f"{p}_count"] = cnt[0] if len(cnt) == 1 else cnt
                row[f"{p}_ms"] = round(ns / 1e6, 4)
                row[f"{p}_spread_%"] = round(100 * spread, 2)
            r_ns = agg[ref].get(k, (0,))[0]
            row["share_%"] = round(100 * r_ns / max(1, total[ref]), 2)
            for p in profs:
                if p != ref:
                    p_ns = agg[p].get(k, (0,))[0]
                    row[f"{p}_vs_{ref}_%"] = round(100 * (p_ns - r_ns) / r_ns, 2) if r_ns else None
            all_rows.append(row)
        summaries[wl] = {"steps": steps, "warmup": warm, "rounds": args.rounds,
                         "total_ms": {p: round(total[p] / 1e6, 3) for p in profs},
                         "total_per_step_ms": {p: round(total[p] / 1e6 / steps, 4) for p in profs},
                         "against": ref, "agreement": _agreement(agg, profs, ref, total[ref]),
                         "kprof_state": states or None}
        print(json.dumps({wl: summaries[wl]}, indent=1), flush=True)
        # each workload's rows as soon as they are in (an outer timeout keeps the workloads done)
        write_results((args.name or "reconcile_profilers") + ".partial", all_rows, {"summary": summaries},
                      **({"results_dir": args.results_dir} if args.results_dir else {}))
    write_results(args.name or "reconcile_profilers", all_rows, {"summary": summaries},
                  **({"results_dir": args.results_dir} if args.results_dir else {}))
    return 0


def _agreement(agg, profs, ref, ref_total):
    """Per profiler against ``ref``: the keys whose counts differ (and those only one of the two has), the
    total's difference, and the largest per-key time difference over the keys of at least 1% of the
    reference's time and over all keys (``agg``: key -> (mean ns, counts over rounds, own spread))."""
    out = {}
    for p in profs:
        if p == ref:
            continue
        a, b = agg[p], agg[ref]
        count_diff = sorted(k for k in set(a) & set(b) if a[k][1] != b[k][1])
        diffs = {k: 100 * (a[k][0] - b[k][0]) / b[k][0] for k in set(a) & set(b) if b[k][0]}
        big = {k: v for k, v in diffs.items() if b[k][0] >= 0.01 * ref_total}
        worst = max(big, key=lambda k: abs(big[k])) if big else None
        worst_all = max(diffs, key=lambda k: abs(diffs[k])) if diffs else None
        total = sum(v[0] for v in a.values())
        out[p] = {"count_mismatches": len(count_diff), "count_mismatch_keys": [k[:80] for k in count_diff[:10]],
                  "only_here": len(set(a) - set(b)), "only_in_ref": len(set(b) - set(a)),
                  "only_in_ref_ms": round(sum(b[k][0] for k in set(b) - set(a)) / 1e6, 4),
                  "total_vs_ref_%": round(100 * (total - ref_total) / ref_total, 3) if ref_total else None,
                  "rows_over_1%": len(big),
                  "worst_over_1%": None if worst is None else [worst[:80], round(big[worst], 2)],
                  "worst_any": None if worst_all is None else [worst_all[:80], round(diffs[worst_all], 2),
                                                               round(b[worst_all][0] / 1e6, 4)]}
    return out


def _run_overhead_child(spec: dict) -> dict:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("KERNELC_INTERPRET", None)
    cmd = [sys.executable, os.path.abspath(__file__), "_overhead_child", json.dumps(spec)]
    timeout = max(60.0, spec["deadline"] - time.time() + 120)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    if p.returncode != 0:
        raise RuntimeError(f"{spec['workload']}/{spec['profiler']} failed (rc {p.returncode}):\n"
                           f"{p.stdout[-1500:]}\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def _forked_child(spec: dict, conn) -> None:
    """A child of ``--spawn fork``: forked from a server that has imported torch (CUDA untouched), so
    each process skips torch's import; everything else is :func:`child_overhead` in a new process."""
    try:
        os.environ.pop("KERNELC_INTERPRET", None)
        if spec.get("mode") == "reconcile":
            r = child(spec["workload"], spec["profiler"], spec["out"], spec["steps"], spec["warmup"], spec["device"])
        else:
            r = child_overhead(spec)
        conn.send(("ok", r))
    except BaseException:
        import traceback
        conn.send(("error", traceback.format_exc()[-3000:]))
    finally:
        conn.close()


_FORK = {"ctx": None, "broken": None}   # --spawn fork: the forkserver context, or why it was given up


def _noop() -> None:
    pass


def _start_forkserver() -> None:
    """Start the fork server (it imports torch once) before the budget's clock runs; on failure,
    ``--spawn fork`` is given up and every child starts with exec."""
    import importlib
    import multiprocessing as mp
    try:
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["torch"])
        mod = importlib.import_module("bench.reconcile_profilers")
        p = ctx.Process(target=mod._noop, daemon=True)
        p.start()
        p.join(300)
        if p.exitcode != 0:
            raise RuntimeError(f"a trivial forked child exited with {p.exitcode}")
        _FORK["ctx"] = ctx
    except Exception as e:
        _FORK["broken"] = f"fork server: {e}"
        print(json.dumps({"spawn": "fork given up, exec from now on", "why": _FORK["broken"]}), flush=True)


def _run_forked_child(spec: dict) -> dict:
    import importlib
    ctx = _FORK["ctx"]
    mod = importlib.import_module("bench.reconcile_profilers")   # the target is pickled by module name
    recv, send = ctx.Pipe(duplex=False)
    p = ctx.Process(target=mod._forked_child, args=(spec, send))   # not daemonic: it may start processes
    p.start()
    send.close()
    timeout = max(60.0, spec["deadline"] - time.time() + 120)
    try:
        if not recv.poll(timeout):
            raise subprocess.TimeoutExpired("forked child", timeout)
        kind, payload = recv.recv()
    except EOFError:
        kind, payload = "error", f"the forked child died (exit code {p.exitcode})"
    finally:
        p.join(10)
        if p.is_alive():
            p.kill()
    if kind == "error":   # the child ran: its own failure, not the fork's
        raise ChildError(f"{spec['workload']}/{spec['profiler']} failed (forked child):\n{payload}")
    if kind != "ok":
        raise RuntimeError(f"{spec['workload']}/{spec['profiler']} failed (forked child):\n{payload}")
    return payload


class ChildError(RuntimeError):
    """A forked child that started and reported its own failure (the fork server itself works)."""


def _boot_medians(groups, reps, seed):
    """Bootstrap medians of the values pooled over ``groups`` (one list per process): processes
    resampled, then values within each, so both levels of noise are in the interval."""
    import random
    rnd = random.Random(seed)
    out = []
    for _ in range(reps):
        pool = []
        for g in rnd.choices(groups, k=len(groups)):
            pool.extend(rnd.choices(g, k=len(g)))
        out.append(statistics.median(pool))
    return out


def _median_ci(groups, reps=2000, seed=0):
    """Median of the pooled values and its 95% bootstrap interval (:func:`_boot_medians`)."""
    groups = [g for g in groups if g]
    if not groups:
        return None, None, None
    boots = sorted(_boot_medians(groups, reps, seed))
    return statistics.median([x for g in groups for x in g]), boots[int(0.025 * reps)], boots[int(0.975 * reps) - 1]


def _order_stat_ci(n, z=1.96):
    """0-based ranks ``(lo, hi)`` of the distribution-free 95% interval of a median of ``n`` values (the
    sign test's: the binomial(n, 1/2) quantiles, normal approximation with continuity); None below 6."""
    import math
    if n < 6:
        return None
    k = int(math.floor(n / 2 - z * math.sqrt(n) / 2 - 0.5))
    return max(0, k), min(n - 1, n - 1 - max(0, k))


def _sign_ci(values):
    """Median of ``values`` and its sign-test 95% interval (no assumption on their distribution, only that
    they are independent draws): ``(median, lo, hi)``, the interval None where there are too few."""
    xs = sorted(values)
    if not xs:
        return None, None, None
    ranks = _order_stat_ci(len(xs))
    m = statistics.median(xs)
    return (m, None, None) if ranks is None else (m, xs[ranks[0]], xs[ranks[1]])


def _hl_over(xs, ys, z=1.96):
    """How much larger the ratios ``xs`` are than ``ys`` (e.g. kprof's pair ratios and the floor's, each a
    profiled block over its own unprofiled one): the Hodges-Lehmann estimate, the median of all
    ``log x - log y``, as a percentage, with the Mann-Whitney 95% interval of that shift.  It asks only that
    the pairs be independent and the two sets differ by a shift in log scale, so a few wild pairs (a
    block in a slow phase of the host) move it far less than the ratio of two medians with a bootstrap.
    ``(pct, lo, hi)``; the interval None with fewer than 4 pairs on a side."""
    import math
    if not xs or not ys:
        return None, None, None
    d = sorted(math.log(x) - math.log(y) for x in xs for y in ys)
    n, m = len(xs), len(ys)
    pct = lambda v: round(100 * (math.exp(v) - 1), 2)
    est = pct(statistics.median(d))
    if n < 4 or m < 4:
        return est, None, None
    c = int(math.floor(n * m / 2 - z * math.sqrt(n * m * (n + m + 1) / 12)))
    c = max(0, min(c, len(d) - 1))
    return est, pct(d[c]), pct(d[len(d) - 1 - c])


def _rounded_ci(t):
    return None if t[1] is None else [round(t[1], 4), round(t[2], 4)]


def _aa(r):
    """The process's own control: adjacent unprofiled blocks (AB, BA, AB, ... puts A next to A at each
    pair boundary), later over earlier -- the noise of a ratio of two blocks in this process, with no
    profiler in either."""
    if r.get("order"):   # a comparison out of a multi-way run: its reference blocks are not adjacent
        return []
    u = r["unprof_ms"]
    return [u[k + 1] / u[k] for k in range(1, len(u) - 1, 2)]


def _sequence(r):
    """The process's timed blocks in time order: ``[("u" or "p", ms per step)]`` (pairs AB, BA, ...)."""
    out = []
    order = r.get("order")   # a comparison taken out of a multi-way run: which block came first in each pair
    for i, (u, p) in enumerate(zip(r["unprof_ms"], r["prof_ms"])):
        first = order[i] if order else ("u" if i % 2 == 0 else "p")
        out += [("u", u), ("p", p)] if first == "u" else [("p", p), ("u", u)]
    return out


def _bracket(r):
    """Each profiled block over the mean of the nearest unprofiled blocks before and after it (one side
    at the ends): a drift that is linear over the three blocks cancels, where the pair ratio keeps half
    of it."""
    seq = _sequence(r)
    out = []
    for i, (k, v) in enumerate(seq):
        if k != "p":
            continue
        before = next((x for kk, x in reversed(seq[:i]) if kk == "u"), None)
        after = next((x for kk, x in seq[i + 1:] if kk == "u"), None)
        ref = [x for x in (before, after) if x is not None]
        if ref:
            out.append(v / (sum(ref) / len(ref)))
    return out


def _pair_sched(r, key):
    """Per pair, profiled over unprofiled block of ``sched[key]`` (e.g. all threads' CPU time), or []."""
    sched = r.get("sched") or []
    out = []
    for i in range(len(sched) // 2):
        x, y = sched[2 * i], sched[2 * i + 1]
        if x[1] is None or y[1] is None:
            return []
        p, u = (y, x) if x[0] == "u" else (x, y)
        if key not in u[1] or key not in p[1]:   # e.g. no PMU for instructions
            return []
        if u[1][key] > 0:
            out.append(p[1][key] / u[1][key])
    return out


def _pair_ref(r):
    """Per pair, profiled over unprofiled block time, each block's time multiplied by the reference core's
    speed during it (``ref_rate``): the block's time at a fixed host CPU speed, where that speed moves on all
    cores at once.  [] without a reference process."""
    seq, sched = _sequence(r), r.get("sched") or []
    if len(sched) != len(seq):
        return []
    adj = [(k, ms * d["ref_rate"] if d and d.get("ref_rate") else None) for (k, ms), (_, d) in zip(seq, sched)]
    out = []
    for i in range(0, len(adj) - 1, 2):
        (k1, v1), (k2, v2) = adj[i], adj[i + 1]
        if v1 and v2:   # a pair with a block the reference did not run through is left out
            p, u = (v1, v2) if k1 == "p" else (v2, v1)
            out.append(p / u)
    return out


# --step-probe estimators: how a segment's speed is read from the probes around it
#   "probe": the mean of the speeds (1/probe time) just before and just after the segment;
#   "probe-med": the same from the running median of the block's probes over +-2 probes, so that one probe
#   hit by a stall (an interrupt, CUPTI's thread taking the GIL) does not scale its neighbours' segments;
#   "probe-fit": the speed to the power beta, one beta per workload, the one that makes the control
#   processes' successive unprofiled blocks agree best (:func:`_fit_beta`): a step's launch path slows less
#   than the pure-Python probe does (beta ~0.7-0.85 on the GPU hosts, 2026-11-28), CPU torch ops more (~1.3)
PROBE_ESTIMATORS = ("probe", "probe-med", "probe-fit")
BETA_GRID = tuple(round(0.05 * i, 2) for i in range(31))   # 0 .. 1.5


def _smooth(xs, half=2):
    return [statistics.median(xs[max(0, i - half):i + half + 1]) for i in range(len(xs))]


def _probe_norm(d, how="probe", beta=1.0):
    """A block's time per segment at a fixed host speed: each segment's time times the speed of its core
    around it (1 / the probe time there; to the power ``beta`` for ``probe-fit``), averaged over segments,
    in probe-time units (only ratios of blocks of one process are used); None without probes."""
    seg, pr = (d or {}).get("seg_us"), (d or {}).get("seg_probe_us")
    if not seg or not pr or len(pr) != len(seg) + 1 or min(pr) <= 0:
        return None
    if how == "probe-med":
        pr = _smooth(pr)
    b = beta if how == "probe-fit" else 1.0
    return sum(s * (0.5 * (1.0 / x + 1.0 / y)) ** b for s, x, y in zip(seg, pr[:-1], pr[1:])) / len(seg)


def _fit_beta(results):
    """``probe-fit``'s exponent for one workload: the beta of :data:`BETA_GRID` that minimises the spread
    (sd of the log ratio) of successive unprofiled blocks of the control processes (``none``; every
    process where there is none), so it is chosen on no profiler's blocks.  None without probes."""
    import math
    rs = [r for r in results if r["profiler"] == "none"] or results
    best = None
    for beta in BETA_GRID:
        logs = []
        for r in rs:
            seq, sched = _sequence(r), r.get("sched") or []
            if len(sched) != len(seq):
                continue
            # a control's blocks are all unprofiled; elsewhere the unprofiled ones only
            u = [_probe_norm(d, "probe-fit", beta) for (k, _), (_, d) in zip(seq, sched)
                 if k == "u" or r["profiler"] == "none"]
            if None in u:
                continue
            logs += [math.log(b / a) for a, b in zip(u[:-1], u[1:])]
        if len(logs) < 2:
            return None
        sd = statistics.pstdev(logs)
        if best is None or sd < best[1] - 1e-12:
            best = (beta, sd)
    return best[0]


def _pair_probe(r, how="probe", beta=1.0):
    """Per pair, profiled over unprofiled block at a fixed host speed (:func:`_probe_norm`); [] without
    ``--step-probe``."""
    seq, sched = _sequence(r), r.get("sched") or []
    if len(sched) != len(seq):
        return []
    adj = [(k, _probe_norm(d, how, beta)) for (k, _), (_, d) in zip(seq, sched)]
    out = []
    for i in range(0, len(adj) - 1, 2):
        (k1, v1), (k2, v2) = adj[i], adj[i + 1]
        if v1 is None or v2 is None:
            return []
        p, u = (v1, v2) if k1 == "p" else (v2, v1)
        out.append(p / u)
    return out


def _pair_steady(r):
    """Per pair, profiled over unprofiled block without each block's first segment (``--step-probe`` runs):
    the first segment after the profiler's start carries its start-up cost (Proton's first ~3 ms of tiny
    launches took as long as a whole 50-ms block, 2026-11-28), which a profiled run pays once, not per block;
    the unprofiled block's first segment (the GPU idle after the sync) goes too.  [] without segments."""
    seq, sched = _sequence(r), r.get("sched") or []
    if len(sched) != len(seq):
        return []
    out = []
    for i in range(0, len(seq) - 1, 2):
        blk = {}
        for (k, _), (_, d) in ((seq[i], sched[i]), (seq[i + 1], sched[i + 1])):
            seg = (d or {}).get("seg_us")
            if not seg or len(seg) < 3:
                return []
            blk[k] = sum(seg[1:]) / (len(seg) - 1)
        out.append(blk["p"] / blk["u"])
    return out


def _aa_probe(r, how="probe", beta=1.0):
    """:func:`_aa` at a fixed host speed: adjacent unprofiled blocks, later over earlier."""
    seq, sched = _sequence(r), r.get("sched") or []
    if len(sched) != len(seq) or r.get("order"):
        return []
    u = [_probe_norm(d, how, beta) for (k, _), (_, d) in zip(seq, sched) if k == "u"]
    if any(x is None for x in u):
        return []
    return [u[k + 1] / u[k] for k in range(1, len(u) - 1, 2)]


def _probe_diagnostics(rs):
    """What the probes saw: the range of the probe time over the process's median, its spread within a block,
    and how the unprofiled segments' times follow it (correlation of log segment time with log probe time
    around it, and the slope: 1 where the whole segment scales with the probe's speed)."""
    import math
    rel, xs, ys = [], [], []
    for r in rs:
        seq, sched = _sequence(r), r.get("sched") or []
        if len(sched) != len(seq):
            continue
        probes = [x for _, d in sched if d and d.get("seg_probe_us") for x in d["seg_probe_us"]]
        segs = [x for (k, _), (_, d) in zip(seq, sched) if k == "u" and d and d.get("seg_us") for x in d["seg_us"]]
        if not probes or not segs:
            continue
        mp, ms = statistics.median(probes), statistics.median(segs)
        rel.extend(x / mp for x in probes)
        for (k, _), (_, d) in zip(seq, sched):
            if k != "u" or not d or not d.get("seg_us"):
                continue
            pr = d["seg_probe_us"]
            for s, a, b in zip(d["seg_us"], pr[:-1], pr[1:]):
                if s > 0 and a > 0 and b > 0:
                    xs.append(math.log(2 * mp / (a + b)))   # log speed
                    ys.append(math.log(s / ms))
    if not rel:
        return {}
    out = {"probe_rel_range": [round(min(rel), 3), round(max(rel), 3)],
           "probe_rel_p10_p90": [round(sorted(rel)[len(rel) // 10], 3), round(sorted(rel)[9 * len(rel) // 10], 3)]}
    if len(xs) >= 3:
        out["corr_seg_speed"] = _corr(xs, ys)
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        vx = sum((x - mx) ** 2 for x in xs)
        if vx:
            # log segment time against log speed: -1 where the segment's time scales fully with the speed
            out["slope_seg_speed"] = round(sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / vx, 3)
    return out


def _loop_stats(rs):
    """Median per profiled block of what kprof's callbacks did on CUPTI's thread, or None."""
    blocks = [b for r in rs for b in (r.get("loop_stats") or [])]
    if not blocks:
        return None
    out = {}
    for k in sorted({k for b in blocks for k in b}):
        vals = [b.get(k, 0) for b in blocks]
        out[k] = round(statistics.median(vals) / (1e6 if k.endswith("_ns") else 1), 3)
    return {k[:-3] + "_ms" if k.endswith("_ns") else k: v for k, v in out.items()}


def _corr(xs, ys):
    if len(xs) < 3:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sx = sum((x - mx) ** 2 for x in xs) ** 0.5
    sy = sum((y - my) ** 2 for y in ys) ** 0.5
    return round(sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / (sx * sy), 3) if sx and sy else None


def _block_diagnostics(rs):
    """What moved with the block times (the unprofiled blocks of every process, each over its process's
    median): the CPU probe, the GPU clock, the queued GPU work at the end (``tail_ms``), and the share of
    CPU time per thread name."""
    out = {}
    rel, probe, mhz, tail, shares = [], [], [], [], defaultdict(list)
    ref_rel, ref = [], []
    for r in rs:
        seq = _sequence(r)
        sched = r.get("sched") or []
        if len(sched) != len(seq):
            continue
        med = statistics.median(r["unprof_ms"])
        for (k, ms), (_, d) in zip(seq, sched):
            if d is None:
                continue
            if "tail_ms" in d:
                tail.append(d["tail_ms"] / (ms * r["steps_per_block"]))
            if "gpu_mhz" in d:
                mhz.extend(d["gpu_mhz"])
            if k == "u" and "probe_us" in d:
                rel.append(ms / med)
                probe.append(d["probe_us"])
            if k == "u" and d.get("ref_rate"):
                ref_rel.append(ms / med)
                ref.append(d["ref_rate"])
            tm = d.get("threads_ms")
            if tm:
                total = sum(tm.values())
                for name, v in tm.items():
                    shares[name].append(v / total)
    if tail:
        out["tail_share_median"] = round(statistics.median(tail), 4)   # of the block's wall time
        out["tail_share_max"] = round(max(tail), 4)
    if probe:
        out["probe_us_range"] = [min(probe), max(probe)]
        out["corr_unprof_probe"] = _corr(rel, probe)
    if ref:
        # the reference core's speed during each unprofiled block: its range, and how the block times follow
        # it (strongly negative: the host's speed moved on all cores and the ref-corrected ratios remove it)
        out["ref_rate_range"] = [min(ref), max(ref)]
        out["corr_unprof_ref"] = _corr(ref_rel, ref)
    if mhz:
        out["gpu_mhz_range"] = [min(mhz), max(mhz)]
    if shares:
        n = max(len(v) for v in shares.values())
        top = sorted(shares.items(), key=lambda kv: -sum(kv[1]))[:5]
        out["cpu_share_by_thread"] = {k: round(sum(v) / n, 3) for k, v in top}
    return out


def _settled(r: dict, k: int):
    """``r`` without its first ``k`` pairs (``--settle-pairs``; an odd ``k`` counts as ``k + 1``): the pairs, their blocks' counters, stops and
    loop stats from pair ``k`` on; None where fewer than 2 pairs would be left.  Pooled over the earlier
    runs, `train`'s first three pairs sat 0.7-2.2% below their process's median (2026-11-28): not yet the
    steady state, and with ~10 pairs a process they moved its median."""
    if not k:
        return r
    k += k % 2   # even: the pairs left start with an AB pair, as _sequence's time order assumes
    if len(r["warm"]) - k < 2:
        return None
    out = dict(r)
    for key in ("warm", "unprof_ms", "prof_ms", "stop_s", "order"):
        if key in r:
            out[key] = r[key][k:]
    if r.get("loop_stats"):
        out["loop_stats"] = r["loop_stats"][k:]
    if r.get("sched") and len(r["sched"]) == 2 * len(r["warm"]):
        out["sched"] = r["sched"][2 * k:]
    return out


def control_noise(rs: list, target_pct: float = 1.0, p_target: float = 0.8, pairs=None) -> dict:
    """What the control's spread is made of.  Each control process's median of its pair ratios has a standard
    error from its own pairs alone (1.2533 x sd / sqrt(n) of the log ratios); if the processes differ only
    by that, the squared z-scores of their medians around their weighted mean add up to a chi-square with
    (processes - 1) degrees of freedom.  Returned: per process n, pair sd and se (%), the spread expected
    from within-process noise alone (the mean range of medians drawn with those se's, fixed-seed Monte
    Carlo), the chi-square and its p-value (small: the processes differ by more than their own noise), and
    the pairs per process that two processes need for a spread below ``target_pct`` with probability
    ``p_target`` at the pooled pair sd.  ``pairs(r)``: the process's pair ratios under another estimator
    (default its raw ``warm``)."""
    import math
    import random
    procs = []
    for r in rs:
        w = pairs(r) if pairs is not None else r["warm"]
        if len(w) < 3:
            continue
        logs = [math.log(x) for x in w]
        sd = statistics.stdev(logs)
        procs.append((math.log(statistics.median(w)), len(w), sd, max(1.2533 * sd / math.sqrt(len(w)), 1e-6)))
    if len(procs) < 2:
        return {}
    wts = [1 / p[3] ** 2 for p in procs]
    mean = sum(p[0] * wt for p, wt in zip(procs, wts)) / sum(wts)
    chi2 = sum(((p[0] - mean) / p[3]) ** 2 for p in procs)
    dof = len(procs) - 1
    rnd = random.Random(0)
    sims = []
    for _ in range(4000):
        m = [rnd.gauss(0, p[3]) for p in procs]
        sims.append(max(m) - min(m))
    pooled_sd = math.sqrt(sum((p[1] - 1) * p[2] ** 2 for p in procs) / sum(p[1] - 1 for p in procs))
    # two processes: their medians' difference ~ N(0, sqrt(2) se); P(|d| < t) >= p  <=>  se <= t / (sqrt(2) z)
    z = statistics.NormalDist().inv_cdf(0.5 + p_target / 2)
    se_max = target_pct / 100 / (math.sqrt(2) * z)
    return {"n": [p[1] for p in procs], "pair_sd_%": [round(100 * p[2], 2) for p in procs],
            "se_%": [round(100 * p[3], 2) for p in procs],
            "spread_expected_%": round(100 * statistics.fmean(sims), 2),
            "chi2": round(chi2, 2), "dof": dof, "p_between": round(_chi2_sf(chi2, dof), 3),
            "pooled_pair_sd_%": round(100 * pooled_sd, 2),
            f"pairs_for_{target_pct:g}pct": math.ceil((1.2533 * pooled_sd / se_max) ** 2)}


def _chi2_sf(x: float, k: int) -> float:
    """P(chi-square with k degrees of freedom > x), by the regularized upper incomplete gamma (series and
    continued fraction, as in Numerical Recipes' gammq): no scipy in the bench's environment."""
    import math
    a, x = k / 2.0, x / 2.0
    if x <= 0:
        return 1.0
    gln = math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        ap = a
        for _ in range(500):
            ap += 1
            term *= x / ap
            total += term
            if abs(term) < abs(total) * 1e-12:
                break
        return max(0.0, 1.0 - total * math.exp(-x + a * math.log(x) - gln))
    b = x + 1 - a
    c, d = 1e300, 1 / b
    h = d
    for i in range(1, 500):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = 1e-300 if abs(d) < 1e-300 else d
        c = b + an / c
        c = 1e-300 if abs(c) < 1e-300 else c
        d = 1 / d
        h *= d * c
        if abs(d * c - 1) < 1e-12:
            break
    return min(1.0, math.exp(-x + a * math.log(x) - gln) * h)


def summarize(results: list, reps: int = 2000, settle: int = 0, beta=None) -> dict:
    """Per profiler, from the children's results of one workload: warm, residue and full overheads
    (median and 95% interval), the spread of the per-process medians, kprof-over-floor.  ``settle``: the
    first pairs of every process left out (``--settle-pairs``; a process with fewer than 2 pairs left is
    left out whole and counted in ``_settle``).  ``beta``: probe-fit's exponent fixed before the run
    (``--probe-beta``) instead of fitted on this run's control."""
    n_in = len(results)
    results = [x for x in (_settled(r, settle) for r in results) if x is not None]
    by = defaultdict(list)
    for r in results:
        by[r["profiler"]].append(r)
    out = {}
    if settle:
        out["_settle"] = {"pairs_dropped_per_process": settle, "processes_dropped": n_in - len(results)}
    boots = {}
    pooled = {}   # (profiler, estimator) -> every pair ratio of its processes
    fitted = _fit_beta(results)
    beta = fitted if beta is None or fitted is None else beta
    for p, rs in by.items():
        warm = [r["warm"] for r in rs]
        # residue: each unprofiled block after CUPTI's first start over the process's cold median
        residue = [[u / statistics.median(r["cold_ms"]) for u in r["unprof_ms"]] for r in rs if r["cold_ms"]]
        # full: each profiled block over the cold median
        full = [[b / statistics.median(r["cold_ms"]) for b in r["prof_ms"]] for r in rs if r["cold_ms"]]
        per_proc = [statistics.median(w) for w in warm if w]
        e = {"processes": len(rs), "pairs": sum(len(w) for w in warm),
             "steps_per_block": sorted({r["steps_per_block"] for r in rs}),
             "unprofiled_ms_per_step": round(statistics.median([u for r in rs for u in r["unprof_ms"]]), 4),
             "stop_s_median": round(statistics.median([x for r in rs for x in r["stop_s"]]), 3) if any(r["stop_s"] for r in rs) else None,
             "setup_s_median": round(statistics.median([r["setup_s"] for r in rs]), 1),
             "warm_per_process": [round(x, 4) for x in per_proc],
             "spread_%": round(100 * (max(per_proc) - min(per_proc)), 2) if per_proc else None,
             "aa_per_process": [round(statistics.median(a), 4) if a else None for a in map(_aa, rs)],
             "loop_stats": _loop_stats(rs)}
        m, lo, hi = _median_ci([_bracket(r) for r in rs], reps)
        e["warm_bracket"], e["warm_bracket_ci"] = (None, None) if m is None else (round(m, 4), [round(lo, 4), round(hi, 4)])
        cpu = [_pair_sched(r, "all_run_ms") for r in rs]
        m, lo, hi = _median_ci(cpu, reps)
        # the process's CPU time (all threads) per profiled block over the unprofiled one: the host work
        # a profiler adds, without the time its threads waited for a core
        e["warm_cpu"], e["warm_cpu_ci"] = (None, None) if m is None else (round(m, 4), [round(lo, 4), round(hi, 4)])
        # user-space instructions of all threads, profiled block over unprofiled: the work a profiler adds,
        # whatever the host CPU's clock did meanwhile (None where the machine has no PMU)
        ins = [_pair_sched(r, "instr") for r in rs]
        m, lo, hi = _median_ci(ins, reps)
        e["warm_instr"], e["warm_instr_ci"] = (None, None) if m is None else (round(m, 4), [round(lo, 4), round(hi, 4)])
        e["instr_per_process"] = [round(statistics.median(x), 4) if x else None for x in ins]
        boots[p, "instr"] = _boot_medians([x for x in ins if x], reps, 1) if any(ins) else None
        waits = [b[1]["all_wait_ms"] / max(b[1]["all_run_ms"], 1e-9) for r in rs for b in (r.get("sched") or [])
                 if b[1] is not None]
        e["wait_over_run_median"] = round(statistics.median(waits), 4) if waits else None
        blocks = [b[1] for r in rs for b in (r.get("sched") or []) if b[1] is not None and "cores_busy_ms" in b[1]]
        if blocks:
            # other processes' CPU time on the pinned cores per block (ticks: +-10 ms), steal, MHz
            e["cores_other_ms_median"] = round(statistics.median(b["cores_busy_ms"] - b["all_run_ms"] for b in blocks), 1)
            e["cores_steal_ms_median"] = round(statistics.median(b["cores_steal_ms"] for b in blocks), 1)
            mhz = [b["mhz"] for b in blocks if "mhz" in b]
            e["mhz_range"] = [min(mhz), max(mhz)] if mhz else None
        e.update(_block_diagnostics(rs))
        for name, groups in (("warm", warm), ("residue", residue), ("full", full)):
            m, lo, hi = _median_ci(groups, reps)
            e[name] = None if m is None else round(m, 4)
            e[name + "_ci"] = None if m is None else [round(lo, 4), round(hi, 4)]
        pooled[p, "warm"] = [x for w in warm for x in w]
        e["warm_sign_ci"] = _rounded_ci(_sign_ci(pooled[p, "warm"]))
        refd = [_pair_ref(r) for r in rs]
        if any(refd):
            m, lo, hi = _median_ci(refd, reps)
            per = [statistics.median(x) for x in refd if x]
            e["warm_ref"], e["warm_ref_ci"] = round(m, 4), [round(lo, 4), round(hi, 4)]
            e["warm_ref_per_process"] = [round(x, 4) for x in per]
            e["spread_ref_%"] = round(100 * (max(per) - min(per)), 2)
            boots[p, "ref"] = _boot_medians([x for x in refd if x], reps, 1)
        else:
            e["warm_ref"] = e["warm_ref_ci"] = e["spread_ref_%"] = None
        for how in PROBE_ESTIMATORS:
            tag = how.replace("-", "_")
            pd = [_pair_probe(r, how, beta) for r in rs] if beta is not None else []
            if any(pd):
                m, lo, hi = _median_ci(pd, reps)
                per = [statistics.median(x) for x in pd if x]
                e[f"warm_{tag}"], e[f"warm_{tag}_ci"] = round(m, 4), [round(lo, 4), round(hi, 4)]
                e[f"warm_{tag}_per_process"] = [round(x, 4) for x in per]
                e[f"spread_{tag}_%"] = round(100 * (max(per) - min(per)), 2)
                e[f"aa_{tag}_per_process"] = [round(statistics.median(a), 4) if a else None
                                              for a in (_aa_probe(r, how, beta) for r in rs)]
                boots[p, tag] = _boot_medians([x for x in pd if x], reps, 1)
                pooled[p, tag] = [x for g in pd for x in g]
                e[f"warm_{tag}_sign_ci"] = _rounded_ci(_sign_ci(pooled[p, tag]))
            else:
                e[f"warm_{tag}"] = e[f"warm_{tag}_ci"] = e[f"spread_{tag}_%"] = None
        e.update(_probe_diagnostics(rs))
        steady = [_pair_steady(r) for r in rs]
        if any(steady):
            pooled[p, "steady"] = [x for g in steady for x in g]
            m, lo, hi = _sign_ci(pooled[p, "steady"])
            e["warm_steady"], e["warm_steady_sign_ci"] = round(m, 4), _rounded_ci((m, lo, hi))
            per = [statistics.median(x) for x in steady if x]
            e["warm_steady_per_process"] = [round(x, 4) for x in per]
            e["spread_steady_%"] = round(100 * (max(per) - min(per)), 2)
        boots[p] = _boot_medians([w for w in warm if w], reps, 1)
        boots[p, "bracket"] = _boot_medians([b for b in map(_bracket, rs) if b], reps, 1)
        out[p] = e
    aa_all = [statistics.median(a) for a in map(_aa, results) if a]
    if aa_all:  # every process's own control, whatever its profiler
        out["_aa"] = {"processes": len(aa_all), "spread_%": round(100 * (max(aa_all) - min(aa_all)), 2),
                      "sd_%": round(100 * statistics.pstdev(aa_all), 2), "median": round(statistics.median(aa_all), 4)}
        for how in PROBE_ESTIMATORS:
            aa_p = [statistics.median(a) for a in (_aa_probe(r, how, beta) for r in results) if a] \
                if beta is not None else []
            if aa_p:
                t = how.replace("-", "_")
                out["_aa"][f"spread_{t}_%"] = round(100 * (max(aa_p) - min(aa_p)), 2)
                out["_aa"][f"sd_{t}_%"] = round(100 * statistics.pstdev(aa_p), 2)
    if beta is not None:
        out["_probe_beta"] = beta
        out["_probe_beta_fitted"] = fitted
    if by.get("none"):
        out["_control_noise"] = control_noise(by["none"])
        if beta is not None:
            out["_control_noise_probe_fit"] = control_noise(by["none"], pairs=lambda r: _pair_probe(r, "probe-fit", beta))
    for floor, tag in (("floor", "floor"), ("floor-raw", "floor_raw"), ("floor-api", "floor_api")):
        if floor not in out:
            continue
        for p in out:
            if p in ("none", "floor", "floor-raw", "floor-api") or p.startswith("_"):
                continue
            d = sorted(100 * (a / b - 1) for a, b in zip(boots[p], boots[floor]))
            out[p][f"over_{tag}_%"] = round(100 * (out[p]["warm"] / out[floor]["warm"] - 1), 2)
            out[p][f"over_{tag}_ci_%"] = [round(d[int(0.025 * reps)], 2), round(d[int(0.975 * reps) - 1], 2)]
            if out[p]["warm_bracket"] and out[floor]["warm_bracket"]:
                d = sorted(100 * (a / b - 1) for a, b in zip(boots[p, "bracket"], boots[floor, "bracket"]))
                out[p][f"bracket_over_{tag}_%"] = round(100 * (out[p]["warm_bracket"] / out[floor]["warm_bracket"] - 1), 2)
                out[p][f"bracket_over_{tag}_ci_%"] = [round(d[int(0.025 * reps)], 2), round(d[int(0.975 * reps) - 1], 2)]
            if out[p]["full"] and out[floor]["full"]:
                out[p][f"full_over_{tag}_%"] = round(100 * (out[p]["full"] / out[floor]["full"] - 1), 2)
            if out[p].get("warm_ref") and out[floor].get("warm_ref"):
                d = sorted(100 * (a / b - 1) for a, b in zip(boots[p, "ref"], boots[floor, "ref"]))
                out[p][f"ref_over_{tag}_%"] = round(100 * (out[p]["warm_ref"] / out[floor]["warm_ref"] - 1), 2)
                out[p][f"ref_over_{tag}_ci_%"] = [round(d[int(0.025 * reps)], 2), round(d[int(0.975 * reps) - 1], 2)]
            for how in PROBE_ESTIMATORS:
                t = how.replace("-", "_")
                if out[p].get(f"warm_{t}") and out[floor].get(f"warm_{t}"):
                    d = sorted(100 * (a / b - 1) for a, b in zip(boots[p, t], boots[floor, t]))
                    out[p][f"{t}_over_{tag}_%"] = round(100 * (out[p][f"warm_{t}"] / out[floor][f"warm_{t}"] - 1), 2)
                    out[p][f"{t}_over_{tag}_ci_%"] = [round(d[int(0.025 * reps)], 2), round(d[int(0.975 * reps) - 1], 2)]
            # the same, as the Hodges-Lehmann shift of the pair ratios with its Mann-Whitney interval
            for est, key in (("warm", f"hl_over_{tag}"), ("probe_fit", f"hl_probe_fit_over_{tag}"),
                             ("steady", f"hl_steady_over_{tag}")):
                if pooled.get((p, est)) and pooled.get((floor, est)):
                    v, lo, hi = _hl_over(pooled[p, est], pooled[floor, est])
                    out[p][key + "_%"] = v
                    out[p][key + "_ci_%"] = None if lo is None else [lo, hi]
            if out[p]["warm_instr"] and out[floor]["warm_instr"]:
                d = sorted(100 * (a / b - 1) for a, b in zip(boots[p, "instr"], boots[floor, "instr"]))
                out[p][f"instr_over_{tag}_%"] = round(100 * (out[p]["warm_instr"] / out[floor]["warm_instr"] - 1), 2)
                out[p][f"instr_over_{tag}_ci_%"] = [round(d[int(0.025 * reps)], 2), round(d[int(0.975 * reps) - 1], 2)]
    return out


def overhead(args) -> int:
    """One process per (profiler, round), rounds interleaved and rotated; each child has its share of
    the remaining budget (:func:`child_overhead`); the summary is :func:`summarize`'s."""
    from bench.common import write_results
    if args.spawn == "fork":
        t0 = time.time()
        _start_forkserver()
        print(json.dumps({"spawn": "fork", "server_start_s": round(time.time() - t0, 1)}), flush=True)
    tmp = tempfile.mkdtemp(prefix="kprof_overhead_")
    profs = [p for p in args.profilers.split(",") if p]
    wls = [w for w in args.workloads.split(",") if w]
    t_start = time.time()
    deadline = t_start + args.budget
    share = {w: _per_workload(args.shares, w, float, "--shares") or BUDGET_SHARE.get(w, 1.0) for w in wls}
    cpus = _cpu_set(args.cpus)
    ref_path = ref_proc = None
    if args.ref_cpu is not None:
        if cpus and args.ref_cpu in cpus:
            raise SystemExit(f"--ref-cpu {args.ref_cpu} is one of the children's cores {cpus}")
        ref_path, ref_proc = _start_ref(args.ref_cpu)
    rows, summary, raw = [], {}, []
    for wi, wl in enumerate(wls):
        # this workload's part of what is left, by share
        left = deadline - time.time()
        wl_deadline = time.time() + left * share[wl] / sum(share[w] for w in wls[wi:])
        plan = [(rnd, p) for rnd in range(args.rounds)
                for p in (profs[rnd % len(profs):] + profs[:rnd % len(profs)])]
        if "none" in profs and not args.against:  # a closing control: the control's spread across the whole run
            plan.append((args.rounds, "none"))
        results = []
        for k, (rnd, p) in enumerate(plan):
            if time.time() > deadline + args.grace:  # past the budget: keep what was measured, write it
                rows.append({"workload": wl, "round": rnd, "profiler": p, "error": "skipped: budget spent"})
                print(json.dumps(rows[-1]), flush=True)
                continue
            share_s = (wl_deadline - time.time()) / (len(plan) - k)
            setup = statistics.median([r["setup_s"] for r in raw]) if raw else 0.0
            child_deadline = time.time() + share_s
            spec = {"workload": wl, "profiler": p, "device": args.device, "out": os.path.join(tmp, f"{wl}_{p}_{rnd}"),
                    "warmup": WARMUP[wl] if not args.quick else min(WARMUP[wl], 50), "block_s": args.block_s or (
                        BLOCK_S[wl] / (4 if args.quick else 1)),
                    "steps": args.steps or 0, "pre": args.pre, "prime": args.prime, "max_pairs": args.max_pairs,
                    # late (the children's setup took more than planned): one pair each, to stay near the budget
                    "min_pairs": (args.min_pairs if share_s > setup + args.min_pairs * 3 * BLOCK_S[wl] else 2)
                    + args.settle_pairs + args.settle_pairs % 2,
                    "deadline": child_deadline, "cpus": cpus, "threads": args.threads, "buffer": args.buffer,
                    "pin_threads": args.pin_threads, "cpu_latency0": args.cpu_latency0, "ref_path": ref_path,
                    "step_probe": args.step_probe, "probe_seg_ms": args.probe_seg_ms, "against": args.against,
                    # a multi-way child writes its rounds here as they end (a run cut off keeps them)
                    "rounds_path": os.path.join(args.results_dir or _results_dir(),
                                                f"{args.name or 'profiler_overhead_rotated'}.{wl}"
                                                # solo: several children a workload, a file each
                                                + (f".{p}{rnd}" if args.fine_order == "solo" else "")
                                                + ".rounds.json")
                    if (args.against and "," in args.against) or args.fine else None,
                    "fine": _per_workload(args.fine, wl, float, "--fine"), "fine_cycles": args.fine_cycles,
                    "fine_order": args.fine_order,
                    "fine_sync": bool(args.fine_sync),
                    "fine_settle": _per_workload(args.fine_settle, wl, float, "--fine-settle") or 0.0,
                    "fine_states": _fine_states_arg(args.fine_states)}
            try:
                r = None
                if args.spawn == "fork" and _FORK["broken"] is None:
                    try:
                        r = _run_forked_child(spec)
                    except ChildError:   # the child ran and failed on its own: its row says why
                        raise
                    except Exception as e:  # fork did not work here: this child and the rest start afresh
                        _FORK["broken"] = " | ".join(str(e).strip().splitlines()[-3:])
                        print(json.dumps({"spawn": "fork given up, exec from now on", "why": _FORK["broken"]}),
                              flush=True)
                if r is None:
                    r = _run_overhead_child(spec)
            except (RuntimeError, subprocess.TimeoutExpired) as e:  # one failed child costs its own numbers only
                msg = str(e).strip().splitlines()
                rows.append({"workload": wl, "round": rnd, "profiler": p, "error": " | ".join(msg[:1] + msg[-3:])})
                print(json.dumps(rows[-1]), flush=True)
                continue
            r["round"] = rnd
            raw.append(r)
            # every child's raw blocks on disk as soon as it ends: a run cut off by an outer timeout
            # keeps them (--reanalyse reads the file)
            _write_partial(args, raw, t_start)
            for v in (_multi_split(r) if "multi" in r else [r]):
                results.append(v)
                rows.append({"workload": wl, "round": rnd, "profiler": v["profiler"], "pairs": len(v["warm"]),
                             "warm_median": round(statistics.median(v["warm"]), 4),
                             "residue": round(statistics.median(v["unprof_ms"]) / statistics.median(v["cold_ms"]), 4)
                             if v["cold_ms"] else None,
                             "ms_per_step": round(statistics.median(v["unprof_ms"]), 4), "wall_s": v["wall_s"],
                             "kprof_state": v.get("kprof_state") or None})
                print(json.dumps(rows[-1]), flush=True)
        if not results:
            summary[wl] = {"error": "no child finished"}
            continue
        s = summarize(results, settle=args.settle_pairs, beta=_betas(args.probe_beta).get(wl))
        summary[wl] = _workload_summary(s, results)
        fp = fine_pairs_summary([r for r in raw if r.get("workload") == wl], args.settle_pairs)
        if fp:
            summary[wl]["fine_pairs"] = fp
        print(json.dumps({wl: {k: v for k, v in summary[wl].items() if k != "profilers"}}), flush=True)
        _print_profilers(wl, s)
    if ref_proc is not None:
        ref_proc.kill()
        os.unlink(ref_path)
    print(overhead_table(summary), flush=True)
    meta = {"summary": summary, "budget_s": args.budget, "elapsed_s": round(time.time() - t_start, 1),
            "spawn_fork_given_up": _FORK["broken"],
            "args": {k: v for k, v in vars(args).items()}, "children": raw}
    from bench.common import RESULTS
    write_results(args.name or ("profiler_overhead_rotated_quick" if args.quick else "profiler_overhead_rotated"),
                  rows, meta, results_dir=args.results_dir or RESULTS)
    return 0


def _results_dir():
    from bench.common import RESULTS
    os.makedirs(RESULTS, exist_ok=True)
    return RESULTS


def _write_partial(args, children, t_start):
    from bench.common import RESULTS
    name = args.name or ("profiler_overhead_rotated_quick" if args.quick else "profiler_overhead_rotated")
    d = args.results_dir or RESULTS
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, f"{name}.partial.json")
    with open(path + ".tmp", "w") as f:
        json.dump({"partial": True, "elapsed_s": round(time.time() - t_start, 1),
                   "args": {k: v for k, v in vars(args).items()}, "children": children}, f)
    os.replace(path + ".tmp", path)


def _workload_summary(s, results):
    """One workload's entry of the results file: :func:`summarize`'s per profiler, and the figures the
    issue asks for at its top."""
    return {"profilers": s,
                       "control_spread_%": s.get("none", {}).get("spread_%"),
                       "control_noise": s.get("_control_noise"),
                       "control_noise_probe_fit": s.get("_control_noise_probe_fit"),
                       "control_spread_steady_%": s.get("none", {}).get("spread_steady_%"),
                       "kprof_hl_steady_over_floor_%": s.get("kprof", {}).get("hl_steady_over_floor_%"),
                       "kprof_hl_steady_over_floor_ci_%": s.get("kprof", {}).get("hl_steady_over_floor_ci_%"),
                       "probe_beta_fitted": s.get("_probe_beta_fitted"),
                       "settle": s.get("_settle"),
                       "aa_control": s.get("_aa"),
                       "control_warm_ci": s.get("none", {}).get("warm_ci"),
                       "control_spread_ref_%": s.get("none", {}).get("spread_ref_%"),
                       "control_spread_probe_%": s.get("none", {}).get("spread_probe_%"),
                       "control_spread_probe_med_%": s.get("none", {}).get("spread_probe_med_%"),
                       "control_spread_probe_fit_%": s.get("none", {}).get("spread_probe_fit_%"),
                       "probe_beta": s.get("_probe_beta"),
                       "kprof_probe_fit_over_floor_%": s.get("kprof", {}).get("probe_fit_over_floor_%"),
                       "kprof_probe_fit_over_floor_ci_%": s.get("kprof", {}).get("probe_fit_over_floor_ci_%"),
                       "kprof_probe_over_floor_%": s.get("kprof", {}).get("probe_over_floor_%"),
                       "kprof_probe_over_floor_ci_%": s.get("kprof", {}).get("probe_over_floor_ci_%"),
                       "kprof_ref_over_floor_%": s.get("kprof", {}).get("ref_over_floor_%"),
                       "kprof_ref_over_floor_ci_%": s.get("kprof", {}).get("ref_over_floor_ci_%"),
                       "kprof_over_floor_%": s.get("kprof", {}).get("over_floor_%"),
                       "kprof_over_floor_ci_%": s.get("kprof", {}).get("over_floor_ci_%"),
                       "kprof_over_floor_raw_%": s.get("kprof", {}).get("over_floor_raw_%"),
                       "kprof_hl_over_floor_%": s.get("kprof", {}).get("hl_over_floor_%"),
                       "kprof_hl_over_floor_ci_%": s.get("kprof", {}).get("hl_over_floor_ci_%"),
                       "kprof_hl_probe_fit_over_floor_%": s.get("kprof", {}).get("hl_probe_fit_over_floor_%"),
                       "kprof_hl_probe_fit_over_floor_ci_%": s.get("kprof", {}).get("hl_probe_fit_over_floor_ci_%"),
                       # a multi-way run's comparisons (A/B, see _multi_split): the median ratio with its
                       # sign-test interval, raw and steady (each block's first segment left out)
                       "comparisons": {p: {"pairs": e["pairs"], "warm": e["warm"], "warm_sign_ci": e["warm_sign_ci"],
                                           "steady": e.get("warm_steady"), "steady_sign_ci": e.get("warm_steady_sign_ci")}
                                       for p, e in s.items() if "/" in p} or None,
                       "wall_s": round(sum({(r.get("round"), r["setup_s"], r["wall_s"]): r["wall_s"]
                                            for r in results}.values()), 1)}


def _print_profilers(wl, s):
    """Everything :func:`summarize` has per profiler, one long line each (the log's detail)."""
    for p, e in s.items():
            if p.startswith("_"):
                continue
            print(f"  {wl:8s} {p:18s} warm {e['warm']} {e['warm_ci']}  residue {e['residue']}  full {e['full']}  "
                  f"over floor {e.get('over_floor_%')} {e.get('over_floor_ci_%')}  spread {e['spread_%']}%  "
                  f"stop {e['stop_s_median']} s  bracket {e['warm_bracket']} {e['warm_bracket_ci']} over floor "
                  f"{e.get('bracket_over_floor_%')} {e.get('bracket_over_floor_ci_%')}  "
                  f"cpu {e['warm_cpu']} {e['warm_cpu_ci']}  aa {e['aa_per_process']}  "
                  f"wait/run {e['wait_over_run_median']}  others {e.get('cores_other_ms_median')} ms  "
                  f"steal {e.get('cores_steal_ms_median')} ms  MHz {e.get('mhz_range')}  loop {e['loop_stats']}  "
                  f"tail {e.get('tail_share_median')}/{e.get('tail_share_max')}  probe {e.get('probe_us_range')} "
                  f"corr {e.get('corr_unprof_probe')}  GPU MHz {e.get('gpu_mhz_range')}  "
                  f"threads {e.get('cpu_share_by_thread')}  instr {e.get('warm_instr')} {e.get('warm_instr_ci')} "
                  f"per process {e.get('instr_per_process')} over floor {e.get('instr_over_floor_%')} "
                  f"{e.get('instr_over_floor_ci_%')}  ref {e.get('warm_ref')} {e.get('warm_ref_ci')} spread "
                  f"{e.get('spread_ref_%')}% over floor {e.get('ref_over_floor_%')} {e.get('ref_over_floor_ci_%')} "
                  f"ref range {e.get('ref_rate_range')} corr {e.get('corr_unprof_ref')}  "
                  f"probe {e.get('warm_probe')} {e.get('warm_probe_ci')} per process "
                  f"{e.get('warm_probe_per_process')} spread {e.get('spread_probe_%')}% over floor "
                  f"{e.get('probe_over_floor_%')} {e.get('probe_over_floor_ci_%')}  probe-med {e.get('warm_probe_med')} "
                  f"spread {e.get('spread_probe_med_%')}% over floor {e.get('probe_med_over_floor_%')} "
                  f"{e.get('probe_med_over_floor_ci_%')}  probe-fit {e.get('warm_probe_fit')} "
                  f"{e.get('warm_probe_fit_ci')} per process {e.get('warm_probe_fit_per_process')} spread "
                  f"{e.get('spread_probe_fit_%')}% over floor {e.get('probe_fit_over_floor_%')} "
                  f"{e.get('probe_fit_over_floor_ci_%')} (beta {s.get('_probe_beta')})  probe/median {e.get('probe_rel_p10_p90')} "
                  f"seg~speed corr {e.get('corr_seg_speed')} slope {e.get('slope_seg_speed')}",
                  flush=True)


def _ci(ci):
    return ci if ci and ci[0] is not None else None


def _fmt(v, ci=None, pct=False):
    if v is None:
        return "-"
    u = "%" if pct else ""
    return f"{v:+.2f}{u}" + (f" [{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else "") if pct else \
        f"{v:.4f}" + (f" [{ci[0]:.4f}, {ci[1]:.4f}]" if ci else "")


def overhead_table(summary) -> str:
    """The results in short, per workload: the control's spread (raw and probe-fit), then per profiler its
    warm ratio (raw and probe-fit, sign-test intervals) and its cost over the floor (Hodges-Lehmann shift
    of the pair ratios, Mann-Whitney intervals; ``probe-fit`` scales each segment by its core's speed to
    the power chosen on the control alone)."""
    lines = []
    for wl, w in summary.items():
        s = w.get("profilers")
        if not s:
            lines.append(f"{wl}: {w.get('error')}")
            continue
        aa = s.get("_aa") or {}
        lines.append(f"{wl}: control spread {w.get('control_spread_%')}% raw, "
                     f"{w.get('control_spread_probe_fit_%')}% probe-fit (beta {w.get('probe_beta')}); "
                     f"A/A sd {aa.get('sd_%')}% raw, {aa.get('sd_probe_fit_%')}% probe-fit over {aa.get('processes')} processes")
        cn = w.get("control_noise") or {}
        if cn:
            lines.append(f"  control processes: pairs {cn['n']}, pair sd {cn['pair_sd_%']}%, se of each median "
                         f"{cn['se_%']}%: spread expected from that alone {cn['spread_expected_%']}%; between "
                         f"processes chi2 {cn['chi2']} on {cn['dof']} df, p {cn['p_between']}; pairs per process "
                         f"for a spread < 1% (p 0.8, two processes): {cn.get('pairs_for_1pct')}"
                         + (f"; first {(w.get('settle') or {}).get('pairs_dropped_per_process')} pairs of each "
                            f"process left out" if w.get("settle") else ""))
        cf = w.get("control_noise_probe_fit") or {}
        if cf:
            lines.append(f"  the same, probe-fit (beta {w.get('probe_beta')}, fitted on this run's control: "
                         f"{w.get('probe_beta_fitted')}): pair sd {cf['pair_sd_%']}%, se {cf['se_%']}%, expected "
                         f"spread {cf['spread_expected_%']}%, chi2 {cf['chi2']} on {cf['dof']} df, p {cf['p_between']}; "
                         f"pairs for < 1%: {cf.get('pairs_for_1pct')}")
        if w.get("control_spread_steady_%") is not None:
            lines.append(f"  steady (each block's first segment left out: the profiler's start-up): control spread "
                         f"{w['control_spread_steady_%']}%; per profiler: " + ", ".join(
                             f"{p} {e['warm_steady']:.4f}" + (f" ({e['hl_steady_over_floor_%']:+.2f}% "
                                                               f"{e.get('hl_steady_over_floor_ci_%')} over the floor)"
                                                               if e.get("hl_steady_over_floor_%") is not None else "")
                             for p, e in s.items() if not p.startswith("_") and e.get("warm_steady")))
        lines.append(f"  {'profiler':16s} {'pairs':>5s}  {'warm [sign 95%]':26s} {'probe-fit [sign 95%]':26s} "
                     f"{'over floor, HL [MW 95%]':26s} probe-fit over floor")
        for p, e in s.items():
            if p.startswith("_"):
                continue
            lines.append(f"  {p:16s} {e['pairs']:5d}  {_fmt(e['warm'], e.get('warm_sign_ci')):26s} "
                         f"{_fmt(e.get('warm_probe_fit'), e.get('warm_probe_fit_sign_ci')):26s} "
                         f"{_fmt(e.get('hl_over_floor_%'), e.get('hl_over_floor_ci_%'), True):26s} "
                         f"{_fmt(e.get('hl_probe_fit_over_floor_%'), e.get('hl_probe_fit_over_floor_ci_%'), True)}")
        if w.get("comparisons"):
            lines.append(f"  multi-way run, A/B in one process: {'A/B':22s} {'pairs':>5s}  {'raw [sign 95%]':26s} "
                         f"steady [sign 95%]")
            for p, c in w["comparisons"].items():
                lines.append(f"  {'':34s} {p:22s} {c['pairs']:5d}  {_fmt(c['warm'], c['warm_sign_ci']):26s} "
                             f"{_fmt(c['steady'], c['steady_sign_ci'])}")
        if w.get("fine_pairs"):
            lines.append(f"  fine, adjacent pairs: {'A/B':14s} {'blocks':>6s}  {'block [sign 95%]':26s} "
                         f"{'pairs':>5s}  pair [sign 95%]")
            for p, c in w["fine_pairs"].items():
                lines.append(f"  {'':21s} {p:14s} {c['blocks']:6d}  "
                             f"{_fmt(c['block_median'], _ci(c['block_sign_ci'])):26s} {c['pairs']:5d}  "
                             f"{_fmt(c['pair_median'], _ci(c['pair_sign_ci']))}")
    return "\n".join(lines)


def reanalyse(path: str, name=None, results_dir=None, settle=0, betas=None) -> int:
    """Summaries and the table again from a results file's raw children (``--reanalyse``): a new
    estimator on old runs without a GPU.  Several files, comma-separated: their children pooled (the same design
    in separate calls; each child's settle blocks still left out)."""
    paths = [p for p in path.split(",") if p]
    metas = [json.load(open(p)) for p in paths]
    meta = metas[0]
    children = [r for m in metas for r in (m.get("children") or [])]
    by = defaultdict(list)
    for r in children:
        by[r["workload"]].extend(_multi_split(r) if "multi" in r else [r])
    summary = {wl: _workload_summary(summarize(rs, settle=settle, beta=(betas or {}).get(wl)), rs)
               for wl, rs in by.items()}
    for wl in summary:
        fp = fine_pairs_summary([r for r in children if r.get("workload") == wl], settle)
        if fp:
            summary[wl]["fine_pairs"] = fp
    print(overhead_table(summary), flush=True)
    if name:
        from bench.common import RESULTS, write_results
        write_results(name, meta.get("rows") or [], {"summary": summary,
                                                     "reanalysed_from": ",".join(os.path.basename(p) for p in paths),
                                                     "source_environment": meta.get("environment"),
                                                     "children": children},
                      results_dir=results_dir or RESULTS)
    return 0


def _betas(text) -> dict:
    """``--probe-beta``: "train=0.15,encoder=0.7" -> {"train": 0.15, "encoder": 0.7}."""
    out = {}
    for part in (text or "").split(","):
        if part.strip():
            wl, _, b = part.partition("=")
            out[wl.strip()] = float(b)
    return out


def _cpu_set(text):
    """``--cpus``: "2-5" or "2,3,4" or "auto" (4 cores from the third, where the machine has 8 or
    more: away from core 0's interrupts; else none) or "none"."""
    if text in (None, "", "none"):
        return None
    avail = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    if text == "auto":
        return avail[2:6] if len(avail) >= 8 else None
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    bad = [c for c in out if c not in avail]
    if bad:
        raise SystemExit(f"--cpus: cores {bad} are not available here (available: {avail})")
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_child":
        wl, prof, out, steps, warmup, device, _ = argv[1:8]
        print(json.dumps(child(wl, prof, out, int(steps), int(warmup), device)))
        return 0
    if argv and argv[0] == "_overhead_child":
        print(json.dumps(child_overhead(json.loads(argv[1]))))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=["reconcile", "overhead"])
    ap.add_argument("--workloads", default=None)
    ap.add_argument("--profilers", default=None)
    ap.add_argument("--steps", type=int, default=None, help="steps per block (default: reconcile per workload; "
                    "overhead: calibrated to --block-s)")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--device", default=None)
    ap.add_argument("--name", default=None, help="results file name (bench/results/NAME.json)")
    ap.add_argument("--results-dir", default=None, help="folder of the results file (default bench/results)")
    ov = ap.add_argument_group("overhead")
    ov.add_argument("--budget", type=float, default=None, help="seconds for everything (default 450; --quick 90)")
    ov.add_argument("--block-s", type=float, default=None, help="seconds per block (default per workload)")
    ov.add_argument("--pre", type=int, default=2, help="unprofiled blocks before CUPTI is first started")
    ov.add_argument("--prime", type=int, default=1, help="profiled blocks after the cold ones, not counted")
    ov.add_argument("--min-pairs", type=int, default=4, help="pairs per process at least (even: AB and BA)")
    ov.add_argument("--max-pairs", type=int, default=1000)
    ov.add_argument("--cpus", default="auto", help="cores to pin each child to: auto, none, 2-5, 2,3,4")
    ov.add_argument("--threads", type=int, default=4, help="torch.set_num_threads in each child")
    ov.add_argument("--pin-threads", action="store_true", help="main thread on the first --cpus core, the "
                    "process's other threads on the rest (set again before each block)")
    ov.add_argument("--cpu-latency0", action="store_true", help="hold /dev/cpu_dma_latency at 0 in each "
                    "child (no deep C-states; root only; the row says if it took)")
    ov.add_argument("--buffer", default="1M", help="CUPTI buffer size for floor and kprof (0: their defaults): "
                    "small enough that buffers complete inside every block")
    ov.add_argument("--ref-cpu", type=int, default=None, help="core for a reference process that counts a fixed "
                    "loop through the whole run; each block records that core's speed during it, and the summary "
                    "adds ratios at a fixed host speed (warm_ref, spread_ref_%%)")
    ov.add_argument("--step-probe", type=int, default=None, metavar="ITERS",
                    help="time a fixed pure-Python loop of ITERS iterations (~50 ns each) on the main thread "
                    "between segments of each block (0: off; default 6000, ~0.3 ms, on a GPU, 0 on CPU); the "
                    "summary adds ratios with each segment's time scaled by its core's speed around it "
                    "(warm_probe, warm_probe_fit, spread_probe_fit_%%); raw times are kept")
    ov.add_argument("--probe-seg-ms", type=float, default=3.0, help="--step-probe: steps per segment such that "
                    "a segment takes about this long (at least one step)")
    ov.add_argument("--settle-pairs", type=int, default=4, metavar="K",
                    help="leave each process's first K pairs out of every statistic (raw blocks are kept; odd K "
                    "counts as K+1; 0: all pairs); the children run K more pairs than --min-pairs")
    ov.add_argument("--probe-beta", default="", metavar="WL=B,...",
                    help="probe-fit's exponent per workload, fixed before the run (e.g. train=0.15), instead of "
                    "the one fitted on the run's own control (which makes the control's probe-fit spread "
                    "optimistic); the fitted one is still reported")
    ov.add_argument("--against", default=None, metavar="PROFILER",
                    help="the other block of each pair runs under this kprof variant, floor or Proton instead "
                         "of unprofiled (e.g. --profilers kprof-nohook --against kprof, --profilers kprof "
                         "--against floor: kprof over the floor in one process, or --against proton): two "
                         "configurations compared block by block in one process; `warm` is then the ratio to it "
                         "and a closing control is not added; several, comma-separated (e.g. floor,proton,none: "
                         "'none' unprofiled): a multi-way run, rounds of one block each in a rotating order, "
                         "every pair of them compared (A/B) and none/none as the control")
    ov.add_argument("--shares", default=None, metavar="WL=X,...",
                    help="each workload's share of --budget (default encoder=0.4,train=0.35,tiny=0.25; a workload "
                    "not named keeps its default)")
    ov.add_argument("--fine", default=None, metavar="MS|WL=MS,...",
                    help="one kprof session per process, its segments of about MS ms (at least one step) switched "
                    "between the states kprof, floor (kprof's activity kinds only), none and none2 (all off; the "
                    "control) -- a fine interleave: each block's states ran within a few ms of each other, on the "
                    "same core speed; every pair of states is compared block by block (--profilers kprof only); "
                    "per workload as WL=MS,... (a workload not named runs without --fine: not allowed)")
    ov.add_argument("--fine-cycles", type=int, default=1, metavar="N",
                    help="--fine: a block is N times 26 segments (an order in which every state follows every other "
                    "once, then the same reversed)")
    ov.add_argument("--fine-order", default="circuit", choices=["circuit", "pairs", "swap", "solo"],
                    help="--fine: circuit (default): blocks of 26 segments in which every state follows every other; "
                    "pairs: blocks of 8 adjacent pairs (kprof/floor and none/none2, each order in half of them), "
                    "compared inside each pair (fine_pair_ratios; the summary's fine_pairs), 3 untimed steps at a "
                    "block's start; swap (with --against proton): the same pairs, kprof/Proton and none/none2, each "
                    "profiler segment bracketed by its own start and stop (untimed; --fine-settle's steps after each "
                    "start, at least one), the switches into none/none2 padded to the median profiler-to-profiler "
                    "switch (_swap_rounds); solo (--profilers kprof,proton, no --against): swap's pairs with "
                    "one profiler a process, P/base and none/none2 (base unprofiled), each process's P/base its "
                    "overhead in its own state, processes of each profiler interleaved by --rounds")
    ov.add_argument("--fine-sync", type=int, default=1, choices=[0, 1],
                    help="--fine: 1 (default): a synchronize closes every segment inside its time (no GPU work "
                    "queued across a segment boundary; on a GPU-bound step each segment then starts with an idle "
                    "GPU, which exposes host work a pipelined run would hide); 0: no synchronize, the GPU queue "
                    "runs on from segment to segment (what it carries over falls on every state alike, by the "
                    "order)")
    ov.add_argument("--fine-settle", default="0", metavar="MS|WL=MS,...",
                    help="--fine: untimed steps for about MS ms (at least one step; 0: none) after each switch, before "
                    "the segment's timed steps (R3, "
                    "2026-11-29: switching kprof on left ~170 us of after-effect in the segment it opened, on the "
                    "tiny loop at 3- and 12-ms segments alike; a profiled run switches once)")
    ov.add_argument("--fine-states", default=",".join(FINE_STATES), metavar="S1,S2,S3,S4",
                    help="--fine: the four states, kprof first (default kprof,floor,none,none2; none and none2 give "
                    "the control); others take kprof apart: api (the floor plus launch API records), kprof-noapi, "
                    "kprof-nocb, kprof-nosess (kprof without its API records, callbacks or session)")
    ov.add_argument("--grace", type=float, default=40.0, help="no child starts later than this past --budget")
    ov.add_argument("--spawn", choices=["exec", "fork"], default="exec",
                    help="how each child process starts (overhead and reconcile): exec (a new interpreter) or fork (from a server that "
                    "has imported torch, CUDA untouched: no import per child; falls back to exec if it fails)")
    ov.add_argument("--quick", action="store_true", help="smoke run: the tiny workload (unless --workloads), one "
                    "round, short blocks, --budget 90")
    ov.add_argument("--reanalyse", metavar="JSON[,JSON...]", default=None, help="no run: the summaries and the table "
                    "again from an overhead results file's raw blocks (written to --name if given); several files: "
                    "their processes pooled")
    args = ap.parse_args(argv)
    if args.mode == "overhead" and args.reanalyse:
        return reanalyse(args.reanalyse, args.name, args.results_dir, args.settle_pairs, _betas(args.probe_beta))
    import torch
    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.mode == "reconcile":
        args.workloads = args.workloads or "encoder,train"
        args.profilers = args.profilers or "cupti,torch,kprof,proton"
        args.rounds = args.rounds or 2
        if args.spawn == "fork":
            _start_forkserver()
        return reconcile(args)
    from profiler.options import parse_size
    args.buffer = 0 if str(args.buffer) == "0" else parse_size(args.buffer, "--buffer")
    args.workloads = args.workloads or ("tiny" if args.quick else "encoder,train,tiny")
    default = "none,floor,floor-raw,kprof,kprof-ext,kprof-split,kprof-nohook,proton" \
        if args.device == "cuda" \
        else "none,kprof,kprof-ext,kprof-deferred"
    args.profilers = args.profilers or default
    if args.against:   # kprof variants and the two floors: they (re-)register their own CUPTI callbacks per start
        others = args.against.split(",")
        # a multi-way run (several --against) may hold unprofiled blocks too: "none"
        bad = [p for p in [*others, *args.profilers.split(",")]
               if p and p not in AGAINST_OK and not (p == "none" and len(others) > 1 and p in others)]
        if bad:
            ap.error(f"--against compares {', '.join(sorted(AGAINST_OK))} only; not: {', '.join(bad)}")
    if args.fine:
        for w in args.workloads.split(","):
            if w and not _per_workload(args.fine, w, float, "--fine"):
                ap.error(f"--fine has no segment length for {w}")
            _per_workload(args.fine_settle, w, float, "--fine-settle")
        if args.fine_order == "swap":
            if args.against != "proton" or [p for p in args.profilers.split(",") if p] != ["kprof"] \
                    or args.device != "cuda":
                ap.error("--fine-order swap runs --profilers kprof --against proton, on a GPU")
        elif args.fine_order == "solo":
            ps = [p for p in args.profilers.split(",") if p]
            if args.against or not ps or set(ps) - {"kprof", "proton"} or args.device != "cuda":
                ap.error("--fine-order solo runs --profilers kprof and/or proton (a process each), without "
                         "--against, on a GPU")
        elif args.against or [p for p in args.profilers.split(",") if p] != ["kprof"] or args.device != "cuda":
            ap.error("--fine runs --profilers kprof alone, without --against, on a GPU")
        args.step_probe = 0
    args.rounds = args.rounds or 1
    args.budget = args.budget or (90.0 if args.quick else 450.0)
    if args.step_probe is None:   # on the GPU hosts the probe halved the noise or better (2026-11-28)
        args.step_probe = 6000 if args.device == "cuda" else 0
    return overhead(args)


if __name__ == "__main__":
    sys.exit(main())
