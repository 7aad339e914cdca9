"""Load a small per-row/per-column vector straight into the layout its one reader converts it to.

``coalesce`` gives a load the coalesced layout of its addresses; a 1-D vector that is then broadcast
against an MMA tile (``lse[None, :]``, ``delta[None, :]`` in the attention backward's dK/dV loop: one
fp32 per query row of the step) is converted right after, through shared memory: a store, a barrier,
loads, a barrier -- on every trip of the loop, where the barriers stop both warpgroups. This pass
writes the converted layout (with the size-1 axis dropped) on the load itself (``load {layout=...}``,
which layout assignment then takes) and removes the conversion. The threads that hold the same element
read the same address; a warp's lanes that do share one request, so the cost is a few more load
instructions in place of the round trip through shared memory.

Unless KERNELC_PREFETCH_DOT_LOOPS is off, a row register prefetch carries into the loop (``pipeline_loads``: loaded
before the loop and, for the next trip, in the body) moves the same way: both loads take the layout.

Only this pattern moves: ``load`` (1-D, at most MAX_ELEMS elements, its result read only by an
``expand_dims`` that only a ``convert_layout`` reads) in the body of a ``for`` loop, whose address and
mask are index math (materialised in any layout), and only when the target layout keeps the new axis of
size 1 in every register/lane/warp base (a broadcast along it, nothing stored along it). Outside a loop the
round trip runs once a program, which in a one-pass kernel (rope: a program per token) is the whole kernel;
such loads move too unless KERNELC_USE_LAYOUT_LOADS=loops. The loaded layout issues as many load instructions
as the conversion's shared-memory reads, so what it trades is the store, the barriers and the original load
against L1 requests of the threads that hold the same elements.

Example::

    %l = load %p, %m, %z : <32xfp32>
    %e = expand_dims %l {axis=0} : <1x32xfp32>
    %c = convert_layout %e {layout=#mma_cols} : <1x32xfp32>
  ->
    %l = load %p, %m, %z {layout=#mma_cols without axis 0} : <32xfp32>
    %e = expand_dims %l {axis=0} : <1x32xfp32>
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ...language.dtypes import shape_of
from ..ir.core import Function, Op, Value, replace_all_uses
from .layout_assign import REMATERIALIZABLE

# a vector longer than this costs more in redundant loads than the conversion it saves
MAX_ELEMS = 256


def _uses(fn: Function) -> Dict[int, List[Tuple[Op, int]]]:
    u: Dict[int, List[Tuple[Op, int]]] = {}
    for op in fn.walk():
        for i, v in enumerate(op.operands):
            u.setdefault(v.id, []).append((op, i))
    return u


def _flexible(v: Value) -> bool:
    """A scalar, or a tile layout assignment materialises wherever it is read (index math, constants)."""
    todo, seen = [v], set()
    while todo:
        x = todo.pop()
        if x.id in seen or not shape_of(x.type):
            continue
        seen.add(x.id)
        d = x.op
        if d is None or d.name not in REMATERIALIZABLE:
            return False
        todo.extend(d.operands)
    return True


def _carried_loads(arg: Value, uses, exp: Op):
    """(load before the loop, load in the body) of a loop-carried 1-D row that ``exp`` alone reads, as register
    prefetch leaves it (the prologue's load is the loop's init, the body's is yielded), or None."""
    blk = exp.block
    loop = blk.parent if blk is not None else None
    j = next((i for i, a in enumerate(blk.args[1:]) if a is arg), None) if blk is not None else None
    if loop is None or loop.name != "scf.for" or j is None or len(uses.get(arg.id, [])) != 1:
        return None
    init, y = loop.operands[3 + j], blk.ops[-1].operands[j]
    loads = [init.op, y.op]
    shape = shape_of(arg.type)
    if any(x is None or x.name != "load" or "layout" in x.attrs or x.attrs.get("pipeline") for x in loads) \
            or len(shape) != 1 or shape[0] > MAX_ELEMS or loads[1].block is not blk \
            or len(uses.get(init.id, [])) != 1 or len(uses.get(y.id, [])) != 1 \
            or not all(_flexible(o) for x in loads for o in x.operands):
        return None
    return loads


def loads_in_use_layout(fn: Function, loops_only: Optional[bool] = None) -> Function:
    """Rewrite every ``convert_layout(expand_dims(load))`` the module docstring allows. Mutates ``fn``.
    ``loops_only``: rewrite only loads in loop bodies (None: as KERNELC_USE_LAYOUT_LOADS says, ``loops`` = True)."""
    from ...options import get
    carried = get("KERNELC_PREFETCH_DOT_LOOPS") != "off"  # the knob that makes such rows; off, the code stays as it was
    if loops_only is None:
        loops_only = get("KERNELC_USE_LAYOUT_LOADS") == "loops"
    uses = _uses(fn)
    for cvt in [op for op in fn.walk() if op.name == "convert_layout"]:
        exp = cvt.operands[0].op
        if exp is None or exp.name != "expand_dims" or len(uses.get(exp.results[0].id, [])) != 1:
            continue
        ld = exp.operands[0].op
        if ld is None and carried and _carried_loads(exp.operands[0], uses, exp) is not None:
            # register prefetch (passes/pipeline_loads.py): the row is loaded before the loop and reloaded in the
            # body for the next trip; both loads take the layout, so the carried value needs no conversion
            loads = _carried_loads(exp.operands[0], uses, exp)
            axis = exp.attrs["axis"]
            want = cvt.attrs["layout"]
            if any(b[axis] != 0 for b in want.reg + want.lane + want.warp):
                continue
            for x in loads:
                x.attrs["layout"] = want.sliced(axis)
            replace_all_uses(fn.body, cvt.results[0], exp.results[0])
            cvt.block.ops.remove(cvt)
            continue
        # a 1-D TMA tile (a descriptor_load) is read back from unswizzled shared memory in whatever layout its
        # result has: the same move saves the round trip, with no redundant global requests at all
        if ld is None or ld.name not in ("load", "descriptor_load") or "layout" in ld.attrs or ld.attrs.get("pipeline"):
            continue
        shape = shape_of(ld.results[0].type)
        if len(shape) != 1 or shape[0] > MAX_ELEMS or len(uses.get(ld.results[0].id, [])) != 1:
            continue
        if not all(_flexible(o) for o in ld.operands):
            continue  # an address or mask with a layout of its own would need its own conversion
        in_loop = ld.block.parent is not None and ld.block.parent.name == "scf.for"
        if ld.block is not cvt.block or (loops_only and not in_loop):
            # another block (a conversion hoisted out of the load's loop by hoist_conversions), or outside a
            # loop under KERNELC_USE_LAYOUT_LOADS=loops: left as coalesce wrote it
            continue
        axis = exp.attrs["axis"]
        want = cvt.attrs["layout"]
        if any(b[axis] != 0 for b in want.reg + want.lane + want.warp):
            continue
        ld.attrs["layout"] = want.sliced(axis)
        replace_all_uses(fn.body, cvt.results[0], exp.results[0])
        cvt.block.ops.remove(cvt)
    return fn
