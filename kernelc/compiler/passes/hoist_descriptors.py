"""Hoist ``make_tensor_descriptor`` ops to the kernel's top level, and merge identical ones.

A descriptor made inside a loop or a branch from values the top level already has -- the block
pointer loads the frontend turns into descriptor loads on TMA targets make one per load, at the load,
from the block pointer's base, shape and strides -- describes the same tensor on every trip. Made
once, before the loop, it gets one CUtensorMap per program built at the kernel's entry
(``codegen/device_tensor_map.py``, which only takes top-level descriptors) instead of the generic
lowering. The op is pure, so moving it up and merging copies with the same operands, type and
padding changes nothing else.

Example (tile IR, names shortened)::

    scf.for %k ... {
      %d = make_tensor_descriptor %a, %M, %K, %lda {padding='zero'}
      %t = descriptor_load %d, %r, %c
    }
  ->
    %d = make_tensor_descriptor %a, %M, %K, %lda {padding='zero'}
    scf.for %k ... {
      %t = descriptor_load %d, %r, %c
    }
"""
from __future__ import annotations

from typing import Dict

from ..ir.core import Function, Op, replace_all_uses


def hoist_descriptors(fn: Function) -> Function:
    """Move every top-level-computable ``make_tensor_descriptor`` just before the top-level op that
    holds it, then keep one of each identical group. Mutates and returns ``fn``."""
    top = fn.body
    available = {a.id for a in top.args} | {r.id for op in top.ops for r in op.results}
    for holder in list(top.ops):
        for op in list(holder.walk()):
            if op is holder or op.name != "make_tensor_descriptor":
                continue
            if all(v.id in available for v in op.operands):
                op.block.ops.remove(op)
                top.ops.insert(top.ops.index(holder), op)
                op.block = top
    seen: Dict[tuple, Op] = {}
    for op in list(top.ops):
        if op.name != "make_tensor_descriptor":
            continue
        key = (tuple(v.id for v in op.operands), str(op.results[0].type), tuple(sorted(op.attrs.items())))
        first = seen.setdefault(key, op)
        if first is not op:
            replace_all_uses(top, op.results[0], first.results[0])
            top.ops.remove(op)
    return fn
