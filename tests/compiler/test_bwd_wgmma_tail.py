"""Two opt-in wgmma schedules for the attention backward's loops, as Triton's tutorial 06 issues them
(docs/triton-tutorials.md, "06 backward: causal and d64"):

- ``KERNELC_WGMMA_ASYNC_TAIL`` (``schedule_pipelines``): the body's last dot, read only by its own accumulator
  (dK += dS^T Q, dQ += dS K), stays in flight across the back edge (``wgmma='async'``) although the other dots
  of the body are waited for in the iteration; a cp.async ring then refills after the dots;
- ``KERNELC_WGMMA_DEFER_ACC`` (``schedule_wgmma``): in a ringed loop, the dots not left in flight are deferred
  when one of them (dV += P^T dO) is read only by its accumulator and another dot follows it, so the two run
  back to back and are waited for together.

Golden IR before -> after, the knobs off, and the waits of the tutorial-shaped backward's loops in SASS."""
import re

import pytest

from kernelc.compiler.compiler import compile as kcompile
from tests.compiler import fused_bwd_kernels as FB
from tests.compiler.filecheck import filecheck
from tests.compiler.test_ring_deferred_waits import _ir
from tests.compiler.test_ring_views import _loop_sass


@pytest.fixture
def tail(monkeypatch):
    monkeypatch.setenv("KERNELC_WGMMA_ASYNC_TAIL", "1")


@pytest.fixture
def defer_acc(monkeypatch):
    monkeypatch.setenv("KERNELC_WGMMA_DEFER_ACC", "1")


# the dK/dV loop reduced (test_ring_deferred_waits.dk_loop, DV=True): S^T = K Q^T, then exp2; dP^T = V dO^T;
# dV += P^T dO; dK += (P^T * dP^T) Q -- each result read before the next dot but dV's
BEFORE = """
    CHECK: = scf.for {{.*}}{pipeline={stages=2, lookahead=1}}
    CHECK: [[ST:%\\d+]] = dot {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {input_precision='tf32', engine='wgmma'} :
    CHECK-NEXT: = exp2 [[ST]]
    CHECK: [[DP:%\\d+]] = dot {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {input_precision='tf32', engine='wgmma'} :
    CHECK: [[DV:%\\d+]] = dot {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {input_precision='tf32', engine='wgmma'} :
    CHECK-NEXT: = fmul {{%\\d+}}, [[DP]]
    CHECK: [[DK:%\\d+]] = dot {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {input_precision='tf32', engine='wgmma'} :
    CHECK-NEXT: scf.yield [[DV]], [[DK]]
"""


def test_the_last_accumulating_dot_stays_in_flight(tail):
    ir = _ir(DP_FIRST=False, DV=True)
    filecheck(ir["assign_layouts"], BEFORE.replace("{{.*}}{pipeline={stages=2, lookahead=1}}", "{{.*}}"))
    filecheck(ir["schedule_pipelines"], """
        CHECK: = scf.for {{.*}}{pipeline={stages=2, lookahead=1}}
        CHECK: [[ST:%\\d+]] = dot {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {input_precision='tf32', engine='wgmma'} :
        CHECK: [[DP:%\\d+]] = dot {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {input_precision='tf32', engine='wgmma'} :
        CHECK: [[DV:%\\d+]] = dot {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {input_precision='tf32', engine='wgmma'} :
        CHECK: [[DK:%\\d+]] = dot {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {input_precision='tf32', engine='wgmma', wgmma='async'} :
        CHECK-NEXT: scf.yield [[DV]], [[DK]]
    """)
    # only dK: no deferral without DEFER_ACC (no dot is issued before an earlier result is read)
    assert ir["schedule_wgmma"].count("wgmma=") == 1
    # its wait leaves it in flight; the next iteration's first wait (S^T's, at 0) retires it before the
    # refill overwrites the stage it read; the loop waits for dK's accumulator (carried value 1) on its exit edge
    # (KERNELC_WGMMA_EXIT_WAIT): no wait op after it
    filecheck(ir["place_wgmma_waits"], """
        CHECK: = scf.for {{.*}}{pipeline={stages=2, lookahead=1}, exit_wait=[1]}
        CHECK: [[ST:%\\d+]] = dot {{.*}}{input_precision='tf32', engine='wgmma'} :
        CHECK-NEXT: wgmma_wait {pending=0}
        CHECK: [[DK:%\\d+]] = dot {{.*}}wgmma='async'} :
        CHECK-NEXT: wgmma_wait {pending=1}
        CHECK-NEXT: barrier
        CHECK: tma_copy_to_ring
        CHECK: scf.yield
        CHECK-NOT: wgmma_wait
    """)


