"""``KERNELC_REUSE_SYNC`` (passes/smem_offsets.py): what the pass writes where a buffer takes an earlier one's
bytes. ``all`` (default) writes cp.async.wait_all, fence.proxy.async (sm_90) and a barrier; ``needed`` (opt-in,
no GPU measurement yet) leaves out a wait_all that drains nothing and the fence where only generic-proxy
accesses (a store's conversion) follow on a cp.async ring's bytes. Issue 20: tutorial 03's fp8 epilogue
(docs/triton-tutorials.md)."""
import re

import pytest

from examples.kernels.matmul import matmul_kernel
from kernelc.compiler.compiler import compile as kcompile
from kernelc.compiler.ir import verify
from tests.compiler.filecheck import filecheck
from tests.compiler.smem_kernels import SHARED_SIG, TWO_SIG, shared_operand, two_loops
from tests.compiler.test_codegen_sass import UNIT_STRIDES
from tests.compiler.test_schedule_passes import _passes as _sched_passes
from tests.compiler.test_store_conversion import (DIV, MM_SIG, PDIV, PSIG, _cx, _passes, _sass_ops,
                                                  ptr_persistent)

# tutorial 03's fp8 benchmark shape: e5m2 inputs, B K-major (stride_bk = 1), fp16 out
FP8_SIG = dict(MM_SIG, a_ptr="*fp8e5", b_ptr="*fp8e5")
FP8_UNIT = ("stride_ak", "stride_bk", "stride_cn")


@pytest.fixture
def discount4(monkeypatch):
    monkeypatch.setenv("KERNELC_STORE_SMEM_DISCOUNT", "4")
    monkeypatch.setenv("KERNELC_SMEM_REUSE", "1")


@pytest.mark.parametrize("mode", ["all", "needed"])
def test_golden_the_epilogue_conversion_after_a_cp_async_ring(discount4, monkeypatch, mode):
    """128x128x64 fp16, 4 warps, 3 stages: the rings' loop is followed by its own wait_all (passes/rings.py).
    ``all`` waits again, fences and syncs; ``needed`` only syncs (the conversion's stmatrix/ld.shared are
    generic-proxy accesses, the rings' wgmma reads were waited for)."""
    monkeypatch.setenv("KERNELC_REUSE_SYNC", mode)
    ir, fn, _ = _passes(matmul_kernel, MM_SIG, _cx(128, 128, 64), 4, 3, DIV, UNIT_STRIDES)
    after = ir["assign_smem_offsets"]
    if mode == "all":
        filecheck(after, """
            CHECK: = scf.for
            CHECK: = wgmma_wait
            CHECK: async_wait_all
            CHECK: async_wait_all
            CHECK-NEXT: fence_async_shared
            CHECK-NEXT: barrier
            CHECK-NEXT: = convert_layout {{%\\d+}} {layout={{.*}}smem_buffer={offset=0, bytes=32768}} : <128x128xfp16>
        """)
    else:  # the loop's own wait, every copy committed before it: a wait_group 0
        filecheck(after, """
            CHECK: = scf.for
            CHECK: = wgmma_wait
            CHECK: async_wait_group {pending=0}
            CHECK-NOT: async_wait
            CHECK-NOT: fence_async_shared
            CHECK: barrier
            CHECK-NEXT: = convert_layout {{%\\d+}} {layout={{.*}}smem_buffer={offset=0, bytes=32768}} : <128x128xfp16>
        """)
    assert after.count("async_wait_all") == (2 if mode == "all" else 0)
    assert after.count("fence_async_shared") == (1 if mode == "all" else 0)
    verify(fn)


