"""Anchor compiler hints to the value they describe, as Triton does.

``tl.multiple_of(x, 16)``, ``tl.max_contiguous`` and ``tl.max_constancy`` are promises about ``x``
itself: Triton writes them onto ``x``'s defining op (or, for a loop-carried ``x``, onto the loop), so
they hold at every use of ``x``, even when the call's result is dropped. Triton's grouped GEMM
tutorial relies on that: ``tl.multiple_of(a_ptrs, [16, 16])`` stands alone at the top of the K loop
and the loads below read ``a_ptrs``. The frontend builds a ``hint`` op whose result only its own
users see; this pass moves each hint right after the definition of its operand (to the top of the
block for a block argument) and points every other use of the operand at the hint's result. The
hint then dominates all of them and the axis analysis sees the promise wherever the value is read.
"""
from __future__ import annotations

from typing import List

from ..ir.core import Block, Function, Op, Value, replace_all_uses


def _root_block(v: Value, fn: Function) -> Block:
    """The block whose ops (and nested regions) can read ``v``: its defining block."""
    if isinstance(v.owner, Block):
        return v.owner
    return v.owner.block if v.owner is not None and v.owner.block is not None else fn.body


def anchor_hints(fn: Function) -> Function:
    """Move every ``hint`` op next to its operand's definition and route the operand's uses through it.
    Mutates ``fn``."""
    hints: List[Op] = [op for op in fn.walk() if op.name == "hint"]
    for h in hints:
        x = h.operands[0]
        block = _root_block(x, fn)
        h.block.ops.remove(h)
        if isinstance(x.owner, Block):
            pos = 0
        else:
            pos = block.ops.index(x.owner) + 1
        # keep earlier hints on the same value first: they were anchored at pos already
        while pos < len(block.ops) and block.ops[pos].name == "hint" and block.ops[pos].operands[0] is x:
            pos += 1
        block.ops.insert(pos, h)
        h.block = block
        replace_all_uses(block, x, h.result)
        h.operands[0] = x
    return fn
