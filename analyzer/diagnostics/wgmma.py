"""2. Hopper under-use: a dot on mma.sync (HMMA) where wgmma (HGMMA) applies on sm_90a.

kernelc emits wgmma for fp16/bf16 dots with an fp32 accumulator on ``sm_90a`` when
``num_warps % 4 == 0``, ``M % (16 * num_warps) == 0``, ``N % 8 == 0``, ``8 <= N <= 256`` and
``K % 16 == 0`` (``kernelc/compiler/codegen/wgmma.py``); the check proposes the smallest change
that satisfies those rules.
"""
from __future__ import annotations

from typing import Dict, List

from . import Diagnostic
from ._util import dot_constexprs, dot_dims, evidence_samples, source_of
from ..facts import KernelFacts

WGMMA_TYPES = ("fp16", "bf16")
TITLE = "dot uses mma.sync where Hopper's wgmma applies"


def _eligible(m: int, n: int, k: int, nw: int) -> bool:
    return nw % 4 == 0 and m % (16 * nw) == 0 and n % 8 == 0 and 8 <= n <= 256 and k % 16 == 0


def check(facts: KernelFacts) -> List[Diagnostic]:
    if facts.device.sm != 90:
        return []
    arch = getattr(getattr(facts.compiled, "target", None), "arch", None) or facts.device.arch
    out: List[Diagnostic] = []
    n_hmma = len(facts.opcodes("HMMA"))
    n_hgmma = len(facts.opcodes("HGMMA"))
    for d in facts.dots:
        if d.get("engine") != "mma.sync":
            continue
        m, n, k = dot_dims(d)
        at = str(d.get("a_dtype"))
        where = facts.location(d.get("file"), d.get("line"))
        ev = {"dot": f"{m}x{k} @ {k}x{n}", "a_dtype": at, "engine": "mma.sync", "num_warps": facts.num_warps,
              "hmma_instructions": n_hmma, "hgmma_instructions": n_hgmma, "target": arch}
        ev.update(evidence_samples(facts, d.get("file"), d.get("line")))
        src = source_of(facts, d.get("file"), d.get("line"))
        if at not in WGMMA_TYPES or str(d.get("acc_dtype")) != "fp32":
            if at == "fp32":
                out.append(Diagnostic(
                    "hopper-no-wgmma", 2, TITLE, "info",
                    f"{where}: tf32 dot {m}x{k} @ {k}x{n} runs on mma.sync; kernelc emits wgmma only for fp16/bf16",
                    "if bf16 inputs are acceptable, convert the operands (a.to(kl.bfloat16)) to use wgmma",
                    d.get("file"), d.get("line"), src, ev))
            continue
        if not arch.endswith("a"):
            out.append(Diagnostic(
                "hopper-no-wgmma", 2, TITLE, "warning",
                f"{where}: dot {m}x{k} @ {k}x{n} ({at}) runs on mma.sync ({n_hmma} HMMA): built for {arch}, and "
                "wgmma needs the arch-specific target sm_90a",
                "compile for sm_90a (the default on Hopper; check KERNELC_TARGET)", d.get("file"), d.get("line"),
                src, ev))
            continue
        names = dot_constexprs(facts, d)
        changes: List[Dict[str, int]] = []
        for nw in (4, 8):
            if _eligible(m, n, k, nw):
                changes.append({"num_warps": nw})
        why = []
        if facts.num_warps % 4:
            why.append(f"num_warps={facts.num_warps} is not a multiple of 4 (a warpgroup)")
        elif m % (16 * facts.num_warps):
            why.append(f"M={m} is not a multiple of 16 x num_warps = {16 * facts.num_warps}")
        if n % 8 or not 8 <= n <= 256:
            why.append(f"N={n} is not a multiple of 8 in [8, 256]")
        if k % 16:
            why.append(f"K={k} is not a multiple of 16")
        if not changes:
            # change the tile too: M to 64 with 4 warps or 128 with 8, N/K to legal values
            for tm, nw in ((64, 4), (128, 8)):
                delta: Dict[str, int] = {}
                if names["M"] and m != tm:
                    delta[names["M"]] = tm
                if (n % 8 or not 8 <= n <= 256) and names["N"]:
                    delta[names["N"]] = 128 if n > 256 else max(16, n + (-n) % 8)
                if k % 16 and names["K"]:
                    delta[names["K"]] = max(16, k + (-k) % 16)
                if _eligible(delta.get(names["M"] or "", m), delta.get(names["N"] or "", n),
                             delta.get(names["K"] or "", k), nw):
                    delta["num_warps"] = nw
                    changes.append(delta)
        fix_cfg = ", ".join(f"{kk}={vv}" for kk, vv in changes[0].items()) if changes else None
        fix = ("kernelc uses wgmma for fp16/bf16 dots when num_warps is a multiple of 4 and BLOCK_M a multiple of "
               "16 x num_warps" + (f": launch with {fix_cfg}" if fix_cfg else ""))
        out.append(Diagnostic(
            "hopper-no-wgmma", 2, TITLE, "warning",
            f"{where}: dot {m}x{k} @ {k}x{n} ({at}) runs on mma.sync ({n_hmma} HMMA, {n_hgmma} HGMMA) on {arch}: "
            + "; ".join(why or ["the tile does not meet wgmma's shape rules"]),
            fix, d.get("file"), d.get("line"), src, ev, changes, "static+samples" if "line_samples" in ev else "static"))
    return out