def test_exit_wait_off_waits_after_the_loop(tail, monkeypatch):
    # KERNELC_WGMMA_EXIT_WAIT=0: one wait op after the loop takes dK's accumulator through (the form before it)
    monkeypatch.setenv("KERNELC_WGMMA_EXIT_WAIT", "0")
    ir = _ir(DP_FIRST=False, DV=True)
    assert "exit_wait" not in ir["place_wgmma_waits"]
    filecheck(ir["place_wgmma_waits"], """
        CHECK: = scf.for
        CHECK: = dot {{.*}}wgmma='async'} :
        CHECK: scf.yield
        CHECK-NEXT: = wgmma_wait {{%\\d+}} {pending=0}
    """)


def test_defer_acc_runs_dv_with_the_next_dot(defer_acc, tail):
    ir = _ir(DP_FIRST=False, DV=True)
    filecheck(ir["schedule_wgmma"], """
        CHECK: = scf.for {{.*}}{pipeline={stages=2, lookahead=1}}
        CHECK: = dot {{.*}}{input_precision='tf32', engine='wgmma', wgmma='deferred'} :
        CHECK: = dot {{.*}}{input_precision='tf32', engine='wgmma', wgmma='deferred'} :
        CHECK: = dot {{.*}}{input_precision='tf32', engine='wgmma', wgmma='deferred'} :
        CHECK: = dot {{.*}}{input_precision='tf32', engine='wgmma', wgmma='async'} :
        CHECK-NEXT: scf.yield
    """)
    # S^T waited for at its read (nothing after it yet); dP^T at its read with dV's group still in flight;
    # dK left in flight; the yield ties dV through a wait that dK's own has already satisfied
    filecheck(ir["place_wgmma_waits"], """
        CHECK: = scf.for
        CHECK: [[ST:%\\d+]] = dot {{.*}}wgmma='deferred'} :
        CHECK-NEXT: [[S:%\\d+]] = wgmma_wait [[ST]] {pending=0}
        CHECK-NEXT: = exp2 [[S]]
        CHECK: [[DP:%\\d+]] = dot {{.*}}wgmma='deferred'} :
        CHECK: [[DV:%\\d+]] = dot {{.*}}wgmma='deferred'} :
        CHECK-NEXT: [[P:%\\d+]] = wgmma_wait [[DP]] {pending=1}
        CHECK-NEXT: = fmul {{%\\d+}}, [[P]]
        CHECK: [[DK:%\\d+]] = dot {{.*}}wgmma='async'} :
        CHECK-NEXT: wgmma_wait {pending=1}
        CHECK: [[V:%\\d+]] = wgmma_wait [[DV]] {pending=1}
        CHECK-NEXT: scf.yield [[V]], [[DK]]
    """)


def test_defer_acc_alone_waits_at_the_back_edge(defer_acc):
    ir = _ir(DP_FIRST=False, DV=True)
    assert ir["schedule_wgmma"].count("wgmma='deferred'") == 4 and "wgmma='async'" not in ir["schedule_wgmma"]
    # dV's group runs with dP^T's; dK's is waited for with dV's at the back edge (after the refill, which
    # overwrites the stage the previous iteration read)
    filecheck(ir["place_wgmma_waits"], """
        CHECK: = scf.for
        CHECK: [[ST:%\\d+]] = dot {{.*}}wgmma='deferred'} :
        CHECK-NEXT: = wgmma_wait [[ST]] {pending=0}
        CHECK: [[DP:%\\d+]] = dot {{.*}}wgmma='deferred'} :
        CHECK: [[DV:%\\d+]] = dot {{.*}}wgmma='deferred'} :
        CHECK-NEXT: = wgmma_wait [[DP]] {pending=1}
        CHECK: [[DK:%\\d+]] = dot {{.*}}wgmma='deferred'} :
        CHECK-NOT: wgmma_wait
        CHECK: = wgmma_wait [[DV]], [[DK]] {pending=0}
        CHECK-NEXT: scf.yield
    """)


