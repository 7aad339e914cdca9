"""``expand_tma_rings`` (passes/tma_rings.py, docs/schedule-ir.md): golden IR before -> after, the
verifier's checks of the TMA ring ops, and their lowering one op at a time."""
import pytest

import kernelc
import kernelc.language as kl
from kernelc.compiler.ir import verify
from kernelc.compiler.ir.verifier import VerificationError
from tests.compiler.filecheck import filecheck
from tests.compiler.test_cp_async_rings import mm_mixed
from tests.compiler.test_schedule_passes import MM_DESC_DIV, MM_DESC_SIG, TD_DIV, TD_SIG, _passes, two_dots
from tests.compiler.test_warp_specialize import mm_loop
from tests.compiler.verifier_cases import first_ops, rejects_bad_attrs, rejects_bad_operands

MM_CX = dict(BM=128, BN=128, BK=64, WS=False)


def test_the_ring_expansions_run_after_the_schedule():
    from kernelc.compiler import compiler as C
    names = [p.name for p in C.TILE_PASSES]
    assert names[names.index("schedule_wgmma") + 1:][:3] == ["mark_uniform_masks", "expand_cp_async_rings",
                                                             "expand_tma_rings"]


def test_a_tma_ring_becomes_explicit_ops():
    ir, fn, _ = _passes(mm_loop, MM_DESC_SIG, MM_CX, div=MM_DESC_DIV)
    filecheck(ir["expand_cp_async_rings"], """
        CHECK: = scf.for {{.*}} {pipeline={stages=3, lookahead=2}} : <128x128xfp32>
        CHECK: [[A:%\\d+]] = descriptor_load %0, {{.*}}pipeline={ring='tma'}
        CHECK: [[B:%\\d+]] = descriptor_load %1, {{.*}}pipeline={ring='tma'}
        CHECK-NEXT: = dot [[A]], [[B]],
    """)
    filecheck(ir["expand_tma_rings"], """
        CHECK: [[RA:%\\d+]] = tma_ring_alloc %0 {stages=3, operand='a'} : <128x64xfp16>
        CHECK-NEXT: [[RB:%\\d+]] = tma_ring_alloc %1 {stages=3, operand='b'} : <64x128xfp16>
        CHECK-NEXT: [[BARS:%\\d+]] = mbarrier_alloc {count=3} : i64
        CHECK-NEXT: [[T0:%\\d+]] = elect_one : i1
        CHECK-NEXT: barrier
        CHECK-NEXT: [[I0:%\\d+]] = constant {value=0} : i32
        CHECK-NEXT: [[B0:%\\d+]] = mbarrier_at [[BARS]], [[I0]] : i32
        CHECK-NEXT: mbarrier_init [[B0]], [[T0]] {count=1}
        CHECK: mbarrier_init {{%\\d+}}, [[T0]] {count=1}
        CHECK: mbarrier_init {{%\\d+}}, [[T0]] {count=1}
        CHECK-NEXT: fence_mbarrier_init
        CHECK-NEXT: barrier
        CHECK-NEXT: prefetch_tensormaps %0, %1, [[T0]]
        CHECK: [[G0:%\\d+]] = cmpi {{%\\d+}}, {{%\\d+}} {pred='slt'} : i1
        CHECK: [[S0:%\\d+]] = constant {value=0} : i32
        CHECK-NEXT: [[E0:%\\d+]] = elect_one : i1
        CHECK-NEXT: [[P0:%\\d+]] = and [[E0]], [[G0]] : i1
        CHECK-NEXT: [[BS0:%\\d+]] = mbarrier_at [[BARS]], [[S0]] : i32
        CHECK-NEXT: mbarrier_expect_tx [[BS0]], [[P0]] {bytes=32768}
        CHECK-NEXT: tma_copy_to_ring [[RA]], [[S0]], [[BS0]], [[P0]], {{%\\d+}}, {{%\\d+}}
        CHECK-NEXT: tma_copy_to_ring [[RB]], [[S0]], [[BS0]], [[P0]], {{%\\d+}}, {{%\\d+}}
        CHECK: mbarrier_expect_tx {{%\\d+}}, {{%\\d+}} {bytes=32768}
        CHECK-NEXT: tma_copy_to_ring [[RA]], [[S1:%\\d+]],
        CHECK-NEXT: tma_copy_to_ring [[RB]], [[S1]],
        CHECK-NEXT: [[R0:%\\d+]] = constant {value=0} : i32
        CHECK-NEXT: [[W0:%\\d+]] = constant {value=2} : i32
        CHECK-NEXT: [[PH0:%\\d+]] = constant {value=0} : i32
        CHECK-NEXT: = scf.for {{.*}}, [[R0]], [[W0]], [[PH0]] {pipeline={stages=3, lookahead=2}} : <128x128xfp32>, i32, i32, i32
        CHECK-NEXT: ^body({{%\\d+}}: i32, [[ACC:%\\d+]]: <128x128xfp32>, [[RD:%\\d+]]: i32, [[WR:%\\d+]]: i32, [[PH:%\\d+]]: i32):
        CHECK-NEXT: [[BR:%\\d+]] = mbarrier_at [[BARS]], [[RD]] : i32
        CHECK-NEXT: mbarrier_wait [[BR]], [[PH]]
        CHECK: [[G:%\\d+]] = cmpi {{%\\d+}}, {{%\\d+}} {pred='slt'} : i1
        CHECK: [[TA:%\\d+]] = ring_read [[RA]], [[RD]] : <128x64xfp16>
        CHECK-NEXT: [[TB:%\\d+]] = ring_read [[RB]], [[RD]] : <64x128xfp16>
        CHECK: [[RI:%\\d+]] = add [[RD]], {{%\\d+}} : i32
        CHECK: [[RW:%\\d+]] = cmpi [[RI]], {{%\\d+}} {pred='eq'} : i1
        CHECK: [[RN:%\\d+]] = select [[RW]], {{%\\d+}}, [[RI]] : i32
        CHECK: [[WN:%\\d+]] = select {{%\\d+}}, {{%\\d+}}, {{%\\d+}} : i32
        CHECK-NEXT: [[FLIP:%\\d+]] = cast [[RW]] : i32
        CHECK-NEXT: [[PN:%\\d+]] = xor [[PH]], [[FLIP]] : i32
        CHECK-NOT: descriptor_load
        CHECK: [[D:%\\d+]] = dot [[TA]], [[TB]], [[ACC]] {input_precision='tf32', engine='wgmma', wgmma='async', wgmma_desc='stepped'}
        CHECK-NEXT: barrier
        CHECK-NEXT: [[E:%\\d+]] = elect_one : i1
        CHECK-NEXT: [[P:%\\d+]] = and [[E]], [[G]] : i1
        CHECK-NEXT: [[BW:%\\d+]] = mbarrier_at [[BARS]], [[WR]] : i32
        CHECK-NEXT: mbarrier_expect_tx [[BW]], [[P]] {bytes=32768}
        CHECK-NEXT: tma_copy_to_ring [[RA]], [[WR]], [[BW]], [[P]], {{%\\d+}}, {{%\\d+}} {source='{{.*}}test_warp_specialize.py:131:{{\\d+}}'}
        CHECK-NEXT: tma_copy_to_ring [[RB]], [[WR]], [[BW]], [[P]], {{%\\d+}}, {{%\\d+}} {source='{{.*}}test_warp_specialize.py:131:{{\\d+}}'}
        CHECK-NEXT: scf.yield [[D]], [[RN]], [[WN]], [[PN]]
        CHECK-NEXT: barrier
        CHECK-NEXT: [[TE:%\\d+]] = elect_one : i1
        CHECK: mbarrier_inval {{%\\d+}}, [[TE]]
        CHECK: mbarrier_inval {{%\\d+}}, [[TE]]
        CHECK: mbarrier_inval {{%\\d+}}, [[TE]]
        CHECK-NEXT: ring_free [[RA]]
        CHECK-NEXT: ring_free [[RB]]
        CHECK: descriptor_store %2
    """)
    verify(fn)
    # the stage counters wrap at the ring's 3 stages; the barriers: 3 inits, 3 invalidations
    ops = list(fn.walk())
    wraps = [o for o in ops if o.name == "cmpi" and o.attrs["pred"] == "eq"]
    assert [w.operands[1].op.attrs["value"] for w in wraps] == [3, 3]
    assert sum(o.name == "mbarrier_init" for o in ops) == sum(o.name == "mbarrier_inval" for o in ops) == 3
    # the prologue copies iterations 0 and 1 into stages 0 and 1
    top = fn.body.ops
    assert [o.operands[1].op.attrs["value"] for o in top if o.name == "tma_copy_to_ring"] == [0, 0, 1, 1]


