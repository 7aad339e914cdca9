"""``place_wgmma_waits`` (passes/wgmma_waits.py, docs/schedule-ir.md): every wgmma.wait_group as a ``wgmma_wait``
op. Golden IR before (after ``stage_invariant_operands``) -> after, for dots waited for at once, dots left in
flight across iterations, deferred dots (first read, older groups, pinned waits, the release marker), the
values without a layout moved behind a wait, the verifier's checks and the lowering."""
import pytest

import kernelc
from kernelc.compiler.ir import verify
from kernelc.compiler.passes.wgmma_waits import place_wgmma_waits
import kernelc.language as kl
from tests.compiler.filecheck import filecheck
from tests.compiler.test_schedule_passes import (MM_DESC_DIV, MM_DESC_SIG, MM_PTR_SIG, TD_DIV, TD_SIG, _passes,
                                                 mm_plain, two_dots)
from tests.compiler.test_warp_specialize import mm_loop
from tests.compiler.verifier_cases import rejects_bad_attrs, rejects_bad_operands

BEFORE = "share_staged_operands"
PASS = "place_wgmma_waits"
MM_CX = dict(BM=128, BN=128, BK=64, WS=False)
TD_CX = dict(BM=128, BN=64, D=64)


def test_the_pass_runs_after_every_pass_that_writes_a_dot():
    # only the bulk reductions' and TMA stores' expansions (they stage dot results the waits here have completed),
    # issue_tma_loads_early (it moves TMA copies outside loops and places no wgmma wait) and
    # assign_smem_offsets (offsets only), mark_zero_acc_dots and mark_uniform_warpgroups (an operand on the dots, no wait) and
    # mark_copy_mad_wide (an attribute on copy addresses) and mark_elect_form (attributes on elect_one) follow it
    from kernelc.compiler.compiler import TILE_PASSES
    assert [p.name for p in TILE_PASSES][-10:] == [BEFORE, PASS, "expand_bulk_reductions", "defer_tma_store_waits", "issue_tma_loads_early",
                                                  "assign_smem_offsets", "mark_zero_acc_dots", "mark_uniform_warpgroups", "mark_copy_mad_wide",
                                                  "mark_elect_form"]


def test_a_dot_left_in_flight_waits_for_the_one_before_and_the_loop_for_all():
    """``wgmma='async'`` (TMA ring, 4 warps): ``wait_group 1`` right after the dot; after the loop ``wait_group 0``
    takes the accumulator the dot yields, and the epilogue reads what the wait hands back."""
    ir, fn, _ = _passes(mm_loop, MM_DESC_SIG, MM_CX, div=MM_DESC_DIV)
    assert "wgmma_wait" not in ir[BEFORE]
    filecheck(ir[PASS], """
        CHECK: [[ACC:%\\d+]], {{%\\d+}}, {{%\\d+}}, {{%\\d+}} = scf.for {{.*}}{pipeline={stages=3, lookahead=2}}
        CHECK: = dot {{.*}}wgmma='async', wgmma_desc='stepped'}
        CHECK-NEXT: wgmma_wait {pending=1}
        CHECK-NEXT: barrier
        CHECK: scf.yield
        CHECK-NEXT: [[R:%\\d+]] = wgmma_wait [[ACC]] {pending=0} : <128x128xfp32>
        CHECK-NEXT: barrier
        CHECK: = cast [[R]] {rounding='rtne'} : <128x128xfp16>
    """)
    verify(fn)


def test_a_dot_waited_for_at_once_gets_a_wait_right_after_it(monkeypatch):
    monkeypatch.setenv("KERNELC_AUTO_TMA", "0")
    monkeypatch.setenv("KERNELC_WGMMA_ASYNC", "0")   # (by default this cp.async loop keeps its dot in flight)
    ir, fn, _ = _passes(mm_plain, MM_PTR_SIG, dict(BM=128, BN=128, BK=64))
    filecheck(ir[PASS], """
        CHECK: [[D:%\\d+]] = dot {{.*}} {input_precision='tf32', engine='wgmma', wgmma_desc='stepped'} : <128x128xfp32>
        CHECK-NEXT: wgmma_wait {pending=0}
        CHECK-NEXT: scf.yield [[D]],
        CHECK-NEXT: async_wait_all
        CHECK-NOT: wgmma_wait
    """)


