"""CUPTI's PC sampling API (``cupti_pcsampling.h``) through ctypes, and a collector on top of it.

cupti-python has no binding for this API, so it is called here with ctypes against the very
libcupti that cupti-python loads (``cuda.pathfinder.load_nvidia_dynamic_lib("cupti")``; set
``KPROF_LIBCUPTI`` to force another file).  Struct layouts are those of CUPTI >= 12.4 on x86-64
(checked against the 13.4 header with a C compiler; ``tests/pcsampling/test_cupti_structs.py``).

Call sequence, per CUDA context (:class:`Collector`)::

    cuptiPCSamplingEnable
    cuptiPCSamplingGetNumStallReasons / cuptiPCSamplingGetStallReasons   (names resolved at run time)
    cuptiPCSamplingSetConfigurationAttribute:
        SAMPLING_PERIOD (2^N cycles, N in 5..31), STALL_REASON (the counted family only),
        SCRATCH_BUFFER_SIZE, HARDWARE_BUFFER_SIZE, COLLECTION_MODE = KERNEL_SERIALIZED (records carry
        the kernel's correlation id), ENABLE_START_STOP_CONTROL = 1, SAMPLING_DATA_BUFFER = buffer A
    cuptiPCSamplingStart
      ... kernels ...   drain(): cuptiPCSamplingGetData into buffer B until remainingNumPcs == 0
    cuptiPCSamplingStop
      read buffer A first: after Stop CUPTI has already put the range's PCs there (a GetData into A
      would overwrite them with nothing: the verified pitfall), then drain() into B
    cuptiPCSamplingDisable   (CUPTI may flush what is left into A once more: read it)

Per-sample Python work is kept out of the way: every PC record's stall-reason array points into one
contiguous block we allocate, so a buffer is decoded with a handful of numpy operations, whatever
the number of PCs.  Function-name strings belong to CUPTI (and, per its docs, must outlive all
records); they are read once per distinct pointer and never freed.
"""

from __future__ import annotations

import ctypes as C
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from .stall_reasons import counted_reasons

__all__ = [
    "CuptiError", "Cupti", "Collector", "load_libcupti", "period_exponent", "ERROR_NAMES",
    "StallReasonStruct", "PCData", "PCSamplingData", "ConfigurationInfo",
]

STALL_REASON_STRING_SIZE = 128
MIN_CUPTI_VERSION = 22  # CUPTI 12.4: PCData gained correlationId (the 64-byte layout below)

# CUpti_PCSamplingConfigurationAttributeType
ATTR_SAMPLING_PERIOD = 1
ATTR_STALL_REASON = 2
ATTR_SCRATCH_BUFFER_SIZE = 3
ATTR_HARDWARE_BUFFER_SIZE = 4
ATTR_COLLECTION_MODE = 5
ATTR_ENABLE_START_STOP_CONTROL = 6
ATTR_OUTPUT_DATA_FORMAT = 7
ATTR_SAMPLING_DATA_BUFFER = 8
ATTR_WORKER_THREAD_PERIODIC_SLEEP_SPAN = 9
MODE_CONTINUOUS, MODE_KERNEL_SERIALIZED = 1, 2
# "serialized": CUPTI serializes kernels and tags samples with the launch's correlation id (exact per
# launch, about a millisecond per launch); "continuous": kernels run concurrently, samples are per
# kernel function (lower overhead).
COLLECTIONS = {"serialized": MODE_KERNEL_SERIALIZED, "continuous": MODE_CONTINUOUS}