def test_a_tile_read_through_a_trans_is_a_transposed_ring():
    """two_dots reads k through ``.T``: its ring holds the transposed view the dot reads (no trans op is
    left), q is read in place outside the ring; the ring stays (no ring_free) when it is not freed."""
    ir, fn, _ = _passes(two_dots, TD_SIG, dict(BM=128, BN=64, D=64), div=TD_DIV)
    assert "ws=" not in ir["expand_tma_rings"]
    filecheck(ir["expand_tma_rings"], """
        CHECK: = descriptor_load %0, {{.*}}in_place=True
        CHECK: [[RK:%\\d+]] = tma_ring_alloc %1 {stages=3, operand='b', transposed=True} : <64x64xfp16>
        CHECK-NEXT: [[RV:%\\d+]] = tma_ring_alloc %2 {stages=3, operand='b'} : <64x64xfp16>
        CHECK: prefetch_tensormaps %1, %2, {{%\\d+}}
        CHECK: mbarrier_expect_tx {{%\\d+}}, {{%\\d+}} {bytes=16384}
        CHECK: [[K:%\\d+]] = ring_read [[RK]], [[RD:%\\d+]] : <64x64xfp16>
        CHECK-NEXT: [[V:%\\d+]] = ring_read [[RV]], [[RD]] : <64x64xfp16>
        CHECK-NOT: trans
        CHECK: = dot {{%\\d+}}, [[K]],
        CHECK: = dot {{%\\d+}}, [[V]],
    """)
    verify(fn)


