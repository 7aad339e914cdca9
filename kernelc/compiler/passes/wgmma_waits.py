"""``place_wgmma_waits``: every ``wgmma.wait_group`` of the kernel as an explicit ``wgmma_wait`` op
(docs/schedule-ir.md, "wgmma waits as ops"). The scheduling passes decided how long each wgmma dot's group
stays in flight (the ``wgmma`` attribute on the dot); this pass, the last tile pass, writes where the
waits go, so the code generator issues a dot's wgmmas and commits its group and waits nowhere else.

    %d = dot ...                                   a wgmma dot: issue + commit only
    wgmma_wait {pending=0}                         right after a dot waited for at once (no ``wgmma``)
    wgmma_wait {pending=1}                         ... after one left in flight (``wgmma='async'``)
    %r0, %r1 = wgmma_wait %a0, %a1 {pending=0}     after a pipelined loop with ``async`` dots: the
                                                   accumulators those dots yield, taken through the wait
    scf.for ... {exit_wait=[k, ...]}               instead, when the loop also waits for other dots in the
                                                   trip (an async tail, KERNELC_WGMMA_ASYNC_TAIL): the code
                                                   generator waits on the loop's exit edge, taking carried
                                                   values k, ... through, before the path that skips the loop
                                                   joins (KERNELC_WGMMA_EXIT_WAIT; codegen/control.py)
    %t, ... = wgmma_wait %d, ... {pending=n[, pin=True]}
                                                   a ``deferred`` dot's result where it is first read

A wait with operands hands them back as its results, and the ops after it read the results: nothing that
reads the registers can be scheduled above the wait (LLVM keeps the data dependence; ptxas would otherwise
serialise every wgmma, C7514). ``pending=n`` for a deferred dot counts the groups committed after it (its
first read waits for it and for every older deferred group, which are taken through the same wait);
``pin=True`` (the dot's ``pin_wait``): the wait stays where it is in ptxas too (``codegen/wgmma.pinned_wait``).
An op that reads several pending values waits once, for the newest of them (a loop's yield reading two
deferred accumulators: one ``pending=0``, not a ``pending=1`` and then a ``pending=0``).
Deferred groups are all waited for before an ``scf.for``/``scf.if``/``scf.while`` (their distance differs
per trip or branch), before the back edge of a pipelined loop and where ``expand_warp_specialize`` wrote
``wgmma_wait_deferred`` (before a stage is released); that op is replaced. A first read is the first op,
in program order, whose lowering reads the value: directly or through values that have no layout of their
own (materialised where they are used); those are moved after the wait, with everything before it that
reads the value. A dot that promotes fp8 partial sums (``max_num_imprecise_acc``) waits inside its own
issue sequence and gets no wait here. The positions are the ones the code generator chose when it decided
this (codegen/wgmma.WgmmaGroups before 2026-11-27), so the generated code did not change.
"""
from __future__ import annotations

from typing import Dict, List

from ...language.dtypes import scalar_of, shape_of
from ...options import get
from ..ir.core import Block, Function, Op, Value
from ..ir.ops import OPS
from ..target_rules import WGMMA_TYPES
from .layout_assign import REMATERIALIZABLE
from .stage_operands import like


def _wgmma_dot(plan, op: Op) -> bool:
    return op.name == "dot" and op.attrs.get("engine") == "wgmma"


def _deferred(op: Op) -> bool:
    return op.attrs.get("wgmma") == "deferred" and op.attrs.get("max_num_imprecise_acc") is None


