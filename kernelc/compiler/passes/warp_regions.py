"""``expand_warp_specialize``: the warp-specialised loop (``warp_specialize`` tagged it ``ws``,
docs/schedule-ir.md) rewritten into explicit tile-IR ops: a producer warp's program that fills the
loop's TMA ring, and the consumers' side of the ring's full/empty barrier protocol.

At the kernel's start (after the ops that define the ring's descriptors, moved up front) the pass writes

    %r = tma_ring_alloc %desc {stages=S, operand, transposed}     one per ringed descriptor load
    %bars = mbarrier_alloc {count=2S}          full[s] = barrier s, empty[s] = barrier S+s
    %cur = ring_cursor                         the ring position (stage, phase parity), both sides keep it
    mbarrier_init full[s] (1 arrival: the producer's expect_tx) and empty[s] (one per consumer warp)
    fence_mbarrier_init; barrier
    ws_producer {producer_warps, setmaxnreg, stages, source} ( region: the producer's program )

and the region holds, for the producer warp (its elected lane, ``elect_one {warp}``, issues):
``prefetch_tensormaps``, then a skeleton of the
loops around the specialised one (their bounds only) and the specialised loop itself, whose body waits
until the consumers released the stage (``mbarrier_wait`` on empty[stage] with parity phase^1: a fresh
barrier's phase before its first counts as complete), re-evaluates the copies' offsets (cloned ops),
announces the bytes on full[stage] and issues the copies (``mbarrier_expect_tx``, ``tma_copy_to_ring``)
and advances stage and phase; the position is loaded from and stored back to the cursor around it, so
an enclosing (persistent) loop carries it from one run of the loop to the next. The values the skeleton
needs (bounds, the offsets' inputs) are cloned where the producer first needs them, as the code
generator evaluated them before this pass existed.

The specialised loop itself (the consumers' code) carries the read stage, an unused write stage and
the phase: at the head ``mbarrier_wait`` on full[stage] with the phase and ``ring_read`` of each tile;
after its dots ``wgmma_wait_deferred`` and the release, an ``mbarrier_arrive`` on empty[stage] by lane 0
of every warp (``warp_leader``): right away (``release='at_issue'``) or, when a wgmma group stays in
flight, for the previous stage from the second iteration on and for the last one after the loop
(``'lagged'``); after the loop the position goes back to the cursor. ``ws.pingpong`` adds
``pingpong_begin``/``pingpong_end`` around the loop.
"""
from __future__ import annotations

from typing import Dict, List

from ...errors import CompilationError
from ...options import get as get_option
from ...language.dtypes import int1, int32, int64, shape_of
from ..ir.core import Block, Function, Loc, Op, Value, clone_op, replace_all_uses
from .rings import RingExpander, ring_operand
from .schedule_ir import address_chain, inside_loop, loop_path, ringed_operands
from .stage_operands import entry_values, stage_invariants


def expand_warp_specialize(fn: Function, ctx) -> Function:
    for loop in [op for op in fn.walk() if op.name == "scf.for" and op.attrs.get("ws")]:
        cp, tma = ringed_operands(loop)
        _WsExpander(ctx, fn, loop, cp, tma).run()
    return fn


def _entry_loc(fn: Function) -> Loc:
    """The source location the split's code carries: the kernel's (its ``def`` line), or, when the kernel
    builds tensor maps at its entry (codegen/device_tensor_map.py), the line of the last map built there
    (of the first map made in the kernel when none is): the code generator emitted the split right after
    that entry code, under its location, before the split became ops."""
    maps = sorted((o for o in fn.walk() if o.name == "make_tensor_descriptor" and "tensor_map" in o.attrs),
                  key=lambda o: o.attrs["tensor_map"]["slot"])
    entry = [o for o in maps if o.attrs["tensor_map"]["build"] == "entry"]
    if entry:
        return entry[-1].loc
    return maps[0].loc if maps else Loc(fn.file, fn.line, 0)