def test_a_loop_with_both_rings_shares_one_pair_of_counters(monkeypatch):
    """A from TMA, B from pointers: one loop, the cp.async ring's ops and the TMA ring's around one read
    stage, one write stage and one phase parity."""
    monkeypatch.setenv("KERNELC_AUTO_TMA", "0")  # keep b's pointer load
    sig = {"a_desc": "tensordesc<fp16[64, 32]>", "b_ptr": "*fp16", "c_ptr": "*fp32", "K": "i32"}
    div = {"a_desc": 16, "b_ptr": 16, "c_ptr": 16}
    ir, fn, _ = _passes(mm_mixed, sig, dict(BM=64, BN=64, BK=32), div=div)
    assert ir["expand_cp_async_rings"] == ir["schedule_wgmma"]  # left to expand_tma_rings
    filecheck(ir["expand_tma_rings"], """
        CHECK: [[RB:%\\d+]] = ring_alloc {stages=3, operand='b'} : <32x64xfp16>
        CHECK-NEXT: [[RA:%\\d+]] = tma_ring_alloc %0 {stages=3, operand='a'} : <64x32xfp16>
        CHECK-NEXT: [[BARS:%\\d+]] = mbarrier_alloc {count=3} : i64
        CHECK: async_copy [[RB]], [[S0:%\\d+]], {{%\\d+}}, {{%\\d+}} {vec=8}
        CHECK-NEXT: async_commit_group
        CHECK-NEXT: elect_one
        CHECK: tma_copy_to_ring [[RA]], [[S0]],
        CHECK: = scf.for {{.*}} : <64x64xfp32>, i32, i32, i32
        CHECK-NEXT: ^body({{%\\d+}}: i32, {{%\\d+}}: <64x64xfp32>, [[RD:%\\d+]]: i32, [[WR:%\\d+]]: i32, [[PH:%\\d+]]: i32):
        CHECK-NEXT: async_wait_group {pending=1}
        CHECK-NEXT: barrier
        CHECK-NEXT: [[BR:%\\d+]] = mbarrier_at [[BARS]], [[RD]] : i32
        CHECK-NEXT: mbarrier_wait [[BR]], [[PH]]
        CHECK: async_copy [[RB]], [[WR]], {{.*}}source=
        CHECK-NEXT: async_commit_group
        CHECK-NEXT: [[TA:%\\d+]] = ring_read [[RA]], [[RD]] : <64x32xfp16>
        CHECK-NEXT: [[TB:%\\d+]] = ring_read [[RB]], [[RD]] : <32x64xfp16>
        CHECK: = dot [[TA]], [[TB]],
        CHECK-NEXT: barrier
        CHECK: tma_copy_to_ring [[RA]], [[WR]], {{.*}} {source='{{.*}}test_cp_async_rings.py:{{\\d+}}:{{\\d+}}'}
        CHECK-NEXT: scf.yield
        CHECK-NEXT: async_wait_all
        CHECK-NEXT: barrier
    """)
    verify(fn)
    ck = kernelc.compile(mm_mixed, sig, dict(BM=64, BN=64, BK=32), target="sm_90a", num_warps=4, num_stages=3,
                         divisibility=div)
    ptx = ck.asm["ptx"]
    assert "cp.async.wait_group 1;" in ptx and "mbarrier.try_wait" in ptx and "cp.async.bulk.tensor" in ptx


