"""The ``cupti`` backend: every kernel, memcpy and memset of the process, timed by CUPTI activity
records and joined to the launching thread's context through correlation ids.

How it works (cupti-python, one subscriber per process):

* **Launch attribution without a launch callback** (the default).  CUPTI writes an API activity
  record for each launch call only (``cuptiActivityEnableDriverApi`` on ``cuLaunchKernel[Ex]``,
  cooperative launches, ``cuGraphLaunch``, ``cuMemcpy*``, ``cuMemset*``): correlation id, thread id
  and start time, written in C on the launching thread.  Scopes and kernelc launches append to
  per-thread timelines on CUPTI's clock (:mod:`profiler.context`), and a kernel goes to the node
  its thread had when the launch call started.  A Python callback per launch costs microseconds
  per launch through cupti-python (docs/performance.md, "Profiler (CUPTI)"); this costs two clock
  reads per scope.  The API records cost CUPTI a record per launch, so by default
  (``cupti_api_records="lazy"``) they are turned on only at the first scope entry or kernelc launch of
  any thread (:func:`profiler.context.timelines_on`'s ``arm``): until then every launch is the
  root's, and a kernel without an API record from then is placed at the root by its start time (a profile
  started before CUDA is up keeps them on until CUDA's first context exists: :meth:`CuptiBackend._context_created`).  A torch / cuBLAS launch goes through the runtime API, which
  calls the driver, so the driver ids see every launch.
* **Launch callbacks** are still used where the launching thread's Python state is needed at the
  call: ``context="python"`` sessions (the call path) and launch listeners (PC sampling drains its
  buffers), and when CUPTI cannot record API activity per id (``KPROF_CUPTI_CALLBACKS=1`` forces
  them).  On API entry the callback stores one value under the correlation id: the thread's scope id,
  or ``(scope id, Python call path)``.
* **Activity records** (``CONCURRENT_KERNEL``, ``MEMCPY``, ``MEMSET``, ``DRIVER``) arrive in 8 MiB
  buffers on CUPTI's thread when a buffer fills, and at :meth:`flush` (finalize): each record is
  joined to its launch, and added to the sessions whose active window holds its launch time (or
  correlation id, with callbacks only).
* **Variants** (``profiler/options.py``; docs/performance.md measures them): ``cupti_attribution=
  "external-correlation"`` also places launches by CUPTI external correlation ids (the scope's id,
  pushed at each scope change: :mod:`profiler.context`).  ``cupti_records="raw"`` (the default)
  takes the buffers from libcupti itself (:mod:`profiler.backends.cupti_raw`), with no Python
  object per record, and falls back to cupti-python's callbacks where libcupti is not found;
  ``"split"`` splits cupti-python's record objects into columns as each buffer completes;
  ``"deferred"`` keeps cupti-python's record objects until the flush.
* **CUDA graphs.** While a graph is captured, each launch creates a graph node
  (``RESOURCE/GRAPHNODE_CREATED``, on the capturing thread): the node's CUPTI id is mapped to the
  capture-time context.  Instantiation clones the nodes (``GRAPHNODE_CLONED``): the clone inherits the
  original's context.  A replayed kernel's record carries ``graph_node_id``; it is attributed to
  the capture site when known, else to where the graph was launched.
* **Names** are demangled at the end (``__cxa_demangle`` from libstdc++ through ctypes; a name
  that does not demangle stays as it is).
"""
from __future__ import annotations

import collections
import functools
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from .. import context, options
from . import cupti_records

DEFER_MAX = 250_000       # device records kept undelivered until the flush (API-record mode)
RAW_MAX = 100_000         # records kept as cupti-python delivered them (cupti_records="deferred"; ~30 MB)
RAW_MAX_BYTES = 64 << 20   # raw buffers kept undecoded (cupti_records="raw")
PRUNE_AT = 1 << 20        # correlation entries kept before old ones are dropped
PRUNE_MARGIN = 200_000    # ...keeping this many correlation ids behind the newest completed record
SAME_CLOCK_NS = 50_000    # cupti_timeline_clock=realtime: CUPTI's clock is REALTIME if they differ by less

_MEMCPY_KINDS = {"HTOD": "HtoD", "DTOH": "DtoH", "DTOD": "DtoD", "HTOH": "HtoH", "PTOP": "PtoP",
                 "HTOA": "HtoA", "ATOH": "AtoH", "ATOA": "AtoA", "ATOD": "AtoD", "DTOA": "DtoA"}


# What a start hands to CUPTI (subscriber callback, buffer callbacks, libcupti's raw ones) stays referenced past
# its stop: CUPTI may still be inside a callback of the registration a later start replaces.  The last
# KEEPALIVE_STARTS starts' are kept, not every start's: each holds its backend, and a process that starts and stops
# kprof once per epoch kept every backend it ever had (a stop flushes every buffer and unsubscribes, and a start
# re-registers the buffer callbacks, so an older start's are never called again).
KEEPALIVE_STARTS = 4
_KEEPALIVE: "collections.deque[list]" = collections.deque(maxlen=KEEPALIVE_STARTS)


class BackendUnavailable(Exception):
    """CUPTI cannot be used here; ``str()`` says why in a few words."""