CUPTI_SUCCESS = 0
ERROR_NAMES = {
    1: "CUPTI_ERROR_INVALID_PARAMETER", 2: "CUPTI_ERROR_INVALID_DEVICE", 3: "CUPTI_ERROR_INVALID_CONTEXT",
    7: "CUPTI_ERROR_INVALID_OPERATION", 8: "CUPTI_ERROR_OUT_OF_MEMORY", 9: "CUPTI_ERROR_HARDWARE",
    10: "CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT", 11: "CUPTI_ERROR_API_NOT_IMPLEMENTED",
    12: "CUPTI_ERROR_MAX_LIMIT_REACHED", 13: "CUPTI_ERROR_NOT_READY", 14: "CUPTI_ERROR_NOT_COMPATIBLE",
    15: "CUPTI_ERROR_NOT_INITIALIZED", 23: "CUPTI_ERROR_DISABLED", 24: "CUPTI_ERROR_INVALID_MODULE",
    26: "CUPTI_ERROR_HARDWARE_BUSY", 27: "CUPTI_ERROR_NOT_SUPPORTED",
    33: "CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED", 35: "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES",
    36: "CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED", 38: "CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED",
    39: "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED",
    40: "CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES",
    41: "CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED", 42: "CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED",
    43: "CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED", 44: "CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED",
    45: "CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED", 999: "CUPTI_ERROR_UNKNOWN",
}
PRIVILEGE_ERRORS = frozenset({35, 40})
BUSY_ERRORS = frozenset({7, 14, 26, 36, 39})
UNSUPPORTED_ERRORS = frozenset({11, 27, 33, 38, 41, 42, 43, 44, 45})


# ------------------------------------------------------------------------------------------ structs
class StallReasonStruct(C.Structure):
    _fields_ = [("pcSamplingStallReasonIndex", C.c_uint32), ("samples", C.c_uint32)]


class PCData(C.Structure):  # CUpti_PCSamplingPCData, 64 bytes
    _fields_ = [("size", C.c_size_t), ("cubinCrc", C.c_uint64), ("pcOffset", C.c_uint64),
                ("functionIndex", C.c_uint32), ("pad", C.c_uint32), ("functionName", C.c_void_p),
                ("stallReasonCount", C.c_size_t), ("stallReason", C.c_void_p), ("correlationId", C.c_uint32)]


class PCSamplingData(C.Structure):  # CUpti_PCSamplingData, 80 bytes
    _fields_ = [("size", C.c_size_t), ("collectNumPcs", C.c_size_t), ("totalSamples", C.c_uint64),
                ("droppedSamples", C.c_uint64), ("totalNumPcs", C.c_size_t), ("remainingNumPcs", C.c_size_t),
                ("rangeId", C.c_uint64), ("pPcData", C.c_void_p), ("nonUsrKernelsTotalSamples", C.c_uint64),
                ("hardwareBufferFull", C.c_uint8)]


class ConfigurationInfo(C.Structure):  # CUpti_PCSamplingConfigurationInfo: type, status, 24-byte union
    _fields_ = [("attributeType", C.c_int), ("attributeStatus", C.c_int), ("data", C.c_uint64 * 3)]


class _CtxParams(C.Structure):  # Enable / Disable / Start / Stop: {size, pPriv, ctx}
    _fields_ = [("size", C.c_size_t), ("pPriv", C.c_void_p), ("ctx", C.c_void_p)]


class GetDataParams(C.Structure):
    _fields_ = _CtxParams._fields_ + [("pcSamplingData", C.c_void_p)]


class ConfigurationInfoParams(C.Structure):
    _fields_ = _CtxParams._fields_ + [("numAttributes", C.c_size_t), ("pPCSamplingConfigurationInfo", C.c_void_p)]


class GetNumStallReasonsParams(C.Structure):
    _fields_ = _CtxParams._fields_ + [("numStallReasons", C.c_void_p)]


class GetStallReasonsParams(C.Structure):
    _fields_ = _CtxParams._fields_ + [("numStallReasons", C.c_size_t), ("stallReasonIndex", C.c_void_p),
                                      ("stallReasons", C.c_void_p)]


class GetCubinCrcParams(C.Structure):
    _fields_ = [("size", C.c_size_t), ("cubinSize", C.c_size_t), ("cubin", C.c_void_p), ("cubinCrc", C.c_uint64)]


# CUPTI_PCSAMPLING_STRUCT_SIZE(type, last field) = offsetof(last) + sizeof(last): here all equal sizeof.
PARAM_SIZES = {"ctx": 24, "get_data": 32, "config": 40, "num_stall": 32, "stall": 48, "crc": 32}

