"""schedule_wgmma in a ringed loop no producer warp fills (KERNELC_WGMMA_DEFER_RING): a body that issues
a dot before it reads an earlier dot's result gets its waits at the first reads (the attention backward's
dP^T = V dO^T under the recompute of P^T); any other body is left as it was. Golden IR, then the SASS of
the backward's dK/dV loop with the knob on and off."""
import re

import kernelc
import kernelc.language as kl
from tests.compiler.filecheck import filecheck
from tests.compiler.test_schedule_passes import _passes

SIG = {"q_desc": "tensordesc<fp16[64, 64]>", "k_desc": "tensordesc<fp16[64, 64]>",
       "v_desc": "tensordesc<fp16[64, 64]>", "do_desc": "tensordesc<fp16[64, 64]>",
       "dk_desc": "tensordesc<fp16[64, 64]>", "N": "i32"}
DIV = {k: 16 for k in SIG if k.endswith("desc")}
CX = dict(BM=64, BN=64, D=64)


@kernelc.jit
def dk_loop(q_desc, k_desc, v_desc, do_desc, dk_desc, N, BM: kl.constexpr, BN: kl.constexpr, D: kl.constexpr,
            DP_FIRST: kl.constexpr, DV: kl.constexpr = False):
    """dK of one key block, the backward's loop reduced to its three dots: with DP_FIRST both logit-shaped
    dots are issued before either result is read; without it, dP^T after P^T is computed."""
    k = k_desc.load([kl.program_id(0) * BN, 0])
    v = v_desc.load([kl.program_id(0) * BN, 0])
    dk = kl.zeros((BN, D), dtype=kl.float32)
    dv = kl.zeros((BN, D), dtype=kl.float32)
    for m in kl.range(0, N, BM, warp_specialize=False):
        q = q_desc.load([m, 0])
        do = do_desc.load([m, 0])
        if DP_FIRST:
            st = kl.dot(k, q.T)
            dpt = kl.dot(v, do.T)
            pt = kl.math.exp2(st)
        else:
            pt = kl.math.exp2(kl.dot(k, q.T))
            dpt = kl.dot(v, do.T)
        if DV:  # dV += P^T dO, issued between the two reads (the backward's order)
            dv = kl.dot(pt.to(kl.float16), do, dv)
        dk = kl.dot((pt * dpt).to(kl.float16), q, dk)
    dk_desc.store([kl.program_id(0) * BN, 0], (dk + dv).to(kl.float16))


def _ir(monkeypatch=None, **cx):
    ir, _, _ = _passes(dk_loop, SIG, dict(CX, **cx), num_warps=4, num_stages=2, div=DIV)
    return ir


def test_dots_issued_before_an_earlier_result_is_read_are_waited_for_at_their_first_reads():
    ir = _ir(DP_FIRST=True)
    before = """
        CHECK: = scf.for {{.*}}{pipeline={stages=2, lookahead=1}}
        CHECK: [[ST:%\\d+]] = dot {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {input_precision='tf32', engine='wgmma'} :
        CHECK-NEXT: = trans {{.*}}pipeline={ring='tma'}}
        CHECK-NEXT: [[DP:%\\d+]] = dot {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {input_precision='tf32', engine='wgmma'} :
        CHECK-NEXT: = exp2 [[ST]]
        CHECK: = fmul {{%\\d+}}, [[DP]]
        CHECK: = dot {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {input_precision='tf32', engine='wgmma'} :
    """
    filecheck(ir["warp_specialize"], before)  # no producer warp (warp_specialize=False), no dot left in flight
    assert "ws=" not in ir["schedule_wgmma"]
    # S^T is read first (by exp2) while dP^T's wgmma is in flight: dP^T's wait is pinned there; dK is read by
    # the next iteration only (complete at the back edge)
    filecheck(ir["schedule_wgmma"], """
        CHECK: = scf.for {{.*}}{pipeline={stages=2, lookahead=1}}
        CHECK: [[ST:%\\d+]] = dot {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {input_precision='tf32', engine='wgmma', wgmma='deferred'} :
        CHECK-NEXT: = trans {{.*}}pipeline={ring='tma'}}
        CHECK-NEXT: [[DP:%\\d+]] = dot {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {input_precision='tf32', engine='wgmma', wgmma='deferred', pin_wait=True} :
        CHECK-NEXT: = exp2 [[ST]]
        CHECK: = fmul {{%\\d+}}, [[DP]]
        CHECK: = dot {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {input_precision='tf32', engine='wgmma', wgmma='deferred'} :
    """)
    # the ring expansion keeps them: the refill after the dots writes the stage the last iteration read
    assert ir["expand_tma_rings"].count("wgmma='deferred'") == 3


