"""``mark_guarded_rescales`` (passes/guard_rescale.py): the conditional softmax rescale of a loop-carried accumulator
(factor exp2(m_old - m_new), m_new a select that can keep m_old) is marked ``skip_unit`` (golden IR), and nothing else
is: the plain rescale (m_new a maximum) stays unmarked, and the fp8 forward's default build is the same SASS with the
pass on or off. On sm_90a the marked multiply sits behind a branch in the key loop: the fp8 forward with
``RESCALE_SLACK=8`` runs its 64 accumulator FMULs a thread after a ``BRA``, with 0 spills and 3 programs an SM."""
import re

import pytest

import kernelc
import kernelc.language as kl
from kernelc.compiler import compiler as C
from kernelc.compiler.compiler import _base_function
from kernelc.compiler.frontend import generate_ir
from kernelc.compiler.ir.printer import print_function
from kernelc.compiler.pass_manager import PassContext, run_passes
from tests.compiler.filecheck import filecheck


@kernelc.jit
def online_softmax_kernel(x_ptr, out_ptr, n, SLACK: kl.constexpr, BLOCK: kl.constexpr):
    r = kl.arange(0, BLOCK)
    m_i = kl.zeros([BLOCK], dtype=kl.float32) - float("inf")
    l_i = kl.zeros([BLOCK], dtype=kl.float32)
    acc = kl.zeros([BLOCK, BLOCK], dtype=kl.float32)
    for j in range(0, n):
        s = kl.load(x_ptr + j * BLOCK * BLOCK + r[:, None] * BLOCK + r[None, :])
        m_ij = kl.maximum(m_i, kl.max(s, 1))
        if SLACK:
            m_ij = kl.where(m_ij > m_i + SLACK, m_ij, m_i)
        p = kl.math.exp2(s - m_ij[:, None])
        alpha = kl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + kl.sum(p, 1)
        acc = acc * alpha[:, None] + p
        m_i = m_ij
    kl.store(out_ptr + r[:, None] * BLOCK + r[None, :], acc / l_i[:, None])


def _ir_around(monkeypatch, knob, slack):
    monkeypatch.setenv("KERNELC_GUARD_RESCALE", knob)
    names = [p.name for p in C.TILE_PASSES]
    i = names.index("mark_guarded_rescales")
    fn, _ = generate_ir(_base_function(online_softmax_kernel), dict(x_ptr="*fp32", out_ptr="*fp32", n="i32"),
                        dict(SLACK=slack, BLOCK=32), {}, ())
    run_passes(fn, C.TILE_PASSES[:i], PassContext("sm_90a", (9, 0), 4))
    before = print_function(fn, show_loc=False)
    run_passes(fn, C.TILE_PASSES[i:i + 1], PassContext("sm_90a", (9, 0), 4))
    return before, print_function(fn, show_loc=False)


def test_the_slack_rescale_of_a_carried_accumulator_is_marked_golden(monkeypatch):
    before, after = _ir_around(monkeypatch, "1", 8)
    assert "skip_unit" not in before
    filecheck(after, """
        CHECK: scf.for
        CHECK: [[SEL:%\\d+]] = select {{%\\d+}}, {{%\\d+}}, [[OLD:%\\d+]] : <32xfp32>
        CHECK: [[D:%\\d+]] = fsub [[OLD]], [[SEL]] {contract=True} : <32xfp32>
        CHECK: [[A:%\\d+]] = exp2 [[D]] {ftz=True} : <32xfp32>
        CHECK: [[E:%\\d+]] = expand_dims [[A]] {axis=1} : <32x1xfp32>
        CHECK: [[B:%\\d+]] = broadcast [[E]] : <32x32xfp32>
        CHECK: fmul {{%\\d+}}, [[B]] {contract=True, skip_unit=1} : <32x32xfp32>
    """)
    assert after.count("skip_unit") == 1  # l_i * alpha (a vector) is not marked
    assert after.replace(", skip_unit=1", "") == before


@pytest.mark.parametrize("knob,slack", [("1", 0), ("0", 8)])
def test_the_plain_rescale_and_the_knob_off_leave_the_ir(monkeypatch, knob, slack):
    before, after = _ir_around(monkeypatch, knob, slack)
    assert before == after and "skip_unit" not in after


def test_codegen_puts_the_marked_multiply_behind_a_branch(monkeypatch):
    sig = dict(x_ptr="*fp32", out_ptr="*fp32", n="i32")
    ck = kernelc.compile(online_softmax_kernel, sig, dict(SLACK=8, BLOCK=32), target="sm_90a", num_warps=4)
    monkeypatch.setenv("KERNELC_GUARD_RESCALE", "0")
    bare = kernelc.compile(online_softmax_kernel, sig, dict(SLACK=8, BLOCK=32), target="sm_90a", num_warps=4)
    label = re.compile(r"^rescale\d+:", re.M)  # codegen's block of the multiplies
    assert label.search(ck.asm["llir"]) and not label.search(bare.asm["llir"])
    # the test: fcmp une of each distinct factor register a thread holds, or-ed, a conditional branch to the block
    assert re.search(r"fcmp une float %\w+, 1\.0", ck.asm["llir"])
    assert re.search(r"br i1 %\w+, label %rescale\d+, label %rescale_end\d+", ck.asm["llir"])
    # (LLVM may turn a branch around as few multiplies as these, 8 a thread, back into selects; the fp8 forward's
    # 64 stay behind a branch in its SASS: below)


def _fp8_default(slack, monkeypatch, guard="1", causal=False):
    import sys
    import os
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench", "experiments", "cr29"))
    from sass_cpu import compile_default
    return compile_default(slack, causal=causal, KERNELC_GUARD_RESCALE=guard)


def _loop(sass):
    from tests.compiler.test_reduce_trees import _key_loop_lines
    return _key_loop_lines(sass)


@pytest.mark.parametrize("causal", [False, True])
def test_the_fp8_forward_skips_its_accumulator_multiplies_behind_a_branch(causal, monkeypatch):
    ck = _fp8_default(8, monkeypatch, causal=causal)
    assert ck.n_spills == 0 and ck.n_regs <= 168  # 3 programs of 128 threads an SM
    body = _loop(ck.asm["sass"])
    # the last forward branch before the second dot's wgmmas jumps over the rescale: 64 FMUL a thread (64x128 fp32
    # accumulator over 128 threads), then the reconvergence
    arrive2 = [i for i, b in enumerate(body) if "WARPGROUP.ARRIVE" in b][1]
    bra = max(i for i, b in enumerate(body[:arrive2]) if re.search(r"\bBRA\b", b))
    skipped = body[bra + 1:arrive2]
    assert sum(bool(re.search(r"\bFMUL\b", b)) for b in skipped) >= 64
    bare = _fp8_default(8, monkeypatch, guard="0", causal=causal)
    assert sum(bool(re.search(r"\bBRA\b", b)) for b in body) == \
        sum(bool(re.search(r"\bBRA\b", b)) for b in _loop(bare.asm["sass"])) + 1


def test_the_fp8_default_without_the_slack_is_the_same_sass_either_way(monkeypatch):
    on, off = _fp8_default(0, monkeypatch), _fp8_default(0, monkeypatch, guard="0")
    assert on.asm["sass"] == off.asm["sass"]
