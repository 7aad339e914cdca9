"""``PCSampler``: CUPTI PC sampling around a piece of a program, with or without a kprof session.

::

    from profiler.pcsampling import PCSampler

    with PCSampler(period=10) as s:          # a sample every 2^10 cycles per SM sub-partition
        run()
    s.records                                 # CUPTI-shaped records (function, pc, correlation id, stalls)
    s.profile()                               # ProfileNode tree: kernel frames with per-line children
    s.top_lines("matmul_kernel")              # [(file, line, samples), ...]

Failure never reaches the program: no GPU, no libcupti, missing permissions
(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES), or CUPTI busy (another profiler, a second sampler) print one
``kprof: pcsampling: ...`` line on stderr, ``start()`` returns False, ``s.active`` is False and the
program runs unsampled.  One sampler runs at a time in a process.

Collection is CUPTI's kernel-serialized mode with start/stop control (see :mod:`.cupti_pc`):
every record carries the correlation id of its kernel launch.

PC sampling stays enabled on a context after the first sampler closes (stopped: no samples, no
measurable cost; docs/performance.md).  CUPTI learns a module's code when sampling is first enabled or
while it is enabled; a module loaded while it was disabled comes back as "non-user" samples with no PCs
when sampling is enabled again.  Later
samplers reuse the enabled context; :func:`release_contexts` (also run at exit) disables it.  CUPTI is drained after kernelc
launches (the launch hook), when a session forwards its launch callbacks (:meth:`on_launch`), and
at :meth:`stop`.
"""

from __future__ import annotations

import atexit
import base64
import json
import sys
import threading
from typing import Any

import numpy as np

from cubintools.demangle import demangle

from .attribution import KernelAttribution, KernelCode, SampleTable, annotate, attribute
from .cupti_pc import COLLECTIONS, Collector, Cupti, CuptiError, MIN_CUPTI_VERSION, period_exponent
from .stall_reasons import FAMILY

__all__ = ["PCSampler", "current_context", "demangle", "register_module_cubin", "explain", "release_contexts"]

# Test seams: factories used when PCSampler gets no ``cupti``/``context`` argument (tests point them
# at a fake CUPTI; sessions never touch them).
CUPTI_FACTORY = None     # () -> Cupti
CONTEXT_FACTORY = None   # (device) -> int

_lock = threading.RLock()
_active: "PCSampler | None" = None
_module_cubins: list[bytes] = []   # cubins of loaded modules, from a session's CUPTI resource callback
MAX_DISASSEMBLE_BYTES = 64 << 20
_resident: dict[int, Collector] = {}   # context -> collector left enabled (stopped) by a closed sampler


def release_contexts() -> list[Collector]:
    """Disable PC sampling on every context a closed sampler left enabled; returns those collectors
    (for :func:`rearm_contexts`)."""
    with _lock:
        collectors = list(_resident.values())
        _resident.clear()
    for c in collectors:
        try:
            c.disable()
        except Exception:
            pass
    return collectors


def rearm_contexts(collectors: list[Collector] | None = None) -> None:
    """Enable PC sampling afresh (stopped) on the contexts of ``collectors`` (default: the resident
    ones, which are released first).

    The kprof timing backend calls this after it subscribes to CUPTI and after it unsubscribes: a
    collector left enabled across either gave 0 samples afterwards, while a fresh enable works and
    still knows the modules loaded while the old one was enabled (scripts/pcs_diag.py).  Keeping a context enabled is what lets later samplers see kernels loaded
    in between (CUPTI learns a module's code only while sampling is enabled)."""
    if collectors is None:
        collectors = release_contexts()
    for old in collectors:
        with _lock:
            if old.ctx in _resident or (_active is not None and _active.collector is not None
                                        and _active.collector.ctx == old.ctx):
                continue
        fresh = Collector(old.cupti, old.ctx, period=old.period_arg, collection=old.collection,
                          scratch_bytes=old.scratch_bytes,
                          hardware_bytes=old.hardware_bytes, capacity=old.capacity)
        try:
            fresh.enable()
        except Exception:
            continue  # e.g. the context is gone: nothing to keep
        with _lock:
            _resident[fresh.ctx] = fresh


atexit.register(release_contexts)


