"""exp2 on two pipes (issue 27, docs/attention.md "fp8: exponentials on two pipes"): ``mark_exp2_poly`` marks
the softmax ``exp2`` ops that only feed fp8 values and sums (golden IR), the polynomial lowering
(``codegen/elementwise.py: exp2_poly_f32``) is run on the host over a dense sweep against ``math.exp2``, and
fp8 attention's key loop on sm_90a issues the fraction of its ``MUFU.EX2`` the knob moves to the FMA pipe.
"""
import ctypes
import re
import math

import numpy as np
import pytest

import kernelc
import kernelc.language as kl
from kernelc.compiler import compiler as C
from kernelc.compiler.codegen import elementwise as EW
from kernelc.compiler.compiler import _base_function
from kernelc.compiler.frontend import generate_ir
from kernelc.compiler.ir.core import Op
from kernelc.compiler.ir.printer import print_function
from kernelc.compiler.ir.verifier import VerificationError, verify
from kernelc.compiler.pass_manager import PassContext, run_passes
from kernelc.compiler.passes.exp2_poly import mark_exp2_poly
from tests.compiler.filecheck import filecheck
from tests.compiler.test_fp8_attention import _fa3_fp8, _key_loop


@kernelc.jit
def softmax_fp8_kernel(x_ptr, p_ptr, l_ptr, e_ptr, BLOCK: kl.constexpr):
    r = kl.arange(0, BLOCK)
    x = kl.load(x_ptr + r[:, None] * BLOCK + r[None, :])
    p = kl.math.exp2(x - kl.max(x, 1)[:, None])  # softmax form, read by an fp8 cast and a sum: marked
    kl.store(p_ptr + r[:, None] * BLOCK + r[None, :], p.to(p_ptr.dtype.element_ty))
    kl.store(l_ptr + r, kl.sum(p, 1))
    q = kl.math.exp2(x - 1.0)  # not against a row maximum: left alone
    kl.store(p_ptr + BLOCK * BLOCK + r[:, None] * BLOCK + r[None, :], q.to(p_ptr.dtype.element_ty))
    y = x + 1.0
    s = kl.math.exp2(y - kl.max(y, 1)[:, None])  # softmax form, but stored in fp32: left alone
    kl.store(e_ptr + r[:, None] * BLOCK + r[None, :], s)


SIG = dict(x_ptr="*fp32", p_ptr="*fp8e4nv", l_ptr="*fp32", e_ptr="*fp32")


def _ir_around(monkeypatch, fraction="1/4", degree="3", block=64, num_warps=4):
    if fraction is None:
        monkeypatch.delenv("KERNELC_EXP2_POLY", raising=False)
    else:
        monkeypatch.setenv("KERNELC_EXP2_POLY", fraction)
    monkeypatch.setenv("KERNELC_EXP2_POLY_DEGREE", degree)
    names = [p.name for p in C.TILE_PASSES]
    i = names.index("mark_exp2_poly")
    fn, _ = generate_ir(_base_function(softmax_fp8_kernel), SIG, dict(BLOCK=block), {}, ())
    run_passes(fn, C.TILE_PASSES[:i], PassContext("sm_90a", (9, 0), num_warps))
    before = print_function(fn, show_loc=False)
    run_passes(fn, C.TILE_PASSES[i:i + 1], PassContext("sm_90a", (9, 0), num_warps))
    return before, print_function(fn, show_loc=False)


