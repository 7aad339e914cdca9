"""KERNELC_WGMMA_ZERO_ACC (passes/zero_acc.py): a wgmma dot with a zero constant accumulator takes use_acc = false
(scale-d false on its first K step, undef accumulator inputs) -- on sm_90a, compiled on CPU."""
import re

import pytest

import kernelc
import kernelc.language as kl
from examples.kernels import attention_bwd as B
from kernelc.compiler.ir import verify
from tests.compiler.test_attention_kernels import compile_dkdv_ds
from tests.compiler.test_pass_goldens import _around


@kernelc.jit
def zero_started_dot(a_ptr, b_ptr, c_ptr):
    r = kl.arange(0, 64)
    a = kl.load(a_ptr + r[:, None] * 64 + r[None, :])
    b = kl.load(b_ptr + r[:, None] * 64 + r[None, :])
    kl.store(c_ptr + r[:, None] * 64 + r[None, :], kl.dot(a, b))


def test_golden_a_zero_started_wgmma_dot_takes_a_constant_false_use_acc(monkeypatch):
    """Before: ``dot a, b, zeros``. After: a scalar ``constant {value=0} : i1`` just before the dot and its 4th
    operand; nothing else changes."""
    monkeypatch.setenv("KERNELC_WGMMA_ZERO_ACC", "1")
    sig = dict(a_ptr="*fp16", b_ptr="*fp16", c_ptr="*fp32")
    before, after, fn, _ = _around(zero_started_dot, sig, {}, "mark_zero_acc_dots", div={k: 16 for k in sig})
    dots = lambda t: [ln.strip() for ln in t.splitlines() if " = dot " in ln]  # noqa: E731
    assert len(dots(before)) == 1 and "engine='wgmma'" in dots(before)[0]
    acc = re.search(r"= dot %\d+, %\d+, (%\d+) \{", dots(before)[0]).group(1)
    assert re.search(rf"{acc} = constant {{value=0}} : <64x64xfp32>", before)
    new = re.search(r"(%\d+) = constant \{value=0\} : i1\n\s*%\d+ = dot %\d+, %\d+, " + acc + r", (%\d+) \{", after)
    assert new and new.group(1) == new.group(2), after
    norm = lambda t: [" ".join(re.sub(r"%\d+", "%_", ln).split()) for ln in t.splitlines()  # noqa: E731
                      if ": i1" not in ln or "constant" not in ln]
    assert [ln.replace("= dot %_, %_, %_, %_ {", "= dot %_, %_, %_ {") for ln in norm(after)] == norm(before)
    verify(fn)


def _ds_ws(monkeypatch, on):
    monkeypatch.setenv("KERNELC_WGMMA_ZERO_ACC", on if isinstance(on, str) else "1" if on else "0")
    # ds's D=128 non-causal dK/dV kernel as the default runs it: a producer warpgroup (DS_WS), EVEN_M
    from tests.compiler.test_attention_kernels import P, _compile
    sig = dict(Q=P("fp16"), K=P("fp16"), V=P("fp16"), DO=P("fp16"), DK=P("fp16"), DV=P("fp16"), DQ=P("fp16"),
               LSE=P("fp32"), Delta=P("fp32"), sm_scale="fp32", stride_z="i32", stride_h="i32", stride_m="i32",
               stride_k="i32", dq_stride_z="i32", dq_stride_h="i32", dq_stride_m="i32", H="i32", N_CTX="i32")
    return _compile(B.attn_bwd_dkdv_kernel, sig, dict(HEAD_DIM=128, CAUSAL=False, ATOMIC_DQ=False, STORE_DS=True,
                                                      WS=B.DS_WS[(128, False)], EVEN_M=True),
                    B._cfg(B.DS_DKDV_CONFIGS, 128, None), ("stride_k",))


def _loop_waits(sass):
    return re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x[0-9a-f]+)", sass)


def test_zero_acc_marks_only_the_zero_started_dots(monkeypatch):
    # the two logit dots (K Q^T, V dO^T) start from zeros; dV and dK accumulate into the loop's carries
    ck = _ds_ws(monkeypatch, True)
    dots = [ln for ln in ck.asm["tir"].splitlines() if re.search(r"= dot ", ln)]
    assert len(dots) == 4, dots
    marked = [ln for ln in dots if len(re.search(r"= dot ([^{]*)\{", ln).group(1).split(",")) == 5]
    assert len(marked) == 2 and all("attention_bwd.py:11" in ln for ln in marked), marked  # lines 111-112
    assert ck.n_spills == 0


def test_zero_acc_lets_the_logit_dots_issue_back_to_back_under_a_producer_warpgroup(monkeypatch):
    # off: ptxas sets V dO^T's 32 accumulator registers to 0 between the two logit dots and waits for K Q^T
    # (gsb0 0x0) before issuing V dO^T; on: both start with RZ (scale-d false), the first wait of the trip leaves
    # one group in flight, and the zeroing moves are gone
    off = _ds_ws(monkeypatch, False).asm["sass"]
    on = _ds_ws(monkeypatch, True).asm["sass"]
    assert _loop_waits(off)[0] == "0x0" and _loop_waits(on)[0] == "0x1", (_loop_waits(off), _loop_waits(on))
    rz = lambda s: sum("HGMMA" in ln and "RZ, !UPT" in ln for ln in s.splitlines())  # noqa: E731
    assert (rz(off), rz(on)) == (1, 2)
    assert len(_loop_waits(on)) == len(_loop_waits(off)) - 1


