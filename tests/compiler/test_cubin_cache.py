"""KERNELC_CUBIN_CACHE_DIR: nvJitLink's results kept by content; a hit gives the same result, a torn entry is redone."""
import os

import pytest

from kernelc.compiler.backend import cubin_cache, ptxas

PTX = """//
.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 p)
{
  .reg .b64 %rd<2>;
  .reg .b32 %r<2>;
  ld.param.u64 %rd1, [p];
  mov.u32 %r1, 7;
  st.global.u32 [%rd1], %r1;
  ret;
}
"""


def _calls(monkeypatch):
    nvj = ptxas._nvjitlink()
    n = {"create": 0}
    real = nvj.create

    def create(*a):
        n["create"] += 1
        return real(*a)
    monkeypatch.setattr(nvj, "create", create)
    return n


def test_the_same_ptx_assembles_once_and_a_torn_entry_is_assembled_again(tmp_path, monkeypatch):
    pytest.importorskip("cuda.bindings.nvjitlink")
    monkeypatch.setenv("KERNELC_CUBIN_CACHE_DIR", str(tmp_path))
    n = _calls(monkeypatch)
    first = ptxas.ptx_to_cubin(PTX, "sm_90a")
    again = ptxas.ptx_to_cubin(PTX, "sm_90a")
    assert n["create"] == 1
    assert again.cubin == first.cubin and again.info_log == first.info_log
    assert again.resources.keys() == first.resources.keys() and again.resources["k"].registers == first.resources["k"].registers
    # another option is another entry
    ptxas.ptx_to_cubin(PTX, "sm_90a", opt_level=1)
    assert n["create"] == 2
    (entry,) = [os.path.join(d, f) for d, _, fs in os.walk(tmp_path) for f in fs
                if f.endswith(".bin") and cubin_cache.read(str(tmp_path), f[:-4])[0] == first.cubin]
    with open(entry, "r+b") as f:   # torn: the last bytes never reached the disk
        f.truncate(os.path.getsize(entry) - 3)
    redone = ptxas.ptx_to_cubin(PTX, "sm_90a")
    assert n["create"] == 3 and redone.cubin == first.cubin
    assert ptxas.ptx_to_cubin(PTX, "sm_90a").cubin == first.cubin and n["create"] == 3   # rewritten whole


def test_off_keeps_nothing(tmp_path, monkeypatch):
    pytest.importorskip("cuda.bindings.nvjitlink")
    monkeypatch.setenv("KERNELC_CUBIN_CACHE_DIR", "off")
    n = _calls(monkeypatch)
    ptxas.ptx_to_cubin(PTX, "sm_90a")
    ptxas.ptx_to_cubin(PTX, "sm_90a")
    assert n["create"] == 2