def test_softmax_exp2_feeding_fp8_and_a_sum_is_marked_golden(monkeypatch):
    before, after = _ir_around(monkeypatch)
    assert "poly" not in before
    filecheck(after, """
        CHECK: [[M:%\\d+]] = reduce [[X:%\\d+]] {axis=1, kind='max'}
        CHECK: [[D:%\\d+]] = fsub [[X]], {{%\\d+}}
        CHECK-NEXT: [[P:%\\d+]] = exp2 [[D]] {ftz=True, poly={num=1, den=4, degree=3}} : <64x64xfp32>
        CHECK: cast [[P]] {rounding='rtne', nan_positive=True} : <64x64xfp8e4nv>
        CHECK: reduce [[P]] {axis=1, kind='add'}
        CHECK: [[Q:%\\d+]] = exp2 {{%\\d+}} {ftz=True} : <64x64xfp32>
        CHECK: cast [[Q]]
        CHECK: [[M2:%\\d+]] = reduce {{%\\d+}} {axis=1, kind='max'}
        CHECK: [[S:%\\d+]] = exp2 {{%\\d+}} {ftz=True} : <64x64xfp32>
        CHECK: store {{%\\d+}}, [[S]]
    """)
    assert after.count("poly=") == 1
    # the rest of the IR is unchanged
    assert after.replace(", poly={num=1, den=4, degree=3}", "") == before


@pytest.mark.parametrize("fraction,degree,attr", [("1/2", "2", "{num=1, den=2, degree=2}"),
                                                  ("3/8", "3", "{num=3, den=8, degree=3}"),
                                                  ("1", "3", "{num=1, den=1, degree=3}")])
def test_the_knobs_are_written_into_the_mark(monkeypatch, fraction, degree, attr):
    _, after = _ir_around(monkeypatch, fraction, degree)
    assert after.count(f"poly={attr}") == 1


def test_knob_zero_leaves_the_ir_as_it_was(monkeypatch):
    before, after = _ir_around(monkeypatch, "0")
    assert before == after and "poly" not in after


@pytest.mark.parametrize("fraction", [None, "auto"])  # the default is auto
def test_auto_marks_where_a_thread_computes_64_exponentials_golden(monkeypatch, fraction):
    """``auto``: 1/8 where a thread computes at least 64 of the exp2's elements (128x128 at 4 or 8 warps: 128 and
    64 a thread) and no dot reads the fp8 P (here it is stored), nothing below (64x64 at 4 warps: 32)."""
    before, after = _ir_around(monkeypatch, fraction, block=128, num_warps=8)
    filecheck(after, """
        CHECK: [[M:%\\d+]] = reduce [[X:%\\d+]] {axis=1, kind='max'}
        CHECK: [[D:%\\d+]] = fsub [[X]], {{%\\d+}}
        CHECK-NEXT: [[P:%\\d+]] = exp2 [[D]] {ftz=True, poly={num=1, den=8, degree=3}} : <128x128xfp32>
        CHECK: cast [[P]] {rounding='rtne', nan_positive=True} : <128x128xfp8e4nv>
        CHECK: [[Q:%\\d+]] = exp2 {{%\\d+}} {ftz=True} : <128x128xfp32>
    """)
    assert after.replace(", poly={num=1, den=8, degree=3}", "") == before and after.count("poly=") == 1
    _, after = _ir_around(monkeypatch, fraction, block=128, num_warps=4)
    assert after.count("poly={num=1, den=8, degree=3}") == 1
    before, after = _ir_around(monkeypatch, fraction, block=64, num_warps=4)
    assert before == after and "poly" not in after
    # an explicit fraction still marks the small tile
    _, after = _ir_around(monkeypatch, "1/8", block=64, num_warps=4)
    assert after.count("poly={num=1, den=8, degree=3}") == 1


def test_auto_needs_the_warp_count():
    with pytest.raises(ValueError, match="'auto' needs num_warps"):
        mark_exp2_poly(None, "auto", 3)


def test_the_verifier_checks_the_mark(monkeypatch):
    monkeypatch.setenv("KERNELC_EXP2_POLY", "1/4")
    fn, _ = generate_ir(_base_function(softmax_fp8_kernel), SIG, dict(BLOCK=64), {}, ())
    names = [p.name for p in C.TILE_PASSES]
    run_passes(fn, C.TILE_PASSES[:names.index("mark_exp2_poly") + 1], PassContext("sm_90a", (9, 0), 4))
    op = next(o for o in fn.walk() if o.name == "exp2" and "poly" in o.attrs)
    verify(fn)
    op.attrs["poly"] = {"num": 5, "den": 4, "degree": 3}
    with pytest.raises(VerificationError, match="poly must be"):
        verify(fn)
    op.attrs["poly"] = {"num": 1, "den": 4, "degree": 3}
    del op.attrs["ftz"]
    with pytest.raises(VerificationError, match="needs an fp32 exp2 with ftz"):
        verify(fn)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="bad fraction"):
        mark_exp2_poly(None, "1/4", 4)


