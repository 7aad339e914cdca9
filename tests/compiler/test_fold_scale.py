"""``examples/kernels/attention.py``'s FOLD_SCALE on sm_90a (CPU): the unmasked key loop takes the row max of the raw
scores and folds the scale into the exponent's FFMA, so it has one FMUL a score fewer (64 a thread and key block at
D=64, 128x64, and at D=128, 128x128), the same MUFU.EX2, and no spills; the masked diagonal loop is the same as
without it. The launcher's default (``A._fold``) compiles what the bench runs."""
import re

import pytest

import kernelc
from examples.kernels import attention as A


def _compile(D, causal, fp8, fold):
    io = "fp8e4nv" if fp8 else "fp16"
    sig = dict(Q="*" + io, K="*" + io, V="*" + io, Out="*fp16", LSE="*fp32", QScale="*fp32",
               KScale="*fp32", VScale="*fp32", sm_scale="fp32")
    for a in "qkvo":
        for b in ("z", "h", "m" if a in "qo" else "n", "k"):
            sig[f"stride_{a}{b}"] = "i32"
    sig.update(H="i32", N_CTX="i32")
    cfg = dict(A.fwd_config(D, fp8=fp8))
    w, s = cfg.pop("num_warps"), cfg.pop("num_stages")
    ones = ("stride_qk", "stride_kk", "stride_ok") + (("stride_vn",) if fp8 else ("stride_vk",))
    return kernelc.compile(A.attn_fwd_lse_kernel, sig, dict(HEAD_DIM=D, CAUSAL=causal, STORE_LSE=not fp8, FP8=fp8,
                                                            FOLD_SCALE=fold, **cfg),
                           target="sm_90a", num_warps=w, num_stages=s, divisibility={n: 16 for n in sig},
                           equal_to_1=ones)


def _loops(sass):
    """Opcode lists of the backward branches whose bodies issue two wgmma groups, in program order."""
    lines = sass.splitlines()
    labels = {m.group(1): i for i, ln in enumerate(lines) if (m := re.match(r"\s*(\.L_x_\d+):", ln))}
    out = []
    for i, ln in enumerate(lines):
        m = re.search(r"\bBRA\b.*?(\.L_x_\d+)", ln)
        if m and labels.get(m.group(1), i) < i:
            body = [re.sub(r"^\s*/\*[0-9a-f]+\*/\s*(@!?U?P\w+\s+)?", "", b).split(" ")[0]
                    for b in lines[labels[m.group(1)]:i + 1] if re.match(r"\s*/\*[0-9a-f]{4,}\*/", b)]
            if body.count("WARPGROUP.ARRIVE") == 2 and any("GMMA" in o for o in body):
                out.append(body)
    return out


@pytest.mark.parametrize("D,causal,fp8", [(64, False, True), (128, False, True), (64, False, False),
                                          (128, True, False)])
def test_the_folded_key_loop_has_one_multiply_a_score_fewer(D, causal, fp8):
    """2026-11-28 (ptxas 13.0): fp8 D=64 595 -> 536 instructions, fp8 D=128 564 -> 498, fp16 D=64 569 -> 506, fp16
    D=128 causal 559 -> 497; FMUL 128 -> 68 / 66 (the accumulator's 64 rescale multiplies remain, and one a row
    for the row max times the scale comes in)."""
    off, on = _compile(D, causal, fp8, False), _compile(D, causal, fp8, True)
    assert off.n_spills == on.n_spills == 0
    lo, ln = _loops(off.asm["sass"]), _loops(on.asm["sass"])
    assert len(lo) == len(ln) >= 1
    a, b = lo[0], ln[0]  # the unmasked key loop comes first
    cfg = A.fwd_config(D, fp8=fp8)  # the scores a thread holds per key block, at the config the bench runs
    per_thread = cfg["BLOCK_M"] * cfg["BLOCK_N"] // (32 * cfg["num_warps"])
    # one multiply a score fewer, one more a row the thread holds (the row max times the scale)
    assert per_thread - 4 <= a.count("FMUL") - b.count("FMUL") <= per_thread
    assert sum(o.startswith("MUFU.EX2") for o in a) == sum(o.startswith("MUFU.EX2") for o in b)
    assert len(b) <= len(a) - per_thread + 8, (len(a), len(b))
    if causal:  # the masked diagonal loop keeps its form
        assert lo[1].count("FMUL") == ln[1].count("FMUL")


def test_the_launcher_default():
    # every forward folds by default since fp8 D=64 causal runs 64x128 (it kept the unfolded form at 128x64)
    assert A.FOLD_SCALE and A._fold(None, 128, True, True) and A._fold(None, 64, True, True)
    assert not A.FOLD_SCALE_OFF
