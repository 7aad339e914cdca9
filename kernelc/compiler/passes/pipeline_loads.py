"""Register prefetch of plain loads in ``kl.range(..., num_stages=S)`` loops (S >= 2).

For a loop whose body loads a tile from an address that only depends on the induction variable,
loop-invariant values and "induction" carried values (pointers advanced by invariant amounts)::

    for i in range(lb, ub, step):          x0 = load(p(lb), m(lb) & (lb < ub))
        x = load(p(i), m(i))       ==>     for i in range(lb, ub, step) carrying xc = x0:
        use(x)                                 xn = load(p(i+step), m(i+step) & (i+step < ub))
                                               use(xc)
                                               yield ..., xn

so the load of the next iteration is in flight while this iteration computes (Triton's pipeliner
does the same through shared memory; one stage of register prefetch covers num_stages=2). Both
guards are the loop's own trip condition, so the prefetch never touches memory the original loop
would not have read, and a loop that runs zero times reads nothing.

Loads feeding ``dot`` are left to the cp.async pipeline of the lowering (codegen/pipeline.py).
Aliasing: like Triton we assume distinct kernel pointer arguments do not alias, so a load is only
skipped when a store/atomic in the loop writes through a pointer derived from the same argument as
the load (or from a pointer whose origin is unknown).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Set, Tuple

from ...language import dtypes as T
from ...language.dtypes import block_type, pointer_type, scalar_of, shape_of
from ..ir.core import Block, Function, Op, Value, clone_op, replace_all_uses
from ..ir.ops import OPS
from .layout_assign import REMATERIALIZABLE

_CHAIN_OPS = REMATERIALIZABLE | {"program_id", "num_programs"}
_WRITES = ("store", "atomic_rmw", "atomic_cas")
# Prefetched tiles stay live across the whole body: cap the extra registers per thread so a loop
# with many large loads does not start spilling.
MAX_PREFETCH_REGS = 64


def pipeline_loads(fn: Function, num_warps: int = 4, notes: Optional[List[str]] = None,
                   max_regs: int = MAX_PREFETCH_REGS, kernel_stages: Optional[int] = None) -> Function:
    """Prefetch eligible loads of ``scf.for`` loops with ``num_stages >= 2`` one iteration ahead.

    With KERNELC_PREFETCH_DOT_LOOPS, ``kernel_stages`` (the kernel's ``num_stages``) applies to a loop with a
    dot and no ``num_stages`` of its own (the ring passes pipeline it at that many stages), and only loads a
    dot reads directly (or through ``trans``/``convert_layout``) are left to the rings: a load that reaches a
    dot through arithmetic (tutorial 06's log-sum-exp and Delta rows in its dK/dV loop) is prefetched too.

    Mutates and returns ``fn``; run ``simplify`` afterwards to share the cloned index arithmetic.
    ``notes`` (if given) receives one line per load that was prefetched or deliberately skipped.
    """
    from ...options import get
    dot_loop_stages = kernel_stages if get("KERNELC_PREFETCH_DOT_LOOPS") else None
    loops = [op for op in fn.walk() if op.name == "scf.for"]
    for loop in reversed(loops):  # inner loops first
        stages = loop.attrs.get("num_stages")
        if stages is None and dot_loop_stages is not None and any(o.name == "dot" for o in loop.regions[0].ops):
            stages = dot_loop_stages
        if stages is None or stages < 2 or loop.attrs.get("prefetched"):
            continue
        n = _pipeline_loop(fn, loop, num_warps, max_regs, notes, stages,
                           _read_by_dot if dot_loop_stages is not None else _feeds_dot)
        if n:
            loop.attrs["prefetched"] = n
    return fn


# -- the transformation ----------------------------------------------------------------------------


def _pipeline_loop(fn: Function, loop: Op, num_warps: int, max_regs: int, notes, stages: int, ringed) -> int:
    body = loop.regions[0]
    parent = _parent_block(fn, loop)
    if parent is None or body.terminator is None or body.terminator.name != "scf.yield":
        return 0
    roots = _PointerRoots(fn)
    writes = [t for o in body.ops for t in o.walk() if t.name in _WRITES]
    write_roots = [roots.of(t.operands[0]) for t in writes]
    budget = max_regs
    done = 0
    for ld in [o for o in body.ops if o.name == "load"]:
        where = f"{ld.loc.file}:{ld.loc.line}"
        if ld.attrs.get("volatile"):
            continue
        if ringed(body, ld.results[0]):
            continue  # the rings of schedule_pipelines own it
        lroots = roots.of(ld.operands[0])
        if writes and (lroots is None or any(w is None or (w & lroots) for w in write_roots)):
            _note(notes, f"{where}: load not prefetched: the loop stores through a pointer that may alias it")
            continue
        plan = _address_plan(body, ld)
        if plan is None:
            continue
        regs = _regs_per_thread(ld.results[0].type, num_warps)
        if regs > budget:
            _note(notes, f"{where}: load not prefetched: {regs} more registers per thread exceed the "
                         f"prefetch budget ({budget} left)")
            continue
        budget -= regs
        _rewrite(loop, parent, ld, *plan)
        done += 1
        _note(notes, f"{where}: load prefetched one iteration ahead (num_stages={stages})")
    return done


def _rewrite(loop: Op, parent: Block, ld: Op, chain: List[Op], carried: List[int], step_chain: List[Op]) -> None:
    body = loop.regions[0]
    iv = body.args[0]
    lb, ub, step = loop.operands[:3]
    loc = ld.loc
    # prologue: iteration 0's load, before the loop, guarded by the loop running at all
    pre: List[Op] = []
    m0 = {iv.id: lb}
    for j in carried:
        m0[body.args[1 + j].id] = loop.operands[3 + j]
    first = _clone_load(ld, chain, m0, _in_range(lb, ub, step, loc, pre), pre)
    at = parent.ops.index(loop)
    for k, o in enumerate(pre):
        o.block = parent
        parent.ops.insert(at + k, o)
    # the carried value replaces the load inside the body
    cur = body.add_arg(ld.results[0].type, "")
    loop.operands.append(first)
    res = Value(ld.results[0].type, loop, len(loop.results))
    loop.results.append(res)
    replace_all_uses(body, ld.results[0], cur)
    body.ops.remove(ld)
    # next iteration's load at the top of the body (in flight while this iteration computes)
    top: List[Op] = []
    nxt_iv = _new(top, "add", [iv, step], iv.type, loc=loc)
    m1: Dict[int, Value] = {}
    step_map = _clone(step_chain, {}, top)  # carried values of the next iteration (their yields)
    yld = body.terminator
    for j in carried:
        y = yld.operands[j]
        m1[body.args[1 + j].id] = step_map.get(y.id, y)
    m1[iv.id] = nxt_iv
    nxt = _clone_load(ld, chain, m1, _in_range(nxt_iv, ub, step, loc, top), top)
    for k, o in enumerate(top):
        o.block = body
        body.ops.insert(k, o)
    yld.operands.append(nxt)


def _clone_load(ld: Op, chain: List[Op], mapping: Dict[int, Value], guard: Value, out: List[Op]) -> Value:
    """Clone the address chain with ``mapping`` and issue the load with its mask and-ed with ``guard``."""
    mapping = _clone(chain, mapping, out)
    ops = [mapping.get(o.id, o) for o in ld.operands]
    shape = shape_of(ld.results[0].type)
    g = guard if not shape else _new(out, "splat", [guard], block_type(T.int1, shape), loc=ld.loc)
    mask = g if len(ops) < 2 else _new(out, "and", [ops[1], g], ops[1].type, loc=ld.loc)
    operands = [ops[0], mask] + ops[2:]
    return _new(out, "load", operands, ld.results[0].type, dict(ld.attrs), ld.loc)


def _clone(chain: List[Op], mapping: Dict[int, Value], out: List[Op]) -> Dict[int, Value]:
    mapping = dict(mapping)
    for op in chain:
        new = clone_op(op, [mapping.get(o.id, o) for o in op.operands])
        out.append(new)
        for a, b in zip(op.results, new.results):
            mapping[a.id] = b
    return mapping


def _new(out: List[Op], name: str, operands, ty, attrs=None, loc=None) -> Value:
    op = Op(name, operands, [ty], attrs or {}, loc=loc)
    out.append(op)
    return op.results[0]


def _in_range(x: Value, ub: Value, step: Value, loc, out: List[Op]) -> Value:
    """``x`` is an iteration of the loop: the same test the lowered loop header makes."""
    sign = _step_sign(step)
    if sign > 0:
        return _new(out, "cmpi", [x, ub], T.int1, {"pred": "slt"}, loc)
    if sign < 0:
        return _new(out, "cmpi", [x, ub], T.int1, {"pred": "sgt"}, loc)
    zero = _new(out, "constant", [], step.type, {"value": 0}, loc)
    pos = _new(out, "cmpi", [step, zero], T.int1, {"pred": "sgt"}, loc)
    lt = _new(out, "cmpi", [x, ub], T.int1, {"pred": "slt"}, loc)
    gt = _new(out, "cmpi", [x, ub], T.int1, {"pred": "sgt"}, loc)
    return _new(out, "select", [pos, lt, gt], T.int1, loc=loc)


def _step_sign(step: Value) -> int:
    op = step.op
    if op is not None and op.name == "constant":
        v = int(op.attrs["value"])
        return (v > 0) - (v < 0)
    if op is not None and op.name == "num_programs":
        return 1  # a grid dimension is at least 1
    return 0


# -- eligibility -----------------------------------------------------------------------------------


def _address_plan(body: Block, ld: Op) -> Optional[Tuple[List[Op], List[int], List[Op]]]:
    """(address chain, carried indices it reads, chain of their next values), or None if the load's
    pointer/mask/other cannot be recomputed for another iteration."""
    defs = {r.id: op for op in body.ops for r in op.results}
    carried_ids = {a.id: i - 1 for i, a in enumerate(body.args) if i > 0}
    yld = body.terminator
    need: Set[int] = set()
    while True:
        res = _closure(list(ld.operands) + [yld.operands[j] for j in sorted(need)], defs, body.args[0], carried_ids)
        if res is None:
            return None
        _, used = res
        if used <= need:
            break
        need |= used
    order = {id(o): i for i, o in enumerate(body.ops)}
    chain = _closure(list(ld.operands), defs, body.args[0], carried_ids)[0]
    step_chain = _closure([yld.operands[j] for j in sorted(need)], defs, body.args[0], carried_ids)[0]
    key = lambda o: order[id(o)]  # noqa: E731
    return sorted(chain, key=key), sorted(need), sorted(step_chain, key=key)


def _closure(values: List[Value], defs: Dict[int, Op], iv: Value, carried_ids: Dict[int, int]):
    """Body ops computing ``values`` and the carried indices they read; None if one is not pure
    index/pointer arithmetic (a load, a reduction, nested control flow...)."""
    ops: Dict[int, Op] = {}
    used: Set[int] = set()
    stack = list(values)
    while stack:
        v = stack.pop()
        if v.id == iv.id:
            continue
        if v.id in carried_ids:
            used.add(carried_ids[v.id])
            continue
        op = defs.get(v.id)
        if op is None:
            continue  # defined before the loop
        if id(op) in ops:
            continue
        d = OPS.get(op.name)
        if op.name not in _CHAIN_OPS or d is None or not d.pure or op.regions:
            return None
        ops[id(op)] = op
        stack.extend(op.operands)
    return list(ops.values()), used


def _feeds_dot(body: Block, v: Value) -> bool:
    """Whether ``v`` reaches an A/B operand of a dot in the body (through any ops)."""
    tainted = {v.id}
    for op in _walk(body):
        if op.name == "dot" and (op.operands[0].id in tainted or op.operands[1].id in tainted):
            return True
        if any(o.id in tainted for o in op.operands):
            tainted.update(r.id for r in op.results)
            for r in op.regions:
                tainted.update(a.id for a in r.args)
    return False


def _read_by_dot(body: Block, v: Value) -> bool:
    """Whether a dot of the body reads ``v`` as its A or B operand, directly or through ``trans`` /
    ``convert_layout`` views (the loads ``schedule_pipelines`` may ring)."""
    for op in _walk(body):
        if op.name == "dot" and v.id in (op.operands[0].id, op.operands[1].id):
            return True
        if op.name in ("trans", "convert_layout") and op.operands[0].id == v.id and _read_by_dot(body, op.results[0]):
            return True
    return False


def _regs_per_thread(ty, num_warps: int) -> int:
    elt = scalar_of(ty)
    bits = 64 if isinstance(elt, pointer_type) else max(8, elt.primitive_bitwidth)
    words = max(1, (bits + 31) // 32)
    if not shape_of(ty):
        return words
    return max(words, -(-ty.numel * bits // (32 * 32 * num_warps)))


class _PointerRoots:
    """The kernel pointer arguments a pointer value derives from (None: not known)."""

    _THROUGH = ("addptr", "splat", "broadcast", "expand_dims", "reshape", "trans", "hint", "split")

    def __init__(self, fn: Function):
        self.args = {v.id: i for i, v in enumerate(fn.body.args)}
        self.block_arg_owner: Dict[int, Tuple[Op, int, int]] = {}
        for op in fn.walk():
            for ri, r in enumerate(op.regions):
                for ai, a in enumerate(r.args):
                    self.block_arg_owner[a.id] = (op, ri, ai)

    def of(self, v: Value) -> Optional[frozenset]:
        roots: Set[int] = set()
        seen: Set[int] = set()
        stack = [v]
        while stack:
            x = stack.pop()
            if x.id in seen:
                continue
            seen.add(x.id)
            if x.id in self.args:
                roots.add(self.args[x.id])
                continue
            prev = self._sources(x)
            if prev is None:
                return None
            stack.extend(prev)
        return frozenset(roots)

    def _sources(self, x: Value) -> Optional[List[Value]]:
        op = x.op
        if op is None:
            owner = self.block_arg_owner.get(x.id)
            if owner is None:
                return None
            parent, ri, ai = owner
            if parent.name == "scf.for" and ai > 0:
                return [parent.operands[2 + ai], parent.regions[0].ops[-1].operands[ai - 1]]
            if parent.name == "scf.while":
                if ri == 0:
                    return [parent.operands[ai], parent.regions[1].ops[-1].operands[ai]]
                return [parent.regions[0].ops[-1].operands[1 + ai]]
            return None
        name = op.name
        if name in self._THROUGH:
            return [op.operands[0]]
        if name == "select":
            return list(op.operands[1:])
        if name in ("join", "cat"):
            return list(op.operands)
        if name in ("cast", "bitcast") and isinstance(scalar_of(op.operands[0].type), pointer_type):
            return [op.operands[0]]
        if name == "scf.for":
            return [op.operands[3 + x.index], op.regions[0].ops[-1].operands[x.index]]
        if name == "scf.if":
            return [r.ops[-1].operands[x.index] for r in op.regions]
        if name == "scf.while":
            return [op.regions[0].ops[-1].operands[1 + x.index]]
        return None


def _walk(block: Block):
    for op in block.ops:
        yield from op.walk()


def _parent_block(fn: Function, target: Op) -> Optional[Block]:
    stack = [fn.body]
    while stack:
        b = stack.pop()
        for op in b.ops:
            if op is target:
                return b
            stack.extend(op.regions)
    return None


def _note(notes, text: str) -> None:
    if notes is not None:
        notes.append(text)
