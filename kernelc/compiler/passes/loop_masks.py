"""Which tile compares a loop reads from outside it: a mask computed before a row loop (``mask = cols <
n_cols`` in a layer-norm or RMS-norm backward that walks its program's rows) and read in the loop's body.

Why it matters (passes/mask_blocks.py uses it): such a compare's per-element predicates stay live across every
trip of the loop. A thread of layer_norm bwd at 4096 columns and 8 warps holds 16 of them, more than the 7
predicate registers, so ptxas keeps them in general registers and moves them back and forth (12 ``P2R`` in its
loop on sm_90a, 480 SASS instructions against 440 with the compare computed once per 16-column block). A
compare made inside the loop's body is short-lived and does not pay this.
"""
from __future__ import annotations

from typing import List

from ...language.dtypes import shape_of
from ..ir.core import Function, Op

LOOPS = ("scf.for", "scf.while")
# ops a mask passes through unchanged in meaning (the same set mark_uniform_masks follows to a ring's mask)
THROUGH = frozenset({"broadcast", "expand_dims", "reshape", "and", "or"})


def compares_read_in_loops(fn: Function) -> List[Op]:
    """The tile ``cmpi`` ops defined outside some loop of ``fn`` whose result is read inside that loop's body,
    directly or through ``THROUGH`` ops also defined outside it; in program order, each once."""
    found, seen = [], set()
    for loop in [o for o in fn.walk() if o.name in LOOPS]:
        inside = {id(o) for o in loop.walk()}
        todo = [v for o in loop.walk() if o is not loop for v in o.operands
                if v.op is not None and id(v.op) not in inside and shape_of(v.type)]
        while todo:
            op = todo.pop().op
            if op is None or id(op) in inside:
                continue
            if op.name in THROUGH:
                todo.extend(v for v in op.operands if shape_of(v.type))
            elif op.name == "cmpi" and id(op) not in seen:
                seen.add(id(op))
                found.append(op)
    order = {id(o): i for i, o in enumerate(fn.walk())}
    return sorted(found, key=lambda o: order[id(o)])
