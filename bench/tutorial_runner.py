"""Run one Triton tutorial under real Triton or under kernelc and record what it measured.

    python3 bench/tutorial_runner.py --impl kernelc|triton --json OUT.json [--bench-points N [--spread]] tutorial.py

Used by ``bench/triton_tutorials.py`` (one process per tutorial and implementation). Records every
``triton.testing`` benchmark table the tutorial produced (``Mark.run`` is wrapped to also return its
DataFrames; ``--bench-points`` keeps N x values: the first N, or with ``--spread`` N spread evenly from the
first to the last), the wall time of the first call of each
kernel object (compile, and autotune where there is one, with a device sync), the script's exit status
and its output's last lines. Writes the JSON even when the tutorial fails.

Where the time goes (``compile`` in the JSON), for either implementation: how many kernels were compiled
and how many came from the on-disk cache (``failed``: how many of them raised, e.g. a config too large
for the device; kernelc's disk cache remembers those, so a warm cache answers them too), the wall seconds spent in compiles (summed per compile: kernelc's
autotuner compiles on several threads at once, so its sum can exceed the elapsed time), and the wall
seconds spent choosing autotune configs (compiles of candidates included; ``autotune_compile_s`` says how
much of it was compiling). ``--dry-run`` runs the tutorial without a GPU (``bench/tutorial_dryrun.py``):
every kernel compiles for an H100 into the compile cache, nothing launches.
"""
from __future__ import annotations

import argparse
import glob
import io
import json
import os
import re
import runpy
import shutil
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _Tee(io.TextIOBase):
    def __init__(self, stream, keep=20000):
        self.stream, self.buf, self.keep = stream, [], keep

    def write(self, s):
        self.stream.write(s)
        self.buf.append(s)
        if sum(len(b) for b in self.buf) > 4 * self.keep:
            self.buf = ["".join(self.buf)[-self.keep:]]
        return len(s)

    def flush(self):
        self.stream.flush()

    def tail(self):
        return "".join(self.buf)[-self.keep:]


def pick_points(xs, n, spread=False):
    """``n`` of the x values: the first ``n``, or (``spread``) ``n`` evenly spaced ones, first and last included."""
    xs = list(xs)
    if not n or n >= len(xs):
        return xs
    if not spread:
        return xs[:n]
    if n == 1:
        return xs[:1]
    return [xs[round(i * (len(xs) - 1) / (n - 1))] for i in range(n)]


def keep_x_values(xs, wanted):
    """The x values of ``xs`` named in ``wanted`` (strings, compared with ``str(x)``), in the table's order; a table
    with none of them keeps its first ``len(wanted)``."""
    xs = list(xs)
    names = {str(w).strip() for w in wanted}
    kept = [x for x in xs if str(x) in names]
    return kept or xs[:len(names)]


def _sync():
    try:
        import torch
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    except Exception:
        pass


def _track_tuners(cls, tuners: list) -> None:
    """Keep every autotuner that runs, to report the configs it chose."""
    orig = cls.run

    def run(self, *args, **kwargs):
        if not any(t is self for t in tuners):
            tuners.append(self)
        return orig(self, *args, **kwargs)
    cls.run = run


def _chosen_configs(tuners: list) -> dict:
    """Per autotuned kernel, the config chosen for each key (Triton's and kernelc's ``Autotuner.cache``:
    key -> Config), as strings: which kernel each benchmark point ran."""
    out = {}
    for t in tuners:
        name = getattr(t, "__name__", None) or getattr(getattr(t, "base_fn", None), "__name__", "?")
        # kernelc's ``picks`` also holds keys that left its cache (tensors keyed by identity that died)
        picks = getattr(t, "picks", None) if isinstance(getattr(t, "picks", None), dict) else None
        for key, cfg in dict(picks or getattr(t, "cache", {}) or {}).items():
            out.setdefault(name, {})[str(key)] = str(cfg)
    return out