def test_mma_sync_dots_get_no_waits(monkeypatch):
    monkeypatch.setenv("KERNELC_AUTO_TMA", "0")
    ir, _, _ = _passes(mm_plain, MM_PTR_SIG, dict(BM=128, BN=128, BK=64), target="sm_80")
    assert ir[PASS] == ir[BEFORE]


def test_deferred_dots_are_waited_for_where_first_read_and_before_the_release():
    """Two deferred dots in the warp-specialised loop: QK^T's result is taken through a wait right before the
    softmax's reduce (its first reader) and read through it from there on; PV's where ``expand_warp_specialize``
    wrote ``wgmma_wait_deferred`` (before the stage is released), which is gone; the yield carries the wait's
    result."""
    ir, fn, _ = _passes(two_dots, TD_SIG, TD_CX, num_warps=8, num_stages=2, div=TD_DIV)
    filecheck(ir[BEFORE], """
        CHECK: [[S:%\\d+]] = dot {{.*}}wgmma='deferred'}
        CHECK-NEXT: = reduce [[S]] {axis=1, kind='max'}
        CHECK: = dot {{.*}}wgmma='deferred'}
        CHECK-NEXT: wgmma_wait_deferred
    """)
    filecheck(ir[PASS], """
        CHECK: [[S:%\\d+]] = dot {{.*}}wgmma='deferred'} : <128x64xfp32>
        CHECK-NEXT: [[SW:%\\d+]] = wgmma_wait [[S]] {pending=0} : <128x64xfp32>
        CHECK-NEXT: = reduce [[SW]] {axis=1, kind='max'}
        CHECK: = fsub [[SW]],
        CHECK: [[O:%\\d+]] = dot {{.*}}wgmma='deferred'} : <128x64xfp32>
        CHECK-NEXT: [[OW:%\\d+]] = wgmma_wait [[O]] {pending=0} : <128x64xfp32>
        CHECK-NEXT: = warp_leader
        CHECK: mbarrier_arrive
        CHECK-NEXT: scf.yield [[OW]],
    """)
    assert "wgmma_wait_deferred" not in ir[PASS]
    verify(fn)


def test_fa3_order_waits_for_the_older_group_first_and_pins_pvs_wait():
    """FA3's order issues the next block's QK^T and this block's PV back to back: the softmax's first read of the
    scores waits with one group (PV's) still in flight; PV's own wait, after the softmax, is pinned."""
    from examples.kernels import attention_fa3
    # (QScale, KScale, VScale: the fp8 variant's scales; FP8=False leaves them unread)
    sig = {"sm_scale": "fp32", **{f"desc_{t}": "tensordesc<fp16[128, 128]>" for t in "qkvo"}, "N_CTX": "i32",
           "QScale": "*fp32", "KScale": "*fp32", "VScale": "*fp32"}
    ir, fn, _ = _passes(attention_fa3.attn_fwd_fa3_kernel, sig, dict(BLOCK_M=128, BLOCK_N=128, HEAD_DIM=128,
                                                                     CAUSAL=False, FP8=False),
                        num_warps=8, num_stages=2, div={k: 16 for k in sig if k.startswith("desc")})
    filecheck(ir[PASS], """
        CHECK: ws=
        CHECK: [[QK:%\\d+]] = dot {{.*}}wgmma='deferred'} : <128x128xfp32>
        CHECK-NEXT: [[PV:%\\d+]] = dot {{.*}}wgmma='deferred', pin_wait=True} : <128x128xfp32>
        CHECK-NEXT: [[S:%\\d+]] = wgmma_wait [[QK]] {pending=1} : <128x128xfp32>
        CHECK-NEXT: = reduce [[S]] {axis=1, kind='max'}
        CHECK: = wgmma_wait [[PV]] {pending=0, pin=True} : <128x128xfp32>
        CHECK: mbarrier_arrive
    """)
    verify(fn)


