"""A stand-in for libcupti's PC sampling entry points, for CPU tests of the ctypes collector.

It is called exactly like the real library (``fn(ctypes.byref(params))``) and writes into the
caller's ctypes buffers the way CUPTI does: stall-reason names into the 128-byte buffers, PC
records into the ``CUpti_PCSamplingPCData`` array, stall counts into the arrays those records point
at, function names as C strings that CUPTI owns.  It reproduces the behaviours the collector must
handle: after ``Stop`` the range's records are already in the configured SAMPLING_DATA_BUFFER, and
a ``GetData`` into that same buffer overwrites it with zero PCs (the pitfall verified on the GPU);
``GetData`` pages through ``remainingNumPcs``; ``Disable`` flushes what is left into the configured
buffer; only the configured stall reasons are reported; a context can be enabled only once.
"""

from __future__ import annotations

import ctypes as C
import zlib

from profiler.pcsampling.cupti_pc import ConfigurationInfo, PCData, PCSamplingData, StallReasonStruct

REASONS = ["barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle", "long_scoreboard",
           "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instructions", "not_selected", "selected",
           "short_scoreboard", "sleeping", "tex_throttle", "wait", "gmma", "tmem"]


def sm90_like_table(seed: int = 7) -> list[tuple[int, str]]:
    """40 (index, name) pairs, both families, indices in a scrambled order (as a device may give)."""
    import numpy as np
    names = []
    for r in REASONS:
        names.append(f"smsp__pcsamp_warps_issue_stalled_{r}")
        names.append(f"smsp__pcsamp_warps_issue_stalled_{r}_not_issued")
    perm = np.random.RandomState(seed).permutation(len(names)).tolist()
    return [(perm[i], n) for i, n in enumerate(names)]


_enabled_contexts: set[int] = set()  # shared by all fakes: one PC sampling client per context


