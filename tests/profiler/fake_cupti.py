"""A stand-in for cupti-python's ``cupti.cupti`` module, enough to drive kprof's cupti backend on a
machine without a GPU: launches call the subscriber's callback as CUPTI does (API enter and exit,
same correlation id), graph capture/instantiation raise the resource callbacks, and
``activity_flush_all`` hands the queued activity records to the buffer-completed callback.

Names and shapes follow cupti-python 13.4 (``cupti.pyi``): enums, ``CallbackData.callback_site`` /
``correlation_id``, ``ResourceData.resource_descriptor``, ``GraphData.node`` / ``original_node``,
records with ``kind, name, start, end, device_id, stream_id, correlation_id, graph_node_id``.
"""
from __future__ import annotations

import enum
import itertools
import threading
from types import SimpleNamespace

try:   # the real module's struct dtypes (it imports without a GPU), for raw buffers
    from cupti import cupti as _REAL
except Exception:  # pragma: no cover - cupti-python is a test dependency
    _REAL = None


class CallbackDomain(enum.IntEnum):
    INVALID = 0
    DRIVER_API = 1
    RUNTIME_API = 2
    RESOURCE = 3


class CallbackIdResource(enum.IntEnum):
    CONTEXT_CREATED = 1
    GRAPHNODE_CREATED = 13
    GRAPHNODE_CLONED = 20


class ActivityKind(enum.IntEnum):
    MEMCPY = 1
    MEMSET = 2
    KERNEL = 3
    DRIVER = 4
    CONCURRENT_KERNEL = 10
    EXTERNAL_CORRELATION = 39


class ExternalCorrelationKind(enum.IntEnum):
    INVALID = 0
    UNKNOWN = 1
    OPENACC = 2
    CUSTOM0 = 3


class ActivityMemcpyKind(enum.IntEnum):
    UNKNOWN = 0
    HTOD = 1
    DTOH = 2


class DriverApiTraceCbid(enum.IntEnum):
    cuDeviceGetCount = 3
    cuMemcpyHtoD_v2 = 276
    cuMemsetD8_v2 = 290
    cuLaunchKernel = 307
    cuLaunchKernel_ptsz = 442
    cuGraphLaunch = 514
    cuLaunchKernelEx = 652


class RuntimeApiTraceCbid(enum.IntEnum):
    cudaLaunchKernel_v7000 = 211


class cuptiError(Exception):
    pass


class NotSupportedError(RuntimeError):
    pass


_objects = {}
_ptr = itertools.count(0x1000, 0x10)


def _register(obj) -> int:
    p = next(_ptr)
    _objects[p] = obj
    return p


class CallbackData:
    def __init__(self, site, cid, name=""):
        self.callback_site = site
        self.correlation_id = cid
        self.symbol_name = name
        self.function_name = "cuLaunchKernel"

    @staticmethod
    def from_ptr(ptr, readonly=False, owner=None):
        return _objects[ptr]


class ResourceData:
    def __init__(self, descriptor_ptr):
        self.resource_descriptor = descriptor_ptr
        self.context = 0

    @staticmethod
    def from_ptr(ptr, readonly=False, owner=None):
        return _objects[ptr]


class GraphData:
    def __init__(self, node, original_node=0, node_type=0):
        self.node = node
        self.original_node = original_node
        self.node_type = node_type

    @staticmethod
    def from_ptr(ptr, readonly=False, owner=None):
        return _objects[ptr]


