"""KERNELC_WGMMA_ASYNC_TAIL (default auto: the rule below) on attention's forward order (issue #20, tutorial 06): P V stays in flight across
the back edge (``on``, or ``rescaled`` for this case alone) when the accumulator it yields is read, in the next
trip, only by a rescale (``acc * alpha``) that
comes after the trip's first dot. ``schedule_pipelines`` marks the P V dot ``wgmma='async'``
(passes/schedule.py: ``_rescaled_into_itself``); ``place_wgmma_waits`` makes the first dot's wait (pending 0) take
the carried accumulator through, so the rescale reads the wait's result. Golden IR, the cases left alone, and the
key loop's waits in SASS (docs/triton-tutorials.md, "06's forward below 0.95")."""
import re

import pytest

import kernelc
import kernelc.language as kl
from kernelc.compiler.ir import verify
from tests.compiler.filecheck import filecheck
from tests.compiler.test_schedule_passes import TD_DIV, TD_SIG, _passes


@kernelc.jit
def rescaled_two_dots(q_desc, k_desc, v_desc, o_desc, N, BM: kl.constexpr, BN: kl.constexpr, D: kl.constexpr,
                      EARLY: kl.constexpr):
    q = q_desc.load([kl.program_id(0) * BM, 0])
    acc = kl.zeros((BM, D), dtype=kl.float32)
    m = kl.full((BM,), -1.0e30, dtype=kl.float32)
    for n in kl.range(0, N, BN):
        if EARLY:  # the accumulator read before this trip's first dot: no tail
            acc = acc * 0.5
        s = kl.dot(q, k_desc.load([n, 0]).T)
        m_new = kl.maximum(m, kl.max(s, 1))
        alpha = kl.exp2(m - m_new)
        p = kl.exp2(s - m_new[:, None])
        if not EARLY:
            acc = acc * alpha[:, None]
        acc = kl.dot(p.to(kl.float16), v_desc.load([n, 0]), acc)
        m = m_new
    o_desc.store([kl.program_id(0) * BM, 0], acc.to(kl.float16))


CX = dict(BM=128, BN=64, D=64)


@pytest.mark.parametrize("knob", ["1", "rescaled"])  # on: the backward's tail too; rescaled: this case only
def test_pv_stays_in_flight_and_the_first_wait_takes_the_accumulator_golden(monkeypatch, knob):
    monkeypatch.setenv("KERNELC_WGMMA_ASYNC_TAIL", knob)
    ir, fn, _ = _passes(rescaled_two_dots, TD_SIG, dict(CX, EARLY=False), div=TD_DIV)
    filecheck(ir["schedule_pipelines"], """
        CHECK: scf.for {{.*}}{pipeline={stages=3, lookahead=2}}
        CHECK: = dot {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {input_precision='tf32', engine='wgmma'} : <128x64xfp32>
        CHECK: = dot {{.*}}wgmma='async'} : <128x64xfp32>
    """)
    filecheck(ir["place_wgmma_waits"], """
        CHECK: [[ACC:%\\d+]], {{.*}} = scf.for {{.*}} {pipeline={stages=3, lookahead=2}, exit_wait=[0]}
        CHECK: [[S:%\\d+]] = dot {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {input_precision='tf32', engine='wgmma'} : <128x64xfp32>
        CHECK-NEXT: [[A:%\\d+]] = wgmma_wait [[ARG:%\\d+]] {pending=0} : <128x64xfp32>
        CHECK: = reduce [[S]] {axis=1, kind='max'}
        CHECK: [[R:%\\d+]] = fmul [[A]], {{%\\d+}}
        CHECK: [[PV:%\\d+]] = dot {{%\\d+}}, {{%\\d+}}, [[R]] {{.*}}wgmma='async'} : <128x64xfp32>
        CHECK-NEXT: wgmma_wait {pending=1}
        CHECK: scf.yield [[PV]],
        CHECK-NOT: wgmma_wait
        CHECK: = cast [[ACC]]
    """)
    # (the loop waits for P V on its exit edge, KERNELC_WGMMA_EXIT_WAIT: no wait op after it)
    # nothing reads the carried accumulator but the wait (the other mention: the body's argument list)
    body = ir["place_wgmma_waits"].split("scf.for", 1)[1].split("scf.yield", 1)[0]
    arg = re.search(r"wgmma_wait (%\d+) \{pending=0\}", body).group(1)
    assert len(re.findall(rf"{arg}\b", body)) == 2
    verify(fn)


