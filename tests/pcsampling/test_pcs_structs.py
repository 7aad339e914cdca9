"""The ctypes structs match cupti_pcsampling.h (x86-64, CUPTI 13.4), and the small pure helpers."""

import ctypes as C
import glob
import os
import shutil
import subprocess

import numpy as np
import pytest

from profiler.pcsampling import cupti_pc as cp
from profiler.pcsampling import parse_mode, stall_reasons as sr

# sizeof/offsetof printed by a C program compiled against CUPTI 13.4's cupti_pcsampling.h.
HEADER_LAYOUT = {
    "CUpti_PCSamplingPCData": (64, {"cubinCrc": 8, "pcOffset": 16, "functionIndex": 24, "functionName": 32,
                                    "stallReasonCount": 40, "stallReason": 48, "correlationId": 56}),
    "CUpti_PCSamplingData": (80, {"collectNumPcs": 8, "totalSamples": 16, "droppedSamples": 24, "totalNumPcs": 32,
                                  "remainingNumPcs": 40, "rangeId": 48, "pPcData": 56,
                                  "nonUsrKernelsTotalSamples": 64, "hardwareBufferFull": 72}),
}


def test_struct_layouts():
    assert C.sizeof(cp.StallReasonStruct) == 8
    for cls, name in ((cp.PCData, "CUpti_PCSamplingPCData"), (cp.PCSamplingData, "CUpti_PCSamplingData")):
        size, offsets = HEADER_LAYOUT[name]
        assert C.sizeof(cls) == size
        for field, off in offsets.items():
            assert getattr(cls, field).offset == off, (name, field)
    assert C.sizeof(cp.ConfigurationInfo) == 32 and cp.ConfigurationInfo.data.offset == 8
    assert C.sizeof(cp._CtxParams) == cp.PARAM_SIZES["ctx"] == 24
    assert C.sizeof(cp.GetDataParams) == cp.PARAM_SIZES["get_data"] == 32
    assert C.sizeof(cp.ConfigurationInfoParams) == cp.PARAM_SIZES["config"] == 40
    assert C.sizeof(cp.GetNumStallReasonsParams) == cp.PARAM_SIZES["num_stall"] == 32
    assert C.sizeof(cp.GetStallReasonsParams) == cp.PARAM_SIZES["stall"] == 48
    assert C.sizeof(cp.GetCubinCrcParams) == cp.PARAM_SIZES["crc"] == 32
    # The numpy view used to decode a buffer agrees with the ctypes struct.
    dt = cp.PCDATA_DTYPE
    assert dt.itemsize == 64
    for np_name, field in (("crc", "cubinCrc"), ("pc", "pcOffset"), ("fidx", "functionIndex"), ("name", "functionName"),
                           ("nstall", "stallReasonCount"), ("stall_ptr", "stallReason"), ("corr", "correlationId")):
        assert dt.fields[np_name][1] == getattr(cp.PCData, field).offset


def _header_dir():
    cands = []
    try:
        import nvidia
        for root in nvidia.__path__:
            cands += glob.glob(os.path.join(root, "*", "include", "cupti_pcsampling.h"))
    except ImportError:
        pass
    cands += glob.glob("/usr/local/cuda*/include/cupti_pcsampling.h")
    return [os.path.dirname(c) for c in cands]


