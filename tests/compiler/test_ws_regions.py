"""``expand_warp_specialize`` (passes/warp_regions.py, docs/schedule-ir.md): golden IR before -> after
for the warp-specialised loop (the producer warp's region, the full/empty barriers, the consumers' waits
and releases), the verifier's checks of its ops, and their lowering."""

import pytest

import kernelc
import kernelc.language as kl
from kernelc.compiler.ir import verify
from tests.compiler.filecheck import filecheck
from tests.compiler.test_schedule_passes import MM_DESC_DIV, MM_DESC_SIG, TD_DIV, TD_SIG, _passes, two_dots
from tests.compiler.test_warp_specialize import mm_loop
from tests.compiler.verifier_cases import first_ops, rejects_bad_attrs, rejects_bad_operands

MM_WS = dict(BM=128, BN=128, BK=64, WS=True)


def test_the_ring_and_warp_specialisation_expansions_follow_each_other():
    from kernelc.compiler import compiler as C
    names = [p.name for p in C.TILE_PASSES]
    i = names.index("expand_cp_async_rings")
    assert names[i:i + 3] == ["expand_cp_async_rings", "expand_tma_rings", "expand_warp_specialize"]


def test_a_warp_specialised_loop_becomes_a_producer_region_and_barrier_ops():
    """num_warps=4, a 128-row dot the program asks to specialise: two consumer warpgroups (8 warps, passes/
    ws_consumers.py) arrive on each empty barrier, the producer is warp 8."""
    ir, fn, _ = _passes(mm_loop, MM_DESC_SIG, MM_WS, div=MM_DESC_DIV)
    assert ir["expand_tma_rings"] == ir["schedule_wgmma"]  # left to this pass
    filecheck(ir["expand_warp_specialize"], """
        CHECK: kernel mm_loop(
        CHECK-NEXT: = make_tensor_descriptor %a_desc.base
        CHECK-NEXT: = make_tensor_descriptor %b_desc.base
        CHECK-NEXT: [[RA:%\\d+]] = tma_ring_alloc %0 {stages=3, operand='a'} : <128x64xfp16>
        CHECK-NEXT: [[RB:%\\d+]] = tma_ring_alloc %1 {stages=3, operand='b'} : <64x128xfp16>
        CHECK-NEXT: [[BARS:%\\d+]] = mbarrier_alloc {count=6} : i64
        CHECK-NEXT: [[CUR:%\\d+]] = ring_cursor : i64
        CHECK-NEXT: [[T0:%\\d+]] = elect_one : i1
        CHECK: mbarrier_init {{%\\d+}}, [[T0]] {count=1}
        CHECK: [[E0:%\\d+]] = add {{%\\d+}}, {{%\\d+}} : i32
        CHECK-NEXT: = mbarrier_at [[BARS]], [[E0]] : i32
        CHECK-NEXT: mbarrier_init {{%\\d+}}, [[T0]] {count=8}
        CHECK: fence_mbarrier_init
        CHECK-NEXT: barrier
        CHECK-NEXT: ws_producer {producer_warps=1, stages=3, source='{{.*}}test_warp_specialize.py:130:{{\\d+}}'}
        CHECK-NEXT: ^body():
        CHECK-NEXT: [[L0:%\\d+]] = elect_one {warp=8} : i1
        CHECK-NEXT: prefetch_tensormaps %0, %1, [[L0]]
        CHECK: [[ST0:%\\d+]] = cursor_load [[CUR]] {field='stage'} : i32
        CHECK-NEXT: [[PH0:%\\d+]] = cursor_load [[CUR]] {field='phase'} : i32
        CHECK: [[PS:%\\d+]], [[PP:%\\d+]] = scf.for {{%\\d+}}, {{%\\d+}}, {{%\\d+}}, [[ST0]], [[PH0]] : i32, i32
        CHECK-NEXT: ^body({{%\\d+}}: i32, [[S:%\\d+]]: i32, [[P:%\\d+]]: i32):
        CHECK: [[EI:%\\d+]] = add [[S]], {{%\\d+}} : i32
        CHECK-NEXT: [[EB:%\\d+]] = mbarrier_at [[BARS]], [[EI]] : i32
        CHECK: [[PAR:%\\d+]] = xor [[P]], {{%\\d+}} : i32
        CHECK-NEXT: mbarrier_wait [[EB]], [[PAR]]
        CHECK: [[FB:%\\d+]] = mbarrier_at [[BARS]], [[S]] : i32
        CHECK-NEXT: [[L:%\\d+]] = elect_one {warp=8} : i1
        CHECK-NEXT: mbarrier_expect_tx [[FB]], [[L]] {bytes=32768}
        CHECK-NEXT: tma_copy_to_ring [[RA]], [[S]], [[FB]], [[L]], {{%\\d+}}, {{%\\d+}} {source=
        CHECK-NEXT: tma_copy_to_ring [[RB]], [[S]], [[FB]], [[L]], {{%\\d+}}, {{%\\d+}} {source=
        CHECK: [[NS:%\\d+]] = select {{%\\d+}}, {{%\\d+}}, {{%\\d+}} : i32
        CHECK-NEXT: [[FL:%\\d+]] = cast {{%\\d+}} : i32
        CHECK-NEXT: [[NP:%\\d+]] = xor [[P]], [[FL]] : i32
        CHECK-NEXT: scf.yield [[NS]], [[NP]]
        CHECK-NEXT: cursor_store [[CUR]], [[PS]] {field='stage'}
        CHECK-NEXT: cursor_store [[CUR]], [[PP]] {field='phase'}
        CHECK: [[RD0:%\\d+]] = cursor_load [[CUR]] {field='stage'} : i32
        CHECK-NEXT: [[PH0C:%\\d+]] = cursor_load [[CUR]] {field='phase'} : i32
        CHECK: = scf.for {{.*}}, [[RD0]], {{%\\d+}}, [[PH0C]] {warp_specialize=True, pipeline={stages=3, lookahead=2}, ws={{.*}}release='lagged'
        CHECK-NEXT: ^body([[IV:%\\d+]]: i32, {{%\\d+}}: <128x128xfp32>, [[RD:%\\d+]]: i32, [[WR:%\\d+]]: i32, [[PH:%\\d+]]: i32):
        CHECK-NEXT: [[FR:%\\d+]] = mbarrier_at [[BARS]], [[RD]] : i32
        CHECK-NEXT: mbarrier_wait [[FR]], [[PH]]
        CHECK-NEXT: [[TA:%\\d+]] = ring_read [[RA]], [[RD]] {source='{{.*}}test_warp_specialize.py:131:{{\\d+}}'} : <128x64xfp16>
        CHECK-NEXT: [[TB:%\\d+]] = ring_read [[RB]], [[RD]] {source=
        CHECK: [[NRD:%\\d+]] = select {{%\\d+}}, {{%\\d+}}, {{%\\d+}} : i32
        CHECK-NEXT: = cast {{%\\d+}} : i32
        CHECK-NEXT: [[NPH:%\\d+]] = xor [[PH]], {{%\\d+}} : i32
        CHECK-NOT: descriptor_load
        CHECK: [[D:%\\d+]] = dot [[TA]], [[TB]], {{%\\d+}} {input_precision='tf32', engine='wgmma', wgmma='async', wgmma_desc='stepped'}
        CHECK-NEXT: wgmma_wait_deferred
        CHECK-NEXT: [[NF:%\\d+]] = cmpi [[IV]], {{%\\d+}} {pred='ne'} : i1
        CHECK: [[PREV:%\\d+]] = select {{%\\d+}}, {{%\\d+}}, {{%\\d+}} : i32
        CHECK-NEXT: [[L0:%\\d+]] = warp_leader : i1
        CHECK-NEXT: [[REL:%\\d+]] = and [[L0]], [[NF]] : i1
        CHECK: [[XI:%\\d+]] = add [[PREV]], {{%\\d+}} : i32
        CHECK-NEXT: [[XB:%\\d+]] = mbarrier_at [[BARS]], [[XI]] : i32
        CHECK-NEXT: mbarrier_arrive [[XB]], [[REL]]
        CHECK-NEXT: scf.yield [[D]], [[NRD]], [[WR]], [[NPH]]
        CHECK-NEXT: [[RAN:%\\d+]] = cmpi {{%\\d+}}, {{%\\d+}} {pred='slt'} : i1
        CHECK: mbarrier_arrive {{%\\d+}}, {{%\\d+}}
        CHECK-NEXT: cursor_store [[CUR]], {{%\\d+}} {field='stage'}
        CHECK-NEXT: cursor_store [[CUR]], {{%\\d+}} {field='phase'}
        CHECK-NEXT: ring_free [[RA]]
        CHECK-NEXT: ring_free [[RB]]
        CHECK: descriptor_store
    """)
    verify(fn)
    ops = list(fn.walk())
    # S full barriers expect the producer's one arrival, S empty ones one arrival per consumer warp
    assert sorted(o.attrs["count"] for o in ops if o.name == "mbarrier_init") == [1, 1, 1, 8, 8, 8]
    assert fn.attrs["consumer_warps"] == 8
    assert sum(o.name == "ws_producer" for o in ops) == 1 and not any(o.name == "descriptor_load" for o in ops)


