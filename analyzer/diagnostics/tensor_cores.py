"""1. Missing tensor cores: a ``dot`` whose SASS has no HMMA/HGMMA/QMMA/QGMMA/IMMA: which dot, why, and the fix."""
from __future__ import annotations

from typing import Callable, Dict, List, Tuple, Union

from .diagnostic import Diagnostic
from ._util import (FP8_MMA_SM, basis_of, dot_constexprs, dot_dims, dot_types, evidence_samples, fp8_types,
                    next_pow2, source_of, target_sm)
from ..facts import KernelFacts

TITLE = "dot runs on FMA, not tensor cores"
# K minimum per operand type (mma.sync shapes m16n8k16 f16/bf16, m16n8k8 tf32, m16n8k32 int8 and fp8;
# wgmma's k is 16 / 32 too)
K_MIN = {"fp16": 16, "bf16": 16, "fp32": 8, "int8": 32, "fp8e4nv": 32, "fp8e5": 32}
TENSOR_CORE_RULE = "tensor cores need fp16/bf16/tf32/int8 tiles of at least 16x8x16 (fp8: 16x8x32)"


def _kmin(facts: KernelFacts, d: dict) -> int:
    """K the dot needs for tensor cores. An fp8 dot (maybe upcast to fp16 because K was too small) needs
    fp8's 32 where the target has fp8 MMAs: with K=16 it would only run as an fp16 dot."""
    fp8 = fp8_types(d)
    if fp8 and target_sm(facts) >= FP8_MMA_SM:
        return K_MIN[fp8[0]]
    return K_MIN.get(str(d.get("a_dtype")), 16)


def _tile_fix(facts: KernelFacts, d: dict) -> Tuple[str, List[Dict[str, int]]]:
    m, n, k = dot_dims(d)
    names = dot_constexprs(facts, d)
    kmin = _kmin(facts, d)
    changes: List[Dict[str, int]] = []
    p = facts.num_programs
    sms = facts.device.num_sms
    for tm, tn, tk, nw in ((64, 64, max(32, kmin), 4), (128, 128, max(32, kmin), 8), (64, 128, max(32, kmin), 4)):
        delta: Dict[str, int] = {}
        for dim, cur, want in (("M", m, tm), ("N", n, tn), ("K", k, tk)):
            name = names[dim]
            if name and cur < want:
                delta[name] = want
        if not delta:
            continue
        if p:  # the grid shrinks with the tile: keep at least one program per SM
            area = (max(m, 1) * max(n, 1)) / (max(m, delta.get(names["M"] or "", m)) * max(n, delta.get(names["N"] or "", n)))
            if p * area < sms and changes:
                continue
        delta["num_warps"] = nw
        if delta not in changes:
            changes.append(delta)
    named = ", ".join(f"{names[x]}={v}" for x, v in (("M", m), ("N", n), ("K", k)) if names[x]) or f"{m}x{n}x{k}"
    fix = (f"use tiles of at least 16 (M) x 16 (N) x {kmin} (K) so the dot maps onto mma/wgmma, e.g. "
           f"BLOCK_M=64, BLOCK_N=64, BLOCK_K={max(32, kmin)} with num_warps=4 (now {named})")
    return fix, changes


def _fix_tile(facts: KernelFacts, d: dict) -> Tuple[str, str, List[Dict[str, int]]]:
    fix, changes = _tile_fix(facts, d)
    return "error", fix, changes


def _fix_pow2(facts: KernelFacts, d: dict) -> Tuple[str, str, List[Dict[str, int]]]:
    m, n, k = dot_dims(d)
    names = dot_constexprs(facts, d)
    delta = {names[x]: next_pow2(v) for x, v in (("M", m), ("N", n), ("K", k)) if names[x] and next_pow2(v) != v}
    return "error", "use power-of-two tile sizes for the dot (mask the edges instead)", [delta] if delta else []


