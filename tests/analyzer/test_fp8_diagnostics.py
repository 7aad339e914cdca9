"""fp8 dots in the analyzer's judgement, on a CPU-compiled fp8 matmul (pointer loads, as in
``examples/kernels/matmul_fp8.py``): an fp8 dot on mma.sync on sm_90a (``hopper-no-wgmma``, fp8 rules and
QGMMA/QMMA evidence), an fp8 dot upcast to fp16 (``fp8-upcast``: K not a multiple of 32, or an sm_80
target), an fp8 dot on FMA (``no-tensor-cores`` with fp8's K minimum), a row-major fp8 B staged byte by
byte (``fp8-transposed-operand``), and the well-configured fp8 wgmma kernel that gets none of them. Every
proposed config change is applied and recompiled: the dot must then be QGMMA in the SASS."""
import functools
import re
from collections import Counter

import pytest

import analyzer
import kernelc
import kernelc.language as kl
from analyzer import diagnostics as D
from analyzer.diagnostics import tensor_cores
from analyzer.facts import Device, KernelFacts, facts_from_compiled

from .helpers import line_of


@kernelc.jit
def fp8_matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
               BLOCK_SIZE_M: kl.constexpr, BLOCK_SIZE_N: kl.constexpr, BLOCK_SIZE_K: kl.constexpr):
    pid = kl.program_id(0)
    num_n = kl.cdiv(N, BLOCK_SIZE_N)
    offs_m = (pid // num_n) * BLOCK_SIZE_M + kl.arange(0, BLOCK_SIZE_M)
    offs_n = (pid % num_n) * BLOCK_SIZE_N + kl.arange(0, BLOCK_SIZE_N)
    offs_k = kl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = kl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=kl.float32)
    for k in range(0, kl.cdiv(K, BLOCK_SIZE_K)):
        a = kl.load(a_ptrs)
        b = kl.load(b_ptrs)
        acc = kl.dot(a, b, acc)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    kl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :], acc.to(kl.bfloat16))


FP8_IDS = ("hopper-no-wgmma", "fp8-upcast", "fp8-transposed-operand", "no-tensor-cores")
GOOD = dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=128, num_warps=4)
DOT_LINE = line_of(fp8_matmul, "kl.dot(")


@functools.lru_cache(maxsize=None)
def _compile(a="fp8e4nv", b="fp8e4nv", target="sm_90a", col_b=True, **cfg):
    cfg = dict(GOOD, **cfg)
    P = lambda t: "*" + t  # noqa: E731
    sig = dict(a_ptr=P(a), b_ptr=P(b), c_ptr=P("bf16"), M="i32", N="i32", K="i32", stride_am="i32",
               stride_ak="i32", stride_bk="i32", stride_bn="i32", stride_cm="i32")
    # a row-major A; B column-major (stride_bk == 1, b = b_nk.t()) or row-major (stride_bn == 1)
    unit = ("stride_ak", "stride_bk" if col_b else "stride_bn")
    nw = cfg.pop("num_warps")
    return kernelc.compile(fp8_matmul, sig, cfg, target=target, num_warps=nw, num_stages=3,
                           divisibility={n: 16 for n in sig}, equal_to_1=unit)


def _diagnose(ck, device=None):
    facts = facts_from_compiled(ck, grid=(1024, 1, 1), device=device, function=fp8_matmul)
    return D.run(facts)


def _one(diags, ident):
    hits = [d for d in diags if d.id == ident]
    assert len(hits) == 1, f"{ident}: {[(d.id, d.severity, d.message) for d in diags]}"
    return hits[0]


def _ops(ck) -> Counter:
    """SASS opcodes from the disassembly text (independent of the analyzer's own SASS parsing)."""
    return Counter(re.sub(r"^\s*/\*[0-9a-f]+\*/\s*(@!?U?P\w+\s+)?", "", ln).split(" ")[0]
                   for ln in ck.asm["sass"].splitlines() if re.match(r"\s*/\*[0-9a-f]{4,}\*/", ln))


def _count(ops: Counter, prefix: str) -> int:
    return sum(n for op, n in ops.items() if op.split(".", 1)[0] == prefix)


def _recompile_with(change, a="fp8e4nv", b="fp8e4nv", **base):
    """Apply a diagnostic's config change (constexprs, num_warps) to the kernel's config and compile again."""
    return _compile(a, b, **dict(base, **change))


def _assert_qgmma(ck):
    ops = _ops(ck)
    assert _count(ops, "QGMMA") > 0 and _count(ops, "HMMA") == 0 and _count(ops, "HGMMA") == 0, sorted(ops)
    d = ck.reports["dots"][0]
    assert d["engine"] == "wgmma" and d["fp8_upcast"] is None
    assert not [x for x in _diagnose(ck) if x.id in FP8_IDS and x.is_finding]


