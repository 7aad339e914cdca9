"""Give the wgmma dots of a kernel with several warpgroups a warpgroup index the assembler knows is warp-uniform.

With more than one consumer warpgroup (8 warps and up) each warpgroup's wgmmas read their own 64-row blocks of
A, so the A descriptors are built from the warpgroup's first row, ``(tid.x / 128) * 64``. ptxas cannot prove a
value computed from ``tid.x`` the same in every lane, so it builds the descriptors in ordinary registers and moves
each to the uniform datapath that ``HGMMA`` reads them from (``R2UR``): 8 a K step in tutorial 09's persistent
GEMM at 128x256x64, 8 warps, where Triton's step has none. A warpgroup index read once at the kernel's entry
through ``shfl.sync.idx`` from lane 0 is warp-uniform to ptxas, and what is computed from it stays in uniform
registers (docs/triton-tutorials.md, "09 persistent pointer GEMM: the warpgroup index on the uniform datapath").

The pass writes this down: one ``warpgroup_index {uniform = true}`` op at the top of the kernel, and its result
as the last operand of every wgmma dot (after ``use_acc``, if any). Codegen lowers the op to the shuffle and the
dot's row blocks start from the operand; a dot without one computes the row from ``tid.x`` as before. One
warpgroup (4 warps) needs nothing: its rows start at 0 (codegen/wgmma.py). ``KERNELC_UNIFORM_WARPGROUP=0``
turns the pass off.
"""
from __future__ import annotations

from ...language.dtypes import int32
from ..ir.core import Function, Loc, Op


def _wgmma_dots(fn: Function, plan):
    return [op for op in fn.walk() if op.name == "dot" and op.attrs.get("engine") == "wgmma"]


def mark_uniform_warpgroups(fn: Function, ctx, enabled: bool = True) -> Function:
    """Add ``warpgroup_index {uniform}`` to ``fn``'s entry and pass it to each wgmma dot when ``enabled``
    (KERNELC_UNIFORM_WARPGROUP) and the tiles are laid over more than one warpgroup (``ctx.num_warps`` > 4: the
    consumer warps). Mutates ``fn``."""
    if not enabled or ctx.num_warps <= 4 or ctx.plan is None:
        return fn
    dots = [d for d in _wgmma_dots(fn, ctx.plan) if not (d.operands[-1].op is not None
                                                          and d.operands[-1].op.name == "warpgroup_index")]
    if not dots:
        return fn
    wg = Op("warpgroup_index", [], [int32], {"uniform": True}, loc=Loc(fn.file, fn.line))
    wg.block = fn.body
    fn.body.ops.insert(0, wg)
    for d in dots:
        d.operands.append(wg.results[0])
    return fn
