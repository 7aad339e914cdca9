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


@pytest.fixture(autouse=True)
def _assemble_for_real(monkeypatch):
    # these tests compare what a worker assembles with what this process does: from the run's cubin cache
    # both would be one read
    monkeypatch.setenv("KERNELC_CUBIN_CACHE_DIR", "off")


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


import kernelc  # noqa: E402
from tests.compiler.test_sm90_fields import _keep_above  # noqa: E402  (a seeded dropout, 04's shape)


def _ptx_and_llir():
    ck = kernelc.compile(_keep_above, dict(x_ptr="*fp32", out_ptr="*fp32", n="i32", p="fp32", seed="i32"),
                         dict(BLOCK=1024), target="sm_90a", num_warps=4)
    return ck.asm["ptx"], ck.asm["llir"], ck


def test_an_assembly_that_overlaps_another_goes_to_a_worker_and_builds_the_same(monkeypatch):
    from kernelc.compiler.backend import parse_target
    from kernelc.compiler.backend.ptxas import ptx_to_cubin
    monkeypatch.setenv("KERNELC_LLVM_PROCESSES", "1")
    ptx, llir, ck = _ptx_and_llir()
    tgt = parse_target("sm_90a")
    here = ptx_to_cubin(ptx, tgt, fill_step=True)
    assert here.cubin == ck.asm["cubin"]
    calls = []
    real = llvm_pool._in_worker
    monkeypatch.setattr(llvm_pool, "_in_worker", lambda kind, *a: calls.append(kind) or real(kind, *a))
    with llvm_pool._assembling:   # another compile of this process is assembling
        t = {}
        res = llvm_pool.assemble(ptx, tgt, 3, t, fill_step=True)
    assert calls == ["ptxas"] and res.cubin == here.cubin and res.resources == here.resources and t["ptxas"] > 0
    # LLVM and assembling both busy here: one round trip does both
    with llvm_pool._here:
        t = {}
        ptx2, _, res2 = llvm_pool.to_cubin(llir, tgt, 3, t, fill_step=True)
    assert calls[-1] == "both" and ptx2 == ptx and res2.cubin == here.cubin and {"llc", "ptxas"} <= set(t)


def test_a_worker_assembles_with_the_options_in_force_now(monkeypatch):
    # a knob set after the worker started decides its build as it would this process's
    from kernelc.compiler.backend import parse_target
    from kernelc.compiler.backend.ptxas import ptx_to_cubin
    monkeypatch.setenv("KERNELC_LLVM_PROCESSES", "1")
    ptx, _, _ = _ptx_and_llir()
    tgt = parse_target("sm_90a")
    with llvm_pool._assembling:
        llvm_pool.assemble(ptx, tgt, 3, {})          # (starts a worker if none is idle)
    for bound in ("0", "1"):
        monkeypatch.setenv("KERNELC_NVJITLINK_LAUNCH_BOUND", bound)
        here = ptx_to_cubin(ptx, tgt)
        with llvm_pool._assembling:
            there = llvm_pool.assemble(ptx, tgt, 3, {})
        assert there.cubin == here.cubin, bound
    monkeypatch.delenv("KERNELC_NVJITLINK_LAUNCH_BOUND")
    free, bound = ptx_to_cubin(ptx, tgt), None
    monkeypatch.setenv("KERNELC_NVJITLINK_LAUNCH_BOUND", "1")
    bound = ptx_to_cubin(ptx, tgt)
    assert free.cubin != bound.cubin   # the knob matters for this kernel, so the check above could fail


def test_a_forked_child_starts_with_no_workers_and_free_locks(monkeypatch):
    import os
    _fresh_pool(monkeypatch)
    with llvm_pool.in_flight(), llvm_pool.in_flight():
        assert llvm_pool._idle
        llvm_pool._here.acquire()      # a parent thread inside LLVM at the fork
        try:
            pid = os.fork()
            if pid == 0:   # the child: report through the exit status, never return into pytest
                ok = (llvm_pool._idle == [] and llvm_pool._started == 0 and llvm_pool._in_flight == 0
                      and llvm_pool._here.acquire(blocking=False))
                import kernelc.compiler.compiler as C
                ok = ok and C._python_phase.acquire(blocking=False)
                os._exit(0 if ok else 1)
            _, status = os.waitpid(pid, 0)
        finally:
            llvm_pool._here.release()
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