class FakeCupti:
    """The module object (``from cupti import cupti`` gives an instance) plus simulation methods."""

    CallbackDomain = CallbackDomain
    CallbackIdResource = CallbackIdResource
    ActivityKind = ActivityKind
    ExternalCorrelationKind = ExternalCorrelationKind
    ActivityMemcpyKind = ActivityMemcpyKind
    DriverApiTraceCbid = DriverApiTraceCbid
    RuntimeApiTraceCbid = RuntimeApiTraceCbid
    CallbackData = CallbackData
    ResourceData = ResourceData
    GraphData = GraphData
    cuptiError = cuptiError

    def __getattr__(self, name):
        if name.endswith("_dtype") and _REAL is not None:
            return getattr(_REAL, name)
        raise AttributeError(name)

    def __init__(self, *, busy=False, pass_pointers=False, api_records=True, clock=None):
        self.busy = busy
        self.api_records = api_records    # False: a CUPTI without per-id API activity records
        self.api_ids = set()              # driver ids whose API activity records are on
        self.pass_pointers = pass_pointers  # hand callbacks raw pointers (ints) instead of objects
        self.callback = None
        self.enabled = set()
        self.kinds = set()
        self.requested = self.completed = None
        self.pending = []
        self.cid = itertools.count(1)
        self.clock = 1_000_000
        self.clock_fn = clock       # timestamps from this host clock (a counter when None)
        self.node_ids = {}          # node handle -> CUPTI graph node id
        self.next_node = itertools.count(100)
        self.subscribes = 0
        self.unsubscribes = 0
        self.flushes = 0
        self.ext_stacks = {}        # (thread id, kind) -> CUPTI's external correlation stack
        self.lib = None             # a FakeLibcupti, when kprof takes buffers from libcupti itself
        # contexts: None until the first is created (CUDA not up).  ctx_api_model: a context created while no
        # launch id's API record is on gives none -- a stand-in for what kprof saw on an H200 with the records off
        # while CUDA came up (no launch placed; session 22), not for raw CUPTI, which kept them in every order
        self.contexts = None
        self.ctx_api_model = False
        self.ctx_dead = False       # the current context got created with every launch id's records off

    # -- the cupti-python surface kprof uses ---------------------------------------------
    def subscribe(self, callback, userdata):
        if self.busy or self.callback is not None:
            raise cuptiError("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED")
        self.callback = callback
        self.subscribes += 1
        return 0xABC

    def unsubscribe(self, handle):
        self.callback = None
        self.enabled.clear()
        self.unsubscribes += 1

    def enable_callback(self, enable, subscriber, domain, cbid):
        key = (int(domain), int(cbid))
        (self.enabled.add if enable else self.enabled.discard)(key)

    def activity_register_callbacks(self, requested, completed):
        self.requested, self.completed = requested, completed
        if self.lib is not None:   # one registration per process: the last one wins
            self.lib.req = self.lib.cmp = None

    def activity_enable(self, kind):
        self.kinds.add(int(kind))

    def activity_disable(self, kind):
        self.kinds.discard(int(kind))

    def activity_flush_all(self, flag):
        self.flushes += 1
        recs, self.pending = self.pending, []
        if self.lib is not None and self.lib.req is not None:
            self.lib.deliver(recs)
            return
        size, _ = self.requested()
        assert size > 0
        if recs:
            self.completed(recs)

    def activity_enable_driver_api(self, cbid, enable):
        if not self.api_records:
            raise cuptiError("CUPTI_ERROR_NOT_SUPPORTED")
        (self.api_ids.add if enable else self.api_ids.discard)(int(cbid))

    def activity_push_external_correlation_id(self, kind, id):
        self.ext_stacks.setdefault((threading.get_ident(), int(kind)), []).append(int(id))

    def activity_pop_external_correlation_id(self, kind):
        stack = self.ext_stacks.get((threading.get_ident(), int(kind)))
        if not stack:
            raise cuptiError("CUPTI_ERROR_QUEUE_EMPTY")
        return stack.pop()

    def get_timestamp(self):
        if self.clock_fn is not None:
            return self.clock_fn()
        self.clock += 1
        return self.clock

    def get_graph_node_id(self, node):
        return self.node_ids[node]

    # -- simulation ----------------------------------------------------------------------
    def create_context(self):
        """CUDA's first (or next) context: CONTEXT_CREATED, as CUPTI raises it on the creating thread."""
        self.contexts = (self.contexts or 0) + 1
        self.ctx_dead = self.ctx_api_model and not self.api_ids
        self._resource(CallbackIdResource.CONTEXT_CREATED, SimpleNamespace())

    def _api(self, domain, cbid, cid):
        if int(domain) == CallbackDomain.DRIVER_API and int(cbid) in self.api_ids and ActivityKind.DRIVER not in self.kinds \
                and not self.ctx_dead:
            start = self.get_timestamp()   # written by CUPTI on the launching thread, as the call starts
            if ActivityKind.EXTERNAL_CORRELATION in self.kinds:   # one record per kind with a pushed id
                for (tid, kind), stack in self.ext_stacks.items():
                    if tid == threading.get_ident() and stack:
                        self.pending.append(SimpleNamespace(kind=int(ActivityKind.EXTERNAL_CORRELATION),
                                                            external_kind=kind, external_id=stack[-1],
                                                            correlation_id=cid))
            self.pending.append(SimpleNamespace(kind=int(ActivityKind.DRIVER), correlation_id=cid, start=start,
                                                end=start + 1, thread_id=threading.get_ident() & 0xFFFFFFFF,
                                                cbid=int(cbid)))
        if (int(domain), int(cbid)) not in self.enabled or self.callback is None:
            return
        for site in (0, 1):
            data = CallbackData(site, cid)
            self.callback(None, int(domain), int(cbid), _register(data) if self.pass_pointers else data)

    def _resource(self, cbid, graph_data):
        if (int(CallbackDomain.RESOURCE), int(cbid)) not in self.enabled or self.callback is None:
            return
        rd = ResourceData(_register(graph_data))
        self.callback(None, int(CallbackDomain.RESOURCE), int(cbid), _register(rd) if self.pass_pointers else rd)

    def _record(self, kind, cid, name=None, dur=1000, device=0, stream=7, graph_node_id=0, nbytes=0, copy_kind=1):
        start = self.clock + 1   # the GPU starts after the launch call began (kprof windows unplaced kernels by it)
        self.clock += dur + 11
        rec = SimpleNamespace(kind=int(kind), correlation_id=cid, start=start, end=start + dur, device_id=device,
                              stream_id=stream, graph_node_id=graph_node_id, name=name, bytes=nbytes,
                              copy_kind=copy_kind)
        if int(kind) in self.kinds or (int(kind) == ActivityKind.CONCURRENT_KERNEL and ActivityKind.KERNEL in self.kinds):
            self.pending.append(rec)

    def launch(self, name="kernel", dur=1000, device=0, cbid=DriverApiTraceCbid.cuLaunchKernel, runtime=False):
        """A kernel launch (a torch launch: the runtime callback first, then the driver's, one id)."""
        cid = next(self.cid)
        if runtime:
            self._api(CallbackDomain.RUNTIME_API, RuntimeApiTraceCbid.cudaLaunchKernel_v7000, cid)
        self._api(CallbackDomain.DRIVER_API, cbid, cid)
        self._record(ActivityKind.CONCURRENT_KERNEL, cid, name, dur, device)
        return cid

    def memcpy(self, nbytes=4096, dur=500):
        cid = next(self.cid)
        self._api(CallbackDomain.DRIVER_API, DriverApiTraceCbid.cuMemcpyHtoD_v2, cid)
        self._record(ActivityKind.MEMCPY, cid, None, dur, nbytes=nbytes, copy_kind=ActivityMemcpyKind.HTOD)

    def memset(self, nbytes=1024, dur=300):
        cid = next(self.cid)
        self._api(CallbackDomain.DRIVER_API, DriverApiTraceCbid.cuMemsetD8_v2, cid)
        self._record(ActivityKind.MEMSET, cid, None, dur, nbytes=nbytes)

    def capture_launch(self, graph, name="kernel"):
        """A launch while a stream is captured into ``graph`` (a list): no record, a new node."""
        cid = next(self.cid)
        node = next(self.next_node)
        self.node_ids[node] = 10_000 + node
        # CUPTI calls the resource callback from inside the launch API call
        if (int(CallbackDomain.DRIVER_API), int(DriverApiTraceCbid.cuLaunchKernel)) in self.enabled and self.callback:
            self.callback(None, 1, int(DriverApiTraceCbid.cuLaunchKernel), CallbackData(0, cid))
            self._resource(CallbackIdResource.GRAPHNODE_CREATED, GraphData(node))
            self.callback(None, 1, int(DriverApiTraceCbid.cuLaunchKernel), CallbackData(1, cid))
        else:
            self._resource(CallbackIdResource.GRAPHNODE_CREATED, GraphData(node))
        graph.append((node, name))

    def instantiate(self, graph):
        """cuGraphInstantiate: every node is created anew, then reported as a clone."""
        exec_graph = []
        for node, name in graph:
            new = next(self.next_node)
            self.node_ids[new] = 10_000 + new
            self._resource(CallbackIdResource.GRAPHNODE_CREATED, GraphData(new))
            self._resource(CallbackIdResource.GRAPHNODE_CLONED, GraphData(new, original_node=node))
            exec_graph.append((new, name))
        return exec_graph

    def graph_launch(self, exec_graph, dur=800):
        cid = next(self.cid)
        self._api(CallbackDomain.DRIVER_API, DriverApiTraceCbid.cuGraphLaunch, cid)
        for node, name in exec_graph:
            self._record(ActivityKind.CONCURRENT_KERNEL, cid, name, dur, graph_node_id=self.node_ids[node])
        return cid