def _torch_profiler_active() -> bool:
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    for probe in (lambda: torch.autograd.profiler._is_profiler_enabled,
                  lambda: torch._C._autograd._profiler_enabled()):
        try:
            if probe():
                return True
        except Exception:
            pass
    return False


def _cuda_initialized() -> bool:
    """Whether torch has initialised CUDA in this process (False without torch)."""
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_initialized())
    except Exception:
        return False


def _capturing() -> bool:
    """Whether torch's current stream is capturing a CUDA graph (False without torch or CUDA)."""
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_initialized() and torch.cuda.is_current_stream_capturing())
    except Exception:
        return False


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def _explain(e: BaseException) -> str:
    msg = _first_line(e)
    name = type(e).__name__
    up = msg.upper()
    if name == "NotSupportedError" or "DRIVER IS NOT FOUND" in up or "LIBCUDA" in up:
        return "no CUDA driver (libcuda.so.1 not found)" if "LIBCUDA" in up else f"no CUDA driver ({msg})"
    if "MULTIPLE_SUBSCRIBERS" in up or "SUBSCRIBER" in up:
        return f"CUPTI is held by another tool (nsys, ncu, torch.profiler?): {msg}"
    if "INSUFFICIENT_PRIVILEGES" in up or "PRIVILEGE" in up:
        return f"no permission to use CUPTI ({msg})"
    if "NO_DEVICE" in up:
        return f"no CUDA device ({msg})"
    return f"CUPTI unavailable ({name}: {msg})"


def _device_count() -> Optional[int]:
    try:
        from cuda.bindings import driver as drv
        err, = drv.cuInit(0)
        if int(err) != 0:
            return 0
        err, n = drv.cuDeviceGetCount()
        return int(n) if int(err) == 0 else 0
    except Exception:
        return None  # cannot tell; let CUPTI decide


