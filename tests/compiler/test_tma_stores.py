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


@kernelc.jit
def store_mid_trip(a_ptr, b_ptr, c_ptr, o_ptr, M, K, STEP, BM: kl.constexpr, BK: kl.constexpr,
                   CONST_STEP: kl.constexpr = True, WS: kl.constexpr = False):
    """The attention backward's dS^T store in small: a dot's fp16 result stored by TMA in the middle of a trip of a
    TMA-ringed loop (without a producer warp (WS) the ring's barrier before its refill ends the trip) and read by a second
    dot after the store. C[m, k] = A[m, k] B[k]; O[m] = sum over k of C[m, k] B[k]."""
    a_d = kl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_d = kl.make_tensor_descriptor(b_ptr, shape=[K, BK], strides=[BK, 1], block_shape=[BK, BK])
    c_d = kl.make_tensor_descriptor(c_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    m = kl.program_id(0) * BM
    acc = kl.zeros([BM, BK], dtype=kl.float32)
    for k in kl.range(0, K, BK if CONST_STEP else STEP, num_stages=3, warp_specialize=WS):
        a = a_d.load([m, k])
        b = b_d.load([k, 0])
        s = kl.dot(a, b).to(kl.float16)
        c_d.store([m, k], s)
        acc = kl.dot(s, b, acc)
    rows = m + kl.arange(0, BM)
    cols = kl.arange(0, BK)
    kl.store(o_ptr + rows[:, None] * BK + cols[None, :], acc, mask=rows[:, None] < M)


MID_SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "o_ptr": "*fp32", "M": "i32", "K": "i32",
           "STEP": "i32"}