def test_release_at_issue_with_deferred_dots_and_ping_pong(monkeypatch):
    """Two dots, 8 warps: each stage is released right after the dots are issued (after their deferred
    groups are waited for); with ping-pong the consumers take turns around the loop."""
    cx = dict(BM=128, BN=64, D=64)
    ir, fn, _ = _passes(two_dots, TD_SIG, cx, num_warps=8, num_stages=2, div=TD_DIV)
    filecheck(ir["expand_warp_specialize"], """
        CHECK: mbarrier_alloc {count=4}
        CHECK: mbarrier_init {{%\\d+}}, {{%\\d+}} {count=8}
        CHECK: ws_producer {producer_warps=1, stages=2,
        CHECK: tma_copy_to_ring {{.*}}
        CHECK: = scf.for {{.*}}release='at_issue'
        CHECK-NEXT: ^body({{%\\d+}}: i32, {{.*}}, [[RD:%\\d+]]: i32, {{%\\d+}}: i32, {{%\\d+}}: i32):
        CHECK: [[K:%\\d+]] = ring_read {{%\\d+}}, [[RD]] {{.*}} : <64x64xfp16>
        CHECK-NOT: trans
        CHECK: = dot {{%\\d+}}, [[K]], {{.*}}wgmma='deferred'}
        CHECK: = dot {{.*}}wgmma='deferred'}
        CHECK: wgmma_wait_deferred
        CHECK-NEXT: [[L0:%\\d+]] = warp_leader : i1
        CHECK-NEXT: = constant {value=2} : i32
        CHECK-NEXT: [[XI:%\\d+]] = add [[RD]], {{%\\d+}} : i32
        CHECK-NEXT: [[XB:%\\d+]] = mbarrier_at {{%\\d+}}, [[XI]] : i32
        CHECK-NEXT: mbarrier_arrive [[XB]], [[L0]]
        CHECK-NEXT: scf.yield
        CHECK-NEXT: cursor_store
    """)
    verify(fn)
    assert "pingpong_begin" not in ir["expand_warp_specialize"]
    monkeypatch.setenv("KERNELC_WS_PINGPONG", "1")
    monkeypatch.setenv("KERNELC_WS_SETMAXNREG", "1")
    ir, fn, _ = _passes(two_dots, TD_SIG, cx, num_warps=8, num_stages=2, div=TD_DIV)
    filecheck(ir["expand_warp_specialize"], """
        CHECK: ws_producer {producer_warps=4, setmaxnreg=True, stages=2,
        CHECK: pingpong_begin
        CHECK-NEXT: = constant {value=0} : i32
        CHECK-NEXT: = scf.for
        CHECK: scf.yield
        CHECK-NEXT: pingpong_end
        CHECK-NEXT: cursor_store
    """)
    verify(fn)