def _tuning_timings(tuners: list) -> dict:
    """Per autotuned kernel, each candidate's time (ms) in its last tuning (``configs_timings``, set by Triton's
    and kernelc's autotuners): why a tuner chose what it chose."""
    out = {}
    for t in tuners:
        name = getattr(t, "__name__", None) or getattr(getattr(t, "base_fn", None), "__name__", "?")
        timings = getattr(t, "configs_timings", None)
        if isinstance(timings, dict):
            out[name] = {str(c): (v if isinstance(v, (int, float)) else list(v) if isinstance(v, (list, tuple))
                                  else str(v)) for c, v in timings.items()}
    return out


def _kernel_name(obj) -> str:
    return (getattr(obj, "__name__", None) or getattr(getattr(obj, "fn", None), "__name__", None)
            or getattr(obj, "name", None) or "?")


class GcLog:
    """The garbage collector's runs in the process: per generation how many and their seconds, the longest, and the
    runs of at least ``LONG_S`` that fell inside a ``do_bench`` call (``in_do_bench``: the table, the call's index in
    it, the generation, seconds). A mean-reading table (02, 06) takes a pause inside its timed loop into its reading:
    one 20 ms pause in do_bench's ~100 ms of samples doubles a 10 us call's mean."""
    LONG_S = 0.002
    KEEP = 100

    def __init__(self):
        self.per_gen, self.max_s, self.long = {}, 0.0, []
        self.table, self.call, self._t0, self._depth = None, None, None, 0

    def install(self):
        import gc
        gc.callbacks.append(self._cb)

    def _cb(self, phase, info):
        if phase == "start":
            self._t0 = time.perf_counter()
            return
        if self._t0 is None:
            return
        dt, self._t0 = time.perf_counter() - self._t0, None
        g = str(info.get("generation"))
        n, tot = self.per_gen.get(g, (0, 0.0))
        self.per_gen[g] = (n + 1, tot + dt)
        self.max_s = max(self.max_s, dt)
        if self._depth and dt >= self.LONG_S and len(self.long) < self.KEEP:
            self.long.append({"table": self.table, "call": self.call, "generation": int(g), "s": round(dt, 4)})

    def wrap_do_bench(self, testing, tuning=lambda: False):
        """Count ``testing.do_bench`` calls per table and mark the time inside them (the tutorials look the function
        up on the module at each call). Calls while ``tuning()`` are an autotuner's (Triton's takes its benchmarker
        from this module): passed through, not counted."""
        orig = testing.do_bench
        log = self

        def do_bench(*args, **kwargs):
            if tuning():
                return orig(*args, **kwargs)
            log.call = 0 if log.call is None else log.call + 1
            log._depth += 1
            try:
                return orig(*args, **kwargs)
            finally:
                log._depth -= 1
        testing.do_bench = do_bench

    def summary(self):
        return {"runs": {g: {"n": n, "s": round(t, 4)} for g, (n, t) in sorted(self.per_gen.items())},
                "max_s": round(self.max_s, 4), "in_do_bench": self.long}


class StopAfterFirstCalls(BaseException):
    """Raised once ``--stop-after-first-calls`` outermost first calls are recorded (a cold run that measures only
    them: tutorial 06's first ``_attn_fwd`` compiles and tunes its configs, and what follows is not needed)."""


