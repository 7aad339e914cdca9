"""Reading the schedule in the tile IR: the structures ``passes/schedule.py`` tags, recovered the same
way by the pass and by code generation (which only reads them: docs/schedule-ir.md)."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ...language.dtypes import shape_of
from ..ir.core import Block, Op, Value
from .layout_assign import REMATERIALIZABLE

CP_ASYNC, TMA = "cp.async", "tma"
REFILL_AFTER_DOTS = "after_dots"   # ops.RING_REFILL
REFILL_TOP = "top"   # a TMA ring's copies at the top of the iteration (passes/rings.py, KERNELC_TMA_REFILL_TOP)


def body_uses(body: Block) -> Dict[int, List[Tuple[Op, int]]]:
    uses: Dict[int, List[Tuple[Op, int]]] = {}
    for o in body.ops:
        for t in o.walk():
            for i, v in enumerate(t.operands):
                uses.setdefault(v.id, []).append((t, i))
    return uses


def body_defs(body: Block) -> Dict[int, Op]:
    return {r.id: op for op in body.ops for r in op.results}


def closure(values: List[Value], defs: Dict[int, Op], args: set) -> Optional[List[Op]]:
    """Ops of a loop body that compute ``values``, or None if one cannot be re-evaluated ahead of time. An
    ``scf.if`` whose branches only compute (a flattened loop's next tile coordinates, passes/flatten_loops.py)
    counts as one op that reads what its branches read."""
    need: Dict[int, Op] = {}
    stack = list(values)
    while stack:
        v = stack.pop()
        if v.id in args:
            continue
        op = defs.get(v.id)
        if op is None or id(op) in need:
            continue  # defined outside the loop (loop-invariant), or seen
        if op.name == "scf.if" and pure_branches(op):
            need[id(op)] = op
            stack.extend(x for t in op.walk() for x in t.operands)
            continue
        if op.name not in REMATERIALIZABLE and op.name not in ("program_id", "num_programs"):
            return None
        need[id(op)] = op
        stack.extend(op.operands)
    return list(need.values())


def pure_branches(op: Op) -> bool:
    """An ``scf.if`` whose branches hold only ops an address chain may re-evaluate (and their yields)."""
    return all(t.name in REMATERIALIZABLE or t.name in ("program_id", "num_programs", "scf.yield")
               for r in op.regions for t in r.ops)


def address_chain(loop: Op, cp_loads: List[Op], tma_loads: List[Op]):
    """(chain ops in body order, indices of the carried values it advances) of a pipelined loop: the
    pointers and masks of its cp.async loads, the offsets of its TMA loads, and the increments of the
    carried values they read; None if the chain cannot be re-evaluated for a later iteration."""
    body = loop.regions[0]
    defs = body_defs(body)
    args = {a.id for a in body.args}
    wanted = [v for ld in cp_loads for v in ld.operands[:2]] + [v for t in tma_loads for v in t.operands[1:]]
    chain = closure(wanted, defs, args)
    if chain is None:
        return None
    used = {v.id for v in wanted}
    for c in chain:
        used.update(o.id for o in c.operands)
    carried = body.args[1:]
    carried_idx = [i for i, a in enumerate(carried) if a.id in used]
    yld = body.ops[-1]
    while True:  # the increments may read further carried values, which then advance with them
        inc = closure([yld.operands[i] for i in carried_idx], defs, args)
        if inc is None:
            return None
        read = {x.id for c in inc for t in c.walk() for x in t.operands}
        more = [i for i, a in enumerate(carried) if a.id in read and i not in carried_idx]
        if not more:
            break
        carried_idx = sorted(carried_idx + more)
    allowed = {body.args[0].id} | {carried[i].id for i in carried_idx}
    for c in chain + inc:
        for o in (x for t in c.walk() for x in t.operands):
            if o.id in args and o.id not in allowed:
                return None  # the chain may only read the carried values it advances itself
    order = {id(o): i for i, o in enumerate(body.ops)}
    full = {id(c): c for c in chain + inc}
    return sorted(full.values(), key=lambda o: order[id(o)]), carried_idx


def ringed_operands(loop: Op):
    """(cp.async loads, TMA loads) of a loop as ``schedule_pipelines`` tagged them, in the order the
    ring lays them out: dots in body order, operand A before B. Each entry is (load, dot, is_a, via)
    where ``via`` is the 2-D ``trans`` the ringed tile is read through (or None); a tile several dots
    read has an entry per reader. Tiles the ring carries to registers (``pipeline={ring='tma',
    registers=True}``: read by no dot, e.g. attention's LSE rows) follow, as (load, None, None, None)."""
    body = loop.regions[0]
    defs = body_defs(body)
    cp, tma = [], []
    for o in body.ops:
        if o.name != "dot":
            continue
        for idx in (0, 1):
            src, via = defs.get(o.operands[idx].id), None
            if src is not None and src.name == "trans" and ring_of(src) in (TMA, CP_ASYNC):
                via, src = src, defs.get(src.operands[0].id)
            if src is None:
                continue
            if src.name == "load" and ring_of(src) == CP_ASYNC:
                cp.append((src, o, idx == 0, via))
            elif src.name == "descriptor_load" and ring_of(src) == TMA:
                tma.append((src, o, idx == 0, via))
    if tma:
        tma += [(o, None, None, None) for o in body.ops if o.name == "descriptor_load" and ring_of(o) == TMA
                and o.attrs["pipeline"].get("registers")]
    return cp, tma


def ring_of(op: Op) -> Optional[str]:
    p = op.attrs.get("pipeline")
    return p.get("ring") if isinstance(p, dict) else None


def loop_path(op: Op) -> List[Op]:
    """The ops from the function body down to ``op`` (outermost first)."""
    out = [op]
    b = op.block
    while b is not None and b.parent is not None:
        out.append(b.parent)
        b = b.parent.block
    return list(reversed(out))


def function_uses(fn) -> Dict[int, List[Tuple[Op, int]]]:
    """Value id -> (op, operand index) of every use in the function."""
    u: Dict[int, List[Tuple[Op, int]]] = {}
    for op in fn.walk():
        for i, v in enumerate(op.operands):
            u.setdefault(v.id, []).append((op, i))
    return u


def in_place_readers(uses, v: Value) -> Optional[List[Tuple[Op, int, Optional[Op]]]]:
    """(reader, operand index, 2-D trans or None) of every use of the tile ``v``, looking through a
    ``trans`` with one use (a view); None if a trans has other uses. ``schedule_pipelines`` tags a TMA
    tile ``in_place`` when every reader is a dot operand that reads shared memory."""
    out = []
    for op, i in uses.get(v.id, []):
        via = None
        if op.name == "trans" and len(shape_of(v.type)) == 2 and list(op.attrs.get("perm", [])) == [1, 0]:
            t_uses = uses.get(op.results[0].id, [])
            if len(t_uses) != 1:
                return None
            via = op
            op, i = t_uses[0]
        out.append((op, i, via))
    return out


def inside_loop(op: Op) -> bool:
    """Whether ``op`` may run more than once (it is nested in a loop)."""
    b = op.block
    while b is not None and b.parent is not None:
        if b.parent.name in ("scf.for", "scf.while"):
            return True
        b = b.parent.block
    return False