def test_place_wgmma_waits_waits_once_per_read():
    # (passes/wgmma_waits.py) each deferred result waited for where first read: S^T with dP^T left in flight,
    # dP^T pinned with dK's group in flight; at the back edge the yield reads dK and dV: one wait, at 0
    ir = _ir(DP_FIRST=True, DV=True)
    filecheck(ir["place_wgmma_waits"], """
        CHECK: = scf.for {{.*}}{pipeline={stages=2, lookahead=1}}
        CHECK: [[ST:%\\d+]] = dot {{.*}}wgmma='deferred'}
        CHECK: [[DP:%\\d+]] = dot {{.*}}wgmma='deferred', pin_wait=True}
        CHECK-NEXT: [[S:%\\d+]] = wgmma_wait [[ST]] {pending=1}
        CHECK-NEXT: = exp2 [[S]]
        CHECK: [[DV:%\\d+]] = dot {{.*}}wgmma='deferred'}
        CHECK: = wgmma_wait [[DP]] {pending=1, pin=True}
        CHECK: [[DK:%\\d+]] = dot {{.*}}wgmma='deferred'}
        CHECK-NOT: wgmma_wait
        CHECK: [[W0:%\\d+]], [[W1:%\\d+]] = wgmma_wait [[DV]], [[DK]] {pending=0}
        CHECK-NEXT: scf.yield
    """)
    assert ir["place_wgmma_waits"].count("wgmma_wait") == 3


def test_a_body_that_reads_each_result_before_the_next_dot_is_left_alone():
    ir = _ir(DP_FIRST=False)
    assert "wgmma=" not in ir["schedule_wgmma"] and ir["schedule_wgmma"] == ir["warp_specialize"]


def test_the_knob_turns_it_off(monkeypatch):
    monkeypatch.setenv("KERNELC_WGMMA_DEFER_RING", "0")
    ir = _ir(DP_FIRST=True)
    assert "wgmma=" not in ir["schedule_wgmma"] and ir["schedule_wgmma"] == ir["warp_specialize"]


def _waits_and_groups_before_exp(D):
    """(the wgmma wait depths of the dK/dV kernel in order, how many wgmma groups its loop issues before the
    first MUFU.EX2 of a trip)."""
    from tests.compiler.test_attention_kernels import _first_loop, compile_dkdv
    ck = compile_dkdv(D, False)
    assert ck.n_spills == 0
    body = _first_loop(ck.asm["sass"])
    waits = [int(m, 16) for m in re.findall(r"WARPGROUP\.DEPBAR\.LE\s+gsb0,\s*0x([0-9a-f]+)", ck.asm["sass"])]
    first_ex2 = body.index("MUFU.EX2")
    return waits, sum(o == "WARPGROUP.ARRIVE" for o in body[:first_ex2]), ck


def test_the_backward_dkdv_loop_runs_dp_under_the_recompute_of_p(monkeypatch):
    # 2026-11-27 (docs/attention.md): K Q^T and V dO^T issued back to back, a wait that leaves dP^T's group in
    # flight before the exp2s, and dV's group in flight while dS is computed (the pinned wait: in both arms
    # of its branch); everything complete at the back edge
    for D in (128, 64):
        waits, groups, ck = _waits_and_groups_before_exp(D)
        assert groups == 2 and waits == [1, 1, 1, 0], (D, groups, waits)
        assert {d["engine"] for d in ck.reports["dots"]} == {"wgmma"}
    monkeypatch.setenv("KERNELC_WGMMA_DEFER_RING", "0")
    for D in (128, 64):  # main's code before: every wgmma waited for right after its issue
        waits, _, _ = _waits_and_groups_before_exp(D)
        assert waits == [0, 0, 0, 0], (D, waits)