@kernelc.jit
def mm_tiles_ws(a_desc, b_desc, c_desc, K, T, BM: kl.constexpr, BN: kl.constexpr, BK: kl.constexpr,
                NP: kl.constexpr):
    for t in range(kl.program_id(0), T, NP):
        acc = kl.zeros((BM, BN), dtype=kl.float32)
        for k in kl.range(0, K, BK, warp_specialize=True):
            acc = kl.dot(a_desc.load([t * BM, k]), b_desc.load([k, 0]), acc)
        c_desc.store([t * BM, 0], acc.to(kl.float16))


def test_the_producer_runs_the_skeleton_of_the_loops_around_it():
    """A persistent loop around the specialised one: the producer's region repeats its bounds (cloned)
    around its own loop, which carries the ring position across tiles through the cursor; the ring is
    not freed (the loop runs again)."""
    sig = dict(MM_DESC_SIG, T="i32")
    ir, fn, _ = _passes(mm_tiles_ws, sig, dict(BM=128, BN=128, BK=64, NP=132), div=MM_DESC_DIV)
    text = ir["expand_warp_specialize"]
    filecheck(text, """
        CHECK: ws_producer
        CHECK: [[PID:%\\d+]] = program_id {axis=0} : i32
        CHECK-NEXT: [[NP:%\\d+]] = constant {value=132} : i32
        CHECK-NEXT: scf.for [[PID]], %T, [[NP]]
        CHECK-NEXT: ^body([[TILE:%\\d+]]: i32):
        CHECK: cursor_load
        CHECK: = scf.for
        CHECK: mul [[TILE]], {{%\\d+}} : i32
        CHECK: tma_copy_to_ring
        CHECK: cursor_store
        CHECK: scf.yield
        CHECK: scf.for
        CHECK: cursor_load
        CHECK: ws={{.*}}
        CHECK: mbarrier_wait
    """)
    assert "ring_free" not in text
    verify(fn)


