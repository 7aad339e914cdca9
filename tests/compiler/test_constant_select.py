"""passes/simplify.py folds a ``select`` on a constant condition (and an integer compare of two constants), as
MLIR's arith folders do in Triton's canonicalizer. ``tl.where(COS_BS == 1, ...)`` on a constexpr is such a select
(Liger-Kernel's rope, issue 21): folded, the unchosen operand's ``pid // sl`` no longer hides that the cos/sin
rows' address depends on the program id only through ``pid % sl``, and passes/l2_reuse.py marks them (CPU)."""
import re

import numpy as np
import pytest

import kernelc
import kernelc.language as kl
from kernelc.compiler import compiler as C
from kernelc.compiler.compiler import _base_function
from kernelc.compiler.frontend import generate_ir
from kernelc.compiler.ir.printer import print_function
from kernelc.compiler.pass_manager import PassContext, run_passes
from tests.compiler import ir_eval
from tests.compiler.filecheck import filecheck


@kernelc.jit
def constant_conditions(x_ptr, y_ptr, n, FLAG: kl.constexpr, BLOCK: kl.constexpr):
    pid = kl.program_id(0)
    offs = kl.arange(0, BLOCK)
    row = kl.where(FLAG == 1, pid % n, (pid // n) * BLOCK + pid % n)     # a scalar select on a constant
    x = kl.load(x_ptr + row * BLOCK + offs)
    y = kl.where(kl.full([BLOCK], FLAG, kl.int32) == 1, x, -x)          # a compare of two constants
    y = kl.where(kl.full([BLOCK], -1, kl.int32) < 1, y, 0.0)            # signed: -1 < 1
    y = kl.where(kl.full([BLOCK], 4294967295, kl.uint32) > 1, y, 1.0)   # unsigned: 2^32 - 1 > 1
    kl.store(y_ptr + pid * BLOCK + offs, y)


CC_SIG = dict(x_ptr="*fp32", y_ptr="*fp32", n="i32")


def _simplified(flag):
    fn, _ = generate_ir(_base_function(constant_conditions), CC_SIG, dict(FLAG=flag, BLOCK=64), {}, ())
    before = print_function(fn, show_loc=False)
    passes = [p for p in C.FRONTEND_PASSES + C.TILE_PASSES if p.name == "simplify"][:1]
    run_passes(fn, passes, PassContext("sm_90a", (9, 0), 4))
    return before, print_function(fn, show_loc=False), fn


def test_a_select_on_a_constant_condition_is_its_chosen_operand_golden():
    before, after, _ = _simplified(1)
    assert before.count(" = select ") == 4 and before.count(" = cmpi ") == 3
    filecheck(before, """
        CHECK: [[T:%\\d+]] = constant {value=True} : i1
        CHECK-NEXT: = select [[T]], {{%\\d+}}, {{%\\d+}} : i32
    """)
    filecheck(after, """
        CHECK: [[PID:%\\d+]] = program_id {axis=0} : i32
        CHECK: [[REM:%\\d+]] = srem [[PID]], %n : i32
        CHECK: = mul [[REM]], {{%\\d+}} : i32
        CHECK: [[X:%\\d+]] = load {{%\\d+}} : <64xfp32>
        CHECK: store {{%\\d+}}, [[X]]
        CHECK-NEXT: return
    """)
    for gone in (" = select ", " = cmpi ", " = sdiv ", " = fneg "):
        assert gone not in after, gone


def test_a_false_condition_chooses_the_other_operand_golden():
    _, after, _ = _simplified(2)
    filecheck(after, """
        CHECK: [[Q:%\\d+]] = sdiv {{%\\d+}}, %n : i32
        CHECK: [[X:%\\d+]] = load {{%\\d+}} : <64xfp32>
        CHECK-NEXT: [[N:%\\d+]] = fneg [[X]] : <64xfp32>
        CHECK: store {{%\\d+}}, [[N]]
    """)
    assert " = select " not in after and " = cmpi " not in after


@pytest.mark.parametrize("flag", [1, 2])
def test_the_folded_ir_computes_what_the_kernel_says(flag):
    _, _, fn = _simplified(flag)
    n, progs, B = 3, 6, 64
    rows = [p % n if flag == 1 else (p // n) * B + p % n for p in range(progs)]
    x = np.arange((max(rows) + 1) * B, dtype=np.float64) + 1
    bufs = {"x": x.copy(), "y": np.full(progs * B, np.nan)}
    for p in range(progs):
        ir_eval.run(fn, dict(x_ptr="x", y_ptr="y", n=n), bufs, pid=(p, 0, 0), nprog=(progs, 1, 1))
    for p, row in enumerate(rows):
        want = x[row * B:(row + 1) * B] * (1 if flag == 1 else -1)
        np.testing.assert_array_equal(bufs["y"][p * B:(p + 1) * B], want)


# -- rope written like Liger-Kernel's _triton_rope (one program per token; cos/sin of shape (1 or bs, sl, hd)) --

@kernelc.jit
def rope_rows(q_ptr, q_stride, cos_ptr, sin_ptr, cos_stride, sl, COS_BS: kl.constexpr, H: kl.constexpr,
              HD: kl.constexpr):
    pid = kl.program_id(0).to(kl.int64)
    q_ptr = q_ptr + pid * q_stride
    b = pid // sl
    t = pid % sl
    row = kl.where(COS_BS == 1, t * cos_stride, b * (sl * cos_stride) + t * cos_stride)
    d = kl.arange(0, HD // 2)
    c = kl.load(cos_ptr + row + d)
    s = kl.load(sin_ptr + row + d)
    h = kl.arange(0, H)[:, None] * HD + d[None, :]
    x1 = kl.load(q_ptr + h)
    x2 = kl.load(q_ptr + h + HD // 2)
    kl.store(q_ptr + h, x1 * c - x2 * s)
    kl.store(q_ptr + h + HD // 2, x2 * c + x1 * s)


ROPE_SIG = dict(q_ptr="*fp32", q_stride="i32", cos_ptr="*fp32", sin_ptr="*fp32", cos_stride="i32", sl="i32")
ROPE_DIV = {n: 16 for n in ROPE_SIG if n != "sl"}


def _rope_ir(cos_bs, upto="mark_l2_reuse"):
    fn, _ = generate_ir(_base_function(rope_rows), ROPE_SIG, dict(COS_BS=cos_bs, H=4, HD=32), ROPE_DIV, ())
    passes = list(C.FRONTEND_PASSES + C.TILE_PASSES)
    i = [p.name for p in passes].index(upto)
    run_passes(fn, passes[:i + 1], PassContext("sm_90a", (9, 0), 4))
    return fn


def test_rope_with_one_cos_row_per_position_gets_the_l2_policy(monkeypatch):
    monkeypatch.setenv("KERNELC_L2_REUSE", "evict_last")
    tir = print_function(_rope_ir(1), show_loc=False)
    filecheck(tir, """
        CHECK: [[PID:%\\d+]] = program_id {axis=0} : i32
        CHECK: srem {{%\\d+}}, {{%\\d+}} : i64
        CHECK: addptr %cos_ptr
        CHECK: = load {{%\\d+}} {l2='evict_last'} : <16xfp32>
        CHECK: addptr %sin_ptr
        CHECK: = load {{%\\d+}} {l2='evict_last'} : <16xfp32>
        CHECK: = load {{%\\d+}} : <4x16xfp32>
    """)
    assert tir.count("l2='evict_last'") == 2 and " = select " not in tir and " = sdiv " not in tir
    ck = kernelc.compile(rope_rows, ROPE_SIG, dict(COS_BS=1, H=4, HD=32), target="sm_90a", num_warps=4,
                         divisibility=ROPE_DIV)
    assert len(re.findall(r"ld\.global\.L2::cache_hint\.", ck.asm["ptx"])) == 2
    assert len(re.findall(r"mov\.b64\s+%rd\d+, 1508705875169116160;", ck.asm["ptx"])) == 1   # the evict_last policy


def test_rope_with_a_cos_row_per_token_is_left_as_written(monkeypatch):
    # cos_bs == bs: each program reads its own row (b * sl + t): nothing recurs, nothing is marked
    monkeypatch.setenv("KERNELC_L2_REUSE", "evict_last")
    tir = print_function(_rope_ir(4), show_loc=False)
    assert " = sdiv " in tir and " = select " not in tir and "l2=" not in tir
    ck = kernelc.compile(rope_rows, ROPE_SIG, dict(COS_BS=4, H=4, HD=32), target="sm_90a", num_warps=4,
                         divisibility=ROPE_DIV)
    assert "cache_hint" not in ck.asm["ptx"]


def _rope_reference(q, cos, sin, sl):
    out = q.copy()
    bs = q.shape[0] // sl
    for p in range(q.shape[0]):
        r = p % sl if cos.shape[0] == 1 else (p // sl) * sl + p % sl
        c, s = cos.reshape(-1, cos.shape[-1])[r], sin.reshape(-1, sin.shape[-1])[r]
        x1, x2 = q[p, :, :16], q[p, :, 16:]
        out[p, :, :16], out[p, :, 16:] = x1 * c - x2 * s, x2 * c + x1 * s
    assert bs * sl == q.shape[0]
    return out


@pytest.mark.parametrize("cos_bs", [1, 2])
def test_rope_in_the_interpreter_and_its_folded_ir_agree_with_the_reference(cos_bs, monkeypatch):
    torch = pytest.importorskip("torch")
    bs, sl, H, HD = 2, 5, 4, 32
    g = torch.Generator().manual_seed(cos_bs)
    q = torch.randn(bs * sl, H, HD, generator=g)
    cos, sin = torch.randn(cos_bs, sl, HD // 2, generator=g), torch.randn(cos_bs, sl, HD // 2, generator=g)
    want = _rope_reference(q.numpy().astype(np.float64), cos.numpy().astype(np.float64),
                           sin.numpy().astype(np.float64), sl)
    monkeypatch.setenv("KERNELC_INTERPRET", "1")
    got = q.clone()
    rope_rows[(bs * sl,)](got, H * HD, cos, sin, HD // 2, sl, COS_BS=cos_bs, H=H, HD=HD)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
    # the tile IR after the fold and the L2 mark, evaluated program by program (float64)
    fn = _rope_ir(cos_bs)
    bufs = {"q": q.numpy().astype(np.float64).ravel().copy(), "cos": cos.numpy().astype(np.float64).ravel(),
            "sin": sin.numpy().astype(np.float64).ravel()}
    for p in range(bs * sl):
        ir_eval.run(fn, dict(q_ptr="q", q_stride=H * HD, cos_ptr="cos", sin_ptr="sin", cos_stride=HD // 2, sl=sl),
                    bufs, pid=(p, 0, 0), nprog=(bs * sl, 1, 1))
    np.testing.assert_allclose(bufs["q"].reshape(want.shape), want, rtol=1e-12, atol=1e-12)