# The numpy view of PCData used to decode a whole buffer at once.
PCDATA_DTYPE = np.dtype({
    "names": ["size", "crc", "pc", "fidx", "pad", "name", "nstall", "stall_ptr", "corr", "pad2"],
    "formats": ["<u8", "<u8", "<u8", "<u4", "<u4", "<u8", "<u8", "<u8", "<u4", "<u4"],
    "offsets": [0, 8, 16, 24, 28, 32, 40, 48, 56, 60], "itemsize": 64})


# -------------------------------------------------------------------------------------------- calls
class CuptiError(RuntimeError):
    """A CUPTI call failed: ``code`` (CUptiResult), ``call`` (the function), ``name`` (the error's
    name)."""

    def __init__(self, code: int, call: str, text: str = ""):
        self.code, self.call = int(code), call
        self.name = ERROR_NAMES.get(self.code, f"CUptiResult {self.code}")
        super().__init__(f"{call} failed: {self.name}" + (f" ({text})" if text and text != self.name else ""))

    @property
    def privileges(self) -> bool:
        return self.code in PRIVILEGE_ERRORS

    @property
    def busy(self) -> bool:
        return self.code in BUSY_ERRORS

    @property
    def unsupported(self) -> bool:
        return self.code in UNSUPPORTED_ERRORS


def load_libcupti(path: str | None = None) -> C.CDLL:
    """The libcupti that cupti-python uses (or ``path`` / ``$KPROF_LIBCUPTI``)."""
    path = path or os.environ.get("KPROF_LIBCUPTI")
    if not path:
        from cuda import pathfinder
        path = pathfinder.load_nvidia_dynamic_lib("cupti").abs_path
    return C.CDLL(path)


def period_exponent(period: int | None, default: int = 10) -> int:
    """The CUPTI sampling-period exponent N (a sample every 2^N cycles per SM sub-partition).

    ``period`` in 5..31 is N itself; a value of 32 or more is read as a number of cycles and
    rounded to the nearest power of two; None gives ``default`` (10, 1024 cycles, as Proton).
    """
    if period is None:
        return default
    p = int(period)
    if p < 5:
        raise ValueError(f"pcsampling period must be 5..31 (2^N cycles) or a cycle count >= 32, got {period}")
    if p <= 31:
        return p
    n = int(round(np.log2(p)))
    return max(5, min(31, n))