# ---------------------------------------------------------------------------------------------
# hopper-no-wgmma for fp8
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("a,b", [("fp8e4nv", "fp8e4nv"), ("fp8e5", "fp8e4nv")])
def test_fp8_dot_on_mma_sync_on_hopper_gets_a_warpgroup(a, b):
    small = dict(BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=64, num_warps=2)
    ck = _compile(a, b, **small)
    assert ck.reports["dots"][0]["engine"] == "mma.sync"
    d = _one(_diagnose(ck), "hopper-no-wgmma")
    assert d.severity == "warning" and d.line == DOT_LINE
    assert f"({a} x {b}) runs on mma.sync" in d.message and "num_warps=2 is not a multiple of 4" in d.message
    # the evidence is the fp8 opcodes: no QGMMA, and no QMMA either -- sm_90 runs fp8 mma.sync as HMMA on
    # operands ptxas converts to fp16 (F2FP ... UNPACK), which the message says
    ops = _ops(ck)
    ev = d.evidence
    assert ev["qgmma_instructions"] == _count(ops, "QGMMA") == 0
    assert ev["qmma_instructions"] == _count(ops, "QMMA") == 0
    assert ev["hmma_instructions"] == _count(ops, "HMMA") > 0
    unpacks = sum(n for op, n in ops.items() if op.startswith("F2FP") and "UNPACK" in op)
    assert ev["fp8_unpack_instructions"] == unpacks > 0
    assert ev["fp8_types"] == [a, b] and "hgmma_instructions" not in ev
    assert "sm_90 has no native fp8 mma.sync" in d.message and f"{ev['hmma_instructions']} HMMA" in d.message
    assert "QGMMA" in d.fix and "BLOCK_K a multiple of 32" in d.fix
    assert d.changes[0] == {"num_warps": 4}
    _assert_qgmma(_recompile_with(d.changes[0], a, b, **small))


def test_upcast_fp8_dot_on_mma_sync_needs_k32_for_wgmma():
    # K=16: the fp8 dot is upcast to fp16; with two warps it is an fp16 mma.sync. More warps alone would give
    # HGMMA (fp16 rate): the proposal must also make K a multiple of fp8 wgmma's k
    small = dict(BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=16, num_warps=2)
    ck = _compile(**small)
    d = _one(_diagnose(ck), "hopper-no-wgmma")
    assert "fp8e4nv x fp8e4nv upcast to fp16" in d.message and "K=16 is not a multiple of 32" in d.message
    assert d.evidence["qgmma_instructions"] == 0 and d.evidence["hmma_instructions"] > 0
    assert d.changes[0] == {"BLOCK_SIZE_K": 32, "num_warps": 4}
    _assert_qgmma(_recompile_with(d.changes[0], **small))


def test_fp8_dot_built_for_plain_sm90_needs_sm90a():
    ck = _compile(target="sm_90")
    d = _one(_diagnose(ck, Device.for_arch("sm_90a")), "hopper-no-wgmma")
    assert d.severity == "warning" and "built for sm_90, and wgmma needs the arch-specific target sm_90a" in d.message
    assert d.evidence["qgmma_instructions"] == 0 and d.evidence["fp8_unpack_instructions"] > 0
    _assert_qgmma(_compile(target="sm_90a"))


# ---------------------------------------------------------------------------------------------
# fp8-upcast
# ---------------------------------------------------------------------------------------------


def test_fp8_dot_with_k16_is_upcast_and_gets_block_k_32():
    ck = _compile(BLOCK_SIZE_K=16)
    diags = _diagnose(ck)
    d = _one(diags, "fp8-upcast")
    assert d.severity == "warning" and d.number == 9 and d.line == DOT_LINE
    assert "fp8 dot 128x16 @ 16x128 (fp8e4nv x fp8e4nv) is upcast to fp16 and runs at fp16 rate on wgmma" in d.message
    assert "K=16 is not a multiple of 32" in d.message
    ops = _ops(ck)
    assert d.evidence["hgmma_instructions"] == _count(ops, "HGMMA") > 0
    assert d.evidence["qgmma_instructions"] == d.evidence["qmma_instructions"] == 0
    assert "upcast to fp16" in d.evidence["compile_log"] and d.evidence["compile_log"] in ck.compile_log
    assert d.changes == [{"BLOCK_SIZE_K": 32}] and "BLOCK_SIZE_K=32" in d.fix
    assert not [x for x in diags if x.id == "hopper-no-wgmma"]  # it is on wgmma already, at fp16 rate
    _assert_qgmma(_recompile_with(d.changes[0], BLOCK_SIZE_K=16))


def test_fp8_dot_for_sm80_is_upcast_info_on_ampere_warning_on_hopper():
    ck = _compile(target="sm_80", BLOCK_SIZE_K=64)
    d = _one(_diagnose(ck), "fp8-upcast")
    # an A100 has no fp8 tensor cores: nothing to gain there, so no finding
    assert d.severity == "info" and not d.is_finding
    assert "sm_80 has no fp8 tensor-core instructions" in d.message and "runs at fp16 rate on mma.sync" in d.message
    assert d.evidence["hmma_instructions"] == _count(_ops(ck), "HMMA") > 0 and d.evidence["qmma_instructions"] == 0
    assert "sm_89" in d.fix and "sm_90a" in d.fix and "QGMMA" in d.fix and d.changes == []
    # the same build profiled on an H100: the target costs half the fp8 rate
    d = _one(_diagnose(ck, Device.for_arch("sm_90a")), "fp8-upcast")
    assert d.severity == "warning"
    ops = _ops(_compile(target="sm_89", BLOCK_SIZE_K=64))
    assert _count(ops, "QMMA") > 0 and _count(ops, "HMMA") == 0  # the fix's sm_89 claim
    _assert_qgmma(_compile(target="sm_90a", BLOCK_SIZE_K=64))