def _reload_kernelc_modules(device: int | None) -> int:
    """CUPTI learns a module's code only while PC sampling is enabled (or before it is first enabled
    in the process): kernelc kernels loaded between two samplers came back as "non-user" samples
    without PCs.  Reloading kernelc's modules right after Enable avoids that."""
    launcher = sys.modules.get("kernelc.runtime.launcher")
    if launcher is None:
        return 0
    try:
        import torch
        dev = torch.cuda.current_device() if device is None else int(device)
        return launcher.reload_modules(dev)
    except Exception:
        return 0


def register_module_cubin(cubin: bytes) -> None:
    """Remember a loaded module's cubin (a session's CUPTI module-load callback calls this), so
    samples of non-kernelc kernels in it get opcodes, and lines where the cubin has line info."""
    if cubin:
        _module_cubins.append(bytes(cubin))


def _say(text: str) -> None:
    try:
        sys.stderr.write(f"kprof: pcsampling: {text}\n")
        sys.stderr.flush()
    except Exception:
        pass


def explain(err: BaseException) -> str:
    """One line telling the user why there are no samples, and what to do."""
    if isinstance(err, CuptiError):
        if err.privileges:
            return (f"{err.name} from {err.call}: this user may not read GPU performance counters (the driver "
                    "restricts profiling to admin users); run as root or load the nvidia module with "
                    "NVreg_RestrictProfilingToAdminUsers=0 (https://developer.nvidia.com/ERR_NVGPUCTRPERM)")
        if err.busy:
            return (f"CUPTI is busy ({err.name} from {err.call}): another profiler holds PC sampling or CUPTI on "
                    "this GPU context (Nsight Systems/Compute, torch.profiler, Proton, another sampler); "
                    "profile without it")
        if err.unsupported:
            return f"PC sampling is not supported here ({err.name} from {err.call})"
        return str(err)
    return f"{type(err).__name__}: {err}"


def current_context(device: int | None = None) -> int:
    """The CUDA context torch uses on ``device`` (default: torch's current device), as an int."""
    import torch
    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA GPU is available (torch.cuda.is_available() is False)")
    dev = torch.cuda.current_device() if device is None else int(device)
    ctx = _primary_context(dev)
    try:
        value = int(ctx)
    except TypeError:
        value = int(ctx.getPtr())
    if not value:
        raise RuntimeError("no current CUDA context")
    return value