SUB_SIG = {"a_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "T": "i32"}
DESC_SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32"}
ALL16 = lambda sig: {k: 16 for k in sig}  # noqa: E731


@pytest.fixture(autouse=True)
def _defaults(monkeypatch):
    monkeypatch.delenv("KERNELC_TMA_STORE_WAIT", raising=False)
    monkeypatch.delenv("KERNELC_TMA_STORE_PUBLISH", raising=False)


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


def test_a_store_that_a_later_barrier_of_its_trip_publishes_alternates_two_stages(monkeypatch):
    # KERNELC_TMA_STORE_PUBLISH=shared: the ring's barrier before its refill publishes the staged tile and releases
    # the other stage: no barrier of the store's own; the elected thread waits for the previous trip's store before
    # that barrier, and issues this trip's after it
    monkeypatch.setenv("KERNELC_TMA_STORE_PUBLISH", "shared")
    ir, fn, _ = _passes(store_mid_trip, MID_SIG, dict(BM=128, BK=64), num_warps=8, div=ALL16(MID_SIG))
    filecheck(ir["expand_bulk_reductions"], """
        CHECK: [[D:%\\d+]] = make_tensor_descriptor %c_ptr
        CHECK: scf.for [[LB:%\\d+]], %K, [[STEP:%\\d+]],
        CHECK-NEXT: ^body([[IV:%\\d+]]: i32,
        CHECK: [[S:%\\d+]] = cast {{%\\d+}} {rounding='rtne'} : <128x64xfp16>
        CHECK-NEXT: descriptor_store [[D]], [[S]], {{%\\d+}}, [[IV]] {block_shape=[128, 64], tma=True}
        CHECK-NEXT: dot [[S]]
        CHECK-NEXT: wgmma_wait
        CHECK-NEXT: barrier
        CHECK-NEXT: elect_one
        CHECK: tma_copy_to_ring
    """)
    filecheck(ir["defer_tma_store_waits"], """
        CHECK: [[D:%\\d+]] = make_tensor_descriptor %c_ptr
        CHECK-NEXT: [[BUF:%\\d+]] = bulk_buffer_alloc [[D]] {stages=2} : <128x64xfp16>
        CHECK: scf.for [[LB:%\\d+]], %K, [[STEP:%\\d+]],
        CHECK-NEXT: ^body([[IV:%\\d+]]: i32,
        CHECK: [[S:%\\d+]] = cast {{%\\d+}} {rounding='rtne'} : <128x64xfp16>
        CHECK-NEXT: [[K0:%\\d+]] = sub [[IV]], [[LB]] : i32
        CHECK-NEXT: [[K:%\\d+]] = udiv [[K0]], [[STEP]] : i32
        CHECK-NEXT: [[ONE:%\\d+]] = constant {value=1} : i32
        CHECK-NEXT: [[ST:%\\d+]] = and [[K]], [[ONE]] : i32
        CHECK-NEXT: [[T0:%\\d+]] = elect_one : i1
        CHECK-NEXT: bulk_stage_store [[BUF]], [[ST]], [[S]] {smem_write='stmatrix'}
        CHECK-NEXT: fence_async_shared
        CHECK-NEXT: bulk_wait_group [[T0]] {pending=0, read=True}
        CHECK-NEXT: dot [[S]]
        CHECK-NEXT: wgmma_wait
        CHECK-NEXT: barrier
        CHECK-NEXT: bulk_store [[BUF]], [[ST]], [[T0]], {{%\\d+}}, [[IV]]
        CHECK-NEXT: bulk_commit_group [[T0]]
        CHECK-NEXT: elect_one
        CHECK-NOT: {{^ +}}barrier
        CHECK: tma_copy_to_ring
        CHECK: scf.yield
        CHECK-NEXT: [[T1:%\\d+]] = elect_one : i1
        CHECK-NEXT: bulk_wait_group [[T1]] {pending=0, read=True}
        CHECK-NEXT: barrier
    """)
    verify(fn)


def test_the_shared_publication_takes_a_signed_stage_for_a_step_of_unknown_sign_and_own_keeps_one_stage(
        monkeypatch):
    monkeypatch.setenv("KERNELC_TMA_STORE_PUBLISH", "shared")
    ir, _, _ = _passes(store_mid_trip, MID_SIG, dict(BM=128, BK=64, CONST_STEP=False), num_warps=8,
                       div=ALL16(MID_SIG))
    filecheck(ir["defer_tma_store_waits"], """
        CHECK: bulk_buffer_alloc {{%\\d+}} {stages=2}
        CHECK: scf.for [[LB:%\\d+]], %K, %STEP,
        CHECK-NEXT: ^body([[IV:%\\d+]]: i32,
        CHECK: [[K0:%\\d+]] = sub [[IV]], [[LB]] : i32
        CHECK-NEXT: [[K:%\\d+]] = sdiv [[K0]], %STEP : i32
        CHECK-NEXT: [[TWO:%\\d+]] = constant {value=2} : i32
        CHECK-NEXT: [[ST:%\\d+]] = srem [[K]], [[TWO]] : i32
        CHECK-NEXT: elect_one
        CHECK-NEXT: bulk_stage_store {{%\\d+}}, [[ST]],
    """)
    monkeypatch.setenv("KERNELC_TMA_STORE_PUBLISH", "own")
    ir, _, _ = _passes(store_mid_trip, MID_SIG, dict(BM=128, BK=64), num_warps=8, div=ALL16(MID_SIG))
    filecheck(ir["defer_tma_store_waits"], """
        CHECK: bulk_buffer_alloc {{%\\d+}} {stages=1}
        CHECK: scf.for
        CHECK: [[T0:%\\d+]] = elect_one : i1
        CHECK-NEXT: bulk_wait_group [[T0]] {pending=0, read=True}
        CHECK-NEXT: barrier
        CHECK-NEXT: bulk_stage_store
        CHECK-NEXT: fence_async_shared
        CHECK-NEXT: barrier
        CHECK-NEXT: bulk_store
        CHECK-NEXT: bulk_commit_group [[T0]]
        CHECK-NEXT: dot
    """)


def test_a_warp_specialised_loop_has_no_barrier_to_share():
    # a producer warp fills the ring: the consumers release stages with mbarrier arrivals, no barrier follows
    # the store in its trip, and it keeps one stage and barriers of its own
    ir, _, _ = _passes(store_mid_trip, MID_SIG, dict(BM=128, BK=64, WS=True), num_warps=8, div=ALL16(MID_SIG))
    filecheck(ir["defer_tma_store_waits"], """
        CHECK: bulk_buffer_alloc {{%\\d+}} {stages=1}
        CHECK: scf.for {{.*}}ws={
        CHECK: [[T0:%\\d+]] = elect_one : i1
        CHECK-NEXT: bulk_wait_group [[T0]] {pending=0, read=True}
        CHECK-NEXT: barrier
        CHECK-NEXT: bulk_stage_store
        CHECK-NEXT: fence_async_shared
        CHECK-NEXT: barrier
        CHECK-NEXT: bulk_store
        CHECK: mbarrier_arrive
    """)


def test_the_split_knob_stores_each_warpgroups_band_behind_its_own_named_barriers(monkeypatch):
    # KERNELC_TMA_STORE_SPLIT: the [128, 64] accumulator of 8 warps is two 64-row bands, one a warpgroup; the
    # descriptor's box becomes one band, the buffer one stage a band; each warpgroup's elected thread waits for its
    # own previous store and issues its band at row offset + 64 * its index
    monkeypatch.setenv("KERNELC_TMA_STORE_SPLIT", "1")
    ir, fn, _ = _passes(store_mid_trip, MID_SIG, dict(BM=128, BK=64, WS=True), num_warps=8, div=ALL16(MID_SIG))
    filecheck(ir["defer_tma_store_waits"], """
        CHECK: [[D:%\\d+]] = make_tensor_descriptor %c_ptr, {{.*}} : tensordesc<fp16[64, 64]>
        CHECK-NEXT: [[BUF:%\\d+]] = bulk_buffer_alloc [[D]] {stages=2} : <64x64xfp16>
        CHECK: scf.for
        CHECK: [[S:%\\d+]] = cast {{%\\d+}} {rounding='rtne'} : <128x64xfp16>
        CHECK-NEXT: [[WG:%\\d+]] = warpgroup_index {uniform=True} : i32
        CHECK-NEXT: [[T0:%\\d+]] = elect_one {per_warpgroup=True} : i1
        CHECK-NEXT: bulk_wait_group [[T0]] {pending=0, read=True}
        CHECK-NEXT: barrier {warpgroup=True}
        CHECK-NEXT: [[Z:%\\d+]] = constant {value=0} : i32
        CHECK-NEXT: bulk_stage_store [[BUF]], [[Z]], [[S]] {parts=2, smem_write='stmatrix'}
        CHECK-NEXT: fence_async_shared
        CHECK-NEXT: barrier {warpgroup=True}
        CHECK-NEXT: [[R:%\\d+]] = constant {value=64} : i32
        CHECK-NEXT: [[O:%\\d+]] = mul [[WG]], [[R]] : i32
        CHECK-NEXT: [[ROW:%\\d+]] = add {{%\\d+}}, [[O]] : i32
        CHECK-NEXT: bulk_store [[BUF]], [[WG]], [[T0]], [[ROW]], {{%\\d+}}
        CHECK-NEXT: bulk_commit_group [[T0]]
        CHECK: scf.yield
        CHECK-NEXT: [[T1:%\\d+]] = elect_one {per_warpgroup=True} : i1
        CHECK-NEXT: bulk_wait_group [[T1]] {pending=0, read=True}
        CHECK-NEXT: barrier
    """)
    verify(fn)
    (stage,) = [o for o in fn.walk() if o.name == "bulk_stage_store"]
    stage.attrs["parts"] = 4
    with pytest.raises(Exception, match="must be 4 of the buffer's boxes"):
        verify(fn)
    # 4 warps: one warpgroup, nothing to split
    ir, _, _ = _passes(store_mid_trip, MID_SIG, dict(BM=64, BK=64, WS=True), num_warps=4, div=ALL16(MID_SIG))
    assert "parts=" not in ir["defer_tma_store_waits"] and "{stages=1}" in ir["defer_tma_store_waits"]
    ck = kernelc.compile(store_mid_trip, MID_SIG, dict(BM=128, BK=64, WS=True), target="sm_90a", num_warps=8,
                         num_stages=3, divisibility=ALL16(MID_SIG))
    named = re.findall(r"bar\.sync t, 128", ck.asm["ptx"])
    assert len(named) == 2, named


def _bar_syncs(ck):
    return len(re.findall(r"\bbar(rier)?\.sync", ck.asm["ptx"]))


def test_the_shared_publication_removes_the_stores_two_barriers(monkeypatch):
    def build():
        return kernelc.compile(store_mid_trip, MID_SIG, dict(BM=128, BK=64), target="sm_90a", num_warps=8,
                               num_stages=3, divisibility=ALL16(MID_SIG))
    monkeypatch.setenv("KERNELC_TMA_STORE_PUBLISH", "shared")
    shared = build()
    monkeypatch.setenv("KERNELC_TMA_STORE_PUBLISH", "own")
    own = build()
    assert _bar_syncs(own) == _bar_syncs(shared) + 2, (_bar_syncs(own), _bar_syncs(shared))
    assert shared.n_spills == 0 and shared.shared == own.shared + 128 * 64 * 2  # the second stage


@pytest.mark.parametrize("publish", ["own", "shared"])
def test_the_l2_knob_writes_an_evict_first_hint_on_the_store(monkeypatch, publish):
    monkeypatch.setenv("KERNELC_TMA_STORE_L2", "evict_first")
    monkeypatch.setenv("KERNELC_TMA_STORE_PUBLISH", publish)
    _, fn, _ = _passes(store_mid_trip, MID_SIG, dict(BM=128, BK=64), num_warps=8, div=ALL16(MID_SIG))
    (store,) = [o for o in fn.walk() if o.name == "bulk_store"]
    assert store.attrs.get("l2_hint") == "evict_first"
    store.attrs["l2_hint"] = "evict_last"
    with pytest.raises(Exception, match="l2_hint must be 'evict_first'"):
        verify(fn)
    ck = kernelc.compile(store_mid_trip, MID_SIG, dict(BM=128, BK=64), target="sm_90a", num_warps=8, num_stages=3,
                         divisibility=ALL16(MID_SIG))
    ptx = ck.asm["ptx"]
    assert "createpolicy.fractional.L2::evict_first.b64" in ptx
    assert re.search(r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta\.bulk_group\.L2::cache_hint", ptx)


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