def test_auto_by_default(monkeypatch):
    """The default is auto: at 128x64, D=128 on 4 warps (64 of S and 128 of the accumulator a thread) P V stays in
    flight; at D=64 (64 and 64) it is waited for at once."""
    monkeypatch.delenv("KERNELC_WGMMA_ASYNC_TAIL", raising=False)
    for d, tail in ((128, True), (64, False)):
        ir, _, _ = _passes(rescaled_two_dots, _sig(128, 64, d), dict(BM=128, BN=64, D=d, EARLY=False), div=TD_DIV,
                           upto="place_wgmma_waits")
        body = ir["place_wgmma_waits"].split("scf.for", 1)[1].split("scf.yield", 1)[0]
        assert ("wgmma='async'" in body) is tail and body.count("wgmma_wait {pending=1}") == int(tail)


def test_off_waits_as_before(monkeypatch):
    monkeypatch.setenv("KERNELC_WGMMA_ASYNC_TAIL", "off")
    ir, _, _ = _passes(rescaled_two_dots, TD_SIG, dict(CX, EARLY=False), div=TD_DIV)
    assert "wgmma='async'" not in ir["place_wgmma_waits"]
    filecheck(ir["place_wgmma_waits"], """
        CHECK: = dot {{%\\d+}}, {{%\\d+}}, {{%\\d+}} {input_precision='tf32', engine='wgmma'} : <128x64xfp32>
        CHECK-NEXT: wgmma_wait {pending=0}
        CHECK: = dot
        CHECK-NEXT: wgmma_wait {pending=0}
        CHECK: scf.yield
    """)


def test_an_accumulator_read_before_the_first_dot_keeps_its_wait(monkeypatch):
    """The accumulator rescaled before the trip's first dot (its wait would come too late): P V is waited for at
    once, as without the knob, and no wait takes the carried value."""
    monkeypatch.setenv("KERNELC_WGMMA_ASYNC_TAIL", "1")
    ir, _, _ = _passes(rescaled_two_dots, TD_SIG, dict(CX, EARLY=True), div=TD_DIV)
    assert "wgmma='async'" not in ir["schedule_pipelines"]
    body = ir["place_wgmma_waits"].split("scf.for", 1)[1].split("scf.yield", 1)[0]
    assert body.count("wgmma_wait {pending=0}") == 2 and not re.search(r"wgmma_wait %\d+", body)


def test_tutorial_order_key_loop_waits_once_for_everything(monkeypatch):
    """examples/kernels/attention.py's fp8 forward (e5m2, d64, 128x64 at 4 warps; the loop of tutorial 06's
    order), sm_90a: with the tail the key loop waits ``gsb0, 0x0`` after Q K^T and ``0x1`` after P V (Triton 3.6's
    tutorial loop: one wait, after Q K^T); without it, ``0x0`` after each. No spills either way."""
    from tests.compiler.test_fp8_bounds import _key_loop_paths, _pointer_fp8_forward
    waits = {}
    for tail in ("0", "1"):
        monkeypatch.setenv("KERNELC_WGMMA_ASYNC_TAIL", tail)
        ck = _pointer_fp8_forward("fp8e5", 64, False)
        assert ck.n_spills == 0
        whole = _key_loop_paths(ck.asm["sass"])[0]
        waits[tail] = [re.sub(r"\s+", " ", x.split("WARPGROUP.DEPBAR.LE", 1)[1]).strip()
                       for x in whole if "WARPGROUP.DEPBAR" in x]
    assert waits["0"] == ["gsb0, 0x0", "gsb0, 0x0"]
    assert waits["1"] == ["gsb0, 0x0", "gsb0, 0x1"]