class Cupti:
    """Thin, checked wrappers over the PC sampling entry points of a libcupti handle."""

    _CALLS = ("cuptiPCSamplingEnable", "cuptiPCSamplingDisable", "cuptiPCSamplingStart", "cuptiPCSamplingStop",
              "cuptiPCSamplingGetData", "cuptiPCSamplingSetConfigurationAttribute",
              "cuptiPCSamplingGetConfigurationAttribute", "cuptiPCSamplingGetNumStallReasons",
              "cuptiPCSamplingGetStallReasons", "cuptiGetCubinCrc", "cuptiGetVersion", "cuptiGetResultString")

    def __init__(self, lib: Any = None):
        self.lib = lib if lib is not None else load_libcupti()
        if isinstance(self.lib, C.CDLL):
            for name in self._CALLS:
                getattr(self.lib, name).restype = C.c_int

    def result_string(self, code: int) -> str:
        s = C.c_char_p()
        try:
            if self.lib.cuptiGetResultString(int(code), C.byref(s)) == CUPTI_SUCCESS and s.value:
                return s.value.decode(errors="replace")
        except Exception:
            pass
        return ERROR_NAMES.get(int(code), f"CUptiResult {code}")

    def call(self, name: str, params: Any) -> int:
        return int(getattr(self.lib, name)(C.byref(params)))

    def check(self, name: str, params: Any) -> None:
        rc = self.call(name, params)
        if rc != CUPTI_SUCCESS:
            raise CuptiError(rc, name, self.result_string(rc))

    def version(self) -> int:
        v = C.c_uint32(0)
        rc = int(self.lib.cuptiGetVersion(C.byref(v)))
        if rc != CUPTI_SUCCESS:
            raise CuptiError(rc, "cuptiGetVersion", self.result_string(rc))
        return int(v.value)

    def _ctx_call(self, name: str, ctx: int) -> None:
        self.check(name, _CtxParams(PARAM_SIZES["ctx"], None, ctx))

    def enable(self, ctx: int) -> None:
        self._ctx_call("cuptiPCSamplingEnable", ctx)

    def disable(self, ctx: int) -> None:
        self._ctx_call("cuptiPCSamplingDisable", ctx)

    def start(self, ctx: int) -> None:
        self._ctx_call("cuptiPCSamplingStart", ctx)

    def stop(self, ctx: int) -> None:
        self._ctx_call("cuptiPCSamplingStop", ctx)

    def get_data(self, ctx: int, data: PCSamplingData) -> int:
        """``cuptiPCSamplingGetData`` into ``data``; returns the CUptiResult (not raised: OUT_OF_MEMORY
        means the hardware buffer overflowed, and the data that did arrive is still there)."""
        return self.call("cuptiPCSamplingGetData", GetDataParams(PARAM_SIZES["get_data"], None, ctx, C.addressof(data)))

    def stall_reasons(self, ctx: int) -> list[tuple[int, str]]:
        """``[(index, name)]`` of the device's stall reasons."""
        n = C.c_size_t(0)
        self.check("cuptiPCSamplingGetNumStallReasons",
                   GetNumStallReasonsParams(PARAM_SIZES["num_stall"], None, ctx, C.addressof(n)))
        count = int(n.value)
        if count <= 0:
            return []
        names = [C.create_string_buffer(STALL_REASON_STRING_SIZE) for _ in range(count)]
        ptrs = (C.c_void_p * count)(*[C.addressof(b) for b in names])
        idx = (C.c_uint32 * count)()
        self.check("cuptiPCSamplingGetStallReasons",
                   GetStallReasonsParams(PARAM_SIZES["stall"], None, ctx, count, C.addressof(idx), C.addressof(ptrs)))
        return [(int(idx[i]), names[i].value.decode(errors="replace")) for i in range(count)]

    def configure(self, ctx: int, infos: Sequence[ConfigurationInfo]) -> None:
        arr = (ConfigurationInfo * len(infos))(*infos)
        params = ConfigurationInfoParams(PARAM_SIZES["config"], None, ctx, len(infos), C.addressof(arr))
        rc = self.call("cuptiPCSamplingSetConfigurationAttribute", params)
        if rc != CUPTI_SUCCESS:
            bad = [f"attribute {arr[i].attributeType}: {ERROR_NAMES.get(arr[i].attributeStatus, arr[i].attributeStatus)}"
                   for i in range(len(infos)) if arr[i].attributeStatus not in (0,)]
            raise CuptiError(rc, "cuptiPCSamplingSetConfigurationAttribute",
                             self.result_string(rc) + (f"; {', '.join(bad)}" if bad else ""))

    def get_attribute(self, ctx: int, attr: int) -> int | None:
        """One configuration attribute's first 8 bytes (e.g. the sampling period), or None."""
        info = (ConfigurationInfo * 1)()
        info[0].attributeType = attr
        params = ConfigurationInfoParams(PARAM_SIZES["config"], None, ctx, 1, C.addressof(info))
        try:
            if self.call("cuptiPCSamplingGetConfigurationAttribute", params) != CUPTI_SUCCESS:
                return None
        except Exception:
            return None
        return int(info[0].data[0])

    def cubin_crc(self, cubin: bytes) -> int | None:
        """CUPTI's CRC of a cubin (what PC records carry as ``cubinCrc``), or None if unavailable."""
        buf = C.create_string_buffer(bytes(cubin), len(cubin))
        p = GetCubinCrcParams(PARAM_SIZES["crc"], len(cubin), C.addressof(buf), 0)
        try:
            if self.call("cuptiGetCubinCrc", p) != CUPTI_SUCCESS:
                return None
        except Exception:
            return None
        return int(p.cubinCrc)


def config(attr: int, *values: int) -> ConfigurationInfo:
    info = ConfigurationInfo()
    info.attributeType = attr
    for i, v in enumerate(values):
        info.data[i] = int(v)
    return info


