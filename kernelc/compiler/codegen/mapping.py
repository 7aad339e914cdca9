"""``map_elementwise``: the op's region (a traced scalar function) lowered once per register."""
from __future__ import annotations

from ...language.dtypes import shape_of
from ..layouts import default_blocked
from .lowering import Lowering, Tile, rule


def _apply(lw: Lowering, region, args):
    """The region on one element: scalars in, scalars out (its ``if``s become LLVM branches)."""
    for a, x in zip(region.args, args):
        lw.scalars[a.id] = x
    for op in region.ops[:-1]:
        lw.lower_op(op)
    return [lw.scalar(v) for v in region.ops[-1].operands]


@rule("map_elementwise")
def lower_map(lw: Lowering, op):
    region = op.regions[0]
    res = op.results
    if not shape_of(res[0].type):  # scalars in, scalars out
        outs = _apply(lw, region, [lw.scalar(v) for v in op.operands])
        for r, x in zip(res, outs):
            lw.scalars[r.id] = x
        return
    L = lw.plan.get(res[0]) or default_blocked(shape_of(res[0].type), lw.nw)
    args = [lw.get(v, L).regs for v in op.operands]
    regs = [[] for _ in res]
    for k in range(L.num_regs):
        # the region's branches become LLVM blocks; each register gets its own copy of them
        for out, x in zip(regs, _apply(lw, region, [a[k] for a in args])):
            out.append(x)
    for r, rr in zip(res, regs):
        lw.tiles[r.id] = Tile(L, rr)