def test_reading_the_younger_group_first_completes_the_older_one_too():
    """FA3's loop with the softmax's reduce made to read PV's result (issued last) first: that wait has no
    group left in flight, so it takes QK^T's result through it as well (pinned: PV's wait is), and QK^T's
    later readers read it from there; no second wait."""
    from examples.kernels import attention_fa3
    # (QScale, KScale, VScale: the fp8 variant's scales; FP8=False leaves them unread)
    sig = {"sm_scale": "fp32", **{f"desc_{t}": "tensordesc<fp16[128, 128]>" for t in "qkvo"}, "N_CTX": "i32",
           "QScale": "*fp32", "KScale": "*fp32", "VScale": "*fp32"}
    _, fn, ctx = _passes(attention_fa3.attn_fwd_fa3_kernel, sig, dict(BLOCK_M=128, BLOCK_N=128, HEAD_DIM=128,
                                                                      CAUSAL=False, FP8=False),
                         num_warps=8, num_stages=2, div={k: 16 for k in sig if k.startswith("desc")}, upto=BEFORE)
    qk, pv = [o for o in fn.walk() if o.name == "dot" and o.attrs.get("wgmma") == "deferred"]
    ops = qk.block.ops
    red = ops[ops.index(pv) + 1]
    assert red.name == "reduce" and red.operands[0] is qk.results[0]
    red.operands[0] = pv.results[0]
    place_wgmma_waits(fn, ctx)
    waits = [o for o in ops if o.name == "wgmma_wait" and o.operands]
    assert len(waits) == 1 and ops.index(waits[0]) == ops.index(red) - 1
    w = waits[0]
    assert w.operands == [qk.results[0], pv.results[0]] and w.attrs == {"pending": 0, "pin": True}
    readers = [o for o in ops for t in o.walk() if any(v is qk.results[0] for v in t.operands)]
    assert readers == [w]
    verify(fn)


def test_values_without_a_layout_move_behind_the_wait():
    """A value computed from a deferred result that has no layout of its own is materialised where it is read:
    the wait goes before the first op that reads it, under the location of the op that reads the dot's result,
    and the layout-less op moves behind the wait (the IR stays in dominance order)."""
    ir, fn, ctx = _passes(two_dots, TD_SIG, TD_CX, num_warps=8, num_stages=2, div=TD_DIV, upto=BEFORE)
    s = next(o for o in fn.walk() if o.name == "dot" and o.attrs.get("wgmma") == "deferred")
    body = s.block.ops
    red = body[body.index(s) + 1]
    assert red.name == "reduce" and red.operands[0] is s.results[0]
    # make the scores' first reader a layout-less value: t = trans(trans(s)) read by the reduce
    from kernelc.compiler.ir.core import Op
    from kernelc.language.dtypes import block_type
    t1 = Op("trans", [s.results[0]], [block_type(s.results[0].type.element_ty, (64, 128))],
            {"perm": [1, 0]}, loc=red.loc)
    t2 = Op("trans", [t1.results[0]], [s.results[0].type], {"perm": [1, 0]}, loc=red.loc)
    at = body.index(s) + 1
    for o in (t1, t2):
        o.block = s.block
    body[at:at] = [t1, t2]
    red.operands[0] = t2.results[0]
    verify(fn)
    place_wgmma_waits(fn, ctx)
    verify(fn)
    ops = s.block.ops
    w = ops[ops.index(s) + 1]
    assert w.name == "wgmma_wait" and w.operands == [s.results[0]] and w.loc == t1.loc
    assert ops[ops.index(w) + 1:ops.index(w) + 4] == [t1, t2, red] and t1.operands[0] is w.results[0]


@kernelc.jit
def chained_dots(q_desc, k_desc, v_desc, o_desc, N, BM: kl.constexpr, BN: kl.constexpr, D: kl.constexpr):
    """The second dot reads the first one's result (cast to fp16) as A from registers, nothing else reads it."""
    q = q_desc.load([kl.program_id(0) * BM, 0])
    acc = kl.zeros((BM, D), dtype=kl.float32)
    for n in kl.range(0, N, BN):
        p = kl.dot(q, k_desc.load([n, 0]).T).to(kl.float16)
        acc = kl.dot(p, v_desc.load([n, 0]), acc)
    o_desc.store([kl.program_id(0) * BM, 0], acc.to(kl.float16))