# ------------------------------------------------------------------------------------------ buffers
class SampleBuffer:
    """A ``CUpti_PCSamplingData`` with room for ``capacity`` PC records of up to ``n_reasons`` stall
    reasons each, all stall arrays in one contiguous block (so decoding is vectorised)."""

    def __init__(self, capacity: int, n_reasons: int):
        self.capacity, self.n_reasons = int(capacity), max(1, int(n_reasons))
        self.pcdata = (PCData * self.capacity)()
        self.stalls = (StallReasonStruct * (self.capacity * self.n_reasons))()
        self.rows = np.frombuffer(self.pcdata, dtype=PCDATA_DTYPE)
        self.stall_view = np.frombuffer(self.stalls, dtype="<u4").reshape(self.capacity, self.n_reasons, 2)
        base = np.uint64(C.addressof(self.stalls))
        self.expected_ptrs = base + np.arange(self.capacity, dtype=np.uint64) * np.uint64(8 * self.n_reasons)
        self.data = PCSamplingData()
        self.reset()

    def reset(self) -> None:
        """Ready the buffer for CUPTI: sizes, capacity, stall-array pointers, counts zeroed."""
        self.rows["size"] = PCData_SIZE
        self.rows["stall_ptr"] = self.expected_ptrs
        self.rows["nstall"] = 0
        d = self.data
        d.size = C.sizeof(PCSamplingData)
        d.collectNumPcs = self.capacity
        d.totalSamples = d.droppedSamples = d.totalNumPcs = d.remainingNumPcs = d.rangeId = 0
        d.nonUsrKernelsTotalSamples = 0
        d.hardwareBufferFull = 0
        d.pPcData = C.addressof(self.pcdata)

    def decode(self, names: dict[int, str]) -> dict[str, np.ndarray]:
        """The buffer's PC records in long form (one row per record and non-zero stall reason):
        ``{"corr", "name_ptr", "crc", "pc", "fidx", "reason", "samples"}``.  ``names`` caches
        function-name pointers -> strings (filled here)."""
        n = min(int(self.data.totalNumPcs), self.capacity)
        rows = self.rows[:n]
        nstall = np.minimum(rows["nstall"].astype(np.int64), self.n_reasons)
        ptr_ok = rows["stall_ptr"] == self.expected_ptrs[:n]
        idx = self.stall_view[:n, :, 0]
        cnt = self.stall_view[:n, :, 1]
        mask = (np.arange(self.n_reasons)[None, :] < nstall[:, None]) & ptr_ok[:, None] & (cnt > 0)
        r, j = np.nonzero(mask)
        out = {"corr": rows["corr"][r], "name_ptr": rows["name"][r], "crc": rows["crc"][r], "pc": rows["pc"][r],
               "fidx": rows["fidx"][r], "reason": idx[r, j], "samples": cnt[r, j]}
        if not ptr_ok.all():  # CUPTI moved a stall array: read those records one by one
            extra = [self._slow_row(i) for i in np.nonzero(~ptr_ok)[0].tolist()]
            extra = [e for e in extra if e is not None]
            if extra:
                cols = {k: np.concatenate([out[k]] + [e[k] for e in extra]) for k in out}
                out = cols
        for p in np.unique(out["name_ptr"]).tolist():
            if p not in names:
                names[p] = C.string_at(p).decode(errors="replace") if p else "<unknown>"
        return out

    def _slow_row(self, i: int) -> dict[str, np.ndarray] | None:
        rec = self.pcdata[i]
        if not rec.stallReason or not rec.stallReasonCount:
            return None
        k = int(rec.stallReasonCount)
        arr = (StallReasonStruct * k).from_address(rec.stallReason)
        pairs = [(s.pcSamplingStallReasonIndex, s.samples) for s in arr if s.samples]
        m = len(pairs)
        return {"corr": np.full(m, rec.correlationId, np.uint32), "name_ptr": np.full(m, rec.functionName or 0, np.uint64),
                "crc": np.full(m, rec.cubinCrc, np.uint64), "pc": np.full(m, rec.pcOffset, np.uint64),
                "fidx": np.full(m, rec.functionIndex, np.uint32),
                "reason": np.array([p[0] for p in pairs], np.uint32), "samples": np.array([p[1] for p in pairs], np.uint32)}


PCData_SIZE = C.sizeof(PCData)


