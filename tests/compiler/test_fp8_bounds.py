"""passes/fp8_bounds.py (issue 20, tutorial 06's fp8 forward): an e5m2 cast of an exp2 result that the block also
sums gets the sum as its overflow bound (golden IR); what the verifier accepts; what the lowering makes of it
(one vote and a branch around the overflow fix-up; the fix-up's arithmetic is tests/compiler/test_fp8_narrowing.py);
and tutorial 06's fp8 key loop on sm_90a (docs/attention.md, "fp8 narrowing at Triton's cost")."""
import re

import pytest

import kernelc
import kernelc.language as kl
from kernelc.compiler import compiler as C
from kernelc.compiler.compiler import _base_function
from kernelc.compiler.frontend import generate_ir
from kernelc.compiler.ir.printer import print_function
from kernelc.compiler.ir.verifier import VerificationError, verify
from kernelc.compiler.pass_manager import PassContext, run_passes
from tests.compiler.filecheck import filecheck


@kernelc.jit
def softmax_fp8_kernel(x_ptr, p_ptr, l_ptr, BLOCK: kl.constexpr):
    r = kl.arange(0, BLOCK)
    x = kl.load(x_ptr + r[:, None] * BLOCK + r[None, :])
    p = kl.math.exp2(x - kl.max(x, 1)[:, None])
    kl.store(l_ptr + r, kl.sum(p, 1))  # the row sum, before the cast: bounds it
    kl.store(p_ptr + r[:, None] * BLOCK + r[None, :], p.to(p_ptr.dtype.element_ty))
    q = kl.math.exp2(x)  # no sum of q: no bound
    kl.store(p_ptr + BLOCK * BLOCK + r[:, None] * BLOCK + r[None, :], q.to(p_ptr.dtype.element_ty))
    y = x * 2.0  # summed, but may be negative: no bound
    kl.store(l_ptr + BLOCK + r, kl.sum(y, 1))
    kl.store(p_ptr + 2 * BLOCK * BLOCK + r[:, None] * BLOCK + r[None, :], y.to(p_ptr.dtype.element_ty))
    s = kl.math.exp2(x + 1.0)  # summed only after the cast: no bound
    kl.store(p_ptr + 3 * BLOCK * BLOCK + r[:, None] * BLOCK + r[None, :], s.to(p_ptr.dtype.element_ty))
    kl.store(l_ptr + 2 * BLOCK + r, kl.sum(s, 0))


SIG = dict(x_ptr="*fp32", p_ptr="*fp8e5", l_ptr="*fp32")


def _ir_around(sig=SIG, name="mark_fp8_overflow_bounds"):
    names = [p.name for p in C.TILE_PASSES]
    fn, _ = generate_ir(_base_function(softmax_fp8_kernel), sig, dict(BLOCK=64), {}, ())
    run_passes(fn, C.TILE_PASSES[:names.index(name)], PassContext("sm_90a", (9, 0), 4))
    before = print_function(fn, show_loc=False)
    run_passes(fn, C.TILE_PASSES[names.index(name):names.index(name) + 1], PassContext("sm_90a", (9, 0), 4))
    return fn, before, print_function(fn, show_loc=False)


def test_e5m2_cast_of_a_summed_exp2_gets_the_sum_as_its_bound_golden(monkeypatch):
    monkeypatch.setenv("KERNELC_FP8_SELF_BOUND", "0")  # the sum rule alone
    _, before, after = _ir_around()
    assert "overflow_bound" not in before and "nonnegative" not in before
    filecheck(after, """
        CHECK: [[P:%\\d+]] = exp2 {{%\\d+}} {ftz=True, nonnegative=True} : <64x64xfp32>
        CHECK: [[L:%\\d+]] = reduce [[P]] {axis=1, kind='add'} : <64xfp32>
        CHECK: [[E:%\\d+]] = expand_dims [[L]] {axis=1} : <64x1xfp32>
        CHECK-NEXT: [[B:%\\d+]] = broadcast [[E]] : <64x64xfp32>
        CHECK-NEXT: cast [[P]], [[B]] {rounding='rtne', nan_positive=True, overflow_bound=True} : <64x64xfp8e5>
        CHECK: [[Q:%\\d+]] = exp2 {{%\\d+}} {ftz=True} : <64x64xfp32>
        CHECK: cast [[Q]] {rounding='rtne', nan_positive=True} : <64x64xfp8e5>
        CHECK: [[Y:%\\d+]] = fmul
        CHECK: reduce [[Y]] {axis=1, kind='add'}
        CHECK: cast [[Y]] {rounding='rtne'} : <64x64xfp8e5>
        CHECK: [[S:%\\d+]] = exp2 {{%\\d+}} {ftz=True} : <64x64xfp32>
        CHECK: cast [[S]] {rounding='rtne', nan_positive=True} : <64x64xfp8e5>
        CHECK: reduce [[S]] {axis=0, kind='add'}
    """)
    assert after.count("overflow_bound") == 1 and after.count("nonnegative") == 1
    verify(_ir_around()[0])