def test_off_by_default(monkeypatch):
    monkeypatch.delenv("KERNELC_WGMMA_ASYNC_TAIL", raising=False)
    monkeypatch.delenv("KERNELC_WGMMA_DEFER_ACC", raising=False)
    ir = _ir(DP_FIRST=False, DV=True)
    filecheck(ir["schedule_wgmma"], BEFORE)
    assert "wgmma=" not in ir["schedule_wgmma"]


def test_wgmma_async_off_turns_the_tail_off(tail, monkeypatch):
    monkeypatch.setenv("KERNELC_WGMMA_ASYNC", "0")
    assert "wgmma=" not in _ir(DP_FIRST=False, DV=True)["schedule_wgmma"]


def _depbars(loop):
    return [int(m.group(1), 16) for o in loop for m in [re.match(r"WARPGROUP\.DEPBAR\.LE\s+gsb0,\s*0x([0-9a-f]+)", o)]
            if m]


@pytest.mark.parametrize("causal", [False, True])
def test_tutorial_shaped_backward_waits_as_triton(monkeypatch, causal):
    """tests/compiler/fused_bwd_kernels.py at HEAD_DIM 64 (4 warps, 5 stages): by default every wgmma of a
    dK/dV loop (4) and of a dQ loop (3) is waited for right after it; with both knobs each loop waits twice and
    leaves its last dot in flight (Triton 3.6's tutorial kernel: two waits an iteration in every loop,
    bench/experiments/tutorial_gaps/bwd06_sass.py)."""
    div = dict(stride_bh=16, stride_tok=16, N_CTX=16)
    cx = dict(FB.CONFIG, D=64, CAUSAL=causal)
    for knobs, dkdv_waits, dq_waits in (((), [0, 0, 0, 0], [0, 0, 0]),
                                       (("KERNELC_WGMMA_ASYNC_TAIL", "KERNELC_WGMMA_DEFER_ACC"), [0, 0, 1], [0, 0, 1])):
        for k in ("KERNELC_WGMMA_ASYNC_TAIL", "KERNELC_WGMMA_DEFER_ACC"):
            monkeypatch.setenv(k, "1" if k in knobs else "0")
        ck = kcompile(FB.fused_attn_bwd, FB.SIG, cx, "sm_90a", 4, 5, divisibility=div)
        loops = _loop_sass(ck.asm["sass"])
        assert len(loops) == (4 if causal else 2)
        half = len(loops) // 2
        assert [_depbars(lp) for lp in loops] == [dkdv_waits] * half + [dq_waits] * half, knobs
        assert ck.shared <= 232448 // 2 - 1024   # two blocks an SM still fit


@pytest.mark.parametrize("exit_wait", [True, False])
def test_the_examples_causal_fused_backward_keeps_its_tails_in_flight(monkeypatch, exit_wait):
    """examples/kernels/attention_bwd.py's dq_mode="fused" kernel, causal, D=64 (FUSED_CONFIGS, descriptor dQ
    loads) with the async tail: its two dK/dV loops wait at most for the group before the last (never at 0) when
    each loop waits on its exit edge (KERNELC_WGMMA_EXIT_WAIT, the default) with the accumulators' zeros put in
    registers before the loop's guard. With the wait after the loop, ptxas serialised every wgmma of the kernel
    (C7515): every wait at 0."""
    from examples.kernels import attention_bwd as B
    monkeypatch.setenv("KERNELC_WGMMA_ASYNC_TAIL", "1")
    monkeypatch.setenv("KERNELC_WGMMA_EXIT_WAIT", "1" if exit_wait else "0")
    P = lambda t: "*" + t  # noqa: E731
    sig = dict(Q=P("fp16"), K=P("fp16"), V=P("fp16"), DO=P("fp16"), DK=P("fp16"), DV=P("fp16"), DQ=P("fp16"),
               LSE=P("fp32"), Delta=P("fp32"), sm_scale="fp32", stride_z="i32", stride_h="i32", stride_m="i32",
               stride_k="i32", H="i32", N_CTX="i32")
    (bm1, bn1), (bm2, bn2), w, st = B.FUSED_CONFIGS[64]
    ck = kcompile(B.attn_bwd_fused_kernel, sig, dict(HEAD_DIM=64, CAUSAL=True, BLOCK_M1=bm1, BLOCK_N1=bn1,
                                                     BLOCK_M2=bm2, BLOCK_N2=bn2, DQ_DESC=True),
                  "sm_90a", w, st, divisibility={n: 16 for n in sig}, equal_to_1=("stride_k",))
    loops = _loop_sass(ck.asm["sass"])
    assert len(loops) == 4 and ck.n_spills == 0
    dkdv = [_depbars(lp) for lp in loops[:2]]
    if exit_wait:
        assert all(w and min(w) == 1 for w in dkdv), dkdv
    else:
        assert all(set(w) == {0} for w in dkdv), dkdv