@kernelc.jit
def mm_tiles(a_desc, b_desc, c_desc, K, T, BM: kl.constexpr, BN: kl.constexpr, BK: kl.constexpr):
    for t in range(kl.program_id(0), T, kl.num_programs(0)):
        acc = kl.zeros((BM, BN), dtype=kl.float32)
        for k in kl.range(0, K, BK):
            acc = kl.dot(a_desc.load([t * BM, k]), b_desc.load([k, 0]), acc)
        c_desc.store([t * BM, 0], acc.to(kl.float16))


def test_a_ring_inside_another_loop_is_set_up_per_trip_and_never_freed():
    sig = dict(MM_DESC_SIG, T="i32")
    ir, fn, _ = _passes(mm_tiles, sig, dict(BM=128, BN=128, BK=64), div=MM_DESC_DIV)
    text = ir["expand_tma_rings"]
    filecheck(text, """
        CHECK: scf.for
        CHECK: tma_ring_alloc %0
        CHECK: mbarrier_alloc {count=3}
        CHECK: scf.for
        CHECK: mbarrier_wait
        CHECK: scf.yield
        CHECK: mbarrier_inval
        CHECK: descriptor_store %2
    """)
    assert "ring_free" not in text
    verify(fn)


def test_warp_specialised_and_unpipelined_loops_are_left_alone():
    ir, _, _ = _passes(mm_loop, MM_DESC_SIG, dict(MM_CX, WS=True), div=MM_DESC_DIV)
    assert "ws={" in ir["expand_tma_rings"] and ir["expand_tma_rings"] == ir["expand_cp_async_rings"]
    ir, _, _ = _passes(mm_loop, MM_DESC_SIG, MM_CX, div=MM_DESC_DIV, num_stages=1)
    assert ir["expand_tma_rings"] == ir["expand_cp_async_rings"] and "tma_ring_alloc" not in ir["expand_tma_rings"]