class FakeLibcupti:
    """libcupti's buffer callbacks as profiler/backends/cupti_raw.py uses them through ctypes: records
    are written as the structs of cupti-python's dtypes, back to back, into the buffer kprof hands out."""

    DTYPES = {ActivityKind.CONCURRENT_KERNEL: "activity_kernel13_dtype", ActivityKind.KERNEL: "activity_kernel13_dtype",
              ActivityKind.MEMCPY: "activity_memcpy6_dtype", ActivityKind.MEMSET: "activity_memset4_dtype",
              ActivityKind.DRIVER: "activity_api_dtype",
              ActivityKind.EXTERNAL_CORRELATION: "activity_external_correlation_dtype"}

    def __init__(self, fake: FakeCupti):
        import ctypes
        self.ctypes, self.real = ctypes, _REAL
        self.fake = fake
        fake.lib = self
        self.req = self.cmp = None
        self.names = {}
        self.next_calls = 0
        self.buffers = 0
        self.cuptiActivityGetNextRecord = SimpleNamespace()   # kprof sets argtypes/restype on it

    def cuptiActivityRegisterCallbacks(self, req, cmp):
        self.req, self.cmp = req, cmp
        return 0

    def _dtype(self, kind):
        return getattr(self.real, self.DTYPES[ActivityKind(kind)])

    def _struct(self, rec) -> bytes:
        import numpy as np
        dt = self._dtype(rec.kind)
        a = np.zeros(1, dtype=dt)
        for f in dt.names:
            v = getattr(rec, f, None)
            if f == "name":
                if v is None:
                    continue
                buf = self.names.setdefault(v, self.ctypes.create_string_buffer(v.encode()))
                v = self.ctypes.addressof(buf)
            if v is not None:
                a[f] = v
        return a.tobytes()

    def deliver(self, recs) -> None:
        """One buffer per flush: request it, write the records, complete it (as CUPTI's thread would)."""
        ctypes = self.ctypes
        u8p = ctypes.POINTER(ctypes.c_uint8)
        bufp, size, maxrec = ctypes.pointer(u8p()), ctypes.pointer(ctypes.c_size_t()), ctypes.pointer(ctypes.c_size_t())
        self.req(bufp, size, maxrec)
        data = b"".join(self._struct(r) for r in recs)
        assert len(data) <= size.contents.value, "records overflow the buffer"
        ctypes.memmove(ctypes.cast(bufp.contents, ctypes.c_void_p).value, data, len(data))
        self.buffers += 1
        self.cmp(None, 0, bufp.contents, size.contents.value, len(data))

    def next_record(self, base: int, valid: int, cur: int) -> int:
        """cuptiActivityGetNextRecord: the record after ``cur`` (0: the first), 0 at the end."""
        self.next_calls += 1
        if not cur:
            return base if valid else 0
        kind = self.ctypes.c_int32.from_address(cur).value
        nxt = cur + self._dtype(kind).itemsize
        return nxt if nxt < base + valid else 0