Fix = Union[Tuple[str, str], Callable[[KernelFacts, dict], Tuple[str, str, List[Dict[str, int]]]]]
# words in the compiler's FMA reason (passes/layout_assign.py) -> (severity, fix) or a function of the dot
# that also proposes config changes; the first match wins (the fp8 target rule before the generic one)
REASON_FIXES: List[Tuple[str, Fix]] = [
    ("ieee", ("warning", "if TF32 accuracy (10-bit mantissa, fp32 range) is acceptable, write "
              "kl.dot(a, b, input_precision=\"tf32\") (the default) to run on tensor cores (HMMA.1688.F32.TF32), "
              "or convert the operands to bf16/fp16 (a.to(kl.bfloat16)) for the fastest path; keep 'ieee' only "
              "where exact fp32 products are required")),
    ("below the tensor-core minimum", _fix_tile),
    ("non-power-of-two", _fix_pow2),
    ("mixed operand types", ("error", "convert both operands to one tensor-core type before the dot, e.g. "
                             "kl.dot(a.to(kl.float16), b.to(kl.float16))")),
    ("batched", ("warning", "write the batched dot as a loop of 2-D dots (or fold the batch into M) so each runs "
                 "on tensor cores")),
    ("no mma.sync form", ("warning", "convert the operands to fp16/bf16 (or use fp32 with input_precision='tf32') "
                          "before the dot")),
    ("accumulator", ("warning", "accumulate in fp32 (out_dtype=kl.float32 / an fp32 acc) and convert the result")),
    ("fp64", ("info", "fp64 dots run on FMA in kernelc; use fp32/tf32 where the precision allows")),
    ("fp8 operands need sm_89", ("warning", "compile for sm_89 (fp8 mma.sync, QMMA) or sm_90a (fp8 wgmma, QGMMA) "
                                 "(--arch / KERNELC_TARGET), or convert the operands to fp16 before the dot")),
    ("sm_80", ("warning", "compile for sm_80 or newer (--arch / KERNELC_TARGET)")),
]


def _classify(facts: KernelFacts, d: dict, reason: str) -> Tuple[str, str, List[Dict[str, int]]]:
    """(severity, fix, config changes) for an FMA reason from the compiler."""
    r = reason.lower()
    for words, fix in REASON_FIXES:
        if words in r:
            return fix(facts, d) if callable(fix) else (fix[0], fix[1], [])
    return ("warning", f"see the compiler's reason; {TENSOR_CORE_RULE}", [])


def check(facts: KernelFacts) -> List[Diagnostic]:
    """A ``no-tensor-cores`` diagnostic per dot the compiler lowered to FMA (or, without a dot report, per IR
    dot of a kernel with no tensor-core instruction in its SASS)."""
    out: List[Diagnostic] = []
    ffma = len(facts.opcodes("FFMA", "HFMA2", "DFMA", "IMAD"))
    n_ffma = len(facts.opcodes("FFMA", "HFMA2", "DFMA"))
    n_tc = len(facts.tensor_core_instructions)
    fma_dots = [d for d in facts.dots if d.get("engine") == "fma"]
    for d in fma_dots:
        reason = d.get("fma_reason") or "unknown reason"
        m, n, k = dot_dims(d)
        severity, fix, changes = _classify(facts, d, reason)
        where = facts.location(d.get("file"), d.get("line"))
        ev = {"dot": f"{m}x{k} @ {k}x{n}", "a_dtype": d.get("a_dtype"), "b_dtype": d.get("b_dtype"),
              "acc_dtype": d.get("acc_dtype"), "input_precision": d.get("input_precision"), "engine": "fma",
              "reason": reason, "fma_instructions": n_ffma, "tensor_core_instructions": n_tc}
        ev.update(evidence_samples(facts, d.get("file"), d.get("line")))
        sass = f"{n_ffma} FFMA, no HMMA/HGMMA" if n_tc == 0 else f"{n_ffma} FFMA"
        out.append(Diagnostic(
            "no-tensor-cores", 1, TITLE, severity,
            f"{where}: dot {m}x{k} @ {k}x{n} ({dot_types(d)}) runs on FMA ({sass}): {reason}",
            fix, d.get("file"), d.get("line"), source_of(facts, d.get("file"), d.get("line")), ev, changes,
            basis_of(ev)))
    if not facts.dots and facts.sass:
        # no compiler report (an older cache entry): fall back to the IR and the SASS
        ir_dots = facts.tir.ops_named("dot")
        if ir_dots and n_tc == 0:
            for op in ir_dots:
                where = facts.location(op.file, op.line)
                out.append(Diagnostic(
                    "no-tensor-cores", 1, TITLE, "warning",
                    f"{where}: dot compiled without tensor-core instructions ({n_ffma} FFMA, no HMMA/HGMMA)",
                    f"check the compile log; {TENSOR_CORE_RULE}",
                    facts.full_path(op.file) or op.file, op.line, source_of(facts, op.file, op.line),
                    {"fma_instructions": n_ffma, "tensor_core_instructions": 0, "fma_like_instructions": ffma}))
    return out