def test_the_verifier_checks_the_tma_ring_ops():
    _, fn, _ = _passes(mm_loop, MM_DESC_SIG, MM_CX, div=MM_DESC_DIV)
    ring, bars, expect, init = first_ops(fn, "tma_ring_alloc", "mbarrier_alloc", "mbarrier_expect_tx", "mbarrier_init")
    rejects_bad_attrs(fn, [
        (ring, "stages", 0, "stages must be an int >= 1"),  # 1: a copy issued ahead outside loops
        (ring, "operand", "c", "operand must be 'a' or 'b'"),
        (ring, "transposed", True, "the ring's tile is the descriptor's block"),
        (ring, "transposed", None, "transposed must be a bool"),
        (bars, "count", 0, "count must be an int >= 1"),
        (expect, "bytes", 0, "bytes must be an int >= 1"),
        (init, "count", "x", "count must be an int >= 1"),
    ])
    copy, wait, at, read = first_ops(fn, "tma_copy_to_ring", "mbarrier_wait", "mbarrier_at", "ring_read")
    pred, stage = copy.operands[3], copy.operands[1]
    rejects_bad_operands(fn, [
        (copy, 0, bars.results[0], "operand 0 must be a tma_ring_alloc"),
        (copy, 2, stage, "operand 2 must be a barrier"),
        (copy, 3, stage, "the predicate must be an i1 scalar"),
        (copy, 1, pred, "the stage must be an i32 scalar"),
        (wait, 1, pred, "operand 1 must be an i32 parity"),
        (wait, 0, stage, "operand 0 must be a barrier"),
        (expect, 1, stage, "operand 1 must be an i1 predicate"),
        (at, 0, stage, "operand 0 must be an mbarrier_alloc"),
        (read, 1, pred, "the stage must be an i32 scalar"),
    ])
    copy.operands.append(stage)  # one offset too many
    with pytest.raises(VerificationError, match="one i32 offset per descriptor dimension"):
        verify(fn)
    copy.operands.pop()
    verify(fn)


def test_codegen_lowers_each_tma_ring_op():
    """The PTX of the explicit ring: 3 barriers initialised and invalidated by thread 0, two prologue
    stages and one per iteration announced (32 KiB) and copied (two boxes each: A is one 128-byte panel
    wide, B two), the wait on the read stage's parity."""
    ck = kernelc.compile(mm_loop, MM_DESC_SIG, MM_CX, target="sm_90a", num_warps=4, num_stages=3,
                         divisibility=MM_DESC_DIV)
    ptx = ck.asm["ptx"]
    assert ptx.count("mbarrier.init.shared::cta.b64") == 3 and ptx.count("mbarrier.inval.shared::cta.b64") == 3
    assert ptx.count("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r") == 3
    assert "32768;" in ptx and ptx.count("prefetch.tensormap") == 2
    assert "mbarrier.try_wait.parity.shared::cta.b64" in ptx and "wgmma.mma_async" in ptx
    assert ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes") == 3 * 3
    # the copies in the loop body put the loads they stand for in the memory-access report
    pipelined = [r for r in ck.reports["memory_accesses"] if r["kind"] == "load (TMA pipelined)"]
    assert [(r["line"], r["shape"], r["engine"]) for r in pipelined] == [(131, [128, 64], "tma"), (131, [64, 128], "tma")]


def test_an_invariant_operand_read_in_two_roles_is_staged_once_per_role():
    # K (outside the ringed loop) is A of K Q_i^T and B of sT^T K: one stage_operand each; one copy read in both
    # roles gave wrong results on an H100 (2026-11-27)
    import kernelc
    from tests.compiler.filecheck import filecheck
    from tests.compiler.tma_kernels import invariant_operand_two_roles
    ck = kernelc.compile(invariant_operand_two_roles, {"k_ptr": "*fp16", "q_ptr": "*fp16", "out_ptr": "*fp32"},
                         dict(ITERS=3, BN=128, BM=16, D=128), target="sm_90a", num_warps=8,
                         divisibility={"k_ptr": 16, "q_ptr": 16, "out_ptr": 16})
    filecheck(ck.asm["tir"], """
        CHECK: [[A:%\\d+]] = stage_operand [[K:%\\d+]] {operand='a'{{[,}]}}
        CHECK: [[B:%\\d+]] = stage_operand [[K]] {operand='b'{{[,}]}}
        CHECK: scf.for
        CHECK: = dot [[A]],
        CHECK: = dot {{%\\d+}}, [[B]],
    """)