def install_libcupti(monkeypatch, fake: FakeCupti) -> FakeLibcupti:
    """Let kprof's ``cupti_records="raw"`` find ``FakeLibcupti`` as the process's libcupti."""
    from profiler.backends import cupti_raw
    lib = FakeLibcupti(fake)
    monkeypatch.setattr(cupti_raw, "find_libcupti", lambda: lib)
    monkeypatch.setattr(cupti_raw.RawBuffers, "_next_record", lambda self, b, v, c: lib.next_record(b, v, c))
    return lib


def install(monkeypatch, fake: FakeCupti) -> FakeCupti:
    """Make ``from cupti import cupti`` return ``fake`` and reset kprof's backend state."""
    import sys
    import types

    if fake.clock_fn is None:   # a counter is no host clock: timelines read it (kprof's default reads the host's)
        monkeypatch.setenv("KPROF_CUPTI_TIMELINE_CLK", "cupti")
    pkg = types.ModuleType("cupti")
    pkg.cupti = fake
    monkeypatch.setitem(sys.modules, "cupti", pkg)
    monkeypatch.setitem(sys.modules, "cupti.cupti", fake)
    from profiler.backends import cupti as backend_mod
    from profiler.backends import cupti_raw
    # a fake cupti never pairs with a real libcupti this process may have loaded (the raw records mode,
    # the default, then falls back to the fake's callbacks); install_libcupti gives it a fake one
    monkeypatch.setattr(cupti_raw, "find_libcupti", lambda: None)
    monkeypatch.setattr(backend_mod.CuptiBackend, "_instance", None)
    monkeypatch.setattr(backend_mod, "_device_count", lambda: 1)
    monkeypatch.setattr("profiler.backends._said", False)
    return fake
