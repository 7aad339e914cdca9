"""9. fp8 dots below fp8 speed: operands upcast to fp16, or an operand transposed into shared memory.

* ``fp8-upcast``: kernelc runs an fp8 (e4m3 / e5m2) dot on fp16 MMAs, after an exact conversion of its
  operands, where the target has no fp8 tensor-core instruction (before sm_89) or K is not a multiple of
  32, the k of every fp8 MMA (``kernelc/compiler/passes/fp8_dot.py``; the dot report's ``fp8_upcast`` and
  the compile log say so). Native fp8 (QMMA on sm_89, QGMMA on sm_90a) has twice fp16's tensor-core rate.
* ``fp8-transposed-operand``: 8-bit MMA operands must be K-major in shared memory (no ldmatrix.trans for
  bytes, no transpose bit in 8-bit wgmma), so an operand given with its outer dim contiguous (a row-major
  B, a column-major A) cannot be copied by cp.async: it is loaded into registers and written to shared
  memory one byte per store (the dot report's ``smem_transpose``).
"""
from __future__ import annotations

from typing import Dict, List, Optional

from .diagnostic import Diagnostic
from ._util import (FP8_MMA_K, FP8_MMA_SM, basis_of, dot_constexprs, dot_dims, evidence_samples, fp8_types,
                    sass_counts, source_of, target_arch, target_sm)
from ..facts import KernelFacts

TITLE_UPCAST = "fp8 dot upcast to fp16"
TITLE_TRANSPOSED = "fp8 operand transposed into shared memory"
# engine of an upcast dot -> (the SASS opcode it runs as, how it runs)
UPCAST_RUNS = {"mma.sync": ("HMMA", "at fp16 rate on mma.sync"), "wgmma": ("HGMMA", "at fp16 rate on wgmma"),
               "fma": ("FFMA", "on FMA, not even fp16 tensor cores")}
# why the compiler upcast -> the fix (the K rule also proposes a config change)
UPCAST_FIXES = {
    "target": "build for sm_89 (fp8 mma.sync, QMMA) or sm_90a (fp8 wgmma, QGMMA), the default targets on "
              "those GPUs (--arch / KERNELC_TARGET)",
    "k": f"make BLOCK_K a multiple of {FP8_MMA_K}, the k of the fp8 MMA instructions (mma.sync m16n8k32, "
         "wgmma m64nNk32)",
}
# transposed operand -> (name, how it was given, how to give it instead)
OPERAND_FIXES = {
    "a": ("A", "column-major (M-contiguous)", "pass A row-major, K-contiguous (stride_ak == 1)"),
    "b": ("B", "row-major (N-contiguous)", "pass B column-major: b_nk.t(), the transposed view of a contiguous "
          "[N, K] tensor (stride_bk == 1), as torch._scaled_mm takes it"),
}


def _log_line(facts: KernelFacts, d: dict) -> Optional[str]:
    """The compile-log note of this dot's upcast."""
    tag = f"{d.get('file')}:{d.get('line')}:"
    return next((ln for ln in facts.compile_log if ln.startswith(tag) and "upcast to fp16" in ln), None)


def _fp8_evidence(facts: KernelFacts, d: dict) -> Dict:
    m, n, k = dot_dims(d)
    ev = {"dot": f"{m}x{k} @ {k}x{n}", "fp8_types": list(fp8_types(d)), "engine": d.get("engine"),
          "target": target_arch(facts)}
    ev.update(sass_counts(facts, "QMMA", "QGMMA"))
    ev.update(evidence_samples(facts, d.get("file"), d.get("line")))
    return ev


def _upcast(facts: KernelFacts, d: dict) -> Diagnostic:
    m, n, k = dot_dims(d)
    cause = "target" if target_sm(facts) < FP8_MMA_SM else "k"
    # on a GPU without fp8 tensor cores the upcast is the best there is: say so, but it is no finding
    severity = "info" if cause == "target" and facts.device.sm < FP8_MMA_SM else "warning"
    name = dot_constexprs(facts, d)["K"]
    changes = [{name: max(FP8_MMA_K, k + (-k) % FP8_MMA_K)}] if cause == "k" and name else []
    ev = _fp8_evidence(facts, d)
    op, runs = UPCAST_RUNS.get(str(d.get("engine")), UPCAST_RUNS["mma.sync"])
    ev.update(sass_counts(facts, op), upcast_reason=d.get("fp8_upcast"), compile_log=_log_line(facts, d))
    why = str(d.get("fp8_upcast")).split(": ", 1)[-1]
    fix = UPCAST_FIXES[cause] + (f": launch with {name}={changes[0][name]}" if changes else "")
    return Diagnostic(
        "fp8-upcast", 9, TITLE_UPCAST, severity,
        f"{facts.location(d.get('file'), d.get('line'))}: fp8 dot {m}x{k} @ {k}x{n} ({' x '.join(fp8_types(d))}) "
        f"is upcast to fp16 and runs {runs} ({ev[op.lower() + '_instructions']} {op}, "
        f"{ev['qmma_instructions'] + ev['qgmma_instructions']} QMMA/QGMMA): {why}; native fp8 (QMMA on sm_89, "
        "QGMMA on sm_90a) has twice fp16's tensor-core rate",
        fix, d.get("file"), d.get("line"), source_of(facts, d.get("file"), d.get("line")), ev, changes,
        basis_of(ev))


def check_upcast(facts: KernelFacts) -> List[Diagnostic]:
    """An ``fp8-upcast`` diagnostic per fp8 dot the compiler converted to fp16 (warning where a target or
    BLOCK_K change gives native fp8; info on a GPU without fp8 tensor cores)."""
    return [_upcast(facts, d) for d in facts.dots if d.get("fp8_upcast") and fp8_types(d)]


def _transposed(facts: KernelFacts, d: dict, which: List[str]) -> Diagnostic:
    m, n, k = dot_dims(d)
    ev = _fp8_evidence(facts, d)
    ev.update(transposed_operands=which,
              byte_stores=len([i for i in facts.opcodes("STS") if i.opcode.startswith(("STS.U8", "STS.S8"))]))
    names = " and ".join(OPERAND_FIXES[w][0] for w in which)
    given = "; ".join(f"{OPERAND_FIXES[w][0]} is {OPERAND_FIXES[w][1]}" for w in which)
    return Diagnostic(
        "fp8-transposed-operand", 9, TITLE_TRANSPOSED, "warning",
        f"{facts.location(d.get('file'), d.get('line'))}: fp8 dot {m}x{k} @ {k}x{n} ({' x '.join(fp8_types(d))}) "
        f"on {d.get('engine')}: {given}, but 8-bit MMA operands must be K-major in shared memory, so {names} "
        f"cannot be copied by cp.async as it is: it is loaded into registers and written to shared memory one "
        f"byte per store ({ev['byte_stores']} STS.U8)",
        "; ".join(OPERAND_FIXES[w][2] for w in which) + ": K-contiguous tiles stream through the cp.async "
        "pipeline as they are", d.get("file"), d.get("line"), source_of(facts, d.get("file"), d.get("line")), ev,
        [], basis_of(ev))


def check_transposed(facts: KernelFacts) -> List[Diagnostic]:
    """An ``fp8-transposed-operand`` warning per fp8 dot whose report says an operand was staged across its
    contiguous dim (``smem_transpose``; absent from older cache entries, which then get no diagnostic)."""
    return [_transposed(facts, d, list(d["smem_transpose"])) for d in facts.dots
            if d.get("smem_transpose") and fp8_types(d) and not d.get("fp8_upcast")]
