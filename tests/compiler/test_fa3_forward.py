"""Issue 27, FlashAttention-3's forward on CPU (docs/attention.md, "FlashAttention-3's order"): what kept the
FA3-order kernel from overlapping its softmax with the tensor cores, fixed in the compiler, checked in the
IR and in sm_90a SASS.

- ``narrow_loop_carries`` (golden IR, and the IR evaluated before/after): P is carried in fp16, not fp32;
- ``schedule_wgmma``'s ``pin_wait`` and ``warp_specialize``'s setmaxnreg ``auto``: only FA3's order gets them;
- the SASS of the loop: the whole softmax runs between ``WARPGROUP.DEPBAR.LE 1`` and ``.LE 0`` (with the
  pin off, ptxas hoists the second wait to the first shuffle: the test can fail);
- ``exp2`` is one MUFU.EX2 (``KERNELC_EXP2_FTZ``), as in Triton 3.6's tutorial 06.
"""
import re

import numpy as np
import pytest

import kernelc
import kernelc.language as kl
from kernelc.compiler import compiler as C
from kernelc.compiler.compiler import _base_function
from kernelc.compiler.frontend import generate_ir
from kernelc.compiler.ir.core import Op
from kernelc.compiler.ir.printer import print_function
from kernelc.compiler.ir.verifier import VerificationError, verify
from kernelc.compiler.pass_manager import PassContext, run_passes
from kernelc.compiler.backend.ptxas import ptxas_binary
from examples.kernels import attention_fa3, attention_tma
from tests.compiler import ir_eval
from tests.compiler.filecheck import filecheck
from tests.compiler.tma_kernels import attn_fa3_order

needs_ptxas = pytest.mark.skipif(ptxas_binary() is None,
                                 reason="no standalone ptxas: nvJitLink ignores setmaxnreg (C7504)")


@kernelc.jit
def carry_kernel(a_ptr, b_ptr, c_ptr, n, BLOCK: kl.constexpr, VARIANT: kl.constexpr):
    i = kl.arange(0, BLOCK)
    offs = i[:, None] * BLOCK + i[None, :]
    x = kl.load(a_ptr + offs)
    b = kl.load(b_ptr + offs)
    acc = kl.zeros([BLOCK, BLOCK], dtype=kl.float32)
    s = kl.zeros([BLOCK, BLOCK], dtype=kl.float32)
    for k in range(0, n):
        acc = kl.dot(x.to(kl.float16), b, acc)
        if VARIANT == "fp32_read":  # x is read in fp32 too: it stays fp32
            s = s + x
        x = acc * 0.75 + s  # the next x is computed from other values: only the cast reads x
    acc = kl.dot(x.to(kl.float16), b, acc) + s
    kl.store(c_ptr + offs, acc)


CARRY_SIG = dict(a_ptr="*fp32", b_ptr="*fp16", c_ptr="*fp32", n="i32")


def _around(variant, name="narrow_loop_carries"):
    """(function before the pass, IR text before, IR text after) of carry_kernel on sm_90a."""
    fn, _ = generate_ir(_base_function(carry_kernel), CARRY_SIG, dict(BLOCK=16, VARIANT=variant), {}, ())
    ctx = PassContext("sm_90a", (9, 0), 4)
    names = [p.name for p in C.TILE_PASSES]
    run_passes(fn, C.TILE_PASSES[:names.index(name)], ctx)
    before = print_function(fn, show_loc=False)
    fn2, _ = generate_ir(_base_function(carry_kernel), CARRY_SIG, dict(BLOCK=16, VARIANT=variant), {}, ())
    run_passes(fn2, C.TILE_PASSES[:names.index(name)], PassContext("sm_90a", (9, 0), 4))
    run_passes(fn2, C.TILE_PASSES[names.index(name):names.index(name) + 1], ctx)
    return fn, fn2, before, print_function(fn2, show_loc=False)


