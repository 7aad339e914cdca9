"""``share_staged_operands``: one shared-memory copy of a loop-invariant dot operand per block, not one
per loop.

``expand_cp_async_rings`` / ``expand_tma_rings`` stage a tensor-core operand that is defined outside
its loop (``stage_operand``, before the loop) so the dots read it from shared memory. They do it per
loop: a value read by the dots of two loops of the same block (tutorial 06's ``_attn_bwd`` reads ``q``
and ``do`` in both of its dQ loops) is stored twice, and each copy holds its own shared memory for the
whole kernel (128x128 fp16: 32 KB each). A staged copy is never written after its ``stage_operand``,
so a later ``stage_operand`` of the same value in the same role, in the same block, can read the
earlier copy: this pass points its users at the earlier result and removes it. The earlier op comes
first in the block, so it dominates every user of the later one. The barrier (and async-proxy fence)
that follows the removed op's staging stays; it orders nothing new and costs one ``bar.sync``.
"""
from __future__ import annotations

from typing import Dict, Tuple

from ..ir.core import Block, Function, Value, replace_all_uses


def share_staged_operands(func: Function) -> Function:
    _share(func.body, func.body)
    return func


def _share(block: Block, root: Block) -> None:
    first: Dict[Tuple[int, str], Value] = {}
    for op in list(block.ops):
        if op.name == "stage_operand":
            key = (op.operands[0].id, op.attrs.get("operand"))
            earlier = first.get(key)
            if earlier is None:
                first[key] = op.results[0]
            elif earlier.type == op.results[0].type:
                replace_all_uses(root, op.results[0], earlier)
                block.ops.remove(op)
                continue
        for region in op.regions:
            _share(region, root)
