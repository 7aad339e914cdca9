"""``defer_tma_store_waits`` (passes/tma_stores.py, docs/schedule-ir.md "TMA stores in loops"): golden IR before
-> after for a persistent matmul's epilogue store and a subtiled one (two stores sharing one buffer), a store
outside loops left as it was, the knob, the verifier's checks of ``bulk_store``, and the PTX: the elected
thread's ``cp.async.bulk.wait_group.read`` comes before the buffer is written again, not right after the
store is issued."""
import re

import numpy as np
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
    # the wait of the tile loop's store precedes the staging writes (stmatrix) of that store
    first_store = stores[0]
    w_before = [w for w in waits if w < first_store]
    assert w_before and any(ln.startswith(("st.shared", "stmatrix")) for ln in lines[w_before[-1]:first_store])
    monkeypatch.setenv("KERNELC_TMA_STORE_WAIT", "eager")
    lines = _ptx_lines(build())
    commits = [i for i, ln in enumerate(lines) if "cp.async.bulk.commit_group" in ln]
    assert all("wait_group.read 0" in " ".join(lines[c + 1:c + 4]) for c in commits)


# -- the staging writes: stmatrix for an MMA accumulator tile ----------------------------------------


def _jit_offset(sm):
    """codegen's ``SmemOperand.offset`` as a native function of (row, col) (llvmlite MCJIT)."""
    import ctypes
    from types import SimpleNamespace

    import llvmlite.binding as llvm
    from kernelc.compiler.codegen.emitter import Emitter
    e = Emitter("k", "k.py", 1)
    res = sm.offset(SimpleNamespace(e=e), "%r", "%c")
    mod = llvm.parse_assembly("define i32 @f(i32 %r, i32 %c) {\n" + "\n".join(e.body) + f"\n  ret i32 {res}\n}}\n")
    mod.verify()
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    ee = llvm.create_mcjit_compiler(mod, llvm.Target.from_default_triple().create_target_machine())
    ee.finalize_object()
    f = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32, ctypes.c_int32)(ee.get_function_address("f"))
    return f, ee


@pytest.mark.parametrize("shape,warps", [((128, 128), (4, 1)), ((64, 128), (4, 1)), ((128, 256), (8, 1)),
                                         ((64, 64), (4, 1)), ((128, 64), (2, 2))])
def test_a_box_written_with_stmatrix_puts_every_element_in_its_swizzled_place(shape, warps):
    """What ``stmatrix.x4`` (no transpose) does, by its documented semantics (lane 8i + j gives the address of
    row j of block i; thread t holds the pair (t / 4, 2 (t % 4) + k) of each block), against where the box's
    swizzled layout (codegen's offset function, run natively) puts each element: every element once, at its
    place, from 16-byte aligned row addresses."""
    from kernelc.compiler.codegen.dot import SmemOperand
    from kernelc.compiler.layouts import mma_v2
    from kernelc.compiler.shared_layouts import stmatrix_address_layout, stmatrix_rows_fit
    src = mma_v2(shape, warps)
    assert stmatrix_rows_fit(src, 2)
    sm = SmemOperand(0, shape[0], shape[1], 2)  # the box: 128-byte panels, 128B swizzle
    f, _keep = _jit_offset(sm)
    rows = stmatrix_address_layout(src, False)
    seen = set()
    for w in range(src.num_warps):
        for g in range(src.num_regs // 8):
            starts = []
            for lane in range(32):
                r, c = np.array(rows.reg_coord(g)) ^ np.array(rows.thread_coord(lane, w))
                assert c % 8 == 0
                starts.append(f(int(r), int(c)))
            assert all(s % 16 == 0 for s in starts)
            for t in range(32):
                for i in range(4):
                    for k in range(2):
                        r, c = np.array(src.reg_coord(8 * g + 2 * i + k)) ^ np.array(src.thread_coord(t, w))
                        assert starts[8 * i + (t >> 2)] + 2 * (2 * (t & 3) + k) == f(int(r), int(c)), (r, c)
                        seen.add((int(r), int(c)))
    assert len(seen) == shape[0] * shape[1]


@pytest.mark.parametrize("flat", ["0", "tma"])
def test_the_accumulator_is_staged_with_stmatrix(monkeypatch, flat):
    """The persistent matmuls' epilogues on sm_90a: the pass marks the staging write of the fp16 accumulator
    (whole, or each half of the subtiled one) ``smem_write='stmatrix'``; the SASS stages C with STSM only
    (128x128 on 128 threads: 16 x4 per store; 128x256 in halves on 256 threads: 8 per half), no spills."""
    import collections
    monkeypatch.setenv("KERNELC_FLATTEN_LOOPS", flat)
    for kern, cx, warps, stages, per_store in (
            (P.persistent_desc, dict(BM=128, BN=128, BK=64, PROGRAMS=132, FLAT=True), 4, 3, 16),
            (P.persistent_desc_subtiled, dict(BM=128, BN=256, BK=64, PROGRAMS=132, FLAT=True), 8, 4, 8)):
        ck = kernelc.compile(kern, DESC_SIG, cx, target="sm_90a", num_warps=warps, num_stages=stages,
                             divisibility=ALL16(DESC_SIG))
        stages_ir = re.findall(r"bulk_stage_store .*", ck.asm["tir"])
        marked = [s for s in stages_ir if "smem_write='stmatrix'" in s]
        # flattened, the branch for K = 0 stores the zero accumulator (a constant, not MMA fragments) plainly
        assert marked and (marked == stages_ir if flat == "0" else len(marked) == len(stages_ir) // 2), stages_ir
        # past the entry, where the tensor maps are built in shared memory with plain STS
        sass = ck.asm["sass"]
        ops = collections.Counter(re.findall(r"\b(STSM[A-Z0-9._]*|STS(?:\.[A-Z0-9]+)*)\b",
                                             sass[sass.index("UTMALDG"):]))
        assert ops["STSM.16.M88.4"] == per_store * len(marked), (ops, len(marked))
        if flat == "0":
            assert set(ops) == {"STSM.16.M88.4"}, ops
        assert ck.n_spills == 0


def test_a_loaded_tile_keeps_plain_shared_stores():
    _, fn, _ = _passes(subtiled, SUB_SIG, dict(BM=64, BN=128), div=ALL16(SUB_SIG))
    assert not [o for o in fn.walk() if o.name == "bulk_stage_store" and o.attrs.get("smem_write")]