def test_tid_elects_thread_0_for_every_copy_golden(monkeypatch):
    """KERNELC_TMA_ELECT=tid (passes/elect_form.py): every elect_one and the function say by='tid', nothing else
    changes, and the PTX issues the copies under ``tid == 0`` with no elect.sync; the default keeps elect.sync."""
    import re
    monkeypatch.setenv("KERNELC_TMA_ELECT", "tid")
    ir, _, _ = _passes(mm_loop, MM_DESC_SIG, MM_CX, div=MM_DESC_DIV)
    before, after = ir["mark_copy_mad_wide"], ir["mark_elect_form"]
    assert "by=" not in before and after.count("elect_one {by='tid'} : i1") == before.count("elect_one : i1") >= 3
    filecheck(after, """
        CHECK: attributes {{.*}}elect='tid'
        CHECK: = elect_one {by='tid'} : i1
        CHECK: = elect_one {by='tid'} : i1
    """)

    def norm(text):   # the printer pads each line to its location comment
        text = text.replace("elect_one {by='tid'}", "elect_one").replace(", elect='tid'", "")
        text = text.replace("elect='tid', ", "").replace(" attributes {elect='tid'}", "")
        return [re.sub(r"\s+#.*$", "", ln).rstrip() for ln in text.splitlines()]
    assert norm(after) == norm(before)
    ptx = kernelc.compile(mm_loop, MM_DESC_SIG, MM_CX, target="sm_90a", divisibility=MM_DESC_DIV).asm["ptx"]
    assert "elect.sync" not in ptx and "cp.async.bulk.tensor" in ptx
    monkeypatch.setenv("KERNELC_TMA_ELECT", "elect")
    ptx = kernelc.compile(mm_loop, MM_DESC_SIG, MM_CX, target="sm_90a", divisibility=MM_DESC_DIV).asm["ptx"]
    assert "elect.sync" in ptx