@pytest.mark.gpu
@pytest.mark.parametrize("causal,D", [(False, 64), (True, 64), (True, 128)])
def test_gpu_tutorial_shaped_backward_with_both_knobs(defer_acc, tail, causal, D):
    """On a Hopper GPU: the tutorial-shaped backward with dK/dQ left in flight and dV deferred, against torch
    autograd."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs an sm_90 GPU")
    from kernelc.runtime.launcher import get_state
    get_state(FB.fused_attn_bwd)["cache"].clear()  # the knobs are read at compile time
    torch.manual_seed(0)
    q, k, v, do = (torch.randn(1, 2, 1024, D, device="cuda", dtype=torch.float16) * 0.5 for _ in range(4))
    sm_scale = D ** -0.5
    got = FB.run(q, k, v, do, causal, sm_scale)
    torch.cuda.synchronize()
    ref = FB.reference(q, k, v, do, causal, sm_scale)
    get_state(FB.fused_attn_bwd)["cache"].clear()
    for g, r in zip(got, ref):
        torch.testing.assert_close(g.float(), r, atol=2e-2, rtol=2e-2)


def test_a_warp_specialised_loop_keeps_its_schedule(monkeypatch):
    """The dQ kernel of examples/kernels/attention_bwd.py at d128 (8 warps) specialises its loop: the async tail
    is for loops without a producer warp (its stages are released at issue), so that loop is as without the knobs."""
    from tests.compiler.test_attention_kernels import compile_dq
    tirs = {}
    for knob in ("0", "1"):
        monkeypatch.setenv("KERNELC_WGMMA_ASYNC_TAIL", knob)
        monkeypatch.setenv("KERNELC_WGMMA_DEFER_ACC", knob)
        ck = compile_dq(128, False)
        tirs[knob] = ck.asm["tir"]
        assert "ws={" in tirs[knob] and "wgmma='async'" not in tirs[knob]
    assert tirs["0"] == tirs["1"]


def test_a_loops_own_async_tail_request(monkeypatch):
    """tl.range(..., async_tail=True) (the example's TAIL) leaves that loop's last dot in flight with the knob off, as
    KERNELC_WGMMA_ASYNC_TAIL=1 does for every loop; async_tail=False keeps it off under the knob."""
    from examples.kernels import attention_bwd as B
    P = lambda t: "*" + t  # noqa: E731
    sig = dict(Q=P("fp16"), K=P("fp16"), V=P("fp16"), DO=P("fp16"), DK=P("fp16"), DV=P("fp16"), DQ=P("fp16"),
               LSE=P("fp32"), Delta=P("fp32"), sm_scale="fp32", stride_z="i32", stride_h="i32", stride_m="i32",
               stride_k="i32", H="i32", N_CTX="i32")
    (bm1, bn1), (bm2, bn2), w, st = B.FUSED_CONFIGS[64]
    waits = {}
    for knob, tail in (("0", True), ("1", False)):
        monkeypatch.setenv("KERNELC_WGMMA_ASYNC_TAIL", knob)
        ck = kcompile(B.attn_bwd_fused_kernel, sig, dict(HEAD_DIM=64, CAUSAL=False, BLOCK_M1=bm1, BLOCK_N1=bn1,
                                                         BLOCK_M2=bm2, BLOCK_N2=bn2, DQ_DESC=True, TAIL=tail),
                      "sm_90a", w, st, divisibility={n: 16 for n in sig}, equal_to_1=("stride_k",))
        assert ("exit_wait" in ck.asm["tir"]) == tail
        waits[tail] = [_depbars(lp) for lp in _loop_sass(ck.asm["sass"])]
    # dK/dV loop, then dQ loop: asked for, neither waits for its last group at 0 before the back edge
    assert waits[True][0][-1] == 1 and waits[True][1][-1] == 1, waits
    assert waits[False][0][-1] == 0 and waits[False][1][-1] == 0, waits


def _dq64(stages, tail):
    """The separate pass's dQ kernel at D=64, 128 x 128 on 8 warps (the compiler's auto rule gives its loop a producer
    warpgroup), ``stages`` ring stages, the kernel's TAIL (tl.range(..., async_tail=TAIL))."""
    from examples.kernels import attention_bwd as B
    from tests.compiler.test_attention_kernels import P, _compile
    sig = dict(Q=P("fp16"), K=P("fp16"), V=P("fp16"), DO=P("fp16"), DQ=P("fp16"), LSE=P("fp32"), Delta=P("fp32"),
               sm_scale="fp32", stride_z="i32", stride_h="i32", stride_m="i32", stride_k="i32", H="i32", N_CTX="i32")
    return _compile(B.attn_bwd_dq_kernel, sig, dict(HEAD_DIM=64, CAUSAL=False, TAIL=tail),
                    dict(BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=stages), ("stride_k",))