class FakeCupti:
    """Records are dicts ``{"function", "pc", "correlation_id", "cubin_crc", "function_index",
    "stalls": [[index, samples], ...]}``; :meth:`launch` makes them pending while sampling runs."""

    def __init__(self, table=None, *, version: int = 130401, fail: dict | None = None,
                 reject_stall_subset: bool = False, hw_full_on_get: int | None = None,
                 reject_serialized: bool = False):
        self.table = list(table or sm90_like_table())
        self.version = version
        self.fail = dict(fail or {})           # call name -> CUptiResult to return
        self.reject_stall_subset = reject_stall_subset
        self.reject_serialized = reject_serialized
        self.hw_full_on_get = hw_full_on_get   # GetData call number that reports a full hw buffer
        self.calls: list[str] = []
        self.attrs: dict[int, object] = {}
        self.config_buffer = 0
        self.stall_filter: set[int] | None = None
        self.enabled: set[int] = set()
        self.running = False
        self.ready: list[dict] = []
        self.get_data_calls = 0
        self._strings: dict[str, C.Array] = {}

    # helpers
    def launch(self, records) -> None:
        """A kernel ran: its records become collectable (if sampling is running)."""
        if self.running:
            for r in records:
                stalls = [[i, n] for i, n in r["stalls"] if self.stall_filter is None or i in self.stall_filter]
                if stalls:
                    self.ready.append(dict(r, stalls=stalls))

    def _rc(self, name: str) -> int | None:
        self.calls.append(name)
        return self.fail.get(name)

    def _name_ptr(self, name: str) -> int:
        buf = self._strings.get(name)
        if buf is None:
            buf = self._strings[name] = C.create_string_buffer(name.encode())
        return C.addressof(buf)

    def _write(self, addr: int) -> None:
        d = PCSamplingData.from_address(addr)
        n = min(int(d.collectNumPcs), len(self.ready))
        for i in range(n):
            r = self.ready[i]
            rec = PCData.from_address(d.pPcData + i * C.sizeof(PCData))
            rec.cubinCrc = r.get("cubin_crc", 0)
            rec.pcOffset = r["pc"]
            rec.functionIndex = r.get("function_index", 0)
            rec.functionName = self._name_ptr(r["function"])
            rec.correlationId = r.get("correlation_id", 0)
            rec.stallReasonCount = len(r["stalls"])
            for j, (idx, cnt) in enumerate(r["stalls"]):
                s = StallReasonStruct.from_address(rec.stallReason + 8 * j)
                s.pcSamplingStallReasonIndex, s.samples = idx, cnt
        total = sum(cnt for r in self.ready[:n] for _, cnt in r["stalls"])
        del self.ready[:n]
        d.totalNumPcs = n
        d.remainingNumPcs = len(self.ready)
        d.totalSamples = total
        d.droppedSamples = 0
        d.rangeId += 1

    # the API
    def cuptiGetVersion(self, p):
        self.calls.append("cuptiGetVersion")
        p._obj.value = self.version
        return 0

    def cuptiGetResultString(self, code, p):
        p._obj.value = f"fake CUPTI error {code}".encode()
        return 0

    def cuptiPCSamplingEnable(self, p):
        rc = self._rc("cuptiPCSamplingEnable")
        if rc:
            return rc
        prm = p._obj
        assert prm.size == 24
        if prm.ctx in _enabled_contexts:
            return 7  # CUPTI_ERROR_INVALID_OPERATION: PC sampling already enabled on this context
        _enabled_contexts.add(prm.ctx)
        self.enabled.add(prm.ctx)
        return 0

    def cuptiPCSamplingDisable(self, p):
        rc = self._rc("cuptiPCSamplingDisable")
        if rc:
            return rc
        prm = p._obj
        _enabled_contexts.discard(prm.ctx)
        self.enabled.discard(prm.ctx)
        if self.config_buffer and self.ready:
            self._write(self.config_buffer)
        return 0

    def cuptiPCSamplingGetNumStallReasons(self, p):
        rc = self._rc("cuptiPCSamplingGetNumStallReasons")
        if rc:
            return rc
        prm = p._obj
        assert prm.size == 32
        C.c_size_t.from_address(prm.numStallReasons).value = len(self.table)
        return 0

    def cuptiPCSamplingGetStallReasons(self, p):
        rc = self._rc("cuptiPCSamplingGetStallReasons")
        if rc:
            return rc
        prm = p._obj
        assert prm.size == 48 and prm.numStallReasons == len(self.table)
        idx = (C.c_uint32 * len(self.table)).from_address(prm.stallReasonIndex)
        ptrs = (C.c_void_p * len(self.table)).from_address(prm.stallReasons)
        for i, (index, name) in enumerate(self.table):
            idx[i] = index
            raw = name.encode()[:127] + b"\0"
            C.memmove(ptrs[i], raw, len(raw))
        return 0

    def cuptiPCSamplingSetConfigurationAttribute(self, p):
        rc = self._rc("cuptiPCSamplingSetConfigurationAttribute")
        if rc:
            return rc
        prm = p._obj
        assert prm.size == 40
        infos = [ConfigurationInfo.from_address(prm.pPCSamplingConfigurationInfo + 32 * i)
                 for i in range(prm.numAttributes)]
        status = 0
        for info in infos:
            t, d = info.attributeType, info.data
            if t == 1 and not 5 <= d[0] <= 31:
                info.attributeStatus = status = 1
            elif t == 2:
                if self.reject_stall_subset:
                    info.attributeStatus = status = 1
                    continue
                self.stall_filter = set((C.c_uint32 * d[0]).from_address(d[1]))
            elif t == 5 and (d[0] not in (1, 2) or (d[0] == 2 and self.reject_serialized)):
                info.attributeStatus = status = 1
            elif t == 8:
                self.config_buffer = d[0]
            self.attrs[t] = int(d[0])
        return status

    def cuptiPCSamplingGetConfigurationAttribute(self, p):
        self.calls.append("cuptiPCSamplingGetConfigurationAttribute")
        prm = p._obj
        info = ConfigurationInfo.from_address(prm.pPCSamplingConfigurationInfo)
        info.data[0] = self.attrs.get(info.attributeType, 0)
        return 0

    def cuptiPCSamplingStart(self, p):
        rc = self._rc("cuptiPCSamplingStart")
        if rc:
            return rc
        assert p._obj.ctx in self.enabled
        self.running = True
        return 0

    def cuptiPCSamplingStop(self, p):
        rc = self._rc("cuptiPCSamplingStop")
        if rc:
            return rc
        self.running = False
        if self.config_buffer:
            self._write(self.config_buffer)  # the range's PCs land in the configured buffer
        return 0

    def cuptiPCSamplingGetData(self, p):
        self.get_data_calls += 1
        rc = self._rc("cuptiPCSamplingGetData")
        if rc:
            return rc
        prm = p._obj
        assert prm.size == 32
        if prm.pcSamplingData == self.config_buffer:
            d = PCSamplingData.from_address(prm.pcSamplingData)
            d.totalNumPcs = 0  # the pitfall: the configured buffer is overwritten with nothing
            d.remainingNumPcs = 0
            return 0
        self._write(prm.pcSamplingData)
        if self.hw_full_on_get is not None and self.get_data_calls == self.hw_full_on_get:
            PCSamplingData.from_address(prm.pcSamplingData).hardwareBufferFull = 1
            return 8
        return 0

    def cuptiGetCubinCrc(self, p):
        prm = p._obj
        assert prm.size == 32
        prm.cubinCrc = zlib.crc32(C.string_at(prm.cubin, prm.cubinSize))
        return 0


def fake_crc(cubin: bytes) -> int:
    return zlib.crc32(cubin)


def reset() -> None:
    _enabled_contexts.clear()