def _primary_context(device: int):
    """Make torch's primary context on ``device`` current (CUDA initialised through torch) and return it."""
    import torch
    from cuda.bindings import driver as drv
    torch.cuda.init()
    if torch.cuda.current_device() != device:
        torch.cuda.set_device(device)
    torch.cuda.current_stream(device)

    def check(res, what):
        err, *rest = res
        if int(err) != 0:
            raise RuntimeError(f"{what} failed: {err}")
        return rest[0] if rest else None

    ctx = check(drv.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if ctx is None or int(ctx) == 0:
        dev = check(drv.cuDeviceGet(device), "cuDeviceGet")
        ctx = check(drv.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
        check(drv.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    return ctx


class PCSampler:
    """CUPTI PC sampling on one CUDA context (torch's, on ``device``).

    ``period``: a sample every 2^period cycles (5..31; 32 or more is read as cycles; default 10).
    ``drain_every``: drain CUPTI's buffers every N observed launches (0: only at stop).
    ``scratch_mb``/``hw_mb``: CUPTI's host scratch buffer and device hardware buffer.
    ``hook_kernelc``: watch kernelc launches (to find each sampled kernel's code and drain).
    ``collection``: ``"serialized"`` (default: CUPTI runs kernels one at a time and tags every sample
    with its launch) or ``"continuous"`` (kernels overlap as usual, samples per kernel function;
    much lower overhead, see bench/results/pcsampling_overhead.json).
    ``quiet``: do not print the one-line failure message (``error`` still says it).
    ``keep_enabled``: at :meth:`close`, leave PC sampling enabled (stopped) on the context so that
    the next sampler in this process also sees torch/library kernels whose modules load in between.
    Off by default: an enabled context holds the GPU's sampling unit, so PC sampling in any other
    process (Nsight Compute, a child process's kprof) fails with "busy" until it is released
    (:func:`release_contexts`, or at exit).  kernelc kernels are seen either way: a sampler that
    enables a context reloads kernelc's loaded modules (``kernelc.runtime.launcher.reload_modules``).
    """

    def __init__(self, period: int | None = None, *, device: int | None = None, drain_every: int = 1,
                 scratch_mb: int = 64, hw_mb: int = 128, capacity: int = 16384, hook_kernelc: bool = True,
                 quiet: bool = False, cupti: Any = None, context: int | None = None, keep_enabled: bool = False,
                 collection: str = "serialized"):
        self.period = period_exponent(period)
        if collection not in COLLECTIONS:
            raise ValueError(f"collection must be 'serialized' or 'continuous', got {collection!r}")
        self.collection = collection
        self.device = device
        self.drain_every = max(0, int(drain_every))
        self.scratch_bytes = int(scratch_mb) << 20
        self.hw_bytes = int(hw_mb) << 20
        self.capacity = int(capacity)
        self.hook_kernelc = hook_kernelc
        self.drain_on_kernelc = True
        self.quiet = quiet
        self.keep_enabled = keep_enabled
        self.error: str | None = None
        self.active = False
        self.ran = False      # sampling did start at some point (there may be samples)
        self.table = SampleTable()
        self.collector: Collector | None = None
        self._cupti_arg, self._ctx_arg = cupti, context
        self._cupti: Cupti | None = None
        self._hook = None
        self._ticks = 0
        self._seen: dict[int, tuple[Any, Any]] = {}    # id(compiled) -> (CompiledKernel, JITFunction)
        self._crc: dict[int, int | None] = {}           # id(compiled or cubin) -> CUPTI CRC
        self._stopped = False
        self._closed_info: dict[str, Any] | None = None  # info() as it was at close (the collector moves on)
        self._codes: dict[str, list[KernelCode]] = {}   # codes given with add_code (recorded data)
        self._drain_lock = threading.Lock()
        self.reloaded = 0     # kernelc modules reloaded after Enable (see _reload_kernelc_modules)

    @classmethod
    def from_recorded(cls, recorded: Any, **kw: Any) -> "PCSampler":
        """An inactive sampler holding recorded samples (:class:`.fixture.Recorded`) and their
        kernels' code: everything but the collection works on it (profile, top_lines, save)."""
        s = cls(**kw)
        s.table = recorded.table
        for code in recorded.codes.values():
            s.add_code(code)
        return s

    def add_code(self, code: KernelCode) -> None:
        """Make a kernel's code known by function name (e.g. from recorded data or a session)."""
        self._codes.setdefault(code.name, []).append(code)

    # ----------------------------------------------------------------------------------- lifecycle
    def start(self) -> bool:
        """Start sampling; False (with one stderr line, and ``error`` set) if it cannot."""
        global _active
        if self.active:
            return True
        with _lock:
            if _active is not None and _active is not self:
                return self._fail("another kprof PC sampler is already running in this process; "
                                  "only one can sample at a time")
            _active = self
        try:
            if self._ctx_arg is not None:
                ctx = self._ctx_arg
            else:
                ctx = (CONTEXT_FACTORY or current_context)(self.device)
        except Exception as e:
            return self._fail(f"no CUDA context ({type(e).__name__}: {e})")
        with _lock:
            resident = _resident.pop(int(ctx), None)
        if resident is not None and resident.enabled and resident.collection != self.collection:
            try:
                resident.disable()  # configured for the other collection mode: start afresh
            except Exception:
                pass
            resident = None
        if resident is not None and resident.enabled:
            try:
                self._cupti = resident.cupti
                self.collector = resident
                resident.adopt(period=self.period, scratch_bytes=self.scratch_bytes, hardware_bytes=self.hw_bytes,
                               sink=self._sink)
                self.table.stall_names = {i: n for i, n in resident.stall_table}
                resident.start()
            except Exception as e:
                try:
                    resident.disable()
                except Exception:
                    pass
                self.collector = None
                return self._fail(explain(e))
        else:
            failed = self._enable_new(ctx)
            if failed is not None:
                return failed
        self.active = True
        self.ran = True
        self._stopped = False
        if self.hook_kernelc:
            try:
                from .. import hooks
                self._hook = hooks.register_kernelc_hook(exit=self._on_kernelc_launch)
            except Exception:
                self._hook = None
        return True

    def _enable_new(self, ctx: int) -> bool | None:
        """Enable, configure and start PC sampling on ``ctx``; None on success, else ``_fail``'s False."""
        try:
            if self._cupti_arg is not None:
                self._cupti = self._cupti_arg
            else:
                self._cupti = CUPTI_FACTORY() if CUPTI_FACTORY is not None else Cupti()
        except Exception as e:
            return self._fail(f"libcupti could not be loaded ({type(e).__name__}: {e}); install nvidia-cuda-cupti "
                              "(pip) or set KPROF_LIBCUPTI")
        try:
            v = self._cupti.version()
            if v < MIN_CUPTI_VERSION:
                return self._fail(f"libcupti is too old (API version {v}; PC records with correlation ids need "
                                  "CUDA 12.4 or later)")
            self.collector = Collector(self._cupti, ctx, period=self.period, collection=self.collection,
                                       scratch_bytes=self.scratch_bytes,
                                       hardware_bytes=self.hw_bytes, capacity=self.capacity, sink=self._sink)
            self.collector.enable()
            self.table.stall_names = {i: n for i, n in self.collector.stall_table}
            if self._cupti_arg is None:  # a real context (not a test double): make kernelc's code known
                self.reloaded = _reload_kernelc_modules(self.device)
            self.collector.start()
        except Exception as e:
            if self.collector is not None and self.collector.enabled:
                try:
                    self.collector.disable()
                except Exception:
                    pass
            return self._fail(explain(e))
        return None

    def _fail(self, why: str) -> bool:
        global _active
        self.error = why
        self.active = False
        with _lock:
            if _active is self:
                _active = None
        if not self.quiet:
            _say(f"{why}; continuing without instruction samples")
        return False

    def stop(self) -> None:
        """End the sampled range and collect its samples (the sampler can be started again with
        :meth:`resume`; :meth:`close` releases CUPTI)."""
        if not self.active or self.collector is None:
            return
        with self._drain_lock:
            try:
                self.collector.stop()
            except Exception as e:
                self._runtime_error(e)
        self._stopped = True

    def resume(self) -> None:
        """Start a new range after :meth:`stop` (e.g. a session re-activated)."""
        if self.active and self.collector is not None and not self.collector.running:
            try:
                self.collector.start()
                self._stopped = False
            except Exception as e:
                self._runtime_error(e)

    def close(self) -> None:
        """Stop (if running), compute CUPTI CRCs of the kernels seen, disable PC sampling."""
        global _active
        if self._hook is not None:
            try:
                from .. import hooks
                hooks.unregister_kernelc_hook(self._hook)
            except Exception:
                pass
            self._hook = None
        if self.collector is not None:
            if self.collector.running:
                self.stop()
            self._compute_crcs()
            self._closed_info = None
            self._closed_info = self.info()
            if self.collector.enabled:
                keep = self.keep_enabled and self.error is None and self.active
                if keep:
                    self.collector.sink = None
                    with _lock:
                        keep = int(self.collector.ctx) not in _resident
                        if keep:
                            _resident[int(self.collector.ctx)] = self.collector
                if not keep:
                    try:
                        self.collector.disable()
                    except Exception as e:
                        self._runtime_error(e, quiet=True)
        self.active = False
        with _lock:
            if _active is self:
                _active = None

    def __enter__(self) -> "PCSampler":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _runtime_error(self, e: BaseException, quiet: bool = False) -> None:
        msg = explain(e)
        if self.error is None:
            self.error = msg
            if not (self.quiet or quiet):
                _say(f"{msg}; samples so far are kept")
        if self.collector is not None:
            self.collector.stats.warnings.append(msg)
            self.collector.running = False

    # ------------------------------------------------------------------------------------ draining
    def drain(self, wait: bool = True) -> None:
        """Move what CUPTI has collected so far into :attr:`table`.

        A failing mid-range GetData does not stop sampling: draining during the range is turned
        off (with a warning in :meth:`info`) and everything is collected at :meth:`stop`."""
        c = self.collector
        if not self.active or c is None or not c.running:
            return
        if not self._drain_lock.acquire(blocking=wait):
            return  # another thread is draining right now
        try:
            c.drain()
        except Exception as e:
            self.drain_every = 0
            c.stats.warnings.append(f"draining during the range failed ({explain(e)}); collecting at stop only")
        finally:
            self._drain_lock.release()

    def on_launch(self, *args: Any, **kwargs: Any) -> None:
        """A launch callback for sessions (any arguments): drains every ``drain_every`` launches."""
        if self.drain_every and self.active:
            self._ticks += 1
            if self._ticks >= self.drain_every:
                self._ticks = 0
                self.drain(wait=False)

    def _on_kernelc_launch(self, rec: Any) -> None:
        try:
            compiled = getattr(rec, "compiled", None)
            if compiled is not None and id(compiled) not in self._seen:
                self._seen[id(compiled)] = (compiled, getattr(rec, "function", None))
            if self.drain_on_kernelc:
                self.on_launch()
        except Exception:  # a profiler problem must never break the user's launch
            pass

    def note_kernel(self, compiled: Any, function: Any = None) -> None:
        """Tell the sampler about a kernelc kernel launched without the hook (e.g. by a session)."""
        if compiled is not None and id(compiled) not in self._seen:
            self._seen[id(compiled)] = (compiled, function)

    def _sink(self, cols: dict[str, np.ndarray], names: dict[int, str]) -> None:
        uniq, inv = np.unique(cols["name_ptr"], return_inverse=True)
        ids = np.array([self.table.function_id(names.get(int(p), "<unknown>")) for p in uniq.tolist()], dtype=np.uint32)
        self.table.add(cols["corr"], ids[inv.ravel()], cols["crc"], cols["pc"], cols["fidx"], cols["reason"],
                       cols["samples"])

    # ----------------------------------------------------------------------------------------- code
    def _compute_crcs(self) -> None:
        if self._cupti is None:
            return
        for key, (compiled, _) in list(self._seen.items()):
            if key not in self._crc:
                try:
                    self._crc[key] = self._cupti.cubin_crc(compiled.asm["cubin"])
                except Exception:
                    self._crc[key] = None
        for cubin in _module_cubins:
            if id(cubin) not in self._crc:
                self._crc[id(cubin)] = self._cupti.cubin_crc(cubin)

    def kernels_seen(self) -> list[tuple[Any, Any, int | None]]:
        """``[(CompiledKernel, JITFunction, CUPTI CRC or None)]`` of the kernelc kernels launched."""
        return [(c, f, self._crc.get(k)) for k, (c, f) in self._seen.items()]

    def code_for(self, function: str, cubin_crc: int = 0, *, compiled: Any = None, jit: Any = None,
                 cache_key: str | None = None) -> KernelCode | None:
        """What is known about a sampled function's code: the kernelc kernel (given, or seen with
        that cache key, or that name and CRC, or that name), else a registered module cubin with that
        CRC, else None."""
        if compiled is None:
            cands = [(c, f, k) for k, (c, f) in self._seen.items() if getattr(c, "name", None) == function]
            if cache_key:
                keyed = [t for t in cands if getattr(t[0], "cache_key", None) == cache_key]
                cands = keyed or cands
            if cubin_crc:
                exact = [t for t in cands if self._crc.get(t[2]) == cubin_crc]
                cands = exact or cands
            if cands:
                compiled, jit, key = cands[-1]
        if compiled is not None:
            return _code_cache(compiled, jit, self._crc.get(id(compiled)))
        given = self._codes.get(function) or []
        if cubin_crc:
            exact = [c for c in given if c.cubin_crc == cubin_crc]
            given = exact or given  # lenient: a CRC computed differently must not lose the lines
        if given:
            return given[-1]
        if cubin_crc:
            for cubin in _module_cubins:
                if self._crc.get(id(cubin)) == cubin_crc and len(cubin) <= MAX_DISASSEMBLE_BYTES:
                    return _cubin_code(cubin, function, cubin_crc)
        return None

    # ---------------------------------------------------------------------------------------- output
    @property
    def stall_names(self) -> dict[int, str]:
        return dict(self.table.stall_names)

    @property
    def records(self) -> list[dict[str, Any]]:
        """The raw samples as CUPTI-shaped records (see :meth:`.SampleTable.to_records`)."""
        return self.table.to_records()

    @property
    def effective_period(self) -> int | None:
        """The sampling period CUPTI reports for this sampler's range (2^N cycles)."""
        return self.info().get("effective_period")

    def info(self) -> dict[str, Any]:
        if self._closed_info is not None:
            return dict(self._closed_info)
        c = self.collector
        out: dict[str, Any] = {"period": self.period, "period_cycles": 1 << self.period,
                               "collection": "kernel-serialized", "family": FAMILY}
        if c is not None:
            out["collection"] = "kernel-serialized" if c.mode == 2 else "continuous"
            out.update({"effective_period": c.effective_period, "stall_reasons": c.configured_reasons,
                        "cupti_total_samples": c.stats.total_samples, "dropped_samples": c.stats.dropped_samples,
                        "non_user_samples": c.stats.non_user_samples, "pcs_read": c.stats.pcs_read,
                        "get_data_calls": c.stats.get_data_calls, "kernelc_modules_reloaded": self.reloaded})
            if c.stats.warnings:
                out["warnings"] = list(c.stats.warnings)
        if self.error:
            out["error"] = self.error
        return out

    def attribute(self) -> dict[tuple[str, int], KernelAttribution]:
        """Per (function, cubin CRC), all launches together, placed on the code known for it."""
        if self.collector is not None and self.collector.running:
            self.drain()
        return {key: attribute(counts, self.code_for(key[0], key[1])) for key, counts in self.table.by_function().items()}

    def profile(self, root: Any = None) -> Any:
        """A profile tree (``ROOT > kernel > file.py:line``) of everything sampled, standalone."""
        from profiler.format import ProfileNode
        root = root if root is not None else ProfileNode("ROOT")
        info = self.info()
        for (fname, crc), counts in sorted(self.table.by_function().items(), key=lambda kv: -kv[1].total):
            code = self.code_for(fname, crc)
            node = root.child(fname if code is not None else demangle(fname))
            annotate(node, attribute(counts, code), code, info)
        root.extra = dict(root.extra or {})
        root.extra["pcsampling"] = info
        return root

    def top_lines(self, kernel: str, n: int | None = 10) -> list[tuple[str, int, int]]:
        """The kernel's source lines by samples, highest first: ``[(file, line, samples)]``."""
        acc: dict[tuple[str, int], int] = {}
        for (fname, _), a in self.attribute().items():
            if fname == kernel or demangle(fname) == kernel:
                for f, ln, s in a.top_lines():
                    acc[(f, ln)] = acc.get((f, ln), 0) + s
        rows = sorted(((f, ln, s) for (f, ln), s in acc.items()), key=lambda t: (-t[2], t[0], t[1]))
        return rows if n is None else rows[:n]

    def save(self, path: str, *, description: str = "", extra: dict | None = None) -> dict:
        """Write the samples, stall-reason table and the sampled kernelc kernels' cubins as a JSON
        test-data file (:mod:`.fixture` reads it back); returns the written object."""
        from .fixture import dump
        sampled = {fname for (fname, _crc) in self.table.by_function()}
        kernels = []
        for compiled, jit, crc in self.kernels_seen():
            if compiled.name not in sampled:
                continue
            code = _code_cache(compiled, jit, crc)
            kernels.append({"name": compiled.name, "cubin_crc": crc or 0, "cache_key": getattr(compiled, "cache_key", None),
                            "cubin_b64": base64.b64encode(compiled.asm["cubin"]).decode(),
                            "source": code.source})
        obj = dump(self.table, kernels, info=self.info(), description=description, extra=extra)
        with open(path, "w") as f:
            json.dump(obj, f, separators=(",", ":"))
            f.write("\n")
        return obj


_codes: dict[int, KernelCode] = {}


def _code_cache(compiled: Any, jit: Any, crc: int | None) -> KernelCode:
    code = _codes.get(id(compiled))
    if code is None or code._compiled_ref is not compiled:  # type: ignore[attr-defined]
        code = KernelCode.from_compiled(compiled, jit, crc)
        code._compiled_ref = compiled  # type: ignore[attr-defined]
        _codes[id(compiled)] = code
    elif crc and not code.cubin_crc:
        code.cubin_crc = crc
    return code


_cubin_codes: dict[tuple[int, str], KernelCode] = {}


def _cubin_code(cubin: bytes, function: str, crc: int) -> KernelCode:
    key = (crc, function)
    code = _cubin_codes.get(key)
    if code is None:
        code = _cubin_codes[key] = KernelCode.from_cubin(cubin, function, crc)
    return code
