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
                   max_regs: int = MAX_PREFETCH_REGS, kernel_stages: Optional[int] = None,
                   maxnreg: Optional[int] = None) -> Function:
    """Prefetch eligible loads of ``scf.for`` loops with ``num_stages >= 2`` one iteration ahead.

    KERNELC_PREFETCH_DOT_LOOPS (on, or auto where :func:`dot_loop_prefetch_pays` says so for the loop):
    ``kernel_stages`` (the kernel's ``num_stages``) applies to a loop with a dot and no ``num_stages`` of its own
    (the ring passes pipeline it at that many stages), and only loads a dot reads directly (or through
    ``trans``/``convert_layout``) are left to the rings: a load that reaches a dot through arithmetic (tutorial
    06's log-sum-exp and Delta rows in its dK/dV loops) is prefetched too. A loop that gets such a prefetch
    under auto says so: ``prefetch_rule={regs=<estimate>, rows=<its registers>, warps=<per SM>}``. ``maxnreg``
    (the launch's register ceiling) lowers the thread's maximum the rule keeps the loop under.

    Mutates and returns ``fn``; run ``simplify`` afterwards to share the cloned index arithmetic.
    ``notes`` (if given) receives one line per load that was prefetched or deliberately skipped.
    """
    from ...options import get
    mode = get("KERNELC_PREFETCH_DOT_LOOPS")
    loops = [op for op in fn.walk() if op.name == "scf.for"]
    # the kernel's registers a thread, as estimated before any prefetch: its hungriest dot loop decides them
    kernel_regs = max((loop_registers(lp, num_warps) for lp in loops if _has_dot(lp)), default=0) \
        if mode == "auto" else 0
    for loop in reversed(loops):  # inner loops first
        if loop.attrs.get("prefetched"):
            continue
        own = loop.attrs.get("num_stages")
        dot_stages = kernel_stages if mode != "off" and own is None and _has_dot(loop) else None
        stages = own if own is not None else dot_stages
        if stages is None or stages < 2:
            continue
        gate = None
        if mode == "auto":
            gate = _RuleGate(loop, num_warps, kernel_regs, notes, whole_loop=dot_stages is not None,
                             cap=min(MAX_THREAD_REGS, maxnreg or MAX_THREAD_REGS))
        n = _pipeline_loop(fn, loop, num_warps, max_regs, notes, stages,
                           _feeds_dot if mode == "off" else _read_by_dot, gate)
        if n:
            loop.attrs["prefetched"] = n
            if gate is not None and gate.rows:
                loop.attrs["prefetch_rule"] = {"regs": gate.loop_regs, "rows": gate.rows, "warps": gate.warps}
                # the estimate the rule took it on (a loop with no row to decide gets no note: it would be noise)
                _note(notes, f"{loop.loc.file}:{loop.loc.line}: dot loop: about {gate.loop_regs} registers a thread "
                             f"(estimate; the kernel: {kernel_regs}, {gate.warps} warps an SM)")
    return fn


# -- when a dot loop's prefetch pays (KERNELC_PREFETCH_DOT_LOOPS=auto) ------------------------------------------

SM_REGISTERS = 65536  # sm_70 .. sm_90
MAX_THREAD_REGS = 255
# The most warps of a kernel an SM may hold for registers up to a thread's maximum to cost it no program: 8 warps
# of 256 registers fill the register file. With more, a prefetch's registers held across the loop may cost a program
# (the example backward's D=64 dK/dV loop: 16 warps an SM, 12 with the prefetch), and those warps cover the latency
# of the loads in a trip; tutorial 06's d64 backward runs 8, and there the prefetch pays (docs/triton-tutorials.md,
# "dot-loop prefetch rule").
FREE_WARPS = SM_REGISTERS // (32 * (MAX_THREAD_REGS + 1))
# registers kept free under MAX_THREAD_REGS: the estimate was off by -28 to +40 on the kernels it was checked on
# (docs/triton-tutorials.md, "dot-loop prefetch rule"): the loop that pays (06's d64 backward, about 216 + 16 against
# 247) and those that spill (the example backward at D=128, about 240 + 16 for its first row) are 15 and 9 registers
# from the line
SPILL_MARGIN = 8
# what a thread holds beside the float tiles loop_registers counts: addresses, indices, masks, loop counters,
# the wgmma descriptors. Fitted on the example backward's dK/dV loops (126 and 235-242 registers by ptxas, 128 and
# 240 estimated)
BASE_REGS = 16


def _has_dot(loop: Op) -> bool:
    return any(o.name == "dot" for o in loop.regions[0].ops)


def _programs(regs: int, threads: int) -> int:
    """Programs of ``threads`` threads an SM holds at ``regs`` registers a thread (allocated in 8s)."""
    return SM_REGISTERS // (max(8, -(-regs // 8) * 8) * threads)


def dot_loop_prefetch_pays(kernel_regs: int, loop_regs: int, extra: int, num_warps: int,
                           cap: int = MAX_THREAD_REGS) -> Optional[str]:
    """Why a prefetch adding ``extra`` registers a thread to a loop estimated at ``loop_regs`` (a kernel at
    ``kernel_regs``, its hungriest loop) does not pay, or None when it does: the SM holds at most FREE_WARPS of the
    kernel's warps (so no register count a thread may have costs a program) and with the prefetch the loop stays
    SPILL_MARGIN under ``cap``, the registers a thread may have (MAX_THREAD_REGS, or the launch's maxnreg): no
    spill."""
    warps = max(1, _programs(kernel_regs, 32 * num_warps)) * num_warps
    if warps > FREE_WARPS:
        return (f"{warps} warps an SM at about {kernel_regs} registers a thread: more registers may cost a "
                f"program, and those warps cover the loads' latency")
    if loop_regs + extra > cap - SPILL_MARGIN:
        return f"about {loop_regs} + {extra} registers a thread would spill (at most {cap})"
    return None


