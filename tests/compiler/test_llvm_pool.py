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


class _FakeWorker:
    made = 0

    def __init__(self):
        _FakeWorker.made += 1

    def close(self):
        pass


def _fresh_pool(monkeypatch, cpus=8):
    monkeypatch.setenv("KERNELC_LLVM_PROCESSES", "1")
    monkeypatch.setattr(llvm_pool, "_Worker", _FakeWorker)
    monkeypatch.setattr(llvm_pool, "_idle", [])
    monkeypatch.setattr(llvm_pool, "_started", 0)
    monkeypatch.setattr(llvm_pool, "_in_flight", 0)
    monkeypatch.setattr(llvm_pool.os, "cpu_count", lambda: cpus)
    _FakeWorker.made = 0


def test_compiles_in_flight_together_start_their_workers_as_they_start(monkeypatch):
    _fresh_pool(monkeypatch)
    with llvm_pool.in_flight():
        assert _FakeWorker.made == 0   # one compile alone runs LLVM in this process: no worker
        with llvm_pool.in_flight(), llvm_pool.in_flight():
            assert _FakeWorker.made == 2 and len(llvm_pool._idle) == 2   # one fewer than the compiles
        assert llvm_pool._in_flight == 1
        with llvm_pool.in_flight():
            assert _FakeWorker.made == 2   # idle workers count: none started again
    assert llvm_pool._in_flight == 0
    with llvm_pool.in_flight():          # later sequential compiles start none
        assert _FakeWorker.made == 2


def test_prestart_stops_at_the_pool_size_and_when_switched_off(monkeypatch):
    _fresh_pool(monkeypatch, cpus=3)
    ctxs = [llvm_pool.in_flight() for _ in range(6)]
    for c in ctxs:
        c.__enter__()
    assert _FakeWorker.made == 2      # cpu_count - 1
    for c in ctxs:
        c.__exit__(None, None, None)
    _fresh_pool(monkeypatch)
    monkeypatch.setenv("KERNELC_LLVM_PROCESSES", "0")
    with llvm_pool.in_flight(), llvm_pool.in_flight(), llvm_pool.in_flight():
        assert _FakeWorker.made == 0
    # an error inside a compile still leaves the count right
    with pytest.raises(RuntimeError):
        with llvm_pool.in_flight():
            raise RuntimeError("a compile that fails")
    assert llvm_pool._in_flight == 0