def test_a_value_read_only_through_one_cast_is_carried_cast_golden():
    _, _, before, after = _around("plain")
    filecheck(before, """
        CHECK: [[X:%\\d+]] = load {{%\\d+}} : <16x16xfp32>
        CHECK: scf.for {{.*}}, [[X]]
        CHECK-NEXT: ^body({{.*}}, [[XI:%\\d+]]: <16x16xfp32>):
        CHECK-NEXT: [[C:%\\d+]] = cast [[XI]] {rounding='rtne'} : <16x16xfp16>
        CHECK-NEXT: dot [[C]]
        CHECK: scf.yield
        CHECK: [[CO:%\\d+]] = cast {{%\\d+}} {rounding='rtne'} : <16x16xfp16>
        CHECK-NEXT: dot [[CO]]
    """)
    filecheck(after, """
        CHECK: [[X:%\\d+]] = load {{%\\d+}} : <16x16xfp32>
        CHECK: [[X16:%\\d+]] = cast [[X]] {rounding='rtne'} : <16x16xfp16>
        CHECK-NEXT: {{.*}} = scf.for {{.*}}, [[X16]] {{.*}}<16x16xfp16>
        CHECK-NEXT: ^body({{.*}}, [[XI:%\\d+]]: <16x16xfp16>):
        CHECK-NOT: cast
        CHECK: dot [[XI]]
        CHECK: [[N:%\\d+]] = fadd
        CHECK-NEXT: [[N16:%\\d+]] = cast [[N]] {rounding='rtne'} : <16x16xfp16>
        CHECK-NEXT: scf.yield {{.*}}[[N16]]
        CHECK-NOT: cast
        CHECK: dot
    """)


def test_the_narrowed_loop_computes_the_same_values(monkeypatch):
    """The IR evaluated in numpy (casts to fp16 round) before and after the pass: bit-identical."""
    monkeypatch.setattr(ir_eval, "ROUND_FP16", True)
    fn, fn2, before, after = _around("plain")
    assert before != after
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(256), rng.standard_normal(256).astype(np.float16).astype(np.float64)
    outs = []
    for f in (fn, fn2):
        c = np.zeros(256)
        ir_eval.run(f, dict(a_ptr="a", b_ptr="b", c_ptr="c", n=3), {"a": a.copy(), "b": b, "c": c})
        outs.append(c)
    assert np.abs(outs[0]).max() > 1 and np.array_equal(outs[0], outs[1])


def test_a_carry_also_read_in_fp32_is_left_alone():
    _, _, before, after = _around("fp32_read")
    assert after == before


def _fa3_order(**env):
    sig = {"sm_scale": "fp32", "desc_q": "tensordesc<fp16[128, 128]>", "desc_k": "tensordesc<fp16[128, 128]>",
           "desc_v": "tensordesc<fp16[128, 128]>", "desc_o": "tensordesc<fp16[128, 128]>", "N_CTX": "i32"}
    return kernelc.compile(attn_fa3_order, sig, dict(BLOCK_M=128, BLOCK_N=128, HEAD_DIM=128), target="sm_90a",
                           num_warps=8, num_stages=2, divisibility={k: 16 for k in sig if k.startswith("desc")})


def _fwd(kernel, D=128, causal=False, dt="fp16"):
    sig = {"sm_scale": "fp32", **{f"desc_{t}": f"tensordesc<{dt}[128, {D}]>" for t in "qkvo"}, "N_CTX": "i32"}
    cx = dict(BLOCK_M=128, BLOCK_N=128, HEAD_DIM=D, CAUSAL=causal)
    if kernel is attention_fa3.attn_fwd_fa3_kernel:  # + the fp8 variant's scales (unused in fp16/bf16)
        sig.update(QScale="*fp32", KScale="*fp32", VScale="*fp32")
        cx["FP8"] = False
    return kernelc.compile(kernel, sig, cx,
                           target="sm_90a", num_warps=8, num_stages=2,
                           divisibility={k: 16 for k in sig if k.startswith("desc")})


def _dots(tir):
    return [ln for ln in tir.splitlines() if re.search(r"= dot ", ln)]


def test_only_fa3_order_gets_pinned_waits_and_setmaxnreg():
    """FA3's order: PV (issued second) is read after the softmax read QK's scores: its wait is pinned, and
    the loop's producer becomes a warpgroup that gives registers away. The FA2-order descriptor forward
    (softmax between the two dots) gets neither."""
    fa3 = _fwd(attention_fa3.attn_fwd_fa3_kernel).asm["tir"]
    loop = [d for d in _dots(fa3) if "wgmma=" in d]
    assert len(loop) == 2 and "pin_wait" not in loop[0] and "pin_wait=True" in loop[1]
    assert "setmaxnreg=True" in fa3 and "producer_warps=4" in fa3
    fa2 = _fwd(attention_tma.attn_fwd_tma_kernel).asm["tir"]
    assert "pin_wait" not in fa2 and "setmaxnreg=False" in fa2


def test_the_verifier_rejects_a_pin_on_a_dot_that_is_waited_for_at_issue():
    fn, _ = generate_ir(_base_function(carry_kernel), CARRY_SIG, dict(BLOCK=16, VARIANT="plain"), {}, ())
    dot = next(o for o in fn.walk() if o.name == "dot")
    dot.attrs["pin_wait"] = True
    with pytest.raises(VerificationError, match="pin_wait"):
        verify(fn)


# -- SASS ---------------------------------------------------------------------------------------------


