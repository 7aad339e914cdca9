"""Drop loop-carried values of ``scf.for`` that nothing reads.

``dce`` keeps a carried value alive as long as the yield reads it, and the yield reads what the body
computes from the carried value: a pointer tile the loop advances every trip but no longer loads
through (``passes/pointer_tiles.py`` replaced its loads) would stay in registers and be advanced
for nothing. A carried value is dead when the loop's result for it is unused and its body argument
reaches nothing but pure ops whose results reach only its own yield slot; then the init operand, the
body argument, the yield operand, the result and the ops advancing it go.

Example (tile IR, names shortened)::

    %acc, %p = scf.for %lb, %ub, %step, %zero, %p0 {
      ^body(%k, %acc_in, %p_in):
        %t = descriptor_load %d, %r, %c        // no longer reads %p_in
        %p_next = addptr %p_in, %adv
        scf.yield %t_acc, %p_next
    }
  ->
    %acc = scf.for %lb, %ub, %step, %zero {
      ^body(%k, %acc_in):
        %t = descriptor_load %d, %r, %c
        scf.yield %t_acc
    }
"""
from __future__ import annotations

from typing import Dict, List, Optional

from ..ir.core import Block, Function, Op, users
from ..ir.ops import OPS


def drop_dead_carries(fn: Function) -> Function:
    """Remove every dead carried value of every ``scf.for`` (inner loops first). Mutates ``fn``."""
    use = users(fn.body)
    for op in _loops_innermost_first(fn.body):
        for j in reversed(range(len(op.results))):
            slice_ = _dead_slice(op, j, use)
            if slice_ is not None:
                _drop(op, j, slice_)
                use = users(fn.body)
    return fn


def _loops_innermost_first(block: Block) -> List[Op]:
    out: List[Op] = []
    for op in block.ops:
        for r in op.regions:
            out.extend(_loops_innermost_first(r))
        if op.name == "scf.for":
            out.append(op)
    return out


def _dead_slice(loop: Op, j: int, use: Dict[int, List[Op]]) -> Optional[List[Op]]:
    """The ops computing only carried value ``j``'s next value from it, if it is dead; else None."""
    if use.get(loop.results[j].id):
        return None
    body = loop.regions[0]
    yld = body.ops[-1]
    reached: Dict[int, Op] = {}
    todo = [body.args[1 + j]]
    while todo:
        v = todo.pop()
        for u in use.get(v.id, []):
            if u is yld:
                if any(o is v for k, o in enumerate(u.operands) if k != j):
                    return None  # feeds another carried value
                continue
            if id(u) in reached:
                continue
            d = OPS.get(u.name)
            if d is None or not d.pure or u.regions:
                return None
            reached[id(u)] = u
            todo.extend(u.results)
    return list(reached.values())


def _drop(loop: Op, j: int, slice_: List[Op]) -> None:
    body = loop.regions[0]
    yld = body.ops[-1]
    for op in slice_:  # nothing else reads them: they go with the carried value
        op.block.ops.remove(op)
    del loop.operands[3 + j]
    del yld.operands[j]
    del body.args[1 + j]
    del loop.results[j]
    for i, a in enumerate(body.args):
        a.index = i
    for i, r in enumerate(loop.results):
        r.index = i