# -- the polynomial, run on the host -----------------------------------------------------------------------


def _host_exp2(degree, nonnegative=False):
    """The LLVM IR ``exp2_poly_f32`` emits for the GPU, compiled for the host and run over an array."""
    import llvmlite.binding as llvm
    from kernelc.compiler.codegen.emitter import Emitter
    e = Emitter("host", __file__, 1)
    r = EW.exp2_poly_f32(e, "%x", degree, nonnegative)
    body = "\n".join(e.body)
    ir = ("\n".join(e.decls.values()) + f"\ndefine float @f(float %x) {{\nentry:\n{body}\n  ret float {r}\n}}\n"
          """
define void @run(ptr %in, ptr %out, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %loop]
  %pi = getelementptr float, ptr %in, i64 %i
  %x = load float, ptr %pi
  %y = call float @f(float %x)
  %po = getelementptr float, ptr %out, i64 %i
  store float %y, ptr %po
  %i1 = add i64 %i, 1
  %c = icmp ult i64 %i1, %n
  br i1 %c, label %loop, label %done
done:
  ret void
}
""")
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    mod = llvm.parse_assembly(ir)
    mod.verify()
    ee = llvm.create_mcjit_compiler(mod, llvm.Target.from_default_triple().create_target_machine())
    ee.finalize_object()
    run = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(ee.get_function_address("run"))

    def f(x):
        x = np.ascontiguousarray(x, np.float32)
        out = np.empty_like(x)
        run(x.ctypes.data, out.ctypes.data, x.size)
        return out
    f._keep = ee
    return f


@pytest.mark.parametrize("degree", [2, 3])
def test_polynomial_exp2_error_on_a_dense_sweep(degree):
    """Relative error against math.exp2 below EXP2_POLY_MAX_REL_ERROR (2^-13.2 at degree 3, 2^-8.9 at degree 2)
    wherever 2^x is a normal fp32 (x >= -126), over one in 251 fp32 bit patterns in [-1, 1] (subnormals
    included) and a dense grid down to -126 (incl.
    the ties of the rounding at k + 1/2 and the integers); results below 2^-126 are 0 or below 2^-126, as
    ex2.approx.ftz's 0; -inf and x <= -127 give exactly +0; NaN gives 0 (the clamp's maxnum)."""
    f = _host_exp2(degree)
    bound = EW.EXP2_POLY_MAX_REL_ERROR[degree]
    bits = np.arange(0, np.float32(1.0).view(np.uint32) + 1, 251, dtype=np.uint32)  # fp32 in [0, 1], 1 in 251
    every = np.concatenate([bits.view(np.float32), (bits | np.uint32(0x80000000)).view(np.float32)])
    grid = np.linspace(-126.0, 8.0, 1 << 22, dtype=np.float32)
    ties = np.arange(-126, 9, dtype=np.float32)
    x = np.concatenate([every, grid, ties, ties + np.float32(0.5), ties - np.float32(0.5),
                        np.nextafter(ties + np.float32(0.5), np.float32(-200)),
                        np.nextafter(ties + np.float32(0.5), np.float32(200))])
    x = x[(x >= -126) & (x < 127)]
    y = f(x).astype(np.float64)
    want = np.exp2(x.astype(np.float64))
    rel = np.abs(y / want - 1)
    assert rel.max() < bound, (rel.max(), x[np.argmax(rel)])
    assert rel.max() > bound / 8  # the bound is tight: a wrong coefficient table would not pass by luck
    # spot values against math.exp2
    for v in (0.0, -0.5, 0.5, -1.0, -10.25, -126.0, 3.75):
        assert abs(float(f(np.array([v]))[0]) / math.exp2(v) - 1) < bound
    # FTZ region and the clamp
    low = np.concatenate([np.linspace(-127.0, -126.0, 4097, dtype=np.float32)[:-1],
                          np.array([-127.0, -128.0, -200.0, -1e30, -np.inf, -3e38], np.float32)])
    yl = f(low)
    assert (yl >= 0).all() and (yl < 2.0 ** -126).all()
    assert (f(np.array([-127.0, -127.5, -150.0, -1e30, -np.inf], np.float32)) == 0).all()
    assert f(np.array([np.nan], np.float32))[0] == 0