# ---------------------------------------------------------------------------------------- collector
@dataclass
class CollectorStats:
    total_samples: int = 0          # CUPTI's totals over all buffers read (all reasons, user + non-user)
    dropped_samples: int = 0
    non_user_samples: int = 0
    pcs_read: int = 0
    buffers_read: int = 0
    get_data_calls: int = 0
    hardware_buffer_full: bool = False
    warnings: list[str] = field(default_factory=list)


class Collector:
    """PC sampling on one CUDA context: configure, start, drain, stop, disable.

    ``sink(columns, names)`` receives every decoded batch (see :meth:`SampleBuffer.decode`);
    errors are raised as :class:`CuptiError` and the caller decides what to tell the user.
    """

    def __init__(self, cupti: Cupti, ctx: int, *, period: int | None = None, scratch_bytes: int = 64 << 20,
                 hardware_bytes: int = 128 << 20, capacity: int = 16384, configure_family: bool = True,
                 sink: Callable[[dict[str, np.ndarray], dict[int, str]], None] | None = None,
                 collection: str = "serialized"):
        self.cupti, self.ctx = cupti, int(ctx)
        self.period_arg = period  # as given (rearm_contexts builds a twin from it)
        self.period = period_exponent(period)
        self.scratch_bytes, self.hardware_bytes = int(scratch_bytes), int(hardware_bytes)
        self.capacity = int(capacity)
        self.configure_family = configure_family
        if collection not in COLLECTIONS:
            raise ValueError(f"collection must be one of {', '.join(COLLECTIONS)}, got {collection!r}")
        self.collection = collection
        self.sink = sink
        self.stats = CollectorStats()
        self.names: dict[int, str] = {}
        self.stall_table: list[tuple[int, str]] = []
        self.counted: dict[int, str] = {}
        self.effective_period: int | None = None
        self.configured_reasons: str = ""
        self.mode = MODE_KERNEL_SERIALIZED
        self.enabled = self.running = False
        self._config_buf: SampleBuffer | None = None
        self._drain_buf: SampleBuffer | None = None
        self._keep: list[Any] = []  # memory CUPTI points at until Disable

    # lifecycle
    def enable(self) -> None:
        self.cupti.enable(self.ctx)
        self.enabled = True
        try:
            self.stall_table = self.cupti.stall_reasons(self.ctx)
            self.counted = counted_reasons(self.stall_table)
            n_all = max(1, len(self.stall_table))
            self._config_buf = SampleBuffer(self.capacity, n_all)
            self._drain_buf = SampleBuffer(self.capacity, n_all)
            self._configure()
        except BaseException:
            self.disable()
            raise

    def _configure(self) -> None:
        """Kernel-serialized with the counted stall reasons; then with all reasons; last,
        continuous mode (no correlation ids: samples per kernel function, not per launch)."""
        self._keep = [self._config_buf, self._drain_buf]
        family = sorted(self.counted)
        idx = (C.c_uint32 * max(1, len(family)))(*family)
        self._keep.append(idx)
        subset = self.configure_family and self.counted and len(self.counted) < len(self.stall_table)
        tries = []
        first = COLLECTIONS[self.collection]
        if subset:
            tries.append((first, True))
        tries += [(first, False)] + ([(MODE_CONTINUOUS, False)] if first != MODE_CONTINUOUS else [])
        last: CuptiError | None = None
        for mode, with_subset in tries:
            # The attribute order of Proton's working configuration (stall reasons first when given).
            infos = [config(ATTR_STALL_REASON, len(family), C.addressof(idx))] if with_subset else []
            infos += [
                config(ATTR_SAMPLING_PERIOD, self.period),
                config(ATTR_HARDWARE_BUFFER_SIZE, self.hardware_bytes),
                config(ATTR_SCRATCH_BUFFER_SIZE, self.scratch_bytes),
                config(ATTR_SAMPLING_DATA_BUFFER, C.addressof(self._config_buf.data)),
                config(ATTR_ENABLE_START_STOP_CONTROL, 1),
                config(ATTR_COLLECTION_MODE, mode),
            ]
            try:
                self.cupti.configure(self.ctx, infos)
            except CuptiError as e:
                if e.privileges or e.unsupported:
                    raise
                last = e
                what = "the counted stall reasons only" if with_subset else (
                    "kernel-serialized collection" if mode == MODE_KERNEL_SERIALIZED else "continuous collection")
                self.stats.warnings.append(f"configuring {what} failed ({e})")
                continue
            self.mode = mode
            self.configured_reasons = (f"{len(family)} of {len(self.stall_table)} (counted family)" if with_subset
                                       else f"all {len(self.stall_table)}")
            if mode == MODE_CONTINUOUS and first != MODE_CONTINUOUS:
                self.stats.warnings.append("CUPTI refused kernel-serialized collection: continuous mode, samples "
                                           "are per kernel function, not per launch")
            self._read_period()
            return
        assert last is not None
        raise last

    def adopt(self, *, period: int | None, scratch_bytes: int, hardware_bytes: int,
              sink: Callable[[dict[str, np.ndarray], dict[int, str]], None] | None) -> None:
        """Hand this enabled, stopped collector to a new sampler: fresh statistics, its sink, and
        its settings (re-configured only when they differ)."""
        self.stats = CollectorStats()
        self.sink = sink
        want = (period_exponent(period), int(scratch_bytes), int(hardware_bytes))
        self.period_arg = period
        if want != (self.period, self.scratch_bytes, self.hardware_bytes):
            self.period, self.scratch_bytes, self.hardware_bytes = want
            self._configure()

    def _read_period(self) -> None:
        v = self.cupti.get_attribute(self.ctx, ATTR_SAMPLING_PERIOD)
        self.effective_period = (v & 0xFFFFFFFF) if v is not None else None

    def start(self) -> None:
        self._config_buf.reset()
        self.cupti.start(self.ctx)
        self.running = True

    def stop(self) -> None:
        """Stop the range and collect everything it produced."""
        if not self.running:
            return
        self.running = False
        self.cupti.stop(self.ctx)
        self._read_config_buffer()
        self.drain()

    def disable(self) -> None:
        if not self.enabled:
            return
        if self.running:
            try:
                self.stop()
            except CuptiError as e:
                self.stats.warnings.append(str(e))
        self.enabled = False
        try:
            self.cupti.disable(self.ctx)
        finally:
            # Disable may flush the last records into the configured buffer.
            try:
                self._read_config_buffer()
            except Exception:
                pass
            self._keep = []

    # data
    def drain(self, max_rounds: int = 100000) -> int:
        """GetData into the second buffer until CUPTI has nothing left; returns PCs read."""
        if not self.enabled or self._drain_buf is None:
            return 0
        got = 0
        buf = self._drain_buf
        for _ in range(max_rounds):
            buf.reset()
            rc = self.cupti.get_data(self.ctx, buf.data)
            self.stats.get_data_calls += 1
            if rc not in (CUPTI_SUCCESS, 8):  # 8: OUT_OF_MEMORY, hardware buffer full; data still valid
                raise CuptiError(rc, "cuptiPCSamplingGetData", self.cupti.result_string(rc))
            if rc == 8 or buf.data.hardwareBufferFull:
                self._hw_full()
            n = self._consume(buf)
            got += n
            if buf.data.remainingNumPcs == 0 or n == 0:
                break
        return got

    def _read_config_buffer(self) -> int:
        buf = self._config_buf
        if buf is None or buf.data.totalNumPcs == 0:
            return 0
        n = self._consume(buf)
        buf.reset()
        return n

    def _consume(self, buf: SampleBuffer) -> int:
        d = buf.data
        n = min(int(d.totalNumPcs), buf.capacity)
        self.stats.total_samples += int(d.totalSamples)
        self.stats.dropped_samples += int(d.droppedSamples)
        self.stats.non_user_samples += int(d.nonUsrKernelsTotalSamples)
        if d.hardwareBufferFull:
            self._hw_full()
        if n == 0:
            return 0
        self.stats.pcs_read += n
        self.stats.buffers_read += 1
        cols = buf.decode(self.names)
        if self.sink is not None and len(cols["pc"]):
            self.sink(cols, self.names)
        return n

    def _hw_full(self) -> None:
        if not self.stats.hardware_buffer_full:
            self.stats.hardware_buffer_full = True
            self.stats.warnings.append("the hardware sample buffer overflowed and samples were lost: use a larger "
                                       "period (pcsampling:period=N, fewer samples) or a larger hw buffer")
