"""2. Hopper under-use: a dot on mma.sync where wgmma applies on sm_90a.

kernelc emits wgmma for fp16/bf16 (HGMMA) and fp8 e4m3/e5m2 (QGMMA, any pairing of the two) dots with
an fp32 accumulator on ``sm_90a`` when ``num_warps % 4 == 0``, ``M % (16 * num_warps) == 0``,
``N % 8 == 0``, ``8 <= N <= 256`` and K is a multiple of the instruction's k: 16 for the 16-bit types,
32 for fp8 (``kernelc/compiler/codegen/wgmma.py``); an fp8 dot whose K is not a multiple of 32 is upcast
to fp16 first (``passes/fp8_dot.py``). The check proposes the smallest change that satisfies those rules.
On sm_90 an fp8 ``mma.sync`` is no QMMA either: ptxas converts the operands to fp16 (``F2FP ... UNPACK``)
and issues HMMAs, so only wgmma runs fp8 at fp8 rate.
"""
from __future__ import annotations

from typing import Dict, List, Optional

from .diagnostic import Diagnostic
from ._util import (FP8_MMA_K, FP8_TYPES, basis_of, dot_constexprs, dot_dims, dot_types, evidence_samples, fp8_types,
                    fp8_unpacks, sass_counts, source_of, target_arch)
from ..facts import KernelFacts

# operand type -> k of one wgmma instruction (m64nNk16 for 16-bit types, m64nNk32 for fp8)
WGMMA_K = {"fp16": 16, "bf16": 16, "fp8e4nv": FP8_MMA_K, "fp8e5": FP8_MMA_K}
# operand family -> SASS opcodes of its (mma.sync, wgmma) instructions, the check's evidence
SASS_OPCODES = {"16-bit": ("HMMA", "HGMMA"), "fp8": ("QMMA", "QGMMA")}
TITLE = "dot uses mma.sync where Hopper's wgmma applies"


def _eligible(m: int, n: int, k: int, nw: int, kstep: int = 16) -> bool:
    return nw % 4 == 0 and m % (16 * nw) == 0 and n % 8 == 0 and 8 <= n <= 256 and k % kstep == 0


def _kind(d: dict) -> str:
    """The operand type the rules apply to: an upcast fp8 dot counts as fp8 (that is what it could run as)."""
    fp8 = fp8_types(d)
    return fp8[0] if fp8 else str(d.get("a_dtype"))


def _evidence(facts: KernelFacts, d: dict, kind: str, arch: str) -> Dict:
    m, n, k = dot_dims(d)
    ev = {"dot": f"{m}x{k} @ {k}x{n}", "a_dtype": str(d.get("a_dtype")), "engine": "mma.sync",
          "num_warps": facts.num_warps, "target": arch}
    if kind in FP8_TYPES:
        # fp8 mma.sync on sm_90 shows up as fp16 HMMAs fed by fp8 -> fp16 conversions
        ev.update(fp8_types=list(fp8_types(d)), fp8_upcast=d.get("fp8_upcast"),
                  fp8_unpack_instructions=fp8_unpacks(facts))
        ev.update(sass_counts(facts, *SASS_OPCODES["fp8"], "HMMA"))
    else:
        ev.update(sass_counts(facts, *SASS_OPCODES["16-bit"]))
    ev.update(evidence_samples(facts, d.get("file"), d.get("line")))
    return ev


def _sass_text(ev: Dict, kind: str) -> str:
    """What the SASS shows, e.g. ``64 HMMA, 0 HGMMA`` or, for fp8, the emulated QMMA."""
    if kind not in FP8_TYPES:
        return f"{ev['hmma_instructions']} HMMA, {ev['hgmma_instructions']} HGMMA"
    if ev["fp8_upcast"]:
        return f"{ev['hmma_instructions']} HMMA, {ev['qgmma_instructions']} QGMMA"
    if ev["qmma_instructions"]:
        return f"{ev['qmma_instructions']} QMMA, {ev['qgmma_instructions']} QGMMA"
    return (f"{ev['qgmma_instructions']} QGMMA; sm_90 has no native fp8 mma.sync: ptxas converts the operands to fp16 "
            f"({ev['fp8_unpack_instructions']} F2FP unpacks) and runs {ev['hmma_instructions']} HMMA at fp16 rate")


def _why(m: int, n: int, k: int, nw: int, kstep: int) -> List[str]:
    why = []
    if nw % 4:
        why.append(f"num_warps={nw} is not a multiple of 4 (a warpgroup)")
    elif m % (16 * nw):
        why.append(f"M={m} is not a multiple of 16 x num_warps = {16 * nw}")
    if n % 8 or not 8 <= n <= 256:
        why.append(f"N={n} is not a multiple of 8 in [8, 256]")
    if k % kstep:
        why.append(f"K={k} is not a multiple of {kstep}" + (" (the k of fp8 wgmma)" if kstep == FP8_MMA_K else ""))
    return why


