"""Tile IR (with layouts) -> LLVM IR text for NVPTX."""
from __future__ import annotations

from . import control, dot, memory, reduce  # noqa: F401  (register their op rules)
from .lowering import Lowering


def lower_to_llvm(func, plan, axis, num_warps, target, num_stages=3):
    """Returns (LLVM IR text, dynamic shared memory bytes)."""
    lw = Lowering(func, plan, axis, num_warps, target, num_stages)
    text = lw.run()
    return text, lw.smem.total if lw.uses_smem else 0
