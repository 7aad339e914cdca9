"""Overlapping compiles run LLVM in worker processes (backend/llvm_pool.py): llvmlite lets one thread of
a process into LLVM at a time, so autotune candidates compiled on threads would otherwise queue."""
import pytest

from kernelc.compiler.backend import llvm_pool
from kernelc.compiler.backend.llvm import llvm_to_ptx

LLIR = """
target triple = "nvptx64-nvidia-cuda"
define ptx_kernel void @scale(ptr addrspace(1) %p, float %s) {
  %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %q = getelementptr float, ptr addrspace(1) %p, i32 %t
  %v = load float, ptr addrspace(1) %q
  %w = fmul float %v, %s
  store float %w, ptr addrspace(1) %q
  ret void
}
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
"""


def test_llvmlite_serialises_llvm_calls_in_a_process():
    # the premise: one process-wide lock around every LLVM C-API call
    from llvmlite.binding import ffi
    assert isinstance(ffi.lib._lock, ffi._LLVMLock)


def test_a_compile_that_overlaps_another_goes_to_a_worker(monkeypatch):
    monkeypatch.setenv("KERNELC_LLVM_PROCESSES", "1")
    here, _ = llvm_to_ptx(LLIR, "sm_90a")
    started = llvm_pool._started
    with llvm_pool._here:  # another compile of this process is inside LLVM
        t = {}
        ptx, opt = llvm_pool.to_ptx(LLIR, "sm_90a", 3, t)
    assert ptx == here and "@scale" in opt
    assert llvm_pool._started >= max(started, 1) and llvm_pool._idle  # the worker stays for the next compile
    assert "llc" in t and "llvm_opt" in t  # the worker's stage timings come back
    # a worker error falls back to this process, which raises the real error
    with llvm_pool._here, pytest.raises(Exception, match="invalid LLVM IR"):
        llvm_pool.to_ptx("this is not IR", "sm_90a", 3, {})


def test_off_switch_compiles_in_process(monkeypatch):
    monkeypatch.setenv("KERNELC_LLVM_PROCESSES", "0")
    calls = []
    monkeypatch.setattr(llvm_pool, "_take", lambda: calls.append(1))
    with llvm_pool._here:
        ptx, _ = llvm_pool.to_ptx(LLIR, "sm_90a", 3, {})
    assert "@scale" in ptx or "scale" in ptx
    assert not calls