def test_a_dot_reading_a_deferred_result_from_registers_is_its_first_read():
    """A deferred result a later dot reads as its A operand from registers: the cast to fp16 (which has a layout)
    is the first read and gets the wait. With the cast layout-less (materialised inside the second dot's
    lowering, where the dot reads A from registers), the wait goes right before that dot, the cast moves behind
    it, and the wait carries the cast's location."""
    ir, fn, ctx = _passes(chained_dots, TD_SIG, TD_CX, num_warps=8, num_stages=2, div=TD_DIV)
    filecheck(ir[PASS], """
        CHECK: [[S:%\\d+]] = dot {{.*}}wgmma='deferred'} : <128x64xfp32>
        CHECK-NEXT: [[SW:%\\d+]] = wgmma_wait [[S]] {pending=0} : <128x64xfp32>
        CHECK-NEXT: [[P:%\\d+]] = cast [[SW]] {rounding='rtne'} : <128x64xfp16>
        CHECK-NEXT: = dot [[P]], {{.*}}wgmma='deferred'}
    """)
    _, fn, ctx = _passes(chained_dots, TD_SIG, TD_CX, num_warps=8, num_stages=2, div=TD_DIV, upto=BEFORE)
    s, pv = [o for o in fn.walk() if o.name == "dot" and o.attrs.get("wgmma") == "deferred"]
    cast = pv.operands[0].op
    assert cast.name == "cast" and cast.operands[0] is s.results[0]
    del ctx.plan.layouts[cast.results[0].id]
    place_wgmma_waits(fn, ctx)
    verify(fn)
    ops = pv.block.ops
    w = ops[ops.index(pv) - 2]
    assert w.name == "wgmma_wait" and w.operands == [s.results[0]] and w.attrs == {"pending": 0}
    assert ops[ops.index(pv) - 1] is cast and cast.operands[0] is w.results[0] and w.loc == cast.loc


def test_the_verifier_checks_wgmma_wait():
    ir, fn, _ = _passes(two_dots, TD_SIG, TD_CX, num_warps=8, num_stages=2, div=TD_DIV)
    w = next(o for o in fn.walk() if o.name == "wgmma_wait")
    i32 = next(o for o in fn.walk() if o.name == "mbarrier_at").results[0]
    rejects_bad_attrs(fn, [(w, "pending", -1, "pending must be an int >= 0"),
                           (w, "pending", "0", "pending must be an int >= 0")])
    w.attrs["pin"] = False
    with pytest.raises(Exception, match="pin is True or absent"):
        verify(fn)
    del w.attrs["pin"]
    rejects_bad_operands(fn, [(w, 0, i32, "wgmma_wait yields its operands' types")])


def test_the_waits_lower_to_wait_group_and_codegen_keeps_no_wgmma_state():
    """PTX: the async dot's ``wait_group 1`` in the loop, the ``wait_group 0`` after it that takes the 128
    accumulator registers of each thread through it (tied operands); codegen has no table of groups left."""
    from kernelc.compiler.codegen.lowering import Lowering
    assert not hasattr(Lowering(_passes(mm_loop, MM_DESC_SIG, MM_CX, div=MM_DESC_DIV)[1], None, None, 4, None),
                       "wgmma_groups")
    ck = kernelc.compile(mm_loop, MM_DESC_SIG, MM_CX, target="sm_90a", num_warps=4, num_stages=3,
                         divisibility=MM_DESC_DIV)
    llir = ck.asm["llir"]
    assert llir.count("wgmma.wait_group.sync.aligned 1;") == 1
    tied = [ln for ln in llir.splitlines() if "wgmma.wait_group.sync.aligned 0;" in ln]
    assert len(tied) == 1 and tied[0].count("float %") == 128
    with pytest.raises(Exception, match="cannot lower `wgmma_wait_deferred`"):
        _lower_with_marker()


def _lower_with_marker():
    """A ``wgmma_wait_deferred`` that reached codegen (the pass did not run) is an error, not a wait."""
    from kernelc.compiler.codegen import lower_to_llvm
    from kernelc.compiler.backend import parse_target
    _, fn, ctx = _passes(two_dots, TD_SIG, TD_CX, num_warps=8, num_stages=2, div=TD_DIV, upto=BEFORE)
    lower_to_llvm(fn, ctx.plan, ctx.axis, 8, parse_target("sm_90a"))