def test_every_other_e5m2_tile_cast_bounds_itself_golden():
    """KERNELC_FP8_SELF_BOUND (default): the casts the sum rule leaves get overflow_bound='self', one operand."""
    fn, before, after = _ir_around()
    assert "overflow_bound" not in before
    filecheck(after, """
        CHECK: [[P:%\\d+]] = exp2 {{%\\d+}} {ftz=True, nonnegative=True} : <64x64xfp32>
        CHECK: cast [[P]], {{%\\d+}} {rounding='rtne', nan_positive=True, overflow_bound=True} : <64x64xfp8e5>
        CHECK: [[Q:%\\d+]] = exp2 {{%\\d+}} {ftz=True} : <64x64xfp32>
        CHECK: cast [[Q]] {rounding='rtne', nan_positive=True, overflow_bound='self'} : <64x64xfp8e5>
        CHECK: [[Y:%\\d+]] = fmul
        CHECK: cast [[Y]] {rounding='rtne', overflow_bound='self'} : <64x64xfp8e5>
        CHECK: [[S:%\\d+]] = exp2 {{%\\d+}} {ftz=True} : <64x64xfp32>
        CHECK: cast [[S]] {rounding='rtne', nan_positive=True, overflow_bound='self'} : <64x64xfp8e5>
    """)
    assert after.count("overflow_bound='self'") == 3
    verify(fn)


def test_e4m3_casts_need_no_bound():
    """e4m3fn saturates in torch as satfinite does: no overflow fix-up to skip, the IR is left as it was."""
    _, before, after = _ir_around(dict(SIG, p_ptr="*fp8e4nv"))
    assert before == after


def test_the_verifier_checks_the_bound():
    fn, _, _ = _ir_around()
    op = next(o for o in fn.walk() if o.name == "cast" and o.attrs.get("overflow_bound"))
    b = op.operands.pop()
    with pytest.raises(VerificationError, match="overflow_bound and a second operand"):
        verify(fn)
    op.operands.append(b)
    del op.attrs["overflow_bound"]
    with pytest.raises(VerificationError, match="overflow_bound and a second operand"):
        verify(fn)
    op.attrs["overflow_bound"] = True
    res_ty = op.results[0].type
    from kernelc.language.dtypes import block_type, dtype
    op.results[0].type = block_type(dtype("fp8e4nv"), res_ty.shape)
    with pytest.raises(VerificationError, match="needs an fp8 type with infinities"):
        verify(fn)


def test_the_bounded_cast_branches_once_around_the_fixup(monkeypatch):
    monkeypatch.setenv("KERNELC_FP8_SELF_BOUND", "0")
    ck = kernelc.compile(softmax_fp8_kernel, SIG, dict(BLOCK=64), target="sm_90a", num_warps=4)
    llir = ck.asm["llir"]
    assert llir.count("@llvm.nvvm.vote.any.sync(i32 -1") == 1
    assert len(re.findall(r"br i1 %\S+, label %fp8_overflow\d+, label %fp8_narrowed\d+", llir)) == 1
    # the bounded cast (16 pairs a thread) and the three unbounded ones all fix up with sub.f32; the bounded
    # cast only in its branch
    block = llir.split("fp8_overflow")[2].split("fp8_narrowed")[0]
    assert block.count("sub.f32") == 32


def _fixup_blocks(llir):
    """The LLVM IR of each fp8 fix-up branch, and what is outside them."""
    parts = re.split(r"\n(fp8_overflow\d+):|\n(fp8_narrowed\d+):", llir)
    inside, outside, cur = [], [], None
    for p in parts:
        if p is None:
            continue
        if p.startswith("fp8_overflow"):
            cur = "in"
        elif p.startswith("fp8_narrowed"):
            cur = "out"
        elif cur == "in":
            inside.append(p)
        else:
            outside.append(p)
    return inside, "".join(outside)


def test_self_bounded_casts_keep_every_fixup_in_their_branch():
    """Each of the four casts (16 pairs a thread) branches once; the three self-bounded ones test |x| (abs.f32) and
    do both fix-ups (overflow: sub.f32; NaN signs: prmt) only in their branch, so the path taken has neither."""
    ck = kernelc.compile(softmax_fp8_kernel, SIG, dict(BLOCK=64), target="sm_90a", num_warps=4)
    llir = ck.asm["llir"]
    assert llir.count("@llvm.nvvm.vote.any.sync(i32 -1") == 4
    inside, outside = _fixup_blocks(llir)
    assert len(inside) == 4
    assert "sub.f32" not in outside and sum(b.count("sub.f32") for b in inside) == 4 * 32
    # a byte permute a pair for the overflow fix-up; NaN signs only for y (x * 2.0 may be a negative NaN: one more
    # a pair), in its branch; none on the path taken
    assert [b.count("prmt.b32") for b in inside] == [16, 16, 32, 16] and "prmt.b32" not in outside
    assert outside.count("abs.f32") == 3 * 32  # the test: every value of the three self-bounded casts


