"""``split_ws_consumers``: how many warps run the dot of a loop the program asks to warp-specialise.

A warp-specialised loop has consumers (the warps that run its dots and everything else of the kernel)
and a producer that only fills the ring (``warp_specialize`` and ``expand_warp_specialize``,
docs/schedule-ir.md). ``num_warps`` names the consumers. At ``num_warps=4`` a 128-row wgmma dot then
sits in one warpgroup: tutorial 09's 128x256 fp32 accumulator is 256 registers a thread, more than a
thread has, so it spills. Triton (3.6, Hopper) splits such a dot along M between two consumer
warpgroups of 64 rows each, besides its producer, and so does this pass: when the program asks for warp
specialisation on a loop (``kl.range(..., warp_specialize=True)``, on the loop with the dot or on a
tile loop around it), the loop's one dot is a wgmma of ``M`` rows whose operands are descriptor loads,
and ``M`` is at least 64 rows a consumer warpgroup, the kernel's tiles are laid over ``min(2, M // 64)``
warpgroups::

    kernel k(...) attributes {consumer_warps=8}

and ``ctx.num_warps`` becomes 8 for every pass after it (layouts, rings, codegen). It runs before
``lower_descriptors``: the dot's operands are still the program's descriptor loads, so a kernel whose
descriptors cannot take TMA (strides not known 16-byte aligned: the masked path, no producer) is split
too, and does not spill its accumulator at 4 warps. ``num_warps`` as the program gave it stays the kernel's (the autotuner's and ``kl.extra.cuda.num_warps()``'s value); the
launch adds the extra consumer warps to the producer's (``CompiledKernel.extra_warps``).
Loops with several dots (attention) keep ``num_warps``: this is Triton's GEMM rule, and their warp
specialisation was measured with ``num_warps`` consumers (docs/performance.md, "Warp specialisation").
KERNELC_WS_SPLIT_M=0 keeps ``num_warps`` everywhere.
"""
from __future__ import annotations

from typing import List, Optional

from ...language.dtypes import shape_of
from ...options import get
from .. import target_rules as R
from ..ir.core import Function, Op

MAX_CONSUMER_GROUPS = 2  # Triton's split: two consumer warpgroups
WG_ROWS = 64             # a warpgroup's wgmma instruction covers 64 rows


def specialised_loop(loop: Op) -> Optional[Op]:
    """The loop whose ring a producer fills when ``loop`` asks for warp specialisation: ``loop`` itself
    when dots are in its body, else the one loop nested in it whose body holds dots (a persistent
    kernel's K loop inside its tile loop); None if there is no such loop or more than one."""
    body = loop.regions[0]
    if any(o.name == "dot" for o in body.ops):
        return loop
    inner = [o for t in body.ops for o in t.walk()
             if o.name == "scf.for" and any(d.name == "dot" for d in o.regions[0].ops)]
    return inner[0] if len(inner) == 1 else None


def _ring_tile(v) -> bool:
    """A dot operand the program loads through a descriptor, directly or through one 2-D ``trans``."""
    d = v.op
    if d is not None and d.name == "trans":
        d = d.operands[0].op
    return d is not None and d.name == "descriptor_load"


def consumer_warps(fn: Function, num_warps: int, arch: str) -> int:
    """The warps the kernel's tiles are laid over (see the module docstring)."""
    if not R.arch_has_wgmma(arch) or not get("KERNELC_WS_SPLIT_M"):
        return num_warps
    for loop in fn.walk():
        if loop.name != "scf.for" or loop.attrs.get("warp_specialize") is not True:
            continue
        ws = specialised_loop(loop)
        if ws is None or (ws is not loop and ws.attrs.get("warp_specialize") is False):
            return num_warps
        dots: List[Op] = [o for o in ws.regions[0].ops if o.name == "dot"]
        if len(dots) != 1 or not all(_ring_tile(v) for v in dots[0].operands[:2]):
            return num_warps
        d = dots[0]
        m = shape_of(d.results[0].type)[0]
        warps = max(num_warps, 4 * min(MAX_CONSUMER_GROUPS, m // WG_ROWS))
        if warps == num_warps or not R.wgmma_eligible(d.operands[0].type, d.operands[1].type,
                                                      d.results[0].type, warps, arch):
            return num_warps
        return warps
    return num_warps


def split_ws_consumers(fn: Function, ctx) -> Function:
    """Write ``consumer_warps`` on ``fn`` when it differs from ``num_warps`` and lay every later pass's
    tiles over that many warps."""
    warps = consumer_warps(fn, ctx.num_warps, ctx.arch)
    if warps != ctx.num_warps:
        fn.attrs["consumer_warps"] = warps
        ctx.notes.append(f"{fn.file}:{fn.line}: the warp-specialised dot runs on {warps // 4} consumer warpgroups "
                         f"({warps} warps; num_warps={ctx.num_warps})")
        ctx.num_warps = warps
    return fn
