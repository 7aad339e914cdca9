"""``defer_tma_store_waits`` (passes/tma_stores.py, docs/schedule-ir.md "TMA stores in loops"): golden IR before
-> after for a persistent matmul's epilogue store and a subtiled one (two stores sharing one buffer), a store
outside loops left as it was, the knob, the verifier's checks of ``bulk_store``, and the PTX: the elected
thread's ``cp.async.bulk.wait_group.read`` comes before the buffer is written again, not right after the
store is issued."""
import re

import pytest

import kernelc
import kernelc.language as kl
from kernelc.compiler.ir import verify
from tests.compiler import persistent_kernels as P
from tests.compiler.filecheck import filecheck
from tests.compiler.test_schedule_passes import _passes
from tests.compiler.verifier_cases import first_ops, rejects_bad_operands


@kernelc.jit
def subtiled(a_ptr, c_ptr, M, N, T, BM: kl.constexpr, BN: kl.constexpr):
    """Tutorial 09's subtiled epilogue, without the K loop: each tile's two halves go through one descriptor."""
    c_d = kl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN // 2])
    rows = kl.arange(0, BM)
    cols = kl.arange(0, BN // 2)
    for t in range(kl.program_id(0), T, kl.num_programs(0)):
        x0 = kl.load(a_ptr + t * BM * BN + rows[:, None] * BN + cols[None, :])
        x1 = kl.load(a_ptr + t * BM * BN + rows[:, None] * BN + (cols + BN // 2)[None, :])
        c_d.store([t * BM, 0], x0)
        c_d.store([t * BM, BN // 2], x1)


@kernelc.jit
def store_once(a_ptr, c_ptr, M, N, BM: kl.constexpr, BN: kl.constexpr):
    c_d = kl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    rows = kl.arange(0, BM)
    cols = kl.arange(0, BN)
    c_d.store([kl.program_id(0) * BM, 0], kl.load(a_ptr + rows[:, None] * BN + cols[None, :]))


SUB_SIG = {"a_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "T": "i32"}
DESC_SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32"}
ALL16 = lambda sig: {k: 16 for k in sig}  # noqa: E731


@pytest.fixture(autouse=True)
def _defaults(monkeypatch):
    monkeypatch.delenv("KERNELC_TMA_STORE_WAIT", raising=False)


def test_a_store_in_a_loop_waits_for_its_buffer_before_writing_it_again():
    ir, fn, _ = _passes(subtiled, SUB_SIG, dict(BM=64, BN=128), div=ALL16(SUB_SIG))
    filecheck(ir["expand_bulk_reductions"], """
        CHECK: [[D:%\\d+]] = make_tensor_descriptor %c_ptr
        CHECK: scf.for
        CHECK: descriptor_store [[D]], {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {block_shape=[64, 64], tma=True}
        CHECK: descriptor_store [[D]], {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {block_shape=[64, 64], tma=True}
    """)
    filecheck(ir["defer_tma_store_waits"], """
        CHECK: [[D:%\\d+]] = make_tensor_descriptor %c_ptr
        CHECK-NEXT: [[BUF:%\\d+]] = bulk_buffer_alloc [[D]] {stages=1} : <64x64xfp16>
        CHECK-NOT: bulk_buffer_alloc
        CHECK: scf.for
        CHECK-NOT: descriptor_store
        CHECK: [[X0:%\\d+]] = load
        CHECK: [[X1:%\\d+]] = load
        CHECK: [[T0:%\\d+]] = elect_one : i1
        CHECK-NEXT: bulk_wait_group [[T0]] {pending=0, read=True}
        CHECK-NEXT: barrier
        CHECK-NEXT: bulk_stage_store [[BUF]], [[Z:%\\d+]], [[X0]]
        CHECK-NEXT: fence_async_shared
        CHECK-NEXT: barrier
        CHECK-NEXT: bulk_store [[BUF]], [[Z]], [[T0]], {{%\\d+}}, {{%\\d+}}
        CHECK-NEXT: bulk_commit_group [[T0]]
        CHECK: [[T1:%\\d+]] = elect_one : i1
        CHECK-NEXT: bulk_wait_group [[T1]] {pending=0, read=True}
        CHECK-NEXT: barrier
        CHECK-NEXT: bulk_stage_store [[BUF]], [[Z1:%\\d+]], [[X1]]
        CHECK-NEXT: fence_async_shared
        CHECK-NEXT: barrier
        CHECK-NEXT: bulk_store [[BUF]], [[Z1]], [[T1]], {{%\\d+}}, {{%\\d+}}
        CHECK-NEXT: bulk_commit_group [[T1]]
        CHECK-NEXT: scf.yield
        CHECK-NEXT: [[T2:%\\d+]] = elect_one : i1
        CHECK-NEXT: bulk_wait_group [[T2]] {pending=0, read=True}
        CHECK-NEXT: barrier
        CHECK-NEXT: return
    """)
    verify(fn)


def test_a_store_outside_loops_and_the_eager_knob_keep_the_one_op(monkeypatch):
    ir, _, _ = _passes(store_once, {"a_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32"},
                       dict(BM=64, BN=64), div={"a_ptr": 16, "c_ptr": 16, "M": 16, "N": 16})
    assert ir["defer_tma_store_waits"] == ir["expand_bulk_reductions"]
    assert "descriptor_store" in ir["defer_tma_store_waits"] and "bulk_store" not in ir["defer_tma_store_waits"]
    monkeypatch.setenv("KERNELC_TMA_STORE_WAIT", "eager")
    ir, _, _ = _passes(subtiled, SUB_SIG, dict(BM=64, BN=128), div=ALL16(SUB_SIG))
    assert ir["defer_tma_store_waits"] == ir["expand_bulk_reductions"]


def test_the_verifier_checks_bulk_store():
    _, fn, _ = _passes(subtiled, SUB_SIG, dict(BM=64, BN=128), div=ALL16(SUB_SIG))
    alloc, store = first_ops(fn, "bulk_buffer_alloc", "bulk_store")
    rejects_bad_operands(fn, [
        (store, 0, alloc.operands[0], "operand 0 must be a bulk_buffer_alloc"),
        (store, 1, store.operands[2], "the stage must be an i32 scalar"),
        (store, 2, store.operands[1], "the predicate must be an i1 scalar"),
        (store, 3, store.operands[2], "one i32 offset per descriptor dimension"),
    ])


def _ptx_lines(ck):
    return [ln.strip() for ln in ck.asm["ptx"].splitlines() if ln.strip() and not ln.strip().startswith("//")]


@pytest.mark.parametrize("flat", ["0", "1"])
def test_the_persistent_epilogue_is_waited_for_at_the_next_tile(monkeypatch, flat):
    """The persistent descriptor matmul (128x128x64, 4 warps, 3 stages; nested and flattened): one
    ``wait_group.read 0`` before the buffer's write in the tile loop, one after it, none right after the
    store's commit; with ``eager`` the wait follows the commit."""
    monkeypatch.setenv("KERNELC_FLATTEN_LOOPS", flat)

    def build():
        return kernelc.compile(P.persistent_desc, DESC_SIG, dict(BM=128, BN=128, BK=64, PROGRAMS=132, FLAT=True),
                               target="sm_90a", num_warps=4, num_stages=3, divisibility=ALL16(DESC_SIG))

    lines = _ptx_lines(build())
    commits = [i for i, ln in enumerate(lines) if "cp.async.bulk.commit_group" in ln]
    waits = [i for i, ln in enumerate(lines) if re.search(r"cp\.async\.bulk\.wait_group\.read 0", ln)]
    stores = [i for i, ln in enumerate(lines) if re.search(r"cp\.async\.bulk\.tensor\.2d\.global\.shared", ln)]
    assert commits and stores and waits
    for c in commits:  # what follows each commit before the next wait: the loop goes on (a branch back)
        nxt = [w for w in waits if w > c]
        assert nxt and any(re.search(r"\bbra(\.uni)?\b", ln) for ln in lines[c:nxt[0]]), lines[c:c + 12]
    # the wait of the tile loop's store precedes the staging writes (st.shared) of that store
    first_store = stores[0]
    w_before = [w for w in waits if w < first_store]
    assert w_before and any(ln.startswith("st.shared") for ln in lines[w_before[-1]:first_store])
    monkeypatch.setenv("KERNELC_TMA_STORE_WAIT", "eager")
    lines = _ptx_lines(build())
    commits = [i for i, ln in enumerate(lines) if "cp.async.bulk.commit_group" in ln]
    assert all("wait_group.read 0" in " ".join(lines[c + 1:c + 4]) for c in commits)