@pytest.mark.parametrize("degree", [2, 3])
def test_nonnegative_polynomial_exp2_is_positive_everywhere(degree):
    """``nonnegative`` (passes/fp8_bounds.py): the same values below 127, 2^127 from 127 on, never negative or NaN;
    without it the exponent add carries into the sign bit past 127.5."""
    f, g = _host_exp2(degree, nonnegative=True), _host_exp2(degree)
    x = np.linspace(-130.0, 126.99, 1 << 16, dtype=np.float32)
    assert (f(x) == g(x)).all()
    high = np.array([127.0, 127.49, 127.5, 128.0, 200.0, 1e30, np.inf, 3e38], np.float32)
    assert (f(high) == np.float32(2.0 ** 127)).all()
    assert (g(np.array([129.0, 200.0], np.float32)) < 0).any()  # what the clamp is for
    every = np.arange(0, 1 << 32, 4093, dtype=np.uint64).astype(np.uint32).view(np.float32)
    y = f(every)
    assert (y >= 0).all() and not np.isnan(y).any()


@pytest.mark.parametrize("degree", [2, 3])
def test_polynomial_exp2_rounds_to_the_same_e4m3_almost_everywhere(degree):
    """What P needs: rounded to e4m3, the polynomial's 2^x is MUFU's (modelled as exact) or one code away."""
    import torch
    f = _host_exp2(degree)
    x = np.linspace(-12.0, 0.0, 1 << 20, dtype=np.float32)
    got = torch.from_numpy(f(x)).to(torch.float8_e4m3fn).view(torch.uint8).numpy().astype(np.int32)
    want = torch.from_numpy(np.exp2(x.astype(np.float64)).astype(np.float32)).to(
        torch.float8_e4m3fn).view(torch.uint8).numpy().astype(np.int32)
    assert np.abs(got - want).max() <= 1
    assert (got != want).mean() < (0.02 if degree == 2 else 0.001)


def test_poly_registers_are_spread_evenly():
    assert EW.poly_registers(8, 1, 4) == [False, False, False, True] * 2
    assert EW.poly_registers(4, 1, 2) == [False, True] * 2
    assert sum(EW.poly_registers(64, 3, 8)) == 24 and sum(EW.poly_registers(64, 1, 1)) == 64


# -- fp8 attention's key loop on sm_90a ------------------------------------------------------------------


@pytest.mark.parametrize("fraction,D,causal", [("1/4", 128, False), ("1/2", 64, True), (None, 128, True)])
def test_fa3_fp8_key_loop_moves_the_fraction_off_mufu(monkeypatch, fraction, D, causal):
    """P's 64 exponentials a thread and key block: ``fraction`` of them (None: the default, 1/8) leave MUFU.EX2
    for 3 FADD, 3 FFMA, an FMNMX and a LEA each; alpha's two stay on MUFU; 0 spills."""
    if fraction is None:
        monkeypatch.delenv("KERNELC_EXP2_POLY", raising=False)
        fraction = "1/8"
    else:
        monkeypatch.setenv("KERNELC_EXP2_POLY", fraction)
    ck = _fa3_fp8(D, causal)
    assert ck.n_spills == 0
    tir = ck.asm["tir"]
    assert tir.count("poly=") == 2  # the first block's P and the loop's P, not alpha
    ops = _key_loop(ck.asm["sass"])
    count = lambda p: sum(o.startswith(p) for o in ops)  # noqa: E731
    moved = 64 * int(fraction.split("/")[0]) // int(fraction.split("/")[1])
    assert count("MUFU.EX2") == 66 - moved
    assert count("LEA") >= moved
    assert count("FFMA") >= 66 + 3 * moved


