"""Tile IR (with layouts) -> LLVM IR text for NVPTX."""
from __future__ import annotations

from . import (control, convert, descriptors, dot, mapping, memory, permute, pipeline, reduce,  # noqa: F401
               warp_specialize, wgmma)  # (they register their op rules)
from .lowering import Lowering


def lower_to_llvm(func, plan, axis, num_warps, target, reports=None):
    """Returns (LLVM IR text, dynamic shared memory bytes); fills ``reports`` (memory accesses, dots)."""
    lw = Lowering(func, plan, axis, num_warps, target)
    text = lw.run()
    if reports is not None:
        reports.update(lw.reports)
    return text, lw.smem.total if lw.uses_smem else 0
