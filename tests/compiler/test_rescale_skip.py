"""``mark_unit_scale_skips`` (passes/rescale_skip.py): attention's ``acc * alpha[:, None]`` with
``alpha = exp2(m_old - m_new)`` is marked ``skip_unit`` (golden IR, the rescale a trip late too), nothing else is,
the knob off marks nothing, and on sm_90a the fp8 FA3-order key loop tests its two alphas, votes once and branches
around its 64 FMULs without spills or serialised wgmmas."""
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
def online_kernel(x_ptr, s_ptr, out_ptr, N, BLOCK: kl.constexpr, VARIANT: kl.constexpr):
    r = kl.arange(0, BLOCK)
    m = kl.zeros([BLOCK], dtype=kl.float32) - float("inf")
    acc = kl.zeros([BLOCK, BLOCK], dtype=kl.float32)
    alpha = kl.zeros([BLOCK], dtype=kl.float32) + 1.0
    for start in range(0, N, BLOCK):
        x = kl.load(x_ptr + (start + r[:, None]) * BLOCK + r[None, :])
        if VARIANT == "late":  # the previous trip's alpha, before this trip's work
            acc = acc * alpha[:, None]
        m_new = kl.maximum(m, kl.max(x, 1))
        alpha = kl.math.exp2(m - m_new)
        if VARIANT == "lazy":  # the reference max moves only where it grew by more than 8
            m_new = kl.where(m_new > m + 8.0, m_new, m)
            alpha = kl.math.exp2(m - m_new)
        if VARIANT == "plain" or VARIANT == "lazy":
            acc = acc * alpha[:, None]
        if VARIANT == "other":  # a row scale that is not a rescale factor
            acc = acc * kl.load(s_ptr + start + r)[:, None]
        acc = acc + kl.math.exp2(x - m_new[:, None])
        m = m_new
    kl.store(out_ptr + r[:, None] * BLOCK + r[None, :], acc)


def _ir_around(monkeypatch, variant, knob="1"):
    monkeypatch.setenv("KERNELC_RESCALE_SKIP", knob)
    names = [p.name for p in C.TILE_PASSES]
    i = names.index("mark_unit_scale_skips")
    fn, _ = generate_ir(_base_function(online_kernel), dict(x_ptr="*fp32", s_ptr="*fp32", out_ptr="*fp32", N="i32"),
                        dict(BLOCK=64, VARIANT=variant), {}, ())
    run_passes(fn, C.TILE_PASSES[:i], PassContext("sm_90a", (9, 0), 4))
    before = print_function(fn, show_loc=False)
    run_passes(fn, C.TILE_PASSES[i:i + 1], PassContext("sm_90a", (9, 0), 4))
    return fn, before, print_function(fn, show_loc=False)


def test_the_rescale_is_marked_golden(monkeypatch):
    _, before, after = _ir_around(monkeypatch, "plain")
    assert "skip_unit" not in before
    filecheck(after, """
        CHECK: scf.for
        CHECK: [[MNEW:%\\d+]] = fmax [[MOLD:%\\d+]], {{%\\d+}} {propagate_nan='none'} : <64xfp32>
        CHECK: [[D:%\\d+]] = fsub [[MOLD]], [[MNEW]]
        CHECK: [[A:%\\d+]] = exp2 [[D]]
        CHECK: [[E:%\\d+]] = expand_dims [[A]] {axis=1}
        CHECK: [[B:%\\d+]] = broadcast [[E]]
        CHECK: fmul {{%\\d+}}, [[B]] {contract=True, skip_unit=1} : <64x64xfp32>
    """)
    assert after.replace(", skip_unit=1", "") == before


def test_the_rescale_a_trip_late_is_marked(monkeypatch):
    # the carried alpha: the body yields exp2(m_old - m_new) for it
    _, before, after = _ir_around(monkeypatch, "late")
    assert after.count("skip_unit=1") == 1
    assert after.replace(", skip_unit=1", "") == before


def test_the_rescale_by_a_lazily_moved_max_is_marked(monkeypatch):
    _, before, after = _ir_around(monkeypatch, "lazy")
    filecheck(after, """
        CHECK: [[C:%\\d+]] = cmpf [[MNEW:%\\d+]], {{%\\d+}} {pred='ogt'}
        CHECK: [[M:%\\d+]] = select [[C]], [[MNEW]], [[MOLD:%\\d+]] : <64xfp32>
        CHECK: [[D:%\\d+]] = fsub [[MOLD]], [[M]]
        CHECK: fmul {{%\\d+}}, {{%\\d+}} {contract=True, skip_unit=1} : <64x64xfp32>
    """)
    assert after.replace(", skip_unit=1", "") == before