def test_golden_needed_in_a_persistent_tile_loop_body(discount4, monkeypatch):
    """Not flattened, the per-tile ring drains in the body (its wait_all after the wgmma wait): ``needed`` keeps
    that one (as a wait_group 0: the body's copies are committed), writes no second one and no fence, and keeps
    both barriers (the next tile's copies write the conversion's bytes)."""
    monkeypatch.setenv("KERNELC_REUSE_SYNC", "needed")
    ir, fn, _ = _passes(ptr_persistent, PSIG, dict(BM=128, BN=256, BK=64, PROGRAMS=132), 8, 4, PDIV, UNIT_STRIDES)
    after = ir["assign_smem_offsets"]
    filecheck(after, """
        CHECK: = scf.for
        CHECK: = wgmma_wait
        CHECK-NEXT: async_wait_group {pending=0}
        CHECK-NOT: async_wait
        CHECK-NOT: fence_async_shared
        CHECK: barrier
        CHECK-NEXT: = convert_layout {{%\\d+}} {layout={{.*}}smem_buffer={offset=0, bytes=65536}} : <128x256xfp16>
        CHECK-NEXT: barrier
        CHECK-NEXT: store
    """)
    assert after.count("fence_async_shared") == 0
    verify(fn)


def test_needed_keeps_the_fence_before_a_ring_that_wgmma_reads(monkeypatch):
    """Loop 2's cp.async ring, read by wgmma (async proxy), takes loop 1's bytes: the fence stays under
    ``needed``; loop 1's own wait_all right before it joins the sequence (one wait either way)."""
    monkeypatch.setenv("KERNELC_SMEM_REUSE", "1")
    monkeypatch.setenv("KERNELC_AUTO_TMA", "0")
    texts = {}
    for mode in ("all", "needed"):
        monkeypatch.setenv("KERNELC_REUSE_SYNC", mode)
        ir, fn, _ = _sched_passes(shared_operand, SHARED_SIG, dict(BM=64, BN=64, D=64), target="sm_90a",
                                  div={"N": 16})
        texts[mode] = ir["assign_smem_offsets"]
        verify(fn)
    norm = lambda t: re.sub(r"\s+", " ", t)  # noqa: E731 (the location column's padding moves)
    assert norm(texts["needed"]) == norm(texts["all"].replace("async_wait_all", "async_wait_group {pending=0}"))
    filecheck(texts["needed"], """
        CHECK: async_wait_group {pending=0}
        CHECK-NEXT: fence_async_shared
        CHECK-NEXT: barrier
        CHECK-NEXT: = ring_alloc
    """)


def test_needed_keeps_the_fence_between_tma_rings(monkeypatch):
    monkeypatch.setenv("KERNELC_SMEM_REUSE", "1")
    for mode in ("all", "needed"):
        monkeypatch.setenv("KERNELC_REUSE_SYNC", mode)
        ir, fn, _ = _sched_passes(two_loops, TWO_SIG, dict(BM=64, BN=64, BK=32), target="sm_90a", div={"K": 16})
        filecheck(ir["assign_smem_offsets"], """
            CHECK: ring_free
            CHECK: fence_async_shared
            CHECK-NEXT: barrier
            CHECK-NEXT: = tma_ring_alloc
        """)


def test_needed_drops_a_second_wait_between_two_cp_async_loops_on_sm80(monkeypatch):
    """sm_80: loop 1's wait_all already drained every copy (only a constant lies between): ``needed`` writes
    the barrier alone, ``all`` a second wait too."""
    monkeypatch.setenv("KERNELC_SMEM_REUSE", "1")
    monkeypatch.setenv("KERNELC_AUTO_TMA", "0")
    for mode, n in (("all", 3), ("needed", 2)):   # each loop drains its ring after it; the pass: one more or none
        monkeypatch.setenv("KERNELC_REUSE_SYNC", mode)
        ir, fn, _ = _sched_passes(two_loops, TWO_SIG, dict(BM=64, BN=64, BK=32), target="sm_80", div={"K": 16})
        after = ir["assign_smem_offsets"]
        wait = "async_wait_all" if mode == "all" else "async_wait_group {pending=0}"
        assert after.count(wait) == n and after.count("async_wait_all") == (n if mode == "all" else 0), mode
        second = "CHECK-NEXT: async_wait_all\n" if mode == "all" else ""
        filecheck(after, f"""
            CHECK: = scf.for
            CHECK: {wait}
            CHECK-NEXT: = constant {{value=64}} : i32
            {second}CHECK-NEXT: barrier
            CHECK-NEXT: = ring_alloc {{stages=3, operand='a', smem_buffer={{offset=0, bytes=24576}}}}
        """)
        verify(fn)