def _sig(bm, bn, d):
    return {"q_desc": f"tensordesc<fp16[{bm}, {d}]>", "k_desc": f"tensordesc<fp16[{bn}, {d}]>",
            "v_desc": f"tensordesc<fp16[{bn}, {d}]>", "o_desc": f"tensordesc<fp16[{bm}, {d}]>", "N": "i32"}


@pytest.mark.parametrize("bm,bn,d,warps,tail", [
    (128, 64, 128, 4, True),    # S 64 + acc 128 a thread (tutorial 06's fp8 d128 pick at N >= 8192)
    (256, 64, 128, 8, True),    # 64 + 128 on two warpgroups, no producer warp
    (128, 64, 64, 4, False),    # 64 + 64 (tutorial 06's d64 fp16 pick; the pointer forward's D=64)
    (64, 128, 128, 4, False),   # 64 + 64: +0.3-0.8% measured, not taken
    (128, 128, 128, 8, False),  # 64 + 64 on two warpgroups
    (64, 64, 64, 4, False),     # 32 + 32: measured 2% slower with the tail
    (128, 32, 128, 4, False),   # 32 + 128
    (128, 128, 128, 4, False),  # 128 + 128: spills either way
])
def test_auto_leaves_pv_in_flight_only_where_it_fits(monkeypatch, bm, bn, d, warps, tail):
    """KERNELC_WGMMA_ASYNC_TAIL=auto: the rescaled tail where a thread holds at least 64 of S, at least 128 of the
    accumulator and at most 192 of both; elsewhere P V is waited for at once."""
    monkeypatch.setenv("KERNELC_WGMMA_ASYNC_TAIL", "auto")
    monkeypatch.setenv("KERNELC_WARP_SPECIALIZE", "none")
    ir, fn, _ = _passes(rescaled_two_dots, _sig(bm, bn, d), dict(BM=bm, BN=bn, D=d, EARLY=False), num_warps=warps,
                        div=TD_DIV, upto="place_wgmma_waits")
    body = ir["place_wgmma_waits"].split("scf.for", 1)[1].split("scf.yield", 1)[0]
    assert ("wgmma='async'" in body) is tail
    assert bool(re.search(r"wgmma_wait %\d+ \{pending=0\}", body)) is tail
    assert body.count("wgmma_wait {pending=1}") == int(tail)
    verify(fn)


def test_auto_leaves_a_warp_specialised_kernel_alone(monkeypatch):
    """A kernel whose loop gets a producer warp (KERNELC_WARP_SPECIALIZE=all here) keeps P V waited for at once
    under auto: with the tail ptxas serialised the pointer forward's wgmmas at D=128 (8 warps, specialised)."""
    monkeypatch.setenv("KERNELC_WGMMA_ASYNC_TAIL", "auto")
    cx = dict(BM=256, BN=64, D=128, EARLY=False)
    monkeypatch.setenv("KERNELC_WARP_SPECIALIZE", "all")
    ir, _, _ = _passes(rescaled_two_dots, _sig(256, 64, 128), cx, num_warps=8, div=TD_DIV, upto="schedule_pipelines")
    assert "wgmma='async'" not in ir["schedule_pipelines"]
    monkeypatch.setenv("KERNELC_WARP_SPECIALIZE", "none")
    ir, _, _ = _passes(rescaled_two_dots, _sig(256, 64, 128), cx, num_warps=8, div=TD_DIV, upto="schedule_pipelines")
    assert "wgmma='async'" in ir["schedule_pipelines"]
