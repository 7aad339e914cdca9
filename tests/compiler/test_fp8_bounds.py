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


def test_e5m2_cast_of_a_summed_exp2_gets_the_sum_as_its_bound_golden():
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


def test_the_bounded_cast_branches_once_around_the_fixup():
    ck = kernelc.compile(softmax_fp8_kernel, SIG, dict(BLOCK=64), target="sm_90a", num_warps=4)
    llir = ck.asm["llir"]
    assert llir.count("@llvm.nvvm.vote.any.sync(i32 -1") == 1
    assert len(re.findall(r"br i1 %\S+, label %fp8_overflow\d+, label %fp8_narrowed\d+", llir)) == 1
    # the bounded cast (16 pairs a thread) and the three unbounded ones all fix up with sub.f32; the bounded
    # cast only in its branch
    block = llir.split("fp8_overflow")[2].split("fp8_narrowed")[0]
    assert block.count("sub.f32") == 32