def _epilogue_sync(ck):
    ops = _sass_ops(ck)
    return {k: ops.count(k) for k in ("MEMBAR.ALL.CTA", "FENCE.VIEW.ASYNC.S", "DEPBAR.LE", "LDGDEPBAR")}


def test_sass_fp8_wgmma_epilogue_loses_the_membar_and_a_drain(monkeypatch):
    """Tutorial 03's fp8 shape at 128x32x32, 4 warps, 4 stages (its S24 pick) on sm_90a: ``needed`` removes
    MEMBAR.ALL.CTA + FENCE.VIEW.ASYNC.S (the fence under nvJitLink), one DEPBAR + LDGDEPBAR (the second
    cp.async.wait_all) and the first wait's LDGDEPBAR; the barriers and shared memory stay."""
    cx = dict(_cx(128, 32, 32))
    got = {}
    for mode in ("all", "needed"):
        monkeypatch.setenv("KERNELC_REUSE_SYNC", mode)
        ck = kcompile(matmul_kernel, FP8_SIG, cx, "sm_90a", 4, 4, divisibility=DIV, equal_to_1=FP8_UNIT)
        got[mode] = (_epilogue_sync(ck), ck.shared, _sass_ops(ck).count("BAR.SYNC.DEFER_BLOCKING"))
    (a, sh_a, bar_a), (n, sh_n, bar_n) = got["all"], got["needed"]
    assert a["MEMBAR.ALL.CTA"] == a["FENCE.VIEW.ASYNC.S"] == 1
    assert n["MEMBAR.ALL.CTA"] == n["FENCE.VIEW.ASYNC.S"] == 0
    # the second wait's DEPBAR + LDGDEPBAR, and the first wait's LDGDEPBAR (wait_group 0: no commit)
    assert n["DEPBAR.LE"] == a["DEPBAR.LE"] - 1 and n["LDGDEPBAR"] == a["LDGDEPBAR"] - 2
    assert sh_a == sh_n and bar_a == bar_n


def _block(*names):
    from kernelc.compiler.ir.core import Block, Op
    blk = Block()
    for n in names:
        op = n if isinstance(n, Op) else Op(n, [], [])
        op.block = blk
        blk.ops.append(op)
    return blk


def test_a_wait_after_an_uncommitted_copy_stays_a_wait_all():
    """``_committed_before``: a copy after the last commit (here, in the same block, or before a loop whose body
    ends committed) keeps the wait_all (it commits that copy); a commit or an earlier wait_all after it lets the
    wait go without one."""
    from kernelc.compiler.ir.core import Op
    from kernelc.compiler.passes.smem_offsets import _committed_before
    assert not _committed_before(_block("async_copy", "async_wait_all"), 1)
    assert _committed_before(_block("async_copy", "async_commit_group", "async_wait_all"), 2)
    assert _committed_before(_block("async_copy", "async_wait_all", "barrier", "async_wait_all"), 3)
    assert _committed_before(_block("barrier", "async_wait_all"), 1)   # no copy at all
    body_ok = _block("async_copy", "async_commit_group")
    body_open = _block("async_commit_group", "async_copy")
    for body, copy_before, want in ((body_ok, False, True), (body_open, False, False), (body_ok, True, False)):
        loop = Op("scf.for", [], [], regions=[body])
        names = (["async_copy"] if copy_before else []) + [loop, "async_wait_all"]
        blk = _block(*names)
        assert _committed_before(blk, len(blk.ops) - 1) is want
    # inside a loop body whose copies come after the wait: the previous trip's are uncommitted there
    inner = _block("async_wait_all", "async_copy")
    outer = _block("async_commit_group", Op("scf.for", [], [], regions=[inner]))
    assert inner.parent.block is outer and not _committed_before(inner, 0)