def _changes(facts: KernelFacts, d: dict, kstep: int) -> List[Dict[str, int]]:
    """Config deltas that make the dot wgmma-eligible: more warps alone, else the tile too."""
    m, n, k = dot_dims(d)
    changes: List[Dict[str, int]] = [{"num_warps": nw} for nw in (4, 8) if _eligible(m, n, k, nw, kstep)]
    if changes:
        return changes
    names = dot_constexprs(facts, d)
    # change the tile too: M to 64 with 4 warps or 128 with 8, N/K to legal values
    for tm, nw in ((64, 4), (128, 8)):
        delta: Dict[str, int] = {}
        if names["M"] and m != tm:
            delta[names["M"]] = tm
        if (n % 8 or not 8 <= n <= 256) and names["N"]:
            delta[names["N"]] = 128 if n > 256 else max(16, n + (-n) % 8)
        if k % kstep and names["K"]:
            delta[names["K"]] = max(kstep, k + (-k) % kstep)
        if _eligible(delta.get(names["M"] or "", m), delta.get(names["N"] or "", n),
                     delta.get(names["K"] or "", k), nw, kstep):
            delta["num_warps"] = nw
            changes.append(delta)
    return changes


def _fix(kind: str, changes: List[Dict[str, int]]) -> str:
    cfg = ", ".join(f"{kk}={vv}" for kk, vv in changes[0].items()) if changes else None
    rule = ("kernelc uses wgmma (QGMMA, m64nNk32) for fp8 dots when num_warps is a multiple of 4, BLOCK_M a "
            "multiple of 16 x num_warps and BLOCK_K a multiple of 32" if kind in FP8_TYPES else
            "kernelc uses wgmma for fp16/bf16 dots when num_warps is a multiple of 4 and BLOCK_M a multiple of "
            "16 x num_warps")
    return rule + (f": launch with {cfg}" if cfg else "")


def _off_rules(facts: KernelFacts, d: dict, where: str, arch: str, ev: Dict) -> Optional[Diagnostic]:
    """The dot's types or target rule wgmma out (tf32: info; a plain sm_90 build: warning)."""
    m, n, k = dot_dims(d)
    at, kind = str(d.get("a_dtype")), _kind(d)
    src = source_of(facts, d.get("file"), d.get("line"))
    if kind not in WGMMA_K or str(d.get("acc_dtype")) != "fp32":
        if at != "fp32":
            return None
        return Diagnostic(
            "hopper-no-wgmma", 2, TITLE, "info",
            f"{where}: tf32 dot {m}x{k} @ {k}x{n} runs on mma.sync; kernelc emits wgmma only for fp16/bf16/fp8",
            "if bf16 inputs are acceptable, convert the operands (a.to(kl.bfloat16)) to use wgmma",
            d.get("file"), d.get("line"), src, ev)
    return Diagnostic(
        "hopper-no-wgmma", 2, TITLE, "warning",
        f"{where}: dot {m}x{k} @ {k}x{n} ({dot_types(d)}) runs on mma.sync ({_sass_text(ev, kind)}): built for "
        f"{arch}, and wgmma needs the arch-specific target sm_90a",
        "compile for sm_90a (the default on Hopper; check KERNELC_TARGET)", d.get("file"), d.get("line"), src, ev)


def check(facts: KernelFacts) -> List[Diagnostic]:
    """A ``hopper-no-wgmma`` diagnostic per dot on mma.sync on an sm_90 device, with the config that fixes it."""
    if facts.device.sm != 90:
        return []
    arch = target_arch(facts)
    out: List[Diagnostic] = []
    for d in facts.dots:
        if d.get("engine") != "mma.sync":
            continue
        m, n, k = dot_dims(d)
        kind = _kind(d)
        where = facts.location(d.get("file"), d.get("line"))
        ev = _evidence(facts, d, kind, arch)
        if kind not in WGMMA_K or str(d.get("acc_dtype")) != "fp32" or not arch.endswith("a"):
            diag = _off_rules(facts, d, where, arch, ev)
            out.extend([diag] if diag else [])
            continue
        kstep = WGMMA_K[kind]
        changes = _changes(facts, d, kstep)
        why = _why(m, n, k, facts.num_warps, kstep)
        out.append(Diagnostic(
            "hopper-no-wgmma", 2, TITLE, "warning",
            f"{where}: dot {m}x{k} @ {k}x{n} ({dot_types(d)}) runs on mma.sync ({_sass_text(ev, kind)}) on {arch}: "
            + "; ".join(why or ["the tile does not meet wgmma's shape rules"]),
            _fix(kind, changes), d.get("file"), d.get("line"), source_of(facts, d.get("file"), d.get("line")), ev,
            changes, basis_of(ev)))
    return out