def _wrap_first_calls(classes, record, direct=(), stop_after=None):
    """Time the first launch of every kernel object: ``kernel[grid](...)`` through each class's
    ``__getitem__``; nested first calls (an autotuner's inner kernel) are recorded with their depth.

    ``direct``: (class, method) pairs whose first call per object is timed the same way, for host code that
    compiles ahead of its launches (tutorial 02: ``kernel.warmup(...)``, then ``_init_handles()`` and
    ``compiled[grid](...)`` on what it returned). A kernel's first call is then the sum of these.
    ``stop_after``: raise :class:`StopAfterFirstCalls` when that many outermost first calls are recorded."""
    seen = set()
    depth = [0]

    def timed(self, key, kind, call):
        if key in seen:
            return call()
        seen.add(key)
        _sync()
        depth[0] += 1
        t0 = time.perf_counter()
        try:
            return call()
        finally:
            _sync()
            depth[0] -= 1
            record.append({"kernel": _kernel_name(self), "kind": kind, "depth": depth[0],
                           "first_call_s": time.perf_counter() - t0})
            if stop_after and depth[0] == 0 and sum(1 for r in record if r["depth"] == 0) >= stop_after:
                raise StopAfterFirstCalls()

    for cls in classes:
        orig = cls.__dict__.get("__getitem__")
        if orig is None:
            continue

        def make(orig, kind):
            def __getitem__(self, grid):
                launcher = orig(self, grid)
                if id(self) in seen:
                    return launcher

                def first(*args, **kwargs):
                    return timed(self, id(self), kind, lambda: launcher(*args, **kwargs))
                return first
            return __getitem__
        cls.__getitem__ = make(orig, cls.__name__)
    for cls, meth in direct:
        # the class that defines it: Triton 3.6's ``warmup`` is KernelInterface's, not JITFunction's (timed on
        # JITFunction alone, Triton's compile in tutorial 02's ``warmup`` went uncounted until session 21)
        cls = next((c for c in cls.__mro__ if meth in c.__dict__), None)
        orig = cls.__dict__.get(meth) if cls is not None else None
        if orig is None:
            continue

        def make_direct(orig, kind):
            def method(self, *args, **kwargs):
                return timed(self, (id(self), kind), kind, lambda: orig(self, *args, **kwargs))
            return method
        setattr(cls, meth, make_direct(orig, f"{cls.__name__}.{meth}"))


class _Accounting:
    """Counts compiles (cache hits and misses) and the time spent compiling and autotuning."""

    def __init__(self):
        self.d = {"kernels": 0, "cache_hits": 0, "cache_misses": 0, "failed": 0, "compile_s": 0.0, "hit_load_s": 0.0,
                  "autotune_s": 0.0, "autotune_compile_s": 0.0, "misses": [], "per_compile": []}
        self.tuning = 0

    def compiled(self, name, seconds, hit, failed=False, config=None):
        """One compile request: ``hit`` if the disk cache answered it, ``failed`` if it raised (a config
        that does not fit the device, a failed static_assert: counted in ``kernels`` too). ``config``: what
        was compiled (constexprs, warps, stages, argument types), kept per compile with its seconds for the
        first 400 compiles (``per_compile``: which configs a tutorial's compile time is spent on)."""
        d = self.d
        if len(d["per_compile"]) < 400:
            d["per_compile"].append({"kernel": name, "s": round(seconds, 3), "hit": bool(hit), "failed": bool(failed),
                                     "config": config})
        d["kernels"] += 1
        d["failed"] += bool(failed)
        if hit:
            d["cache_hits"] += 1
            d["hit_load_s"] += seconds
        else:
            d["cache_misses"] += 1
            d["compile_s"] += seconds
            if len(d["misses"]) < 50:
                d["misses"].append(name)
        if self.tuning:
            d["autotune_compile_s"] += seconds

    def wrap_tuning(self, owner, attr):
        orig = getattr(owner, attr)
        acct = self

        def tuned(*args, **kwargs):
            acct.tuning += 1
            t0 = time.perf_counter()
            try:
                return orig(*args, **kwargs)
            finally:
                acct.tuning -= 1
                if not acct.tuning:
                    acct.d["autotune_s"] += time.perf_counter() - t0
        setattr(owner, attr, tuned)