@pytest.mark.parametrize("variant,knob", [("other", "1"), ("plain", "0")])
def test_nothing_else_is_marked(monkeypatch, variant, knob):
    _, before, after = _ir_around(monkeypatch, variant, knob)
    assert "skip_unit" not in after and after == before


def test_the_verifier_checks_the_attribute(monkeypatch):
    fn, _, _ = _ir_around(monkeypatch, "plain")
    op = next(o for o in fn.walk() if o.attrs.get("skip_unit") is not None)
    op.attrs["skip_unit"] = 2
    with pytest.raises(VerificationError, match="skip_unit"):
        verify(fn)


def _fa3_fp8(late):
    from examples.kernels import attention_fa3
    sig = {"sm_scale": "fp32", "desc_q": "tensordesc<fp8e4nv[128, 128]>", "desc_k": "tensordesc<fp8e4nv[128, 128]>",
           "desc_v": "tensordesc<fp8e4nv[128, 128]>", "desc_o": "tensordesc<fp16[128, 128]>", "N_CTX": "i32",
           "Descale": "*fp32"}
    return kernelc.compile(attention_fa3.attn_fwd_fa3_kernel, sig,
                           dict(BLOCK_M=128, BLOCK_N=128, HEAD_DIM=128, CAUSAL=False, FP8=True, LATE_RESCALE=late),
                           target="sm_90a", num_warps=8, num_stages=4,
                           divisibility={k: 16 for k in sig if k != "sm_scale"})


def _key_loop_ops(sass):
    lines = sass.splitlines()
    labels = {m.group(1): i for i, ln in enumerate(lines) if (m := re.match(r"\s*(\.L_x_\d+):", ln))}
    for i, ln in enumerate(lines):
        m = re.search(r"\bBRA\b.*?(\.L_x_\d+)", ln)
        if m and labels.get(m.group(1), i) < i:
            body = [re.sub(r"^\s*/\*[0-9a-f]+\*/\s*", "", b).split(" ;")[0]
                    for b in lines[labels[m.group(1)]:i + 1] if re.match(r"\s*/\*[0-9a-f]{4,}\*/", b)]
            if sum(b.startswith("WARPGROUP.ARRIVE") for b in body) == 2 and any("QGMMA" in b for b in body):
                return body
    raise AssertionError("no key loop with two fp8 dots")


@pytest.mark.parametrize("late", [False, True])
def test_fa3_fp8_key_loop_branches_around_the_rescale(monkeypatch, late):
    """2026-11-28, sm_90a, 128x128 blocks, 8+4 warps, D=128: two FSETP.NEU (the thread's two rows), one VOTE.ANY and
    a branch over the 64 FMUL of the rescale; the same FMULs as without the knob, 0 spills, 12 warps, no C7512."""
    monkeypatch.setenv("KERNELC_RESCALE_SKIP", "1")
    ck = _fa3_fp8(late)
    assert ck.n_spills == 0 and ck.launch_warps == 12 and "C7512" not in ck.artifacts.ptxas_log
    ops = _key_loop_ops(ck.asm["sass"])
    names = [re.sub(r"^@!?U?P\w+\s+", "", b).split(" ")[0] for b in ops]
    assert names.count("VOTE.ANY") == 1 and names.count("FSETP.NEU.AND") + names.count("FSETP.NEU.OR") == 2
    vote = names.index("VOTE.ANY")
    skip = next(i for i in range(vote, len(ops)) if re.match(r"@!P\d BRA", ops[i]))
    target = re.search(r"\.L_x_\d+", ops[skip]).group(0)
    lines = ck.asm["sass"].splitlines()
    start = next(k for k, ln in enumerate(lines) if ops[skip] in ln)
    end = next(k for k, ln in enumerate(lines) if ln.strip().startswith(target + ":"))
    skipped = [ln for ln in lines[start + 1:end] if re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+FMUL ", ln)]
    assert len(skipped) == 64, len(skipped)
    monkeypatch.setenv("KERNELC_RESCALE_SKIP", "0")
    off = [re.sub(r"^@!?U?P\w+\s+", "", b).split(" ")[0] for b in _key_loop_ops(_fa3_fp8(late).asm["sass"])]
    assert "VOTE.ANY" not in off and off.count("FMUL") == names.count("FMUL")