class _WsExpander(RingExpander):
    def __init__(self, ctx, fn: Function, loop: Op, cp, tma):
        super().__init__(ctx, loop, cp, tma)
        self.fn = fn
        self.at = _entry_loc(fn)

    def _c(self, out, value, ty=int32) -> Value:
        return self._op(out, "constant", [], [ty], {"value": value}, loc=self.at).results[0]

    def _p(self, out, name, operands, types, attrs=None) -> Op:
        return self._op(out, name, operands, types, attrs, loc=self.at)

    def _elect(self, out) -> Value:
        """The producer warp's elected lane (the warp after the consumers runs the region whole: ptxas
        issues the copies under a uniform predicate, where one thread's own predicate needed an ELECT loop)."""
        return self._p(out, "elect_one", [], [int1], {"warp": self.ctx.num_warps}).results[0]

    # -- the values the producer needs, cloned where it first needs them -------------------------------

    def _need(self, v: Value, out: List[Op], scopes: List[Dict[int, Value]]) -> Value:
        for sc in reversed(scopes):
            if v.id in sc:
                return sc[v.id]
        if v.op is None:
            if v.owner is self.fn.body:
                return v  # a kernel argument
            raise CompilationError("internal: the producer warp needs a loop value it cannot re-evaluate",
                                   self.loop.loc.file, self.loop.loc.line, self.loop.loc.col)
        if id(v.op) in self.before_split:
            return v
        op = v.op
        if op.regions or len(op.results) != 1 or shape_of(v.type) or not op.name:
            raise CompilationError(f"internal: the producer warp cannot re-evaluate `{op.name}`",
                                   op.loc.file, op.loc.line, op.loc.col)
        operands = [self._need(o, out, scopes) for o in op.operands]
        new = Op(op.name, operands, [v.type], dict(op.attrs), loc=op.loc)
        out.append(new)
        scopes[-1][v.id] = new.results[0]
        return new.results[0]

    def _producer_loops(self, depth: int, out: List[Op], scopes) -> None:
        op = self.path[depth]
        if op is self.loop:
            self._producer(out, scopes)
            return
        lb, ub, step = (self._need(v, out, scopes) for v in op.operands[:3])  # a loop around it: bounds only
        body = Block([op.regions[0].args[0].type])
        inner: List[Op] = []
        self._producer_loops(depth + 1, inner, scopes + [{op.regions[0].args[0].id: body.args[0]}])
        for o in inner + [Op("scf.yield", [], [], loc=self.at)]:
            body.append(o)
        out.append(Op("scf.for", [lb, ub, step], [], {}, regions=[body], loc=self.at))

    def _producer(self, out: List[Op], scopes) -> None:
        """The specialised loop's producer side, inside the skeleton of the loops around it."""
        loop, S = self.loop, self.S
        body = loop.regions[0]
        iv, carried = body.args[0], body.args[1:]
        inits = [self._need(loop.operands[3 + i], out, scopes) for i in self.carried_idx]
        inner = {r.id for c in body.ops for t in c.walk() for r in t.results} | {a.id for a in body.args}
        # the offsets' loop-invariant inputs once, before the loop: the chain's, and offsets computed outside
        # the loop (a persistent kernel's tile coordinates, divisions, once per tile, not once per copy)
        for v in [v for c in self.chain for v in c.operands] + [v for src, _, _, _ in self.tma for v in src.operands[1:]]:
            if v.id not in inner and not shape_of(v.type):
                self._need(v, out, scopes)
        st0 = self._p(out, "cursor_load", [self.cur], [int32], {"field": "stage"}).results[0]
        ph0 = self._p(out, "cursor_load", [self.cur], [int32], {"field": "phase"}).results[0]
        lb, ub, step = (self._need(v, out, scopes) for v in loop.operands[:3])
        tys = [carried[i].type for i in self.carried_idx]
        pb = Block([iv.type, int32, int32] + tys)
        stage, phase = pb.args[1], pb.args[2]
        bind = {iv.id: pb.args[0], **{carried[i].id: a for i, a in zip(self.carried_idx, pb.args[3:])}}
        ops: List[Op] = []
        idx = self._p(ops, "add", [stage, self._c(ops, S)], [int32]).results[0]
        empty = self._p(ops, "mbarrier_at", [self.bars, idx], [int32]).results[0]
        par = self._p(ops, "xor", [phase, self._c(ops, 1)], [int32]).results[0]
        self._p(ops, "mbarrier_wait", [empty, par], [])
        ev = scopes + [bind, {}]
        for c in self.chain:  # the offsets of this iteration, each chain op evaluated again
            new = clone_op(c, [self._need(v, ops, ev) for v in c.operands])
            ops.append(new)
            for r, nr in zip(c.results, new.results):
                ev[-1][r.id] = nr
        offsets = [[self._need(v, ops, ev) for v in src.operands[1:]] for src, _, _, _ in self.tma]
        yld = body.ops[-1]
        advanced = [self._need(yld.operands[i], ops, ev) for i in self.carried_idx]
        full = self._p(ops, "mbarrier_at", [self.bars, stage], [int32]).results[0]
        t0 = self._elect(ops)
        self._p(ops, "mbarrier_expect_tx", [full, t0], [], {"bytes": self._stage_bytes()})
        for (src, _, _, _), ring, offs in zip(self.tma, self.trings, offsets):
            self._p(ops, "tma_copy_to_ring", [ring, stage, full, t0] + offs, [], {"source": str(src.loc)})
        if self.dq:  # the staged tiles of the trip S-1 behind this one's copies (the consumers are about there)
            lag = self._p(ops, "sub", [pb.args[0], self._p(ops, "mul", [self._c(ops, S - 1), step], [int32])
                                       .results[0]], [int32]).results[0]
            ok = self._p(ops, "cmpi", [lag, lb], [int1], {"pred": "sge"}).results[0]
            then: List[Op] = []
            self._dq_issue(then, lag, lb, step, scopes)
            yes, no = Block(), Block()
            for o in then + [Op("scf.yield", [], [], loc=self.at)]:
                yes.append(o)
            no.append(Op("scf.yield", [], [], loc=self.at))
            ops.append(Op("scf.if", [ok], [], regions=[yes, no], loc=self.at))
        inc = self._p(ops, "add", [stage, self._c(ops, 1)], [int32]).results[0]
        wrap = self._p(ops, "cmpi", [inc, self._c(ops, S)], [int1], {"pred": "eq"}).results[0]
        nst = self._p(ops, "select", [wrap, self._c(ops, 0), inc], [int32]).results[0]
        flip = self._p(ops, "cast", [wrap], [int32]).results[0]
        nph = self._p(ops, "xor", [phase, flip], [int32]).results[0]
        for o in ops + [Op("scf.yield", [nst, nph] + advanced, [], loc=self.at)]:
            pb.append(o)
        sk = Op("scf.for", [lb, ub, step, st0, ph0] + inits, [int32, int32] + tys, {}, regions=[pb], loc=self.at)
        out.append(sk)
        if self.dq:  # the last S-1 trips' tiles, then every reduction complete before the producer exits
            span = self._p(out, "sub", [ub, lb], [int32]).results[0]
            span = self._p(out, "add", [span, self._p(out, "sub", [step, self._c(out, 1)], [int32]).results[0]],
                           [int32]).results[0]
            n = self._p(out, "sdiv", [span, step], [int32]).results[0]
            back = self._p(out, "sub", [n, self._c(out, S - 1)], [int32]).results[0]
            back = self._p(out, "smax", [back, self._c(out, 0)], [int32]).results[0]
            first = self._p(out, "add", [lb, self._p(out, "mul", [back, step], [int32]).results[0]],
                            [int32]).results[0]
            db = Block([int32])
            dops: List[Op] = []
            self._dq_issue(dops, db.args[0], lb, step, scopes)
            for o in dops + [Op("scf.yield", [], [], loc=self.at)]:
                db.append(o)
            out.append(Op("scf.for", [first, ub, step], [], {}, regions=[db], loc=self.at))
            t = self._elect(out)
            self._p(out, "bulk_wait_group", [t], [], {"pending": 0, "read": False})
        self._p(out, "cursor_store", [self.cur, sk.results[0]], [], {"field": "stage"})
        self._p(out, "cursor_store", [self.cur, sk.results[1]], [], {"field": "phase"})

    # -- kl.bulk_add in the loop: the producer warp issues its reductions (KERNELC_WS_BULK_ISSUE=producer) -------

    DQ_STAGES = 2  # the release of stage s lags one trip: 2 is what the lag needs (the other stage is in use)

    def _dq_setup(self, setup: List[Op], t0: Value) -> None:
        """Each bulk_add of the loop: its staging buffer (2 stages) and 4 barriers, full[s] (every consumer thread
        arrives once it staged the tile) and empty[s] (the producer's elected lane arrives once the reduction has
        read the stage)."""
        self.dq = []
        if get_option("KERNELC_WS_BULK_ISSUE") != "producer":
            return
        adds = [o for o in self.loop.regions[0].ops if o.name == "bulk_add" and o.attrs.get("tma")]
        if not adds:
            return
        D = self.DQ_STAGES
        self.dqbars = self._p(setup, "mbarrier_alloc", [], [int64], {"count": 2 * D * len(adds)}).results[0]
        for i, add in enumerate(adds):
            buf = self._p(setup, "bulk_add_buffer_alloc", [], [add.operands[1].type], {"stages": D}).results[0]
            self.dq.append((add, buf))
            for s in range(D):
                full = self._p(setup, "mbarrier_at", [self.dqbars, self._c(setup, 2 * D * i + s)], [int32]).results[0]
                self._p(setup, "mbarrier_init", [full, t0], [], {"count": 32 * self.ctx.num_warps})
                empty = self._p(setup, "mbarrier_at", [self.dqbars, self._c(setup, 2 * D * i + D + s)],
                                [int32]).results[0]
                self._p(setup, "mbarrier_init", [empty, t0], [], {"count": 1})

    def _dq_slot(self, out: List[Op], iv: Value, lb: Value, step: Value, p) -> tuple:
        """(stage, phase parity) of the trip at ``iv``: trip k uses stage k mod 2 in its (k / 2)-th round."""
        D = self.DQ_STAGES
        k = p(out, "sdiv", [p(out, "sub", [iv, lb], [int32]).results[0], step], [int32]).results[0]
        st = p(out, "srem", [k, self._c(out, D)], [int32]).results[0]
        ph = p(out, "and", [p(out, "sdiv", [k, self._c(out, D)], [int32]).results[0], self._c(out, 1)],
               [int32]).results[0]
        return st, ph

    def _dq_bar(self, out: List[Op], i: int, st: Value, empty: bool, p) -> Value:
        D = self.DQ_STAGES
        idx = p(out, "add", [st, self._c(out, 2 * D * i + (D if empty else 0))], [int32]).results[0]
        return p(out, "mbarrier_at", [self.dqbars, idx], [int32]).results[0]

    def _dq_issue(self, out: List[Op], iv: Value, lb: Value, step: Value, scopes) -> None:
        """The producer's side for the trip at ``iv``: wait until its tile is staged, reduce it, wait until the
        copy engine has read the stage, release it."""
        st, ph = self._dq_slot(out, iv, lb, step, self._p)
        for i, (add, buf) in enumerate(self.dq):
            self._p(out, "mbarrier_wait", [self._dq_bar(out, i, st, False, self._p), ph], [])
            ptr = self._need(add.operands[0], out, scopes + [{self.loop.regions[0].args[0].id: iv}, {}])
            t = self._elect(out)
            attrs = {"kind": add.attrs["kind"], "source": str(add.loc)}
            if add.attrs.get("l2"):
                attrs["l2"] = add.attrs["l2"]
            self._p(out, "bulk_reduce_1d", [buf, st, t, ptr], [], attrs)
            self._p(out, "bulk_commit_group", [t], [])
            # the previous trip's reduction (not this one's: the warp goes on to the next copies) has read its
            # stage once at most one group is in flight: release that stage (the consumers wait for it two trips on)
            self._p(out, "bulk_wait_group", [t], [], {"pending": len(self.dq), "read": True})
            prev = self._p(out, "sub", [self._c(out, self.DQ_STAGES - 1), st], [int32]).results[0]
            had = self._p(out, "cmpi", [iv, lb], [int1], {"pred": "sgt"}).results[0]
            go = self._p(out, "and", [t, had], [int1]).results[0]
            self._p(out, "mbarrier_arrive", [self._dq_bar(out, i, prev, True, self._p), go], [])

    def _dq_stage(self, add: Op, i: int, buf: Value, iv: Value, lb: Value, step: Value) -> List[Op]:
        """The consumers' side, in place of the bulk_add: wait until the stage is free, stage the tile, fence,
        every thread arrives on full[stage]."""
        out: List[Op] = []
        p = self._op
        st, ph = self._dq_slot(out, iv, lb, step, p)
        par = p(out, "xor", [ph, self._const(out, 1)], [int32]).results[0]  # a fresh barrier: first round free
        p(out, "mbarrier_wait", [self._dq_bar(out, i, st, True, p), par], [])
        p(out, "bulk_stage_store", [buf, st, add.operands[1]], [])
        p(out, "fence_async_shared", [], [])
        yes = p(out, "constant", [], [int1], {"value": True}).results[0]
        p(out, "mbarrier_arrive", [self._dq_bar(out, i, st, False, p), yes], [])
        for o in out:
            o.loc = add.loc
        return out

    def _release(self, out: List[Op], stage: Value, cond) -> None:
        """Lane 0 of every consumer warp arrives on empty[stage] (where ``cond``)."""
        pred = self._op(out, "warp_leader", [], [int1]).results[0]
        if cond is not None:
            pred = self._op(out, "and", [pred, cond], [int1]).results[0]
        idx = self._op(out, "add", [stage, self._const(out, self.S)], [int32]).results[0]
        bar = self._op(out, "mbarrier_at", [self.bars, idx], [int32]).results[0]
        self._op(out, "mbarrier_arrive", [bar, pred], [])

    def _previous(self, out: List[Op], stage: Value) -> Value:
        first = self._op(out, "cmpi", [stage, self._const(out, 0)], [int1], {"pred": "eq"}).results[0]
        sub = self._op(out, "sub", [stage, self._const(out, 1)], [int32]).results[0]
        return self._op(out, "select", [first, self._const(out, self.S - 1), sub], [int32]).results[0]

    # -- the rewrite ------------------------------------------------------------------------------------

    def run(self) -> None:
        fn, loop, plan = self.fn, self.loop, self.plan
        ws = loop.attrs["ws"]
        self.S = S = loop.attrs["pipeline"]["stages"]
        if self.cp or not self.tma:
            raise CompilationError("internal: a warp-specialised loop's ring is TMA only (passes/schedule.py)",
                                   loop.loc.file, loop.loc.line, loop.loc.col)
        self.path = loop_path(loop)
        self.chain, self.carried_idx = address_chain(loop, [], [t for t, _, _, _ in self.tma])
        # the ring's descriptors (and what they are computed from) come before the split
        top = fn.body.ops
        descs = []
        for src, _, _, _ in self.tma:
            if all(d is not src.operands[0] for d in descs):
                descs.append(src.operands[0])
        moved = set()

        def pull(v):
            if v.op is None or id(v.op) in moved:
                return
            if v.op.block is not fn.body:
                raise CompilationError("internal: a warp-specialised ring's descriptor is made inside a loop",
                                       v.op.loc.file, v.op.loc.line, v.op.loc.col)
            for o in v.op.operands:
                pull(o)
            moved.add(id(v.op))
        for d in descs:
            pull(d)
        first = [o for o in top if id(o) in moved]
        rest = [o for o in top if id(o) not in moved]
        self.before_split = moved
        setup: List[Op] = []
        self.trings = []
        for src, _, is_a, via in self.tma:
            seen = (via or src).results[0]
            r = self._p(setup, "tma_ring_alloc", [src.operands[0]], [seen.type],
                        {"stages": S, "operand": ring_operand(is_a), "transposed": via is not None}).results[0]
            self._like(r, seen)
            self.trings.append(r)
        self.bars = self._p(setup, "mbarrier_alloc", [], [int64], {"count": 2 * S}).results[0]
        self.cur = self._p(setup, "ring_cursor", [], [int64]).results[0]
        t0 = self._p(setup, "elect_one", [], [int1]).results[0]
        for s in range(S):
            full = self._p(setup, "mbarrier_at", [self.bars, self._c(setup, s)], [int32]).results[0]
            self._p(setup, "mbarrier_init", [full, t0], [], {"count": 1})
            idx = self._p(setup, "add", [self._c(setup, s), self._c(setup, S)], [int32]).results[0]
            empty = self._p(setup, "mbarrier_at", [self.bars, idx], [int32]).results[0]
            self._p(setup, "mbarrier_init", [empty, t0], [], {"count": self.ctx.num_warps})
        self._dq_setup(setup, t0)
        self._p(setup, "fence_mbarrier_init", [], [])
        self._p(setup, "barrier", [], [])
        region: List[Op] = []
        self._p(region, "prefetch_tensormaps", descs + [self._elect(region)], [])
        self._producer_loops(0, region, [{}])
        prod = Block()
        for o in region:
            prod.append(o)
        attrs = {"producer_warps": ws["producer_warps"], "setmaxnreg": ws["setmaxnreg"], "stages": S,
                 "source": str(loop.loc)}
        if "consumer_regs" in ws:
            attrs["consumer_regs"] = ws["consumer_regs"]
        setup.append(Op("ws_producer", [], [], attrs, regions=[prod], loc=self.at))
        fn.body.ops = []
        for o in first + setup + rest:
            fn.body.append(o)
        self._consumers()

    def _consumers(self) -> None:
        """The specialised loop as the consumers run it."""
        loop, S = self.loop, self.S
        ws = loop.attrs["ws"]
        body = loop.regions[0]
        iv = body.args[0]
        lb, ub = loop.operands[:2]
        yld = body.ops[-1]
        pre: List[Op] = entry_values(self.plan, loop)
        stage_invariants(self.plan, self.axis, loop, pre)
        rd0 = self._op(pre, "cursor_load", [self.cur], [int32], {"field": "stage"}).results[0]
        ph0 = self._op(pre, "cursor_load", [self.cur], [int32], {"field": "phase"}).results[0]
        if ws.get("pingpong"):
            self._op(pre, "pingpong_begin", [], [])
        rd, wr, ph = body.add_arg(int32), body.add_arg(int32), body.add_arg(int32)
        loop.operands += [rd0, self._const(pre, 0), ph0]
        for _ in range(3):
            loop.results.append(Value(int32, loop, len(loop.results)))
        rdN, phN = loop.results[-3], loop.results[-1]
        head: List[Op] = []
        full = self._op(head, "mbarrier_at", [self.bars, rd], [int32]).results[0]
        self._op(head, "mbarrier_wait", [full, ph], [])
        reads = self._ring_reads(head, self.trings, rd, lambda src: {"source": str(src.loc)})
        inc = self._op(head, "add", [rd, self._const(head, 1)], [int32]).results[0]
        wrap = self._op(head, "cmpi", [inc, self._const(head, S)], [int1], {"pred": "eq"}).results[0]
        nrd = self._op(head, "select", [wrap, self._const(head, 0), inc], [int32]).results[0]
        flip = self._op(head, "cast", [wrap], [int32]).results[0]
        nph = self._op(head, "xor", [ph, flip], [int32]).results[0]
        tail: List[Op] = []
        # the dots' deferred wgmma groups are complete before their stage is released
        self._op(tail, "wgmma_wait_deferred", [], [])
        lagged = ws["release"] == "lagged"
        if lagged:  # the previous iteration's group is complete now (one stays in flight)
            not_first = self._op(tail, "cmpi", [iv, lb], [int1], {"pred": "ne"}).results[0]
            self._release(tail, self._previous(tail, rd), not_first)
        else:
            self._release(tail, rd, None)
        ringed = self._ringed_ops()
        kept = []
        adds = {id(a): (i, buf) for i, (a, buf) in enumerate(self.dq)}
        for o in body.ops[:-1]:
            if id(o) in ringed:
                continue
            if id(o) in adds:
                i, buf = adds[id(o)]
                kept += self._dq_stage(o, i, buf, iv, lb, loop.operands[2])
                continue
            kept.append(o)
        body.ops = []
        for o in head + kept + tail + [yld]:
            body.append(o)
        for old, t in reads:
            replace_all_uses(body, old, t)
        yld.operands += [nrd, wr, nph]
        after: List[Op] = []
        if ws.get("pingpong"):
            self._op(after, "pingpong_end", [], [])
        if lagged:  # the last stage's group was still in flight at the loop's last release
            ran = self._op(after, "cmpi", [lb, ub], [int1], {"pred": "slt"}).results[0]
            self._release(after, self._previous(after, rdN), ran)
        self._op(after, "cursor_store", [self.cur, rdN], [], {"field": "stage"})
        self._op(after, "cursor_store", [self.cur, phN], [], {"field": "phase"})
        if not inside_loop(loop):
            # every copy landed (each was waited for) and the producer issues no more: an epilogue's TMA
            # store may stage its tile in the ring
            for r in self.trings:
                self._op(after, "ring_free", [r], [])
        blk = loop.block
        at = blk.ops.index(loop)
        blk.ops[at:at + 1] = pre + [loop] + after
        for o in pre + after:
            o.block = blk