def test_a_warp_specialised_loop_keeps_its_own_tail():
    """(d64s27) tl.range(..., async_tail=True) on a loop with a producer warp(group): dQ += dS K stays in flight across
    the back edge, the stages are released a trip late (release='lagged': the tail still reads its K stage), the logit
    dots' waits stay deferred beside it, and the consumers keep their setmaxnreg; in the SASS the loop's last wait
    leaves one group in flight (0 without the request) and no register of the tail's A fragment (dS) is written in
    the next trip before its first wait retires the tail. With 2 stages the request is dropped (the producer would
    have no stage to fill ahead) and the compile log says so."""
    asked = _dq64(3, True)
    tir = asked.asm["tir"]
    assert "release='lagged'" in tir and "wgmma='async'" in tir and tir.count("wgmma='deferred'") == 2, tir
    assert "setmaxnreg=True" in tir and asked.n_spills == 0
    plain = _dq64(3, None)
    assert "release='at_issue'" in plain.asm["tir"] and "wgmma='async'" not in plain.asm["tir"]
    waits = {}
    for name, ck in (("asked", asked), ("plain", plain)):
        loops = [lp for lp in _loop_sass(ck.asm["sass"]) if any("HGMMA" in o for o in lp)]
        assert len(loops) == 1, name
        waits[name] = _depbars(loops[0])
        if name == "asked":
            hg = [o for o in loops[0] if "HGMMA" in o]
            tail_a = set()
            for o in hg:  # the loop's one dot with a register A operand: dS K (Q and dO are staged in shared memory)
                m = re.search(r"HGMMA\.\S+ R\d+, R(\d+),", o)
                if m:
                    tail_a |= set(range(int(m.group(1)), int(m.group(1)) + 4))
            assert len(tail_a) == 32, hg  # 8 k-steps of 16 keys, 4 registers each
            first_wait = next(i for i, o in enumerate(loops[0]) if "DEPBAR.LE" in o)
            for o in loops[0][:first_wait]:
                m = re.match(r"(?:@!?U?P\w+\s+)?([A-Z][\w.]*)\s+R(\d+)", o)
                if m and not m.group(1).startswith(("HGMMA", "ST", "WARPGROUP", "SYNCS")):
                    width = 2 if ".64" in m.group(1) else 4 if ".128" in m.group(1) else 1
                    assert not set(range(int(m.group(2)), int(m.group(2)) + width)) & tail_a, o
    assert waits["asked"][-1] == 1 and waits["plain"][-1] == 0, waits
    two = _dq64(2, True)
    assert "release='at_issue'" in two.asm["tir"] and "wgmma='async'" not in two.asm["tir"]
    assert any("async tail dropped under the producer warp" in n for n in (two.compile_log or [])), two.compile_log