def _pointer_fp8_loop(monkeypatch, fraction, **config):
    """examples/kernels/attention.py's fp8 forward (e5m2, D=64, non-causal): its key loop's path taken when no row
    overflows (tests/compiler/test_fp8_bounds.py)."""
    from tests.compiler.test_fp8_bounds import _key_loop_paths, _pointer_fp8_forward
    if fraction is None:
        monkeypatch.delenv("KERNELC_EXP2_POLY", raising=False)
    else:
        monkeypatch.setenv("KERNELC_EXP2_POLY", fraction)
    ck = _pointer_fp8_forward("fp8e5", 64, False, **config)
    assert ck.n_spills == 0
    return [re.sub(r"^@!?U?P\w+\s+", "", x).split()[0] for x in _key_loop_paths(ck.asm["sass"])[1]]


def test_auto_keeps_a_64x64_fp8_key_loop_on_mufu(monkeypatch):
    """2026-11-28 (CPU, sm_90a): a 64x64 key block at 4 warps, tutorial 06's fp8 pick. Each thread computes 32 of
    P's exponentials and 2 of alpha's a trip; with 1/8 on the FMA pipe the path taken grows by ~8 instructions per
    moved exponential (tutorial 06's loop: 324 -> 357, Triton 3.6's 317). ``auto`` keeps all 34 on MUFU, as 0
    does."""
    cfg = dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=3)
    auto = _pointer_fp8_loop(monkeypatch, None, **cfg)
    zero = _pointer_fp8_loop(monkeypatch, "0", **cfg)
    eighth = _pointer_fp8_loop(monkeypatch, "1/8", **cfg)
    mufu = lambda ops: sum(o.startswith("MUFU.EX2") for o in ops)  # noqa: E731
    assert mufu(auto) == mufu(zero) == 34 and mufu(eighth) == 30
    assert auto == zero
    assert len(eighth) >= len(auto) + 4 * 7, (len(eighth), len(auto))


def test_auto_keeps_the_same_trip_order_on_mufu_at_128x64(monkeypatch):
    """The same kernel at 128x64, 4 warps, 3 stages (its D=64 default until fp813 made it 64x128, 2026-11-28: 64
    of P's exponentials and 4 of alpha's a thread). A dot reads the fp8 P in the same trip (tutorial 06's order),
    so ``auto`` marks nothing: all 68 on MUFU, the loop of ``0`` (H100 2026-11-28: 1/8 was 1.5-6% slower in this
    order). 1/8 moves 8."""
    cfg = dict(BLOCK_M=128, BLOCK_N=64, num_warps=4, num_stages=3)
    auto = _pointer_fp8_loop(monkeypatch, None, **cfg)
    zero = _pointer_fp8_loop(monkeypatch, "0", **cfg)
    eighth = _pointer_fp8_loop(monkeypatch, "1/8", **cfg)
    mufu = lambda ops: sum(o.startswith("MUFU.EX2") for o in ops)  # noqa: E731
    assert auto == zero and mufu(auto) == 68 and mufu(eighth) == 60


def test_auto_marks_by_the_order_of_p(monkeypatch):
    """The tile IR: under ``auto`` the pointer fp8 forward's P (a dot reads its cast in the same trip) has no
    ``poly``; FlashAttention-3's P (cast, carried to the next trip's dot) has 1/8, in the loop and before it."""
    from tests.compiler.test_fp8_bounds import _pointer_fp8_forward
    monkeypatch.delenv("KERNELC_EXP2_POLY", raising=False)
    tir = _pointer_fp8_forward("fp8e5", 64, False).asm["tir"]
    assert "exp2" in tir and "poly=" not in tir
    assert _fa3_fp8(128, False).asm["tir"].count("poly={num=1, den=8, degree=3}") == 2
