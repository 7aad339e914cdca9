"""Fold ``acc + tl.dot(a, b)`` into ``tl.dot(a, b, acc)``.

``accumulator += tl.dot(a, b)`` builds a dot with a zero accumulator and an elementwise add of its
result. Lowered as written, every K step holds two full accumulator tiles (the product and the
running sum) and adds them element by element; for a 128x128 fp32 tile on 4 warps that is 256
registers a thread and spills (Triton's grouped GEMM tutorial). Accumulating in the MMA itself keeps
one tile. Triton folds the same pattern (its combine pass), so results round the same way as under
Triton.
"""
from __future__ import annotations

from ..ir.core import Block, Function, replace_all_uses, users

ADDS = ("fadd", "add")


def _is_zero(v) -> bool:
    op = v.op
    return op is not None and op.name == "constant" and op.attrs.get("value") == 0


def _fold_block(block: Block, root: Block, use) -> None:
    for op in list(block.ops):
        for r in op.regions:
            _fold_block(r, root, use)
        if op.name not in ADDS or len(op.operands) != 2:
            continue
        for i in (0, 1):
            d, other = op.operands[i], op.operands[1 - i]
            dot = d.op
            if (dot is None or dot.name != "dot" or dot.block is not block or not _is_zero(dot.operands[2])
                    or len(use.get(d.id, ())) != 1 or other.type != op.results[0].type or d.type != other.type):
                continue
            # the dot takes the add's place: ``other`` may be defined between the two
            block.ops.remove(dot)
            block.ops[block.ops.index(op)] = dot
            dot.operands[2] = other
            replace_all_uses(root, op.results[0], d)
            break


def fold_dot_accumulate(fn: Function) -> Function:
    """Rewrite ``add(x, dot(a, b, 0))`` (either operand order) as ``dot(a, b, x)`` when the dot's only
    user is the add. Mutates ``fn``."""
    _fold_block(fn.body, fn.body, users(fn.body))
    return fn