def _count_triton_compiles(acct: _Accounting) -> None:
    import triton.compiler
    from triton import knobs
    orig = triton.compiler.compile
    last = {}

    def listener(src=None, metadata=None, metadata_group=None, times=None, cache_hit=False, **_):
        last["hit"] = bool(cache_hit)

    knobs.compilation.listener = listener

    def compile(src, *args, **kwargs):
        last.clear()
        t0 = time.perf_counter()
        try:
            k = orig(src, *args, **kwargs)
        except Exception:  # (a config that does not compile costs its time too)
            acct.compiled(getattr(src, "name", "?"), time.perf_counter() - t0, False, failed=True,
                          config=_triton_config(src, kwargs))
            raise
        if not getattr(k, "dry_run_skipped", False):  # (another dry-run process compiles that one)
            acct.compiled(getattr(src, "name", "?"), time.perf_counter() - t0, last.get("hit", False),
                          config=_triton_config(src, kwargs))
        return k
    triton.compiler.compile = compile  # what JITFunction.create_binder picks up
    from triton.runtime import autotuner
    acct.wrap_tuning(autotuner.Autotuner, "_bench")


def _triton_config(src, kwargs) -> dict:
    """A Triton compile's constexprs (by name), warps, stages and argument types, for ``per_compile``."""
    try:
        fn = getattr(src, "fn", None)
        names = list(getattr(fn, "arg_names", []) or [])
        cx = {}
        for k, v in (getattr(src, "constexprs", None) or {}).items():
            i = k[0] if isinstance(k, tuple) and len(k) == 1 else k
            cx[names[i] if isinstance(i, int) and i < len(names) else str(k)] = repr(v) if not isinstance(
                v, (int, float, bool, str)) else v
        opts = kwargs.get("options") or {}
        sig = {k: str(v) for k, v in (getattr(src, "signature", None) or {}).items() if str(v) != "constexpr"}
        return {"constexprs": cx, "num_warps": opts.get("num_warps"), "num_stages": opts.get("num_stages"),
                "signature": sig}
    except Exception as e:  # the record is a diagnostic; never fail a compile over it
        return {"error": repr(e)}


def _kernelc_config(args, kwargs) -> dict:
    """A kernelc compile's constexprs, warps, stages and argument types (``cached_compile``'s arguments)."""
    try:
        sig, cx, _, eq1, w, s = (list(args) + [None] * 6)[:6]
        return {"constexprs": {k: v if isinstance(v, (int, float, bool, str)) else repr(v)
                               for k, v in (cx or {}).items()}, "num_warps": w, "num_stages": s,
                "signature": {k: str(v) for k, v in (sig or {}).items()}, "equal_to_1": list(eq1 or ())}
    except Exception as e:
        return {"error": repr(e)}


