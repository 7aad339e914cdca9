"""Hoist loop-invariant layout conversions out of ``scf.for`` bodies.

``coalesce`` writes a ``convert_layout`` right before the op that reads the tile in another layout.
When that op sits in a loop and the tile is computed before it -- a per-row statistic loaded once
and broadcast against every key block, ``lse[:, None]`` in an attention backward -- the conversion
goes through shared memory (stores, a barrier, loads) on every trip although its result never
changes. This pass moves such a conversion, with the shape-only ops between it and the loop-invariant
value (``expand_dims``, ``broadcast``, ...), to just before the loop; repeated until nothing moves,
so a conversion leaves every loop its operand is invariant in; one identical to a conversion already
hoisted before an earlier loop of the same block is replaced by it. All moved ops are pure and have no
regions, so only the place the work is done changes: once per loop run instead of once per trip
(also when the loop runs zero times, which costs one conversion).

Example (tile IR, names shortened)::

    scf.for %n ... {
      %e = expand_dims %lse {axis=1}
      %c = convert_layout %e {layout=#mma_rows}
      %s = sub %qk, %c
    }
  ->
    %e = expand_dims %lse {axis=1}
    %c = convert_layout %e {layout=#mma_rows}
    scf.for %n ... {
      %s = sub %qk, %c
    }
"""
from __future__ import annotations

from typing import Dict, List, Optional, Set

from ..ir.core import Function, Op, replace_all_uses

# ops that only rearrange a tile (no arithmetic, no memory): cheap to run once before the loop
_SHAPE_OPS = frozenset(("expand_dims", "broadcast", "reshape", "trans", "splat", "convert_layout"))


def hoist_conversions(fn: Function, notes: Optional[list] = None) -> Function:
    """Move every loop-invariant ``convert_layout`` (and the shape ops feeding it from inside the
    loop) before its loop, outermost first possible. Mutates and returns ``fn``."""
    while _hoist_once(fn, notes):
        pass
    return fn


def _hoist_once(fn: Function, notes: Optional[list]) -> bool:
    for loop in [op for op in fn.walk() if op.name == "scf.for"]:
        body = loop.regions[0]
        inside = {a.id for a in body.args}
        for op in loop.walk():
            inside.update(r.id for r in op.results)
        chosen: List[Op] = []
        ids: Set[int] = set()
        for op in body.ops:
            if op.name != "convert_layout" or op.attrs.get("pipeline"):
                continue
            chain = _invariant_chain(op, body, inside, ids)
            if chain is None:
                continue
            for c in chain:
                if id(c) not in ids:
                    ids.add(id(c))
                    chosen.append(c)
        if not chosen:
            continue
        outer = loop.block
        at = outer.ops.index(loop)
        # the same conversion hoisted out of an earlier loop (a causal kernel's two key loops) is reused
        have: Dict[tuple, Op] = {}
        for o in outer.ops[:at]:
            if o.name in _SHAPE_OPS:
                have.setdefault(_key(o), o)
        for op in sorted(chosen, key=body.ops.index):  # keep program order: defs before uses
            body.ops.remove(op)
            same = have.get(_key(op))
            if same is not None:
                replace_all_uses(fn.body, op.results[0], same.results[0])
                continue
            outer.ops.insert(at, op)
            op.block = outer
            have[_key(op)] = op
            at += 1
            if notes is not None and op.name == "convert_layout":
                notes.append(f"{op.loc.file}:{op.loc.line}: loop-invariant layout conversion hoisted out of the "
                             f"loop at line {loop.loc.line}")
        return True
    return False


def _key(op: Op) -> tuple:
    return (op.name, tuple(v.id for v in op.operands), str(op.results[0].type),
            tuple(sorted((k, repr(v)) for k, v in op.attrs.items())))


def _invariant_chain(op: Op, body, inside: Set[int], taken: Set[int]) -> Optional[List[Op]]:
    """``op`` and the shape ops in ``body`` it depends on, if every value they read from inside the
    loop comes from one of them; else None."""
    if op.block is not body or op.name not in _SHAPE_OPS or op.regions or op.attrs.get("pipeline") \
            or op.attrs.get("in_place"):
        return None
    chain = [op]
    for v in op.operands:
        if v.id not in inside:
            continue
        d = v.op
        if d is None:  # a block argument of the loop (the induction variable or a carried value)
            return None
        if id(d) in taken:
            continue
        sub = _invariant_chain(d, body, inside, taken)
        if sub is None:
            return None
        chain.extend(sub)
    return chain