class CuptiBackend:
    """The process-wide CUPTI collector, shared by every session that uses the ``cupti`` backend."""

    name = "cupti"
    _instance: Optional["CuptiBackend"] = None
    _lock = threading.Lock()

    # -- acquisition -----------------------------------------------------------------------
    @classmethod
    def acquire(cls, kernel_activity: str = "concurrent") -> "CuptiBackend":
        """The running collector, starting it if needed; raises :class:`BackendUnavailable`."""
        with cls._lock:
            inst = cls._instance
            if inst is not None and inst.running:
                return inst
            if _torch_profiler_active():
                raise BackendUnavailable("CUPTI is held by torch.profiler (it is profiling now)")
            try:
                from cupti import cupti
            except Exception as e:  # ImportError, or a broken install
                raise BackendUnavailable(f"cupti-python is not usable ({_first_line(e)}); "
                                         "pip install cupti-python") from None
            n = _device_count()
            if n == 0:
                raise BackendUnavailable("no CUDA device")
            inst = cls(cupti, kernel_activity)
            try:
                inst._start()
            except BackendUnavailable:
                raise
            except Exception as e:
                raise BackendUnavailable(_explain(e)) from None
            cls._instance = inst
            return inst

    def __init__(self, cupti, kernel_activity: str = "concurrent"):
        self.cupti = cupti
        self.kernel_activity = kernel_activity
        self.corr: Dict[int, Any] = {}
        self.graph_nodes: Dict[int, Any] = {}
        self.sessions: List[Any] = []          # sessions attached (each has .windows)
        self.python = False                     # capture Python call paths in the callback
        self._full = [False]                    # the callback reads this: capture call paths
        self.light = False                      # launches placed by API records + timelines (no callback)
        self.launch_callbacks = False           # the launch ids' callbacks are enabled now
        self.api_on = False                     # the launch API records are enabled now
        self.api_wanted = False                 # ...and are needed (armed: something off the root)
        self.armed_at: Optional[int] = None     # CUPTI time by which they were on (lazy mode)
        self.lazy_ctx = False                   # lazy, on until the first context is created (started before CUDA)
        self._arm_lock = threading.Lock()
        self.api: Dict[int, tuple] = {}         # correlation id -> (thread id, launch start) from API records
        self.pending: List[tuple] = []          # device records whose API record has not arrived yet
        self.held = cupti_records.Records()     # records not delivered yet (see _process)
        self.ext: Dict[int, int] = {}           # correlation id -> external correlation id
        self.external = False                   # launches placed by external correlation ids too
        self.attribution = options.get("cupti_attribution")
        self.records_mode = options.get("cupti_records")
        self.deferred = self.records_mode == "deferred"
        self.rawbufs: Optional[Any] = None      # cupti_raw.RawBuffers when cupti_records="raw" works
        self.buffer_bytes = int(options.get("cupti_buffer_bytes"))
        self.raw: List[Any] = []                # completed buffers not split yet (deferred)
        self.raw_count = 0
        self.clock: Callable[[], int] = time.perf_counter_ns
        self.subscriber = None
        self.running = False
        self.max_cid = 0                        # newest correlation id seen in a record
        self.proc_lock = threading.Lock()       # record processing
        self.handlers: Dict[tuple, List[Callable]] = {}
        self.launch_listeners: List[Callable] = []  # fn(correlation_id=, name=) after each launch
        self.clock_offset = 0                   # CUPTI timestamp - perf_counter_ns
        # timelines on a host clock (cupti_timeline_clock): (host time, CUPTI - host) pairs measured at the
        # start and at each join; None when timelines read CUPTI's own clock
        self.tl_offsets: Optional[List[Tuple[int, int]]] = None
        self.tl_clock: Optional[Callable[[], int]] = None
        self.errors: List[str] = []
        self.kinds: List[Any] = []
        self._callback: Optional[Callable] = None
        self._activity_callbacks: tuple = ()
        c = cupti
        self.DRIVER = int(c.CallbackDomain.DRIVER_API)
        self.RUNTIME = int(c.CallbackDomain.RUNTIME_API)
        self.RESOURCE = int(c.CallbackDomain.RESOURCE)
        self.GRAPHNODE_CREATED = int(c.CallbackIdResource.GRAPHNODE_CREATED)
        self.GRAPHNODE_CLONED = int(c.CallbackIdResource.GRAPHNODE_CLONED)
        self.CONTEXT_CREATED = int(getattr(c.CallbackIdResource, "CONTEXT_CREATED", -1))
        K = c.ActivityKind
        self.K_KERNEL = {int(K.CONCURRENT_KERNEL), int(K.KERNEL)}
        self.K_MEMCPY = int(K.MEMCPY)
        self.K_MEMSET = int(K.MEMSET)
        self.K_DRIVER = int(getattr(K, "DRIVER", -1))
        self.K_EXT = int(getattr(K, "EXTERNAL_CORRELATION", -1))
        self._kinds = (self.K_KERNEL, self.K_MEMCPY, self.K_MEMSET, self.K_DRIVER, self.K_EXT)
        self._memcpy_labels: Dict[Any, str] = {}
        self.names: Dict[int, str] = {}          # kernel name by CUPTI's name pointer
        # what ran on CUPTI's thread inside the program's loop (not at the flush): the overhead bench
        # reports it per profiled block (docs/performance.md, "Overhead at CUPTI's floor")
        self.loop_stats = {"buffers": 0, "records": 0, "callback_ns": 0, "decoded_buffers": 0,
                           "delivered": 0}

    # -- start / stop ----------------------------------------------------------------------
    def _start(self) -> None:
        c = self.cupti
        # A PC-sampling context left enabled by a closed sampler gives no samples any more once a
        # timing session has started beside it (docs/performance.md): release it now, enable it afresh
        # once subscribed (see pcsampling.sampler.rearm_contexts).
        rearm = self._release_pcsampling()
        # what this driver/CUPTI pair does not support (not an error: kept for `kprof -v`/debugging)
        self.skipped: List[str] = []
        # Keep every function handed to CUPTI referenced here, whatever cupti-python does with it.
        self._callback = self._make_callback()
        self._activity_callbacks = (self._buffer_requested, self._buffer_completed)
        self._keep = [self._callback, self._activity_callbacks]
        _KEEPALIVE.append(self._keep)
        self.subscriber = c.subscribe(self._callback, None)
        try:
            c.activity_register_callbacks(*self._activity_callbacks)
            if self.records_mode == "raw":   # before any kind is enabled, as CUPTI's callbacks are
                self._use_raw_buffers()
            K = c.ActivityKind
            kernel_kind = K.KERNEL if self.kernel_activity == "serialized" else K.CONCURRENT_KERNEL
            for kind in (kernel_kind, K.MEMCPY, K.MEMSET):
                try:
                    c.activity_enable(kind)
                except Exception as e:
                    if kind == kernel_kind:
                        raise
                    self.skipped.append(f"activity {kind}: {_first_line(e)}")
                    continue
                self.kinds.append(kind)
            # PC sampling sessions (serialized kernels) use launch callbacks from the start: with API
            # activity records enabled first, a sampling session gets no kernel records
            if not options.get("cupti_callbacks") and self.kernel_activity != "serialized":
                # enabled here even when lazy: whether CUPTI can is known now, not at the first scope
                self.light = self._enable_api_records(1)
            if self.light and self.attribution == "external-correlation":
                self.external = self._enable_external()
            lazy = self.light and not self.external and options.get("cupti_api_records") == "lazy"
            # With them off while CUDA came up, no launch was placed on an H200 (docs/performance.md, issue 23,
            # session 22): started before CUDA is up (python -m kprof, torchrun), they stay on until its first
            # context exists and go off in that context's CONTEXT_CREATED callback (_context_created)
            self.lazy_ctx = lazy and not _cuda_initialized()
            if lazy and not self.lazy_ctx:
                self._enable_api_records(0)
            self.api_wanted = self.light and not lazy
            self._enable_callbacks(1)
        except BaseException:
            self._teardown()
            raise
        self.clock = c.get_timestamp
        self.clock_offset = int(c.get_timestamp()) - time.perf_counter_ns()
        if self.rawbufs is not None:
            self.rawbufs.eager = not self.light
        if self.light:
            tl = options.get("cupti_timeline_clock")
            tclock = self.clock
            self.tl_offsets = None
            if tl != "cupti":
                host = host_clock(tl)
                first = clock_offset(self.clock, host)
                if tl == "realtime" and abs(first[1]) > SAME_CLOCK_NS:
                    # the default reads the host's REALTIME only where it is CUPTI's own clock (an H200 host,
                    # 2026-11-29): another clock would be mapped through offsets that NTP's slewing may bend
                    self.skipped.append(f"timeline clock: CUPTI's is not REALTIME here (offset {first[1]} ns); "
                                        "using cupti.get_timestamp")
                else:
                    tclock = self.tl_clock = host
                    self.tl_offsets = [first]
            context.timelines_on(tclock, self._ext_stack() if self.external else None,
                                 arm=None if self.api_wanted else self._arm)
        self.running = True
        self._rearm_pcsampling(rearm)

    @staticmethod
    def _release_pcsampling() -> list:
        pcs = sys.modules.get("profiler.pcsampling.sampler")
        try:
            return pcs.release_contexts() if pcs is not None else []
        except Exception:
            return []

    @staticmethod
    def _rearm_pcsampling(collectors=None) -> None:
        pcs = sys.modules.get("profiler.pcsampling.sampler")
        if pcs is not None and (collectors is None or collectors):
            try:
                pcs.rearm_contexts(collectors)
            except Exception:
                pass

    def _use_raw_buffers(self) -> None:
        """Take activity buffers from libcupti directly (:mod:`profiler.backends.cupti_raw`); on any
        failure cupti-python's callbacks, registered just before, stay."""
        from . import cupti_raw
        lib = cupti_raw.find_libcupti()
        if lib is None:
            self.skipped.append("raw buffers: libcupti not found in this process (looked at: "
                                f"{cupti_raw.libcupti_candidates() or 'no libcupti* mapped'}); using cupti-python's")
            return
        try:
            raw = cupti_raw.RawBuffers(lib, self.buffer_bytes, RAW_MAX_BYTES, self._raw_full)
            self._keep.append(raw)    # its ctypes callbacks: kept as this start's (see _KEEPALIVE)
            raw.register()
        except Exception as e:
            self.skipped.append(f"raw buffers: {_first_line(e)}; using cupti-python's")
            try:
                self.cupti.activity_register_callbacks(*self._activity_callbacks)
            except Exception:
                pass
            return
        self.rawbufs = raw

    def _raw_full(self) -> None:
        """A raw buffer completed past the memory bound, or with delivery not deferred: decode now
        (past the bound only the oldest buffers beyond it, about one per completion)."""
        try:
            with self.proc_lock:
                self._process((), in_loop=True)
        except Exception as e:
            self._error(f"activity records: {_first_line(e)}")

    def stats(self) -> Dict[str, int]:
        """:attr:`loop_stats`, with the raw buffer callbacks' own counters (``raw_*``)."""
        out = dict(self.loop_stats)
        if self.rawbufs is not None:
            out.update({"raw_" + k: v for k, v in self.rawbufs.stats.items()})
        return out

    def _take_raw(self, everything: bool) -> None:
        from . import cupti_raw
        rb = self.rawbufs
        bufs = rb.take(None if everything or rb.eager else max(0, rb.max_bytes - rb.size))
        if bufs:
            if not everything:
                self.loop_stats["decoded_buffers"] += len(bufs)
            self.held.extend(cupti_raw.decode(self.cupti, bufs, rb.walker, self._kinds,
                                              self._memcpy_label, self.names))

    def _arm(self) -> None:
        """Turn the launch API records on for good (lazy mode): a thread left the root (context's
        ``arm``), or call paths are wanted.  Launches before this are the root's."""
        with self._arm_lock:
            if self.api_wanted or not self.light or self.subscriber is None:
                return
            if self._enable_api_records(1):
                self.api_wanted = True
                self.armed_at = int(self.clock())
            else:
                self._error("API records could not be turned on at the first scope; later kernels go to the root")

    def _enable_external(self) -> bool:
        """EXTERNAL_CORRELATION records: each launch's API record comes with the id its thread pushed
        (the thread's node, :func:`profiler.context.ext_id`).  False if CUPTI cannot."""
        c = self.cupti
        if self.K_EXT < 0 or not hasattr(c, "activity_push_external_correlation_id"):
            self.skipped.append("external correlation: not in this cupti-python; using scope timelines")
            return False
        try:
            c.activity_enable(c.ActivityKind.EXTERNAL_CORRELATION)
        except Exception as e:
            self.skipped.append(f"external correlation: {_first_line(e)}; using scope timelines")
            return False
        self.kinds.append(c.ActivityKind.EXTERNAL_CORRELATION)
        return True

    def _ext_stack(self):
        import functools
        c = self.cupti
        kind = int(c.ExternalCorrelationKind.CUSTOM0)
        return (functools.partial(c.activity_push_external_correlation_id, kind),
                functools.partial(c.activity_pop_external_correlation_id, kind))

    def _enable_api_records(self, on: int) -> bool:
        """API activity records for the launch ids only; False (and nothing left on) if CUPTI cannot."""
        c = self.cupti
        if self.K_DRIVER < 0 or not hasattr(c, "activity_enable_driver_api"):
            return False
        D = c.DriverApiTraceCbid
        required = {int(getattr(D, n)) for n in ("cuLaunchKernel", "cuLaunchKernelEx") if hasattr(D, n)}
        done = []
        for cbid in self._launch_cbids():
            try:
                c.activity_enable_driver_api(cbid, on)
                done.append(cbid)
            except Exception as e:
                if cbid in required and on:
                    self.skipped.append(f"API records for callback id {cbid}: {_first_line(e)}; using launch callbacks")
                    for d in done:
                        try:
                            c.activity_enable_driver_api(d, 0)
                        except Exception:
                            pass
                    self.api_on = False
                    return False
        self.api_on = bool(on)
        return True

    def _launch_cbids(self) -> List[int]:
        return launch_cbids(self.cupti)

    def _copy_cbids(self) -> List[int]:
        return copy_cbids(self.cupti)

    def _runtime_cbids(self) -> List[int]:
        R = self.cupti.RuntimeApiTraceCbid
        return sorted({int(getattr(R, n)) for n in R.__members__
                       if n.startswith(("cudaLaunchKernel", "cudaLaunchCooperativeKernel", "cudaGraphLaunch"))})

    def _set_launch_callbacks(self, on: bool) -> None:
        c, sub = self.cupti, self.subscriber
        D = c.DriverApiTraceCbid
        required = {int(getattr(D, n)) for n in ("cuLaunchKernel", "cuLaunchKernelEx") if hasattr(D, n)}
        for cbid in self._launch_cbids():
            # ids this CUPTI/driver pair does not know are skipped; the core launch ids must work
            try:
                c.enable_callback(int(on), sub, self.DRIVER, cbid)
            except Exception as e:
                if cbid in required and on:
                    raise
                self.skipped.append(f"callback id {cbid}: {_first_line(e)}")
        self.launch_callbacks = bool(on)

    def _enable_callbacks(self, on: int) -> None:
        c, sub = self.cupti, self.subscriber
        launches = bool(on) and (not self.light or self.python or bool(self.launch_listeners))
        if launches or self.launch_callbacks:
            self._set_launch_callbacks(launches)
        if options.get("cupti_runtime_callbacks"):
            for cbid in self._runtime_cbids():
                try:
                    c.enable_callback(on, sub, self.RUNTIME, cbid)
                except Exception:
                    pass
        for cbid in (self.GRAPHNODE_CREATED, self.GRAPHNODE_CLONED):
            try:
                c.enable_callback(on, sub, self.RESOURCE, cbid)
            except Exception as e:  # graphs then fall back to the launch site
                self.skipped.append(f"graph callback {cbid}: {_first_line(e)}")
        if self.lazy_ctx and self.CONTEXT_CREATED >= 0:   # lazy API records started before CUDA: _context_created
            try:
                c.enable_callback(on, sub, self.RESOURCE, self.CONTEXT_CREATED)
            except Exception as e:
                self.skipped.append(f"context callback: {_first_line(e)}")
        for (domain, cbid) in self.handlers:
            try:
                c.enable_callback(on, sub, domain, cbid)
            except Exception:
                pass

    def _teardown(self) -> None:
        c = self.cupti
        if self.light:
            self._enable_api_records(0)
            context.timelines_off()
        for kind in self.kinds:
            try:
                c.activity_disable(kind)
            except Exception:
                pass
        self.kinds = []
        if self.subscriber is not None:
            try:
                c.unsubscribe(self.subscriber)
            except Exception:
                pass
            self.subscriber = None

    def stop(self) -> None:
        """Disable everything and release the subscriber (after the last session; its records
        were flushed when it was finalized)."""
        with CuptiBackend._lock:
            if not self.running:
                return
            self.running = False
            self._teardown()
            self._rearm_pcsampling()  # contexts left enabled across the unsubscribe: enable afresh
            self.corr.clear()
            self.api.clear()
            self.ext.clear()
            self.pending.clear()
            self.held = cupti_records.Records()
            self.raw, self.raw_count = [], 0
            if CuptiBackend._instance is self:
                CuptiBackend._instance = None

    # -- the launch callback ---------------------------------------------------------------
    def _make_callback(self):
        """The subscriber callback.  One callback for the whole run: switching call-path capture or
        launch listeners on flips ``self._full`` (re-subscribing CUPTI mid-run loses every later
        activity record)."""
        corr = self.corr
        local = context.local
        MAIN = context.MAIN
        RESOURCE = self.RESOURCE
        CallbackData = self.cupti.CallbackData
        slow = self._slow_callback
        full = self._full
        capture = self._capture
        listeners = self.launch_listeners
        error = self._error

        def callback(userdata, domain, cbid, data):
            if domain != RESOURCE:
                try:
                    if type(data) is int:
                        data = CallbackData.from_ptr(data)
                    if data.callback_site == 0:   # API_ENTER
                        if full[0]:
                            corr[data.correlation_id] = capture()
                            return
                        c = local.ctx
                        if c.inherit and c.node == 0:
                            corr[data.correlation_id] = MAIN.node
                        else:
                            corr[data.correlation_id] = c.node
                    elif listeners:
                        cid, name = data.correlation_id, data.symbol_name
                        for fn in listeners:
                            try:
                                fn(correlation_id=cid, name=name)
                            except Exception as e:
                                error(f"launch listener: {_first_line(e)}")
                except Exception:
                    pass
            else:
                slow(domain, cbid, data)
        return callback

    @staticmethod
    def _capture_python():
        c = context.local.ctx
        n = c.node
        if n == 0 and c.inherit:
            n = context.MAIN.node
        # kprof's own frames (this one, the callback) are dropped when the key becomes frame names
        return (n, context.python_key_here(1))

    def _capture(self):
        if self.python:
            return self._capture_python()
        c = context.local.ctx
        n = c.node
        if n == 0 and c.inherit:
            n = context.MAIN.node
        return n

    def _context_created(self) -> None:
        """CUPTI's CONTEXT_CREATED callback: a profile started before CUDA was up kept the launch API records on
        while CUDA came up (see _start); they go off now, until the first scope.  Only tries the arming lock: a
        thread arming now turns them on anyway, and waiting here (inside CUPTI's callback) for a thread that
        waits on CUPTI could deadlock."""
        if not self.lazy_ctx or not self._arm_lock.acquire(blocking=False):
            return
        try:
            if self.lazy_ctx and not self.api_wanted and self.light and self.subscriber is not None:
                self._enable_api_records(0)
            self.lazy_ctx = False
        finally:
            self._arm_lock.release()

    def _slow_callback(self, domain, cbid, data) -> None:
        if domain == self.RESOURCE and cbid == self.CONTEXT_CREATED:
            try:
                self._context_created()
            except Exception as e:
                self._error(f"context callback: {_first_line(e)}")
        try:
            if domain == self.RESOURCE and cbid in (self.GRAPHNODE_CREATED, self.GRAPHNODE_CLONED):
                c = self.cupti
                rd = data if hasattr(data, "resource_descriptor") else c.ResourceData.from_ptr(int(data))
                g = c.GraphData.from_ptr(int(rd.resource_descriptor))
                nid = int(c.get_graph_node_id(g.node))
                if cbid == self.GRAPHNODE_CREATED:
                    # Nodes created while capturing get the capture site; nodes created by
                    # instantiation keep what GRAPHNODE_CLONED gives them (whatever the order).
                    self.graph_nodes.setdefault(nid, self._capture())
                else:
                    v = self.graph_nodes.get(int(c.get_graph_node_id(g.original_node)))
                    if v is not None:
                        self.graph_nodes[nid] = v
        except Exception as e:
            self._error(f"graph callback: {_first_line(e)}")
        for h in self.handlers.get((int(domain), int(cbid)), ()):
            try:
                h(domain, cbid, data)
            except Exception as e:
                self._error(f"callback handler {getattr(h, '__name__', h)}: {_first_line(e)}")

    def register_callback(self, domain: int, cbid: int, fn: Callable) -> None:
        """Let another part of kprof (PC sampling) receive CUPTI callbacks of ``(domain, cbid)`` on
        this process's single subscriber: ``fn(domain, cbid, data)``.  Not for launch ids."""
        key = (int(domain), int(cbid))
        self.handlers.setdefault(key, []).append(fn)
        if self.subscriber is not None:
            self.cupti.enable_callback(1, self.subscriber, key[0], key[1])

    def _error(self, msg: str) -> None:
        if len(self.errors) < 20:
            self.errors.append(msg)

    def set_python(self, on: bool) -> None:
        """Capture Python call paths in the launch callback (turning the callback on if needed)."""
        self.python = bool(on)
        self._full[0] = self.python
        if self.python and self.light:   # launches are still placed in time by their API records
            self._arm()
        self._update_launch_callbacks()

    def add_launch_listener(self, fn: Callable) -> None:
        """Call ``fn(correlation_id=..., name=...)`` on every launch's API exit (PC sampling)."""
        if self.light:
            self._leave_light_mode()
        self.launch_listeners.append(fn)
        self._update_launch_callbacks()

    def _leave_light_mode(self) -> None:
        """Switch to launch callbacks: a kprof session with PC sampling gets no kernel records at all
        beside API activity records.  What was launched so far is delivered
        first; the sessions' windows then continue in correlation ids."""
        self.flush()
        with self.proc_lock:
            self._enable_api_records(0)
            self.light = False
            self.external = False
            if self.rawbufs is not None:
                self.rawbufs.eager = True
            context.timelines_off()
            mark = self.watermark()
            for s in self.sessions:
                open_now = bool(s.windows) and s.windows[-1][1] is None
                s.windows[:] = [[mark, None]] if open_now else []
        self._set_launch_callbacks(True)

    def _update_launch_callbacks(self) -> None:
        if self.subscriber is None or not self.light:
            return
        want = self.python or bool(self.launch_listeners)
        if want != self.launch_callbacks:
            try:
                self._set_launch_callbacks(want)
            except Exception as e:
                self._error(f"launch callbacks: {_first_line(e)}")

    # -- sessions --------------------------------------------------------------------------
    def watermark(self) -> int:
        """Where a session window starts or ends: now on CUPTI's clock (API-record mode), else the
        newest correlation id handed out so far (approximately: the last one stored)."""
        if self.light:
            return int(self.clock())
        try:
            return max(next(reversed(self.corr)), self.max_cid)
        except (StopIteration, RuntimeError):
            return self.max_cid

    def _unarmed_mark(self) -> int:
        """A window edge while launches have no API records (lazy, not armed): their kernels are
        windowed by their start times, so the edge waits for the GPU work launched before it (not
        during a CUDA graph capture, which a synchronize would break: captured work has no records)."""
        if not _capturing():
            self.synchronize()
        return self.watermark()

    def attach(self, session) -> None:
        session.windows.append([self._unarmed_mark() if self.light and not self.api_wanted else self.watermark(),
                                None])
        if session not in self.sessions:
            self.sessions.append(session)
        if session.context == "python" and not self.python:
            self.set_python(True)

    def detach(self, session) -> None:
        if session.windows and session.windows[-1][1] is None:
            session.windows[-1][1] = (self._unarmed_mark() if self.light and not self.api_wanted
                                      else self.watermark())

    def release(self, session) -> None:
        """The session is finalized: stop routing records to it; stop CUPTI after the last one."""
        if session in self.sessions:
            self.sessions.remove(session)
        if not self.sessions:
            self.launch_listeners.clear()
            self.stop()
        else:
            if self.python and not any(s.context == "python" for s in self.sessions):
                try:
                    self.set_python(False)
                except Exception:
                    pass

    def to_trace_clock(self, host_ns: int) -> int:
        return host_ns + self.clock_offset

    # -- records ---------------------------------------------------------------------------
    def _buffer_requested(self):
        return self.buffer_bytes, 0

    def _buffer_completed(self, activities) -> None:
        t0 = time.perf_counter_ns()
        st = self.loop_stats
        st["buffers"] += 1
        try:
            st["records"] += len(activities)
        except TypeError:   # an iterable without a length: counted as buffers only
            pass
        try:
            with self.proc_lock:
                if self.deferred and self.light:
                    # keep cupti-python's record objects (they own copies of the records); split them
                    # at the flush, or here once RAW_MAX are held (memory: ~0.3 KB a record)
                    self.raw.append(activities)
                    self.raw_count += len(activities)
                    if self.raw_count < RAW_MAX:
                        return
                    activities = ()
                self._process(activities, in_loop=True)
        except Exception as e:
            self._error(f"activity records: {_first_line(e)}")
        finally:
            st["callback_ns"] += time.perf_counter_ns() - t0

    def synchronize(self) -> None:
        """Wait for this process's GPU work (so its records are complete before the flush): every
        device whose primary context is active -- without creating contexts on unused devices."""
        try:
            from cuda.bindings import driver as drv
            err, n = drv.cuDeviceGetCount()
            if int(err) != 0:
                raise RuntimeError("cuDeviceGetCount")
            for d in range(int(n)):
                err, dev = drv.cuDeviceGet(d)
                if int(err) != 0:
                    continue
                err, _flags, active = drv.cuDevicePrimaryCtxGetState(dev)
                if int(err) != 0 or not active:
                    continue
                err, ctx = drv.cuDevicePrimaryCtxRetain(dev)
                if int(err) != 0:
                    continue
                try:
                    if int(drv.cuCtxPushCurrent(ctx)[0]) == 0:
                        try:
                            drv.cuCtxSynchronize()
                        finally:
                            drv.cuCtxPopCurrent()
                finally:
                    drv.cuDevicePrimaryCtxRelease(dev)
            return
        except Exception:
            pass
        torch = sys.modules.get("torch")
        try:
            if torch is not None and torch.cuda.is_initialized():
                torch.cuda.synchronize()
        except Exception:
            pass

    def flush(self) -> None:
        if not self.running:
            return
        self.synchronize()
        try:
            self.cupti.activity_flush_all(1)
        except Exception as e:
            self._error(f"flush: {_first_line(e)}")
        with self.proc_lock:  # wait for a completion callback still running on CUPTI's thread
            if self.pending or self.held.count or self.raw or (self.rawbufs is not None and self.rawbufs.done):
                try:
                    self._process((), final=True)
                except Exception as e:
                    self._error(f"activity records: {_first_line(e)}")

    def _targets(self, key: int) -> List[Any]:
        """Sessions whose active windows hold ``key`` (launch time, or correlation id)."""
        out = []
        for s in self.sessions:
            for lo, hi in s.windows:
                if key > lo and (hi is None or key <= hi):
                    out.append(s)
                    break
        return out

    def _process(self, activities, final: bool = False, in_loop: bool = False) -> None:
        """Join device records to their launches and hand them to the sessions.  ``final``: the
        last flush -- a record whose API record never came goes to the root (window: its start).

        With API records (the default), delivery waits for the flush, or until ``DEFER_MAX``
        records are waiting (then the oldest beyond it): the join costs ~2 us per record under the
        GIL, and run during the program it slows the program down (this callback runs on CUPTI's
        thread).  ``in_loop``: called from a buffer callback while the program runs (counted in
        :attr:`loop_stats`), not from the flush."""
        if self.rawbufs is not None:
            self._take_raw(everything=not in_loop)
        if self.raw:
            raw, self.raw, self.raw_count = self.raw, [], 0
            for acts in raw:
                self.held.extend(cupti_records.split(self.cupti, acts, self._kinds, self._memcpy_label, self.names))
        if activities:
            self.held.extend(cupti_records.split(self.cupti, activities, self._kinds, self._memcpy_label, self.names))
        self.max_cid = max(self.max_cid, self.held.max_cid)
        if self.light and not final:
            if self.held.count < DEFER_MAX:
                return
            # past the bound only the oldest records beyond it: about one buffer per completion, not a
            # pause of DEFER_MAX records inside the program's loop
            held = self.held.take_oldest(DEFER_MAX - 1)
        else:
            held, self.held = self.held, cupti_records.Records()
        self.api.update(held.api())
        if self.external:
            self.ext.update(held.ext())
        recs, self.pending = self.pending + held.device(), []
        if in_loop:
            self.loop_stats["delivered"] += len(recs)
        if recs:
            self._deliver(recs, final)
        if len(self.corr) > PRUNE_AT or len(self.api) > PRUNE_AT or len(self.ext) > PRUNE_AT:
            limit = self.max_cid - PRUNE_MARGIN
            for d in (self.corr, self.api, self.ext):
                for k in [k for k in list(d) if k < limit]:
                    d.pop(k, None)

    def _to_timeline(self) -> Optional[Callable[[int], int]]:
        """CUPTI time -> the timelines' host clock (None when they read CUPTI's clock): the offset
        measured now joins those of the start and earlier joins, and a time takes the offset linearly
        interpolated between the first and the last (a host clock that is CUPTI's moves neither)."""
        offs = self.tl_offsets
        if offs is None:
            return None
        try:
            offs.append(clock_offset(self.clock, self.tl_clock))
        except Exception:   # CUPTI stopped: the offsets so far
            pass
        (h0, o0), (h1, o1) = offs[0], offs[-1]
        if h1 <= h0 or o1 == o0:
            return lambda t: t - o0
        slope = (o1 - o0) / (h1 - h0)
        return lambda t: t - int(o0 + slope * (t - o0 - h0))

    def _memcpy_label(self, kind) -> str:
        label = self._memcpy_labels.get(kind)
        if label is None:
            label = self._memcpy_labels[kind] = "memcpy " + _memcpy_name(self.cupti, kind)
        return label

    def _deliver(self, recs: List[tuple], final: bool) -> None:
        corr_get = self.corr.get
        graph_get = self.graph_nodes.get
        api_get = self.api.get
        ext_get = self.ext.get
        ext_node = context.ext_node
        targets_of = self._targets
        light = self.light
        # lazy and not armed: no launch has an API record; armed: those that started before it are the root's,
        # and so are those without one at the last flush (launched before it, queued: windowed at armed_at)
        armed = self.api_wanted
        armed_at = self.armed_at if armed else None
        threads = None
        for rec in recs:
            cid, name, is_kernel, dev, start, end, extra_bytes, stream, gnode = rec
            value = corr_get(cid)
            if light:
                launch = api_get(cid)
                if launch is None:
                    # no API record: launched before they were on (lazy mode) -- then the root's -- or
                    # its record has not come yet (it waits, unless this is the last flush)
                    if not final and armed and (armed_at is None or start >= armed_at):
                        self.pending.append(rec)
                        continue
                    key = start if armed_at is None or start < armed_at else armed_at
                else:
                    key = launch[1]
                    if value is None:
                        eid = ext_get(cid)
                        if eid is not None:
                            value = ext_node(eid)
                    if value is None:
                        if threads is None:
                            threads = context.live_threads()
                            to_tl = self._to_timeline()
                        value = context.node_at(launch[0], launch[1] if to_tl is None else to_tl(launch[1]), threads)
            else:
                key = cid
            if value is None:
                value = 0
            if gnode:
                value = graph_get(gnode, value)
            targets = targets_of(key)
            if not targets:
                continue
            for s in targets:
                s.add_gpu_record(value, name, is_kernel, dev, start, end, extra_bytes, stream, cid)