@pytest.mark.skipif(shutil.which("gcc") is None, reason="no C compiler")
def test_layout_against_header(tmp_path):
    dirs = _header_dir()
    cuda_h = [d for d in glob.glob("/usr/local/cuda*/include") if os.path.exists(os.path.join(d, "cuda.h"))]
    if not dirs or not cuda_h:
        pytest.skip("CUPTI / CUDA headers not found")
    src = tmp_path / "l.c"
    src.write_text('#include <stdio.h>\n#include <stddef.h>\n#include <cupti_pcsampling.h>\n'
                   'int main(){printf("%zu %zu %zu %zu %zu %zu\\n", sizeof(CUpti_PCSamplingPCData), '
                   'offsetof(CUpti_PCSamplingPCData, correlationId), sizeof(CUpti_PCSamplingData), '
                   'offsetof(CUpti_PCSamplingData, hardwareBufferFull), CUpti_PCSamplingConfigurationInfoParamsSize, '
                   'CUpti_PCSamplingGetStallReasonsParamsSize);}\n')
    exe = tmp_path / "l"
    r = subprocess.run(["gcc", f"-I{dirs[0]}", f"-I{cuda_h[0]}", str(src), "-o", str(exe)], capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"header did not compile: {r.stderr[-300:]}")
    out = subprocess.run([str(exe)], capture_output=True, text=True).stdout.split()
    assert [int(x) for x in out] == [64, 56, 80, 72, 40, 48]


def test_period_exponent():
    assert cp.period_exponent(None) == 10
    assert cp.period_exponent(5) == 5 and cp.period_exponent(31) == 31
    assert cp.period_exponent(1024) == 10 and cp.period_exponent(1500) == 11
    assert cp.period_exponent(1 << 40) == 31
    with pytest.raises(ValueError):
        cp.period_exponent(4)


def test_parse_mode():
    assert parse_mode("pcsampling") == ("pcsampling", {})
    assert parse_mode("pcsampling:period=12") == ("pcsampling", {"period": 12})
    assert parse_mode("PCSampling:period=8:hw_mb=64:x") == ("pcsampling", {"period": 8, "hw_mb": 64, "x": True})
    assert parse_mode(None) == ("", {})
    with pytest.raises(ValueError, match="period must be an integer"):
        parse_mode("pcsampling:period=fast")


def test_stall_reason_names_and_family():
    assert sr.short_name("smsp__pcsamp_warps_issue_stalled_long_scoreboard") == "long_scoreboard"
    assert sr.short_name("smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued") == "long_scoreboard"
    assert sr.short_name("smsp__pcsamp_sample_count") == "sample_count"
    table = [(3, "smsp__pcsamp_warps_issue_stalled_selected"), (9, "smsp__pcsamp_warps_issue_stalled_wait"),
             (1, "smsp__pcsamp_warps_issue_stalled_wait_not_issued"), (4, "smsp__pcsamp_sample_count")]
    assert sr.counted_reasons(table) == {3: "selected", 9: "wait"}
    # A device whose names have no "_stalled_" form still gets counted (not silently nothing).
    assert sr.counted_reasons([(0, "a__x"), (1, "a__y_not_issued")]) == {0: "x"}
    assert sr.describe("stalled_long_scoreboard").title == "global/local memory"
    assert "num_stages" in sr.describe("long_scoreboard").advice
    unknown = sr.describe("warp_dream")
    assert unknown.name == "warp_dream" and "CUPTI" in unknown.meaning
    assert "selected" in sr.NOT_STALLED and set(sr.REASONS) >= {"barrier", "wait", "mio_throttle", "lg_throttle"}


def test_error_explanations():
    from profiler.pcsampling.sampler import explain
    e = cp.CuptiError(35, "cuptiPCSamplingEnable")
    assert e.privileges and "INSUFFICIENT_PRIVILEGES" in explain(e) and "ERR_NVGPUCTRPERM" in explain(e)
    b = cp.CuptiError(39, "cuptiPCSamplingEnable")
    assert b.busy and "another profiler" in explain(b)
    u = cp.CuptiError(27, "cuptiPCSamplingEnable")
    assert u.unsupported and "not supported" in explain(u)


def test_sample_buffer_pointers_are_contiguous():
    buf = cp.SampleBuffer(5, 3)
    ptrs = np.array([buf.pcdata[i].stallReason for i in range(5)], dtype=np.uint64)
    assert (np.diff(ptrs) == 24).all() and ptrs[0] == C.addressof(buf.stalls)
    assert buf.data.collectNumPcs == 5 and buf.data.size == 80 and buf.pcdata[0].size == 64
    assert buf.data.pPcData == C.addressof(buf.pcdata)