class _RuleGate:
    """Admits the loads only the dot-loop prefetch takes (the whole loop's when it is pipelined at the kernel's
    stages, else those reaching a dot through arithmetic) while :func:`dot_loop_prefetch_pays`."""

    def __init__(self, loop: Op, num_warps: int, kernel_regs: int, notes, whole_loop: bool, cap: int):
        self.num_warps, self.kernel_regs, self.notes, self.cap = num_warps, kernel_regs, notes, cap
        self.whole_loop = whole_loop
        self.loop_regs = loop_registers(loop, num_warps)
        self.rows = 0
        self.warps = max(1, _programs(kernel_regs, 32 * num_warps)) * num_warps

    def __call__(self, body: Block, ld: Op) -> bool:
        if not self.whole_loop and not _feeds_dot(body, ld.results[0]):
            return True  # the plain prefetch of a num_stages loop, under its own budget
        extra = _held_regs(body, ld.results[0], self.num_warps)
        why = dot_loop_prefetch_pays(self.kernel_regs, self.loop_regs + self.rows, extra, self.num_warps, self.cap)
        if why is not None:
            _note(self.notes, f"{ld.loc.file}:{ld.loc.line}: load not prefetched "
                              f"(KERNELC_PREFETCH_DOT_LOOPS=auto): {why}")
            return False
        self.rows += extra
        return True


# ops whose result is a view of their operand (or a constant), held in no registers of its own
_VIEWS = {"constant", "splat", "broadcast", "expand_dims", "reshape", "trans", "convert_layout", "hint", "arange"}


def loop_registers(loop: Op, num_warps: int) -> int:
    """Registers a thread holds in ``loop`` (an estimate, before layouts): BASE_REGS plus the most float tile
    registers live at once in its body -- carried values, values of the body between their definition and last
    use, values from before the loop that the body reads in registers -- where a tile of ``n`` elements of ``b``
    bits is ``n * b / 32`` words over the program's threads and a row broadcast against a tile ``n / 4`` words
    (the MMA layouts: the four lanes of a quad share a row; each holds a quarter of its columns). Index, mask
    and pointer tiles, views and tiles only dots read (rings and staged operands: shared memory) count nothing."""
    body = loop.regions[0]
    ops = body.ops
    last: Dict[int, int] = {}
    inside: Set[int] = {a.id for a in body.args}
    for i, op in enumerate(ops):
        for t in op.walk():
            inside.update(r.id for r in t.results)
            for r in t.regions:
                inside.update(a.id for a in r.args)
            for v in t.operands:
                last[v.id] = i
    for op in reversed(ops):  # a view's reader reads its operand's registers: a row lives until its broadcast's reader
        if op.name in _VIEWS:
            far = max((last.get(r.id, -1) for r in op.results), default=-1)
            for v in op.operands:
                last[v.id] = max(last.get(v.id, -1), far)
    end = len(ops) - 1
    spans: List[Tuple[int, int, int]] = []  # (first, last, words)
    seen: Set[int] = set()

    def add(v: Value, first: int, upto: int) -> None:
        if v.id in seen:
            return
        seen.add(v.id)
        w = _held_regs(body, v, num_warps)
        if w:
            spans.append((first, upto, w))

    for a in body.args[1:]:
        add(a, -1, last.get(a.id, -1))
    for i, op in enumerate(ops):
        for t in op.walk():
            for v in t.operands:
                if v.id not in inside:
                    add(v, -1, end)  # from before the loop: live on every trip
        if op.name not in _VIEWS:
            for r in op.results:
                add(r, i, max(i, last.get(r.id, i)))
    # a value holds its registers from its definition up to its last reader, which may write its result into
    # them (an accumulator, an elementwise chain)
    peak = max((sum(w for f, u, w in spans if f == i or f <= i < u) for i in range(-1, end + 1)), default=0)
    return BASE_REGS + peak


def _held_regs(body: Block, v: Value, num_warps: int) -> int:
    """Registers a thread holds of ``v`` in the loop (0 for what :func:`loop_registers` does not count)."""
    shape = shape_of(v.type)
    elt = scalar_of(v.type)
    if not shape or isinstance(elt, pointer_type) or not elt.is_floating() \
            or (v.op is not None and v.op.name in _VIEWS):
        return 0
    if v.op is not None and (v.op.name in ("load", "descriptor_load") or v.op.block is not body) \
            and _only_dots_read(body, v):
        return 0  # a ring's tile or an operand staged before the loop: shared memory
    n = v.type.numel
    bits = elt.primitive_bitwidth
    if len(shape) == 1 and any(o.name == "expand_dims" and v.id == o.operands[0].id for o in _walk(body)):
        return -(-n * bits // 128)  # a row broadcast against a tile: a quarter of it a thread
    return -(-n * bits // (32 * 32 * num_warps))


def _only_dots_read(body: Block, v: Value) -> bool:
    """Whether every reader of ``v`` in the body is a dot's A/B operand (or a view only those read)."""
    readers = [(o, i) for o in _walk(body) for i, x in enumerate(o.operands) if x.id == v.id]
    if not readers:
        return False
    for o, i in readers:
        if o.name == "dot" and i < 2:
            continue
        if o.name in ("trans", "convert_layout") and _only_dots_read(body, o.results[0]):
            continue
        return False
    return True


# -- the transformation ----------------------------------------------------------------------------


def _pipeline_loop(fn: Function, loop: Op, num_warps: int, max_regs: int, notes, stages: int, ringed,
                   gate=None) -> int:
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
        if gate is not None and not gate(body, ld):
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