def _count_kernelc_compiles(acct: _Accounting) -> None:
    from kernelc.runtime import cache, tuning
    orig = cache.cached_compile

    def cached_compile(fn, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            ck = orig(fn, *args, **kwargs)
        except Exception as e:  # (an out-of-resources failure the disk cache remembered is a hit)
            acct.compiled(getattr(fn, "__name__", "?"), time.perf_counter() - t0, getattr(e, "from_cache", False),
                          failed=True, config=dict(_kernelc_config(args, kwargs), error=type(e).__name__))
            raise
        acct.compiled(getattr(fn, "__name__", "?"), time.perf_counter() - t0, "disk_cache_load" in ck.timings,
                      config=dict(_kernelc_config(args, kwargs), timings={k: round(v, 3) for k, v in ck.timings.items()
                                                                          if not k.startswith("pass.")}))
        return ck
    cache.cached_compile = cached_compile  # launcher.compile_for imports it at each call
    acct.wrap_tuning(tuning, "select_config")  # the autotuner imports it at each call


# kprof names a kernel's frame "<launch_metadata name or kernel> [grid 132x1x1, warps 8, stages 3, smem 160KiB]";
# Proton names it by the launch_metadata name alone. Without the suffix the two profiles' frames line up.
_KPROF_LAUNCH_SUFFIX = re.compile(r" \[grid \d+x\d+x\d+, warps \d+, stages \d+(?:, smem \d+(?:KiB|B))?\]$")
# Proton files GPU work done by a launch_metadata function under this frame; it is not the kernel's
LAUNCH_METADATA_FRAME = "__proton_launch_metadata"


def frame_name(name: str) -> str:
    """A profile frame's name as Proton writes it (kprof's launch-configuration suffix removed)."""
    return _KPROF_LAUNCH_SUFFIX.sub("", name)


def read_hatchet(path: str) -> dict:
    """Per top-level frame of a Proton-format profile (Triton's Proton and kprof write the same format;
    tutorial 09 times its kernels this way instead of with ``triton.testing`` tables): summed over the
    frame's subtree, ``time_ns``, ``count`` (kernel launches), ``flops`` (per ``flops*`` metric),
    ``bytes``, and ``tflops`` (all flops over the time, TFLOP/s, as the viewer's ``tflop<w>/s``);
    ``kernels``: the GPU kernels under a scope (cuBLAS's, torch's). Frames are named as Proton names
    them (``frame_name``); frames of the same name add up.

    Kernels only: kprof also records the memsets and memcpys inside a scope (marked ``"kprof": {"kind":
    "memset"}``; Proton 3.6 records kernels only). In 09 cuBLAS does a 4-byte memset per call, so
    counting it made kprof's cuBLAS and torch frames hold twice Proton's launches and 0.8% more time.
    They are summed apart, as ``memory_ops`` (count, time)."""
    with open(path) as f:
        data = json.load(f)
    root = data[0] if isinstance(data, list) else data

    def total(node, acc, top):
        m = node.get("metrics") or {}
        if ((node.get("kprof") or {}).get("kind") or "").startswith(("memset", "memcpy")):
            acc["memory_ops"]["count"] += float(m.get("count", 0) or 0)
            acc["memory_ops"]["time_ns"] += float(m.get("time (ns)", 0) or 0)
            return
        acc["time_ns"] += float(m.get("time (ns)", 0) or 0)
        acc["count"] += float(m.get("count", 0) or 0)
        acc["bytes"] += float(m.get("bytes", 0) or 0)
        for k, v in m.items():
            if k.startswith("flops") and isinstance(v, (int, float)) and v:
                acc["flops"][k] = acc["flops"].get(k, 0.0) + float(v)
        if node is not top and m.get("count"):
            name = frame_name((node.get("frame") or {}).get("name", "?"))
            if name not in acc["kernels"] and len(acc["kernels"]) < 8:
                acc["kernels"].append(name)
        for ch in node.get("children") or ():
            if (ch.get("frame") or {}).get("name") != LAUNCH_METADATA_FRAME:
                total(ch, acc, top)
    out = {}
    for ch in root.get("children") or ():
        name = frame_name((ch.get("frame") or {}).get("name", "?"))
        if name == LAUNCH_METADATA_FRAME:
            continue
        acc = out.setdefault(name, {"time_ns": 0.0, "count": 0.0, "bytes": 0.0, "flops": {}, "kernels": [],
                                    "memory_ops": {"count": 0.0, "time_ns": 0.0}})
        total(ch, acc, ch)
    for acc in out.values():
        fl = sum(acc["flops"].values())
        acc["tflops"] = fl / acc["time_ns"] / 1e3 if fl and acc["time_ns"] else None
    return out


def _capture_printed_trees(out: dict) -> None:
    """Keep what the tutorial's ``triton.profiler.viewer.print_tree`` prints (09's results table), in
    ``printed_trees``, under either implementation. It still prints."""
    import contextlib
    try:
        import triton.profiler.viewer as viewer
    except Exception:  # (a Triton without Proton's viewer: the tutorial fails there by itself)
        return
    orig = viewer.print_tree

    def print_tree(*args, **kwargs):
        buf = io.StringIO()
        try:
            with contextlib.redirect_stdout(buf):
                return orig(*args, **kwargs)
        finally:
            text = buf.getvalue()
            sys.stdout.write(text)
            out.setdefault("printed_trees", []).append(text[-20000:])
    viewer.print_tree = print_tree


def _mentions(path: str, text: str) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return text in f.read()
    except OSError:
        return False


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", choices=("kernelc", "triton"), required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--bench-points", type=int)
    ap.add_argument("--spread", action="store_true", help="bench points spread over the x range, not the first N")
    ap.add_argument("--x-values", help="comma-separated x values to keep in every benchmark table (those the table has; "
                                       "a table with none of them keeps its first as many); overrides --bench-points")
    ap.add_argument("--stop-after-first-calls", type=int, metavar="N",
                    help="end the tutorial once N outermost first calls are timed (exit status 0, 'stopped' in the JSON)")
    ap.add_argument("--tables", help="I/N: run only the benchmark tables whose index is I modulo N (a dry run's "
                                     "share of the work when N processes warm the cache in parallel)")
    ap.add_argument("--kernels", help="I/N with --dry-run: compile only the kernels whose identity hashes to I "
                                      "modulo N (N processes split the compiles of one run between them)")
    ap.add_argument("--dry-run", action="store_true",
                    help="no GPU: compile every kernel for an H100 into the cache, launch nothing")
    ap.add_argument("--keep-profiles", help="copy the profiles (*.hatchet) the tutorial writes into this directory")
    ap.add_argument("tutorial")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    out = {"impl": a.impl, "tutorial": os.path.basename(a.tutorial), "benchmarks": [], "first_calls": [],
           "table_errors": []}
    tee_out, tee_err = _Tee(sys.stdout), _Tee(sys.stderr)
    sys.stdout, sys.stderr = tee_out, tee_err
    t_start = time.perf_counter()
    wall_start = time.time() - 1.0
    rc = 0
    acct = _Accounting()
    out["compile"] = acct.d
    gclog = GcLog()
    tuners: list = []
    mode = None
    try:
        if a.impl == "kernelc":
            sys.path.insert(0, ROOT)
            import kernelc.compat
            kernelc.compat.install()
        import triton
        import triton.testing
        if a.dry_run:
            sys.path.insert(0, ROOT)
            from bench import tutorial_dryrun
            kshard = tuple(int(x) for x in a.kernels.split("/")) if a.kernels else None
            (tutorial_dryrun.install_kernelc if a.impl == "kernelc" else tutorial_dryrun.install_triton)(kshard)
            mode = tutorial_dryrun.torch_function_mode()
            mode.__enter__()
            out["dry_run"] = True
        if a.impl == "kernelc":
            _count_kernelc_compiles(acct)
        else:
            _count_triton_compiles(acct)
        out["triton_version"] = triton.__version__
        out["module_file"] = getattr(sys.modules.get("kernelc" if a.impl == "kernelc" else "triton"), "__file__", None)
        if not a.dry_run:
            gclog.install()
            gclog.wrap_do_bench(triton.testing, lambda: acct.tuning > 0)
        orig_run = triton.testing.Mark.run
        shard = tuple(int(x) for x in a.tables.split("/")) if a.tables else None
        seen_tables = [0]

        def run(self, *args, **kwargs):
            benches = [self.benchmarks] if isinstance(self.benchmarks, triton.testing.Benchmark) else self.benchmarks
            if shard:
                mine = []
                for b in benches:
                    if seen_tables[0] % shard[1] == shard[0]:
                        mine.append(b)
                    seen_tables[0] += 1
                benches = mine
                if not benches:
                    return None
                self.benchmarks = benches
            if a.x_values:
                for b in benches:
                    b.x_vals = keep_x_values(b.x_vals, a.x_values.split(","))
            elif a.bench_points:
                for b in benches:
                    b.x_vals = pick_points(b.x_vals, a.bench_points, a.spread)
            kwargs["return_df"] = True
            # one table at a time: a table whose kernel fails (e.g. out of shared memory) is recorded with
            # its error and the others still run; the first error is raised at the end (the exit status
            # stays the tutorial's)
            original, failed = self.benchmarks, None
            try:
                for b in benches:
                    self.benchmarks = b
                    gclog.table, gclog.call = b.plot_name, None
                    t0 = time.perf_counter()
                    try:
                        df = orig_run(self, *args, **kwargs)
                    except Exception as e:
                        traceback.print_exc()
                        err = f"{type(e).__name__}: {e}"[:2000]
                        out["table_errors"].append({"plot_name": b.plot_name, "error": err})
                        failed = failed or e
                        continue
                    df = df[0] if isinstance(df, list) else df
                    out["benchmarks"].append({"plot_name": b.plot_name, "x_names": list(b.x_names), "ylabel": b.ylabel,
                                              "columns": [str(c) for c in df.columns],
                                              "rows": json.loads(df.to_json(orient="values")),
                                              "seconds": time.perf_counter() - t0})
            finally:
                self.benchmarks = original
            if failed is not None:
                raise failed
            return None
        triton.testing.Mark.run = run
        if a.impl == "kernelc":
            from kernelc.runtime import autotuner, compiled, jit
            classes = [jit.JITFunction, jit.KernelInterface, autotuner.Autotuner, autotuner.Heuristics,
                       compiled.WarmedKernel]
            warmed = compiled.WarmedKernel
        else:
            from triton.runtime import autotuner, jit
            from triton.compiler import compiler as tcompiler
            classes = [jit.KernelInterface, jit.JITFunction, autotuner.Autotuner, autotuner.Heuristics,
                       tcompiler.CompiledKernel]
            warmed = tcompiler.CompiledKernel
        _wrap_first_calls(classes, out["first_calls"],
                          direct=[(jit.JITFunction, "warmup"), (warmed, "_init_handles")],
                          stop_after=a.stop_after_first_calls)
        if not a.dry_run and _mentions(a.tutorial, "triton.profiler"):
            _capture_printed_trees(out)
        _track_tuners(autotuner.Autotuner, tuners)
        sys.argv = [a.tutorial, *a.args]
        runpy.run_path(a.tutorial, run_name="__main__")
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except StopAfterFirstCalls:
        out["stopped"] = f"after {a.stop_after_first_calls} first calls"
    except BaseException:
        traceback.print_exc()
        rc = 1
    finally:
        if mode is not None:
            mode.__exit__(None, None, None)
            from bench import tutorial_dryrun
            out["compile"]["requests"] = list(tutorial_dryrun.REQUESTS)
        if not a.dry_run:
            for hp in sorted(glob.glob("*.hatchet")):  # profiles the tutorial wrote to its working directory
                try:
                    if os.path.getmtime(hp) >= wall_start:
                        out.setdefault("profiles", {})[hp] = read_hatchet(hp)
                        if a.keep_profiles:
                            os.makedirs(a.keep_profiles, exist_ok=True)
                            shutil.copy(hp, a.keep_profiles)
                except (OSError, ValueError, AttributeError, TypeError) as e:
                    out.setdefault("profiles", {})[hp] = {"error": f"{type(e).__name__}: {e}"}
        out["gc"] = gclog.summary()
        out["autotune"] = _chosen_configs(tuners)
        out["autotune_timings"] = _tuning_timings(tuners)
        sys.stdout, sys.stderr = tee_out.stream, tee_err.stream
        out.update(rc=rc, seconds=time.perf_counter() - t_start, stdout_tail=tee_out.tail()[-4000:],
                   stderr_tail=tee_err.tail()[-4000:],
                   mismatch="❌" in tee_out.tail())
        tmp = a.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(out, f, indent=1)
        os.replace(tmp, a.json)
    return rc


if __name__ == "__main__":
    sys.exit(main())