def host_clock(name: str) -> Callable[[], int]:
    """The ``time`` function reading host clock ``name`` (profiler.options.TIMELINE_CLOCKS) in ns."""
    if name == "realtime":
        return time.time_ns
    if name == "monotonic":
        return time.perf_counter_ns if time.get_clock_info("perf_counter").implementation.startswith(
            "clock_gettime(CLOCK_MONOTONIC)") else time.monotonic_ns
    return functools.partial(time.clock_gettime_ns, time.CLOCK_MONOTONIC_RAW)


def clock_offset(ref: Callable[[], int], host: Callable[[], int], tries: int = 16) -> Tuple[int, int]:
    """``(host time, ref - host)`` from the narrowest of ``tries`` bracketed reads ``host, ref, host``."""
    best = None
    for _ in range(tries):
        a = host()
        r = int(ref())
        b = host()
        if best is None or b - a < best[0]:
            best = (b - a, (a + b) // 2, r - (a + b) // 2)
    return best[1], best[2]


def launch_cbids(cupti) -> List[int]:
    """The driver-API ids whose activity records place launches (API-record mode): kernel launches,
    graph launches, copies and memsets.  The overhead bench's ``floor-api`` enables the same ids."""
    D = cupti.DriverApiTraceCbid
    names = ["cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz",
             "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel_ptsz",
             "cuLaunchCooperativeKernelMultiDevice", "cuLaunchGrid", "cuLaunchGridAsync",
             "cuGraphLaunch", "cuGraphLaunch_ptsz"]
    return sorted({int(getattr(D, n)) for n in names if hasattr(D, n)} | set(copy_cbids(cupti)))


def copy_cbids(cupti) -> List[int]:
    """The copy and memset ids among :func:`launch_cbids`."""
    D = cupti.DriverApiTraceCbid
    return sorted({int(getattr(D, n)) for n in D.__members__ if n.startswith(("cuMemcpy", "cuMemset"))})


def _memcpy_name(cupti, kind) -> str:
    try:
        n = cupti.ActivityMemcpyKind(int(kind)).name
    except Exception:
        return str(kind)
    return _MEMCPY_KINDS.get(n, n)