def test_zero_acc_off_leaves_the_kernel_as_it_was(monkeypatch):
    # the default (off) adds no operand: the PTX is the one the compiler gave before the pass existed
    monkeypatch.setenv("KERNELC_WGMMA_ZERO_ACC", "0")
    ck = compile_dkdv_ds(128, True)
    wgmmas = [ln for ln in ck.asm["ptx"].splitlines() if "wgmma.mma_async" in ln]
    assert wgmmas and all("setp.ne.b32 p, 1, 0;" in ln for ln in wgmmas)  # every one adds its accumulator
    assert all(len(re.search(r"= dot ([^{]*)\{", ln).group(1).split(",")) <= 4
               for ln in ck.asm["tir"].splitlines() if re.search(r"= dot ", ln))


def _marked(tir):
    return [ln for ln in tir.splitlines() if re.search(r"= dot ", ln)
            and len(re.search(r"= dot ([^{]*)\{", ln).group(1).split(",")) == 5]


def test_zero_acc_ws_marks_the_dots_of_warp_specialised_loops_only(monkeypatch):
    # ws: the producer-warpgroup dK/dV loop's two logit dots; the causal default (no producer) keeps its IR and PTX
    assert len(_marked(_ds_ws(monkeypatch, "ws").asm["tir"])) == 2
    monkeypatch.setenv("KERNELC_WGMMA_ZERO_ACC", "off")
    off = compile_dkdv_ds(128, True)
    monkeypatch.setenv("KERNELC_WGMMA_ZERO_ACC", "ws")
    ws = compile_dkdv_ds(128, True)
    assert not _marked(ws.asm["tir"]) and ws.asm["ptx"] == off.asm["ptx"]


@pytest.mark.parametrize("raw,value", [("0", "off"), ("1", "on"), ("ws", "ws"), ("auto", "auto")])
def test_zero_acc_is_in_the_cache_key(monkeypatch, raw, value):
    from kernelc.options import compile_options
    monkeypatch.setenv("KERNELC_WGMMA_ZERO_ACC", raw)
    assert compile_options().wgmma_zero_acc == value


def _fp8_fwd(monkeypatch, zero, top):
    # the fp8 pointer forward as its default runs it at D=128 (64x128, host descriptors, key order), non-causal
    import sys
    import os
    monkeypatch.setenv("KERNELC_WGMMA_ZERO_ACC", zero)
    monkeypatch.setenv("KERNELC_TMA_REFILL_TOP", top)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    monkeypatch.syspath_prepend(os.path.join(root, "bench", "experiments", "att20"))
    monkeypatch.syspath_prepend(os.path.join(root, "bench", "experiments", "fp813"))
    sys.modules.pop("sass_cpu", None)
    import sass_cpu
    return sass_cpu.desc_build(128, False, True, 64, 128, 4, 2, KEY_ORDER=True, EVEN_N=True)


def test_zero_acc_auto_marks_the_dots_of_loops_refilled_at_the_top(monkeypatch):
    # auto (the default): nothing where no ring refills at the top of its iteration (the PTX is off's); with
    # KERNELC_TMA_REFILL_TOP the fp8 forward's logit dot (Q K^T) is marked, its first QGMMA of the loop starts with
    # RZ, !UPT, and the 63 moves of its zero accumulator ptxas writes every trip without the mark are gone
    # one warpgroup: no warpgroup index after use_acc, so a marked dot has four operands
    marked = lambda tir: [ln for ln in tir.splitlines() if re.search(r"= dot %\d+, %\d+, %\d+, %\d+ \{", ln)]  # noqa
    auto, off = _fp8_fwd(monkeypatch, "auto", "0"), _fp8_fwd(monkeypatch, "off", "0")
    assert not marked(auto.asm["tir"]) and auto.asm["ptx"] == off.asm["ptx"]
    top_auto, top_off = _fp8_fwd(monkeypatch, "auto", "1"), _fp8_fwd(monkeypatch, "off", "1")
    assert len(marked(top_auto.asm["tir"])) == 1 and not marked(top_off.asm["tir"])
    moves = lambda s: len(re.findall(r"\bMOV R\d+, R24\b", s))  # noqa: E731
    rz = lambda s: sum("QGMMA" in ln and "RZ, !UPT" in ln for ln in s.splitlines())  # noqa: E731
    assert (moves(top_off.asm["sass"]), rz(top_off.asm["sass"])) == (63, 0)
    assert (moves(top_auto.asm["sass"]), rz(top_auto.asm["sass"])) == (0, 1)
    assert top_auto.n_spills == 0 and top_auto.n_regs <= 168