@kernelc.jit
def mm_device_desc(a_ptr, b_ptr, c_ptr, K, BM: kl.constexpr, BN: kl.constexpr, BK: kl.constexpr):
    a_desc = kl.make_tensor_descriptor(a_ptr, shape=[BM, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = kl.make_tensor_descriptor(b_ptr, shape=[K, BN], strides=[BN, 1], block_shape=[BK, BN])
    acc = kl.zeros((BM, BN), dtype=kl.float32)
    for k in kl.range(0, kl.cdiv(K, BK)):
        acc = kl.dot(a_desc.load([0, k * BK]), b_desc.load([k * BK, 0]), acc)
    rm, rn = kl.arange(0, BM), kl.arange(0, BN)
    kl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc.to(kl.float16))


@kernelc.jit
def mm_device_desc_persistent(a_ptr, b_ptr, c_ptr, K, T, BM: kl.constexpr, BN: kl.constexpr, BK: kl.constexpr):
    a_desc = kl.make_tensor_descriptor(a_ptr, shape=[BM, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = kl.make_tensor_descriptor(b_ptr, shape=[K, BN], strides=[BN, 1], block_shape=[BK, BN])
    rm, rn = kl.arange(0, BM), kl.arange(0, BN)
    for t in range(kl.program_id(0), T, kl.num_programs(0)):   # a persistent GEMM's tile loop
        acc = kl.zeros((BM, BN), dtype=kl.float32)
        for k in kl.range(0, kl.cdiv(K, BK)):
            acc = kl.dot(a_desc.load([0, k * BK]), b_desc.load([k * BK, 0]), acc)
        kl.store(c_ptr + t * BM * BN + rm[:, None] * BN + rn[None, :], acc.to(kl.float16))


def test_auto_keeps_elect_sync_for_a_gemm_loop_on_descriptors_made_in_the_kernel(monkeypatch):
    """KERNELC_TMA_ELECT=auto: the same one-dot GEMM loop on tensor maps built in the kernel keeps elect.sync
    (measured faster there, session 24: the fp8 descriptor GEMM 2.1%, attention_bwd's ds dQ GEMM); inside a persistent
    GEMM's tile loop it takes thread 0 (the persistent GEMM on kernel-made descriptors: tid 0.8% faster); tid still
    applies when asked for."""
    from kernelc.compiler.passes.elect_form import gemm_copy_loops
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "K": "i32"}
    cx = dict(BM=128, BN=128, BK=64)
    monkeypatch.delenv("KERNELC_TMA_ELECT", raising=False)
    ir, fn, _ = _passes(mm_device_desc, sig, cx)
    assert "tma_copy_to_ring" in ir["mark_elect_form"] and "tensor_map=" in ir["mark_elect_form"]
    assert not gemm_copy_loops(fn) and "by='tid'" not in ir["mark_elect_form"]
    assert "elect.sync" in kernelc.compile(mm_device_desc, sig, cx, target="sm_90a", divisibility={n: 16 for n in sig}
                                           ).asm["ptx"]
    psig = dict(sig, T="i32")
    ir, fn, _ = _passes(mm_device_desc_persistent, psig, cx)
    assert "tensor_map=" in ir["mark_elect_form"] and gemm_copy_loops(fn) and "by='tid'" in ir["mark_elect_form"]
    monkeypatch.setenv("KERNELC_TMA_ELECT", "tid")
    ir, fn, _ = _passes(mm_device_desc, sig, cx)
    assert "elect_one {by='tid'}" in ir["mark_elect_form"]


def test_auto_elects_thread_0_for_a_gemm_loop_and_keeps_elect_sync_for_two_dots(monkeypatch):
    """KERNELC_TMA_ELECT=auto (the default): tid where every loop issuing TMA copies holds one dot (the GEMM k-loop),
    elect.sync where a loop holds two (attention's)."""
    from kernelc.compiler.passes.elect_form import gemm_copy_loops
    monkeypatch.delenv("KERNELC_TMA_ELECT", raising=False)
    ir, fn, _ = _passes(mm_loop, MM_DESC_SIG, MM_CX, div=MM_DESC_DIV)
    assert gemm_copy_loops(fn) and "elect_one {by='tid'}" in ir["mark_elect_form"]
    ir, fn, _ = _passes(two_dots, TD_SIG, dict(BM=128, BN=64, D=64), div=TD_DIV)
    assert not gemm_copy_loops(fn) and "by='tid'" not in ir["mark_elect_form"]
    assert "elect_one" in ir["mark_elect_form"]
    assert "elect.sync" in kernelc.compile(two_dots, TD_SIG, dict(BM=128, BN=64, D=64), target="sm_90a",
                                           divisibility=TD_DIV).asm["ptx"]
    assert "elect.sync" not in kernelc.compile(mm_loop, MM_DESC_SIG, MM_CX, target="sm_90a",
                                               divisibility=MM_DESC_DIV).asm["ptx"]


def test_auto_keeps_elect_sync_for_a_flattened_persistent_gemm_on_descriptors_made_in_the_kernel(monkeypatch):
    """A persistent GEMM on kernel-made descriptors takes thread 0 nested (measured faster that way, session 24) and
    keeps elect.sync when its tile loop is flattened into its K loop (tutorial 09's Hopper path, which measured
    0.2-1.3% faster under elect.sync, session 26): the flatten pass marks the fused loop ``flattened`` and auto
    does not count it as nested."""
    from kernelc.compiler.passes.elect_form import gemm_copy_loops
    from tests.compiler import persistent_kernels as P
    monkeypatch.delenv("KERNELC_TMA_ELECT", raising=False)
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32"}
    for flat in (True, False):
        monkeypatch.setenv("KERNELC_FLATTEN_LOOPS", "1" if flat else "0")
        ir, fn, _ = _passes(P.persistent_desc, sig, dict(BM=128, BN=128, BK=64, PROGRAMS=132, FLAT=True),
                            div={k: 16 for k in sig})
        assert ("flattened=True" in ir["mark_elect_form"]) == flat
        assert "tensor_map=" in ir["mark_elect_form"] and gemm_copy_loops(fn) != flat, flat
        assert ("elect_one {by='tid'}" in ir["mark_elect_form"]) != flat, flat
        assert "elect_one" in ir["mark_elect_form"]


def test_refill_top_issues_the_copies_before_the_wait_where_no_wgmma_outlives_its_iteration(monkeypatch):
    # KERNELC_TMA_REFILL_TOP: two_dots waits for both of its dots within the iteration (P V reads P from
    # registers), so the stage the previous iteration read is free at the top of this one: a barrier, iteration
    # i+2's copies into it (the write stage), then the wait for this iteration's stage -- a whole iteration of lead
    monkeypatch.setenv("KERNELC_TMA_REFILL_TOP", "1")
    ir, _, _ = _passes(two_dots, TD_SIG, dict(BM=128, BN=64, D=64), div=TD_DIV)
    filecheck(ir["expand_tma_rings"], """
        CHECK: = scf.for {{.*}} {pipeline={stages=3, lookahead=2, refill='top'}}
        CHECK-NEXT: ^body({{%\\d+}}: i32, {{%\\d+}}: <128x64xfp32>, [[RD:%\\d+]]: i32, [[WR:%\\d+]]: i32, [[PH:%\\d+]]: i32):
        CHECK: [[G:%\\d+]] = cmpi {{%\\d+}}, %N {pred='slt'} : i1
        CHECK-NEXT: barrier
        CHECK-NEXT: [[E:%\\d+]] = elect_one : i1
        CHECK-NEXT: [[P:%\\d+]] = and [[E]], [[G]] : i1
        CHECK-NEXT: [[BW:%\\d+]] = mbarrier_at {{%\\d+}}, [[WR]] : i32
        CHECK-NEXT: mbarrier_expect_tx [[BW]], [[P]] {bytes=16384}
        CHECK-NEXT: tma_copy_to_ring {{%\\d+}}, [[WR]], [[BW]], [[P]],
        CHECK-NEXT: tma_copy_to_ring {{%\\d+}}, [[WR]], [[BW]], [[P]],
        CHECK-NEXT: [[BR:%\\d+]] = mbarrier_at {{%\\d+}}, [[RD]] : i32
        CHECK-NEXT: mbarrier_wait [[BR]], [[PH]]
        CHECK-NEXT: = ring_read {{%\\d+}}, [[RD]]
        CHECK: = dot
        CHECK: = dot
        CHECK-NOT: tma_copy_to_ring
        CHECK: scf.yield
    """)
    verify(_passes(two_dots, TD_SIG, dict(BM=128, BN=64, D=64), div=TD_DIV, upto="expand_tma_rings")[1])
    # off (the default): the copies after the last dot, behind a barrier
    monkeypatch.setenv("KERNELC_TMA_REFILL_TOP", "0")
    ir, _, _ = _passes(two_dots, TD_SIG, dict(BM=128, BN=64, D=64), div=TD_DIV)
    filecheck(ir["expand_tma_rings"], """
        CHECK: = scf.for {{.*}} {pipeline={stages=3, lookahead=2}}
        CHECK-NEXT: ^body(
        CHECK-NEXT: mbarrier_at
        CHECK-NEXT: mbarrier_wait
        CHECK-NOT: tma_copy_to_ring
        CHECK: = dot
        CHECK: = dot
        CHECK-NEXT: barrier
        CHECK: tma_copy_to_ring
        CHECK: scf.yield
    """)


def test_refill_top_leaves_a_loop_with_a_wgmma_in_flight_as_it_was(monkeypatch):
    # mm_loop's dot stays in flight across the back edge (wgmma='async'): the stage the previous iteration read is
    # free only after this iteration's wait_group 1, so its copies stay after the dot, knob or not
    ir_off, _, _ = _passes(mm_loop, MM_DESC_SIG, MM_CX, div=MM_DESC_DIV)
    monkeypatch.setenv("KERNELC_TMA_REFILL_TOP", "1")
    ir_on, _, _ = _passes(mm_loop, MM_DESC_SIG, MM_CX, div=MM_DESC_DIV)
    assert ir_on["expand_tma_rings"] == ir_off["expand_tma_rings"]
    assert "wgmma='async'" in ir_on["expand_tma_rings"]


def test_the_verifier_rejects_a_top_refill_beside_a_wgmma_in_flight(monkeypatch):
    # refill='top' overwrites the stage the previous iteration read at the top of this one: a wgmma of it still in
    # flight (wgmma='async') would read a stage being refilled
    ir, fn, _ = _passes(mm_loop, MM_DESC_SIG, MM_CX, div=MM_DESC_DIV, upto="expand_tma_rings")
    loop = next(o for o in fn.walk() if o.name == "scf.for" and o.attrs.get("pipeline"))
    loop.attrs["pipeline"]["refill"] = "top"
    with pytest.raises(VerificationError, match="refill='top'"):
        verify(fn)