def _commit_groups(op: Op, num_warps: int):
    """(groups the dot's wgmmas commit, whether it waits for them itself): a dot that promotes fp8 partial sums
    commits and waits for one group per ``max_num_imprecise_acc`` slice of K per 64-row block
    (``codegen/wgmma.run_wgmma``)."""
    kind = scalar_of(op.operands[0].type).name
    _, kstep, has_trans = WGMMA_TYPES[kind]
    every = op.attrs.get("max_num_imprecise_acc")
    K = shape_of(op.operands[0].type)[1]
    if has_trans or every is None or every > K:
        return 1, False
    per_block = -(-(K // kstep) // max(1, every // kstep))
    return shape_of(op.results[0].type)[0] // (16 * num_warps) * per_block, True


def _flexible(plan, v: Value) -> bool:
    d = v.op
    return d is not None and bool(shape_of(v.type)) and plan.layouts.get(v.id) is None and \
        (d.name in REMATERIALIZABLE or (OPS.get(d.name) is not None and OPS[d.name].elementwise))


class _Waits:
    def __init__(self, fn: Function, ctx):
        self.fn, self.plan, self.axis, self.nw = fn, ctx.plan, ctx.axis, ctx.num_warps
        # deferred dot results not waited for yet (in the order they were issued): value id -> [value,
        # groups committed after it, pinned]
        self.pending: Dict[int, list] = {}
        # results of this block's ``wgmma='async'`` dots, still in flight (their group or the one after it):
        # value id -> [value, groups committed after it]; a branch that reads one waits for it there
        self.in_flight: Dict[int, list] = {}
        # (loop body, its arguments carrying an async dot's result that something besides that dot reads):
        # the body's first wait for everything (pending 0) takes them through (schedule.py: _rescaled_into_itself)
        self.tail = None

    # -- the waits -----------------------------------------------------------------------------------
    def _wait(self, block: Block, at: int, values: List[Value], pending: int, pin: bool, loc) -> int:
        """Insert ``wgmma_wait values {pending}`` at ``block.ops[at]``; the ops after it read its results (ops
        before it that read the values through layout-less values move after it). Returns the index after it."""
        attrs = {"pending": pending}
        if pin:
            attrs["pin"] = True
        w = Op("wgmma_wait", list(values), [v.type for v in values], attrs, loc=loc)
        for old, new in zip(values, w.results):
            like(self.plan, self.axis, new, old)
        tainted = {v.id for v in values}
        moved = []
        for o in block.ops[:at]:
            if any(x.id in tainted for t in o.walk() for x in t.operands):
                if not all(_flexible(self.plan, r) for r in o.results):
                    raise AssertionError(f"internal: {o.name} reads a deferred wgmma result before its wait")
                moved.append(o)
                tainted.update(r.id for r in o.results)
        for o in moved:
            block.ops.remove(o)
        at -= len(moved)
        block.ops[at:at] = [w] + moved
        w.block = block
        sub = {old.id: new for old, new in zip(values, w.results)}
        for o in block.ops[at + 1:]:
            for t in o.walk():
                t.operands = [sub.get(x.id, x) for x in t.operands]
        return at + 1 + len(moved)

    def _complete(self, block: Block, at: int, vid: int, loc) -> int:
        """The first read of pending ``vid`` (by an op at ``loc``): wait until its group is complete (and
        every older one)."""
        d, pin = self.pending[vid][1], self.pending[vid][2]
        done = [k for k, e in self.pending.items() if e[1] >= d]
        vals = [self.pending[k][0] for k in done]
        for k in done:
            del self.pending[k]
        return self._wait(block, at, vals, d, pin, loc)

    def _complete_all(self, block: Block, at: int, loc) -> int:
        if not self.pending:
            return at
        return self._complete(block, at, min(self.pending, key=lambda k: self.pending[k][1]), loc)

    def _reads(self, op: Op):
        """(pending value id, the op that reads it) for each pending value ``op``'s lowering reads, in the
        order it reads them: operands in order, through layout-less values (materialised there, under their
        own location) to what they are computed from."""
        out = []
        seen = set()

        def visit(v: Value, reader: Op):
            if v.id in seen:
                return
            seen.add(v.id)
            if v.id in self.pending:
                out.append((v.id, reader))
            elif _flexible(self.plan, v):
                for x in v.op.operands:
                    visit(x, v.op)

        for t in op.walk():
            for v in t.operands:
                visit(v, t)
        return out

    def _committed(self, n: int) -> None:
        for e in self.pending.values():
            e[1] += n
        for e in self.in_flight.values():
            e[1] += n

    def _branches(self, op: Op) -> None:
        """The regions of an ``scf.if`` after async dots of the enclosing block: a region that reads one of
        their results waits for it there (the tile's last step of a flattened loop: its epilogue), so the
        group stays in flight on the path that does not read it."""
        live = self.in_flight
        for r in op.regions:
            self.pending = {k: [v[0], v[1], False] for k, v in live.items()}
            self.in_flight = {}
            self.block(r)
        self.pending, self.in_flight = {}, live

    # -- the walk, in the code generator's order ------------------------------------------------------
    def block(self, block: Block) -> None:
        outer_in_flight, self.in_flight = self.in_flight, {}
        self._block(block)
        self.in_flight = outer_in_flight

    def _block(self, block: Block) -> None:
        i = 0
        while i < len(block.ops):
            op = block.ops[i]
            if op.name == "wgmma_wait_deferred":
                block.ops.pop(i)  # (the loop's release follows it)
                i = self._complete_all(block, i, op.loc)
                continue
            if op.name in ("scf.for", "scf.if", "scf.while"):
                i = self._complete_all(block, i, op.loc)
                if op.name == "scf.if" and self.in_flight:
                    self._branches(op)
                else:
                    outer_tail = self.tail
                    if op.name == "scf.for" and op.attrs.get("pipeline"):
                        self.tail = _carried_tails(op)
                    for r in op.regions:
                        self.block(r)
                    self.tail = outer_tail
                if op.name == "scf.for" and op.attrs.get("pipeline"):
                    body = op.regions[0]
                    self._complete_all(body, len(body.ops) - 1, body.ops[-1].loc)  # before the back edge
                    i = self._after_loop(block, i, op)
                i += 1
                continue
            # a layout-less value reads its operands where it is materialised, not here
            lazy = bool(op.results) and all(_flexible(self.plan, r) for r in op.results)
            if self.tail is not None and self.tail[0] is block and \
                    any(x.id in {a.id for a in self.tail[1]} for t in op.walk() for x in t.operands):
                i = self._take_tail(block, i, op.loc)  # read before any wait: wait here (not expected)
            reads = [] if lazy else [(vid, reader) for vid, reader in self._reads(op) if vid in self.pending]
            if reads:
                # one wait for every pending value the op reads: the newest one's (fewest groups committed
                # after it) completes the older ones too -- a yield reading dV and dK waits once, at 0
                vid, reader = min(reads, key=lambda e: self.pending[e[0]][1])
                i = self._complete(block, i, vid, reader.loc)
            for r in op.regions:  # reduce/scan combiners, a ws_producer's program
                self.block(r)
            if _wgmma_dot(self.plan, op):
                n, waits_itself = _commit_groups(op, self.nw)
                self._committed(n)
                if waits_itself:
                    pass  # fp8 partial sums: waited for inside the dot
                elif _deferred(op):
                    self.pending[op.results[0].id] = [op.results[0], 0, bool(op.attrs.get("pin_wait"))]
                elif op.attrs.get("wgmma") != "async" and self.tail is not None and self.tail[0] is block:
                    i = self._take_tail(block, i + 1, op.loc) - 1  # this wait retires the tail: take it through
                else:
                    w = Op("wgmma_wait", [], [], {"pending": 1 if op.attrs.get("wgmma") == "async" else 0},
                           loc=op.loc)
                    w.block = block
                    block.ops.insert(i + 1, w)
                    i += 1
                    if op.attrs.get("wgmma") == "async":
                        self.in_flight[op.results[0].id] = [op.results[0], 0]
            i += 1

    def _take_tail(self, block: Block, at: int, loc) -> int:
        """``wgmma_wait`` (pending 0) at ``block.ops[at]`` taking the body's carried tail values through."""
        vals = self.tail[1]
        self.tail = None
        return self._wait(block, at, vals, 0, False, loc)

    def _after_loop(self, block: Block, i: int, loop: Op) -> int:
        """After a pipelined loop whose dots stay in flight: wait for them, taking the accumulators they yield
        through the wait. Returns the loop's index."""
        body = loop.regions[0]
        yld = body.ops[-1]
        dots = {id(o) for o in body.ops if o.name == "dot" and o.attrs.get("wgmma") == "async"}
        if not dots:
            return i
        idx = sorted({k for k, v in enumerate(yld.operands) if v.op is not None and id(v.op) in dots})
        if get("KERNELC_WGMMA_EXIT_WAIT") and not loop.attrs.get("ws") and \
                any(_wgmma_dot(self.plan, o) and id(o) not in dots for o in body.ops):
            # an async tail (the body waits for its other dots in the trip): the wait goes on the loop's exit edge
            # (codegen/control.py), before the path that skips the loop joins
            loop.attrs["exit_wait"] = idx
            return i
        vals = [loop.results[k] for k in idx]
        # (under the location of the loop's yield: the code generator emitted it after the back edge)
        w = Op("wgmma_wait", vals, [v.type for v in vals], {"pending": 0}, loc=yld.loc)
        for k, new in zip(idx, w.results):
            like(self.plan, self.axis, new, body.args[1 + k])
        block.ops.insert(i + 1, w)
        w.block = block
        sub = {old.id: new for old, new in zip(vals, w.results)}
        for o in block.ops[i + 2:]:
            for t in o.walk():
                t.operands = [sub.get(x.id, x) for x in t.operands]
        return i + 1


def _carried_tails(loop: Op):
    """(body, the arguments carrying an ``async`` dot's result into the next trip that an op other than that
    dot's accumulator operand reads), or None."""
    body = loop.regions[0]
    yld = body.ops[-1]
    out = []
    for k, v in enumerate(yld.operands):
        d = v.op
        if d is None or d.name != "dot" or d.block is not body or d.attrs.get("wgmma") != "async":
            continue
        arg = body.args[1 + k]
        readers = [(t, j) for o in body.ops for t in o.walk() for j, x in enumerate(t.operands) if x is arg]
        if any(not (t is d and j == 2) for t, j in readers):
            out.append(arg)
    return (body, out) if out else None


def place_wgmma_waits(fn: Function, ctx) -> Function:
    _Waits(fn, ctx).block(fn.body)
    return fn