# ---------------------------------------------------------------------------------------------
# no-tensor-cores for fp8
# ---------------------------------------------------------------------------------------------


def test_fp8_dot_on_fma_asks_for_fp8s_k_minimum():
    # K=8: upcast to fp16, and then below fp16's 16x8x16 minimum -> FMA. BLOCK_K=16 would only give an fp16
    # dot: the fix asks for fp8's K of 32
    small = dict(BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=8)
    ck = _compile(**small)
    diags = _diagnose(ck)
    d = _one(diags, "no-tensor-cores")
    assert d.severity == "error" and "(fp8e4nv x fp8e4nv upcast to fp16) runs on FMA" in d.message
    assert "x 32 (K)" in d.fix
    assert d.changes[0] == {"BLOCK_SIZE_K": 32, "num_warps": 4}
    up = _one(diags, "fp8-upcast")
    assert "runs on FMA" in up.message and up.changes == [{"BLOCK_SIZE_K": 32}]
    _assert_qgmma(_recompile_with(d.changes[0], **small))


def test_fp8_fma_reasons_get_fp8_fixes():
    facts = KernelFacts(name="k", device=Device.for_arch("sm_80"))
    facts.dots = [{"file": "k.py", "line": 3, "engine": "fma", "a_shape": [64, 64], "b_shape": [64, 64],
                   "a_dtype": "fp8e4nv", "b_dtype": "fp8e4nv", "acc_dtype": "fp32",
                   "fma_reason": "fp8 operands need sm_89 or newer for tensor cores (target sm_80)"}]
    d = tensor_cores.check(facts)[0]
    assert "sm_89" in d.fix and "sm_90a" in d.fix and "sm_80 or newer" not in d.fix
    assert tensor_cores.K_MIN["fp8e4nv"] == tensor_cores.K_MIN["fp8e5"] == 32


# ---------------------------------------------------------------------------------------------
# fp8-transposed-operand
# ---------------------------------------------------------------------------------------------


def test_row_major_fp8_b_is_diagnosed_and_column_major_is_not():
    ck = _compile(col_b=False)
    assert ck.reports["dots"][0]["smem_transpose"] == ["b"]
    d = _one(_diagnose(ck), "fp8-transposed-operand")
    assert d.severity == "warning" and d.line == DOT_LINE
    assert "B is row-major (N-contiguous)" in d.message and "must be K-major in shared memory" in d.message
    assert d.evidence["byte_stores"] == _ops(ck)["STS.U8"] > 0 and d.evidence["transposed_operands"] == ["b"]
    assert "b_nk.t()" in d.fix and "torch._scaled_mm" in d.fix and d.changes == []
    # the fix: a column-major B streams through cp.async, no byte stores, no diagnostic
    good = _compile(col_b=True)
    assert good.reports["dots"][0]["smem_transpose"] == [] and not _ops(good)["STS.U8"]
    _assert_qgmma(good)


def test_dot_reports_without_the_transpose_fact_get_no_diagnostic():
    # cache entries written before the dot report had ``smem_transpose`` must not be guessed at
    facts = facts_from_compiled(_compile(col_b=False), grid=(1024, 1, 1))
    assert D.run(facts, only=["fp8-transposed-operand"])
    facts.dots = [{k: v for k, v in d.items() if k != "smem_transpose"} for d in facts.dots]
    assert not D.run(facts, only=["fp8-transposed-operand"])


# ---------------------------------------------------------------------------------------------
# the good kernel, and the suggestions
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("a,b", [("fp8e4nv", "fp8e4nv"), ("fp8e5", "fp8e5")])
def test_well_configured_fp8_wgmma_kernel_has_no_fp8_diagnostic(a, b):
    ck = _compile(a, b)
    diags = _diagnose(ck)
    assert not [d for d in diags if d.id in FP8_IDS], [(d.id, d.message) for d in diags]
    assert not [d for d in diags if d.is_finding], [(d.id, d.message) for d in diags]
    assert _count(_ops(ck), "QGMMA") > 0


def test_checked_suggestion_for_the_fp8_mma_sync_kernel_runs_wgmma():
    ck = _compile(BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=16, num_warps=2)
    rep = analyzer.analyze_compiled(ck, grid=(1024, 1, 1), function=fp8_matmul).kernels[0]
    best = rep.suggestions[0]
    assert best.checked["ok"] and best.checked["dot_engines"] == ["wgmma"], best.checked
    assert {"hopper-no-wgmma", "fp8-upcast"} <= set(best.fixes) and not set(best.fixes) & set(best.checked["remaining"])
    assert best.changes["BLOCK_SIZE_K"] == 32 and best.changes["num_warps"] in (4, 8)