def _ops(lines):
    return [re.sub(r"^\s*/\*[0-9a-f]+\*/\s*(@!?U?P\w+\s+)?", "", ln).split(" ")[0]
            for ln in lines if re.match(r"\s*/\*[0-9a-f]{4,}\*/", ln)]


def _main_loop(sass, full=False):
    """Opcodes (``full``: instruction lines) of the key loop: the backward branch whose body issues two
    dots (16 HGMMA at 128x128x128, two WARPGROUP.ARRIVE)."""
    lines = sass.splitlines()
    labels = {m.group(1): i for i, ln in enumerate(lines) if (m := re.match(r"\s*(\.L_x_\d+):", ln))}
    for i, ln in enumerate(lines):
        m = re.search(r"\bBRA\b.*?(\.L_x_\d+)", ln)
        if m and labels.get(m.group(1), i) < i:
            body = [b for b in lines[labels[m.group(1)]:i + 1] if re.match(r"\s*/\*[0-9a-f]{4,}\*/", b)]
            ops = _ops(body)
            if sum(o.startswith("HGMMA") for o in ops) == 16 and ops.count("WARPGROUP.ARRIVE") == 2:
                return body if full else ops
    raise AssertionError("no key loop with two dots in the SASS")


def _softmax_under_pv(ck):
    """MUFU.EX2 in the key loop between the wait for QK^T (``DEPBAR.LE gsb0, 0x1``: PV still in flight) and
    the wait for PV (``DEPBAR.LE gsb0, 0x0``)."""
    ops = _main_loop(ck.asm["sass"], full=True)
    n, state = 0, None
    for ln in ops:
        if "WARPGROUP.DEPBAR.LE gsb0, 0x1" in ln:
            state = "in"
        elif "WARPGROUP.DEPBAR.LE gsb0, 0x0" in ln and state == "in":
            return n
        elif state == "in" and "MUFU.EX2" in ln:
            n += 1
    raise AssertionError("no wait_group 1 followed by a wait_group 0 in the key loop")


@needs_ptxas
@pytest.mark.parametrize("kernel", ["example", "tests"])
def test_the_softmax_runs_while_pv_is_on_the_tensor_cores(kernel, monkeypatch):
    """The key loop issues QK^T(j+1) and PV(j), waits for QK^T only, and every exp of the softmax (64 per
    thread at 128x128, 8 warps) comes before the wait for PV. Without the pin ptxas moves that wait up to
    the softmax's first shuffle (FA3's order then runs serially: why it measured no faster)."""
    def build():
        return _fwd(attention_fa3.attn_fwd_fa3_kernel) if kernel == "example" else _fa3_order()
    ck = build()
    assert ck.n_spills == 0 and ck.launch_warps == 12
    assert "C7512" not in ck.artifacts.ptxas_log and "C7514" not in ck.artifacts.ptxas_log
    assert _softmax_under_pv(ck) >= 64
    monkeypatch.setenv("KERNELC_WGMMA_PIN_WAITS", "0")
    monkeypatch.setenv("KERNELC_WS_SETMAXNREG", "1")
    assert _softmax_under_pv(build()) < 8


@needs_ptxas
@pytest.mark.parametrize("D,causal,dt", [(128, True, "fp16"), (128, False, "bf16"), (64, True, "bf16"),
                                         (64, False, "fp16")])
def test_fa3_forward_compiles_without_spills(D, causal, dt):
    ck = _fwd(attention_fa3.attn_fwd_fa3_kernel, D, causal, dt)
    assert ck.n_spills == 0 and ck.launch_warps == 12
    assert "setmaxnreg.inc.sync.aligned.u32 232;" in ck.asm["ptx"]
    assert "C7512" not in ck.artifacts.ptxas_log


def test_exp2_is_one_mufu_per_element(monkeypatch):
    """Tutorial 06's loop in Triton 3.6 (sm_90a, 128x128, 8 warps): 491 instructions, 66 MUFU.EX2, no FSETP.
    Ours was 714 with a range test and two multiplies around every MUFU.EX2 (ex2 without .ftz); 695 with the
    warpgroup index on the uniform datapath (passes/uniform_warpgroups.py)."""
    ops = _main_loop(_fwd(attention_tma.attn_fwd_tma_kernel).asm["sass"])
    assert ops.count("MUFU.EX2") == 66 and not any(o.startswith("FSETP") for o in ops)
    assert len(ops) <= 530, len(ops)
    monkeypatch.setenv("KERNELC_EXP2_FTZ", "0")
    ck = _fwd(attention_tma.attn_fwd_tma_kernel)
    ops = _main_loop(ck.asm["sass"])
    assert sum(o == "FSETP.GEU.AND" for o in ops) == 66 and len(ops) >= 690
    assert "ex2.approx.ftz" not in ck.asm["ptx"]