def test_the_verifier_checks_the_warp_specialisation_ops():
    _, fn, _ = _passes(mm_loop, MM_DESC_SIG, MM_WS, div=MM_DESC_DIV)
    split, load, store, arrive = first_ops(fn, "ws_producer", "cursor_load", "cursor_store", "mbarrier_arrive")
    rejects_bad_attrs(fn, [
        (split, "producer_warps", 2, "producer_warps must be 1 or 4"),
        (split, "setmaxnreg", True, "setmaxnreg must be a bool"),
        (split, "stages", 1, "stages must be an int >= 2"),
        (load, "field", "lap", "field must be 'stage' or 'phase'"),
    ])
    rejects_bad_operands(fn, [
        (store, 0, arrive.operands[0], "operand 0 must be a ring_cursor"),
        (store, 1, arrive.operands[1], "the stage and the phase are i32 scalars"),
        (arrive, 1, store.operands[1], "operand 1 must be an i1 predicate"),
        (arrive, 0, store.operands[1], "operand 0 must be a barrier"),
    ])


@pytest.mark.parametrize("split", [True, False])
def test_codegen_splits_the_warps_and_lowers_the_protocol(split, monkeypatch):
    """Split (the default at 4 warps): two consumer warpgroups + the producer warp; KERNELC_WS_SPLIT_M=0: the
    4 warps the program names + the producer warp."""
    monkeypatch.setenv("KERNELC_WS_SPLIT_M", "1" if split else "0")
    ck = kernelc.compile(mm_loop, MM_DESC_SIG, MM_WS, target="sm_90a", num_warps=4, num_stages=3,
                         divisibility=MM_DESC_DIV)
    consumers = 8 if split else 4
    assert ck.num_warps == 4 and ck.launch_warps == consumers + 1 and ck.extra_warps == consumers - 3
    ptx = ck.asm["ptx"]
    assert f".maxntid {32 * consumers + 32}" in ptx  # the consumer warps + the producer warp
    assert ptx.count("mbarrier.init.shared::cta.b64") == 6 and "mbarrier.arrive.shared::cta.b64" in ptx
    # the consumers' barriers: named barrier 1 over their threads
    assert f"bar.sync \t1, {32 * consumers};" in ptx
    assert ck.reports["warp_specialization"]["producer_warps"] == 1
    assert ck.reports["warp_specialization"]["stages"] == 3 and ck.reports["warp_specialization"]["line"] == 130
    pipelined = [r for r in ck.reports["memory_accesses"] if r["kind"] == "load (TMA pipelined)"]
    assert [r["line"] for r in pipelined] == [131, 131]
