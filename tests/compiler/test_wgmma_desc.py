"""``wgmma_desc='stepped'`` (passes/schedule.py, ``_step_gemm_descriptors``): in a kernel with one dot, the
wgmma operands' shared-memory descriptors are built once per dot and stepped along K by a 64-bit add
(codegen/wgmma.py), instead of rebuilt from the address (shift, mask, or) per k step; kernels with several
dots (attention) keep the per-step build (docs/triton-tutorials.md, "09/08 pointer-load GEMMs")."""
import re

import pytest

from examples.kernels.matmul import matmul_kernel
from kernelc.compiler.compiler import compile as kcompile
from kernelc.compiler.ir import verify
from kernelc.compiler.ir.verifier import VerificationError
from tests.compiler.test_codegen_sass import MM_SIG, UNIT_STRIDES
from tests.compiler.test_store_conversion import DIV, _cx, _passes


def _loop_ops(ck):
    """Opcodes of the loop with the most HGMMAs (label .. backward branch)."""
    lines = [ln for ln in ck.asm["sass"].splitlines()]
    labels = {m.group(1): i for i, ln in enumerate(lines) if (m := re.match(r"\s*(\.L_x_\d+):", ln))}
    best = []
    for i, ln in enumerate(lines):
        m = re.search(r"\bBRA\b.*?`\((\.L_x_\d+)\)", ln)
        if m and labels.get(m.group(1), i + 1) <= i:
            body = [re.sub(r"^\s*/\*[0-9a-f]+\*/\s*(@!?U?P\w+\s+)?", "", b).split(" ")[0]
                    for b in lines[labels[m.group(1)]:i + 1] if re.match(r"\s*/\*[0-9a-f]{4,}\*/", b)]
            if sum(o.startswith("HGMMA") for o in body) > sum(o.startswith("HGMMA") for o in best):
                best = body
    return best


def test_golden_the_one_dot_of_a_gemm_is_stepped(monkeypatch):
    monkeypatch.setenv("KERNELC_WGMMA_DESC_STEPPED", "1")
    ir, fn, _ = _passes(matmul_kernel, MM_SIG, _cx(128, 128, 64), 4, 3, DIV, UNIT_STRIDES, upto="schedule_wgmma")
    assert "wgmma_desc" not in ir["warp_specialize"]
    (line,) = [ln for ln in ir["schedule_wgmma"].splitlines() if " = dot " in ln]
    assert "wgmma='async', wgmma_desc='stepped'}" in line
    verify(fn)
    monkeypatch.setenv("KERNELC_WGMMA_DESC_STEPPED", "0")
    ir, _, _ = _passes(matmul_kernel, MM_SIG, _cx(128, 128, 64), 4, 3, DIV, UNIT_STRIDES, upto="schedule_wgmma")
    assert "wgmma_desc" not in ir["schedule_wgmma"]


def test_kernels_with_several_dots_keep_the_per_step_descriptors():
    from tests.compiler.test_smem_offsets import FB
    cx = dict(FB.CONFIG, D=64, CAUSAL=False)
    ck = kcompile(FB.fused_attn_bwd, FB.SIG, cx, "sm_90a", 4, 5,
                  divisibility=dict(stride_bh=16, stride_tok=16, N_CTX=16))
    assert ck.asm["tir"].count(" = dot ") > 1 and "wgmma_desc" not in ck.asm["tir"]


def test_the_verifier_takes_stepped_on_a_dot_only(monkeypatch):
    _, fn, _ = _passes(matmul_kernel, MM_SIG, _cx(128, 128, 64), 4, 3, DIV, UNIT_STRIDES, upto="schedule_wgmma")
    dot = next(op for op in fn.walk() if op.name == "dot")
    dot.attrs["wgmma_desc"] = "once"
    with pytest.raises(VerificationError, match="wgmma_desc"):
        verify(fn)
    dot.attrs["wgmma_desc"] = "stepped"
    other = next(op for op in fn.walk() if op.name == "cast")
    other.attrs["wgmma_desc"] = "stepped"
    with pytest.raises(VerificationError, match="wgmma_desc"):
        verify(fn)


@pytest.mark.parametrize("bm,bn,warps,stages", [(128, 128, 4, 3), (128, 256, 8, 4)])
def test_the_k_loop_adds_to_its_descriptors_instead_of_building_them(monkeypatch, bm, bn, warps, stages):
    """The main loop of tutorial 03/09's kernel: with the descriptors stepped, the 14-bit field extraction
    (``USGXT``) is done for each operand's stage base, not per HGMMA; the loop is shorter, and registers and
    spills do not grow."""
    def build(flag):
        monkeypatch.setenv("KERNELC_WGMMA_DESC_STEPPED", flag)
        return kcompile(matmul_kernel, MM_SIG, _cx(bm, bn, 64), "sm_90a", warps, stages, divisibility=DIV,
                        equal_to_1=UNIT_STRIDES)
    old, new = build("0"), build("1")
    lo, ln = _loop_ops(old), _loop_ops(new)
    n_mma = sum(o.startswith("HGMMA") for o in ln)
    assert n_mma == sum(o.startswith("HGMMA") for o in lo) == (bm // 64 // (warps // 4)) * 4
    assert sum(o.startswith("USGXT") for o in ln) <= 4
    if warps == 4:
        # one warpgroup: without stepping, codegen/wgmma.py's other form (the shared base read at each dot plus
        # constants, from the attention backward's spills) builds few fields too; stepping must not be longer
        assert len(ln) <= len(lo)
    else:
        assert sum(o.startswith("USGXT") for o in lo) >= n_mma
        assert len(ln) < len(lo) - n_mma
    assert new.n_spills == 0 and new.n_regs <= old.n_regs + 8