def test_fa3_example_matches_the_reference_in_the_interpreter():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    for causal, dt in ((False, torch.float16), (True, torch.bfloat16)):
        q, k, v = (torch.randn(1, 2, 192, 32, dtype=dt) for _ in range(3))
        o = attention_fa3.attention(q, k, v, causal=causal, BLOCK_M=64, BLOCK_N=64)
        ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
        torch.testing.assert_close(o.float(), ref, atol=1e-2 if dt == torch.bfloat16 else 2e-3, rtol=1e-2)
    with pytest.raises(ValueError, match="BLOCK_M == BLOCK_N"):
        attention_fa3.attention(q, k, v, causal=True, BLOCK_M=64, BLOCK_N=32)


@pytest.mark.parametrize("diag_first", [None, True, False])
def test_tma_forward_diagonal_first_in_the_interpreter(diag_first, monkeypatch):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    monkeypatch.setattr(torch, "empty_like", lambda t, **kw: torch.full_like(t, float("nan"), **kw))
    for causal in (False, True):
        q, k, v = (torch.randn(1, 5, 192, 32, dtype=torch.float16) for _ in range(3))
        o = attention_tma.attention(q, k, v, causal=causal, BLOCK_M=64, BLOCK_N=64, diag_first=diag_first)
        ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
        torch.testing.assert_close(o.float(), ref, atol=2e-3, rtol=1e-2)
    with pytest.raises(ValueError, match="diag_first needs BLOCK_M == BLOCK_N"):
        attention_tma.attention(q, k, v, causal=True, BLOCK_M=64, BLOCK_N=32, diag_first=True)


def _tma_causal(D, diag_first, num_stages):
    sig = {"sm_scale": "fp32", **{f"desc_{t}": f"tensordesc<fp16[128, {D}]>" for t in "qkvo"}, "N_CTX": "i32"}
    return kernelc.compile(attention_tma.attn_fwd_tma_kernel, sig,
                           dict(BLOCK_M=128, BLOCK_N=128, HEAD_DIM=D, CAUSAL=True, DIAG_FIRST=diag_first),
                           target="sm_90a", num_warps=8, num_stages=num_stages,
                           divisibility={k: 16 for k in sig if k.startswith("desc")})


@pytest.mark.parametrize("D,num_stages", [(64, 2), (64, 3), (128, 2)])
def test_tma_causal_diagonal_first_has_one_key_loop(D, num_stages):
    """DIAG_FIRST: the masked diagonal block before the warp-specialised loop, no second loop after it (whose
    copies were the consumers' own): one `scf.for` fewer in the tile IR (the producer's loop and the consumers'
    are the rest), and it fits without spills."""
    one, two = _tma_causal(D, True, num_stages), _tma_causal(D, False, num_stages)
    assert one.n_spills == 0 and one.launch_warps == 9
    assert one.shared <= 232448
    assert one.asm["tir"].count("ws={") == two.asm["tir"].count("ws={") == 1
    assert (one.asm["tir"].count("scf.for"), two.asm["tir"].count("scf.for")) == (2, 3)


def test_ping_pong_turn_covers_both_dots_in_fa3_order(monkeypatch):
    """KERNELC_WS_PINGPONG=1 on FA3's order: a warpgroup waits for its turn, issues QK^T(j+1) and PV(j),
    then hands the turn over before waiting for QK^T (FlashAttention-3's schedule); in the FA2 order the
    turn still covers the first dot alone."""
    monkeypatch.setenv("KERNELC_WS_PINGPONG", "1")
    ck = _fwd(attention_fa3.attn_fwd_fa3_kernel)
    turns = [re.search(r"wgmma_turns=(\S+?)[,}]", d) for d in _dots(ck.asm["tir"])]
    assert [t.group(1) for t in turns if t] == ["'take'", "'give'"]
    body = _main_loop(ck.asm["sass"], full=True)
    events = [e for ln in body for e in ("BAR.SYNC", "WARPGROUP.ARRIVE", "BAR.ARV", "DEPBAR.LE gsb0, 0x1") if e in ln]
    assert events == ["BAR.SYNC", "WARPGROUP.ARRIVE", "WARPGROUP.ARRIVE", "BAR.ARV", "DEPBAR.LE gsb0, 0x1"], events
    assert ck.n_spills == 0
    fa2 = _fwd(attention_tma.attn_fwd_tma_kernel).asm["tir"]
    assert [d for d in _dots(fa2) if "wgmma_turns=True" in d] and "'take'" not in fa2