# -- an attention key loop: the e5m2 rounding of P costs about what e4m3's does --------------------------------


def _key_loop_paths(sass):
    """The key loop (a backward branch over two WARPGROUP.ARRIVE and QGMMAs): all its instructions, the ones on
    the path where no vote says overflow (each VOTE.ANY's branch skips its fix-up block), the skipped ones, and
    the number of votes."""
    ins, labels = [], {}
    for ln in sass.splitlines():
        if m := re.match(r"\s*(\.L_x_\d+):", ln):
            labels[m.group(1)] = len(ins)
        elif m := re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;?\s*(/\*.*)?$", ln):
            ins.append(m.group(1).rstrip(" ;"))
    op = lambda x: re.sub(r"^@!?U?P\w+\s+", "", x).split()[0]  # noqa: E731
    for i, x in enumerate(ins):
        m = re.search(r"\bBRA\b.*`\((\.L_x_\d+)\)", x)
        if not (m and labels.get(m.group(1), i) < i):
            continue
        s = labels[m.group(1)]
        body = [op(y) for y in ins[s:i + 1]]
        if body.count("WARPGROUP.ARRIVE") != 2 or not any(o.startswith("QGMMA") for o in body):
            continue
        votes = [k for k in range(s, i) if op(ins[k]) == "VOTE.ANY"]
        skipped = set()
        for v in votes:
            k = next(k for k in range(v + 1, i) if op(ins[k]) == "BRA")
            t = labels[re.search(r"`\((\.L_x_\d+)\)", ins[k]).group(1)]
            assert k < t <= i, "the vote's branch skips forward within the loop"
            skipped |= set(range(k + 1, t))
        return (ins[s:i + 1], [ins[k] for k in range(s, i + 1) if k not in skipped], [ins[k] for k in sorted(skipped)],
                len(votes))
    raise AssertionError("no key loop with two fp8 dots")


def _pointer_fp8_forward(io, D, causal, **overrides):
    from examples.kernels import attention as A
    sig = dict(Q="*" + io, K="*" + io, V="*" + io, Out="*fp16", LSE="*fp32", QScale="*fp32",
               KScale="*fp32", VScale="*fp32", sm_scale="fp32")
    for a in "qkvo":
        for b in ("z", "h", "m" if a in "qo" else "n", "k"):
            sig[f"stride_{a}{b}"] = "i32"
    sig.update(H="i32", N_CTX="i32")
    cfg = dict(A.fwd_config(D, fp8=True, **overrides))
    w, s = cfg.pop("num_warps"), cfg.pop("num_stages")
    return kernelc.compile(A.attn_fwd_lse_kernel, sig, dict(HEAD_DIM=D, CAUSAL=causal, STORE_LSE=False, FP8=True, **cfg),
                           target="sm_90a", num_warps=w, num_stages=s, divisibility={n: 16 for n in sig},
                           equal_to_1=("stride_qk", "stride_kk", "stride_ok", "stride_vn"))


@pytest.mark.parametrize("D,causal", [(128, False), (64, True)])
def test_e5m2_attention_key_loop_pays_the_fixup_only_on_overflow(D, causal):
    """examples/kernels/attention.py's fp8 forward with e5m2 inputs (P rounded to e5m2, summed first), 2026-11-27:
    the key loop holds one vote; all 64 FADDs of the overflow test (32 cvt pairs a thread) are in the block its
    branch skips (144 instructions); the path taken is 644 (D=128) / 684 (D=64 causal) instructions against 629 / 651
    for the same kernel in e4m3, which has no fix-up at all (main: the e5m2 fix-up on every trip, ~13 a pair)."""
    e5 = _pointer_fp8_forward("fp8e5", D, causal)
    e4 = _pointer_fp8_forward("fp8e4nv", D, causal)
    assert "overflow_bound=True" in e5.asm["tir"] and e5.n_spills == 0
    whole, taken, skipped, votes = _key_loop_paths(e5.asm["sass"])
    assert votes == 1
    assert sum("61439.99" in x for x in whole) == sum("61439.99" in x for x in skipped) == 64
    assert len(skipped) >= 4 * 32
    e4_loop = _key_loop_paths(e4.asm["sass"])[0]
    assert len(taken) <= len(e4_loop) + 40, (len(taken), len(e4_loop))
