"""``expand_cp_async_rings``: the cp.async ring of a pipelined loop (``schedule_pipelines`` tagged it,
docs/schedule-ir.md) rewritten into explicit tile-IR ops, so code generation lowers one op at a time.

For a loop ``scf.for {pipeline={stages=S, lookahead=L}}`` whose ringed loads all go through cp.async
(no TMA ring, not warp-specialised), the pass writes

    %r = ring_alloc {stages=S, operand='a'|'b'}              one per ringed load, before the loop
    prologue, for s in 0..L-1: the loop's address chain re-evaluated at iteration s (cloned ops),
        async_copy %r, s, ptr [, mask], guard {vec=V}; async_commit_group
    scf.for ... iter_args(..., chain values L iterations ahead, read stage = 0, write stage = L):
        async_wait_group {pending=L-1}; [fence_async_shared]; barrier
        the chain at iteration i+L, async_copy into the write stage, async_commit_group
        %t = ring_read %r, read stage          (replaces the load: the dot reads stage i in place)
        read/write stage + 1 mod S             (ordinary add / cmpi / select)
        ... the body ...
    async_wait_all                                          after the loop

With ``refill='after_dots'`` on the loop (its dots stay in flight, ``wgmma='async'``, and the ring keeps
the full lookahead S-1), the chain at i+L and its copies come after the body's last dot, behind a barrier:
the write stage is the one iteration i-1's wgmma read, and the dot's ``wait_group 1`` has retired it.

The decision record (``pipeline`` on the loop, ``wgmma`` on the dots) stays. Layouts and axis facts
of the values the pass adds are those of the values they stand for (a stage holds the load's tile;
a chain value one iteration later has the same layout and the same contiguity/divisibility).
"""
from __future__ import annotations

from typing import Dict, List

from ...language.dtypes import int1, int32
from ..ir.core import Function, Op, Value, replace_all_uses
from .schedule_ir import REFILL_AFTER_DOTS, address_chain, ringed_operands


def expand_cp_async_rings(fn: Function, ctx) -> Function:
    loops = [op for op in fn.walk() if op.name == "scf.for" and op.attrs.get("pipeline") and not op.attrs.get("ws")]
    for loop in loops:
        cp, tma = ringed_operands(loop)
        if cp and not tma:  # with a TMA ring too, both share one pair of stage counters (codegen/pipeline.py)
            _Expander(ctx, loop, cp).run()
    return fn


class _Expander:
    def __init__(self, ctx, loop: Op, cp):
        self.ctx, self.loop, self.cp = ctx, loop, cp
        self.plan, self.axis = ctx.plan, ctx.axis

    def _like(self, new: Value, old: Value) -> None:
        """``new`` stands for ``old`` (another iteration, a stage): same layout and axis facts."""
        L = self.plan.layouts.get(old.id)
        if L is not None:
            self.plan.layouts[new.id] = L
        info = self.axis.info.get(old.id) if self.axis is not None else None
        if info is not None:
            self.axis.info[new.id] = info

    def _op(self, out: List[Op], name, operands, types, attrs=None, loc=None) -> Op:
        op = Op(name, operands, types, attrs or {}, loc=loc or self.loop.loc)
        out.append(op)
        return op

    def _const(self, out, value: int, ty=int32) -> Value:
        return self._op(out, "constant", [], [ty], {"value": value}).results[0]

    def _iv_at(self, out, iv: Value, step: Value, n: int) -> Value:
        if n == 0:
            return iv
        ty = iv.type
        off = self._op(out, "mul", [step, self._const(out, n, ty)], [ty]).results[0]
        return self._op(out, "add", [iv, off], [ty]).results[0]

    def _entry_values(self, inits, carried) -> List[Op]:
        """The loop's tile inits that only the loop reads and that have no layout yet (materialised where
        used): computed in the carried layout right before the prologue, where the loop would otherwise
        materialise them on entry (their defining ops move there, in operand order)."""
        blk, loop, out = self.loop.block, self.loop, []
        before = blk.ops[:blk.ops.index(loop)]
        for v, a in zip(inits, carried):
            d = v.op
            L = self.plan.layouts.get(a.id)
            if d is None or d not in before or L is None or self.plan.layouts.get(v.id) is not None \
                    or len(d.results) != 1 or d.name == "constant":
                continue
            readers = [o for o in blk.ops for t in o.walk() for x in t.operands if x is v]
            if readers != [loop] or loop.operands.count(v) != 1:
                continue
            blk.ops.remove(d)
            before.remove(d)
            self.plan.layouts[v.id] = L
            out.append(d)
        return out

    def _stage_invariants(self, pre: List[Op], body) -> None:
        """Tensor-core dot operands defined outside the loop (attention's Q) are stored to shared memory
        once, before the ring (``stage_operand``); the dots read the staged copy."""
        plan = self.plan
        inner = {r.id for o in body.ops for t in o.walk() for r in t.results} | {a.id for a in body.args}
        staged: Dict[int, Value] = {}
        for o in body.ops:
            if o.name != "dot" or id(o) in plan.dot_fma or plan.layouts.get(o.results[0].id) is None:
                continue
            for idx in (0, 1):
                v = o.operands[idx]
                if v.id in inner or not hasattr(v.type, "shape") or (v.op is not None and v.op.attrs.get("in_place")):
                    continue
                if v.id not in staged:
                    st = self._op(pre, "stage_operand", [v], [v.type], {"operand": "a" if idx == 0 else "b"})
                    self._like(st.results[0], v)
                    staged[v.id] = st.results[0]
                o.operands[idx] = staged[v.id]
        if staged:
            if any(o.name == "dot" and id(o) in plan.wgmma for o in body.ops):
                self._op(pre, "fence_async_shared", [], [])
            self._op(pre, "barrier", [], [])

    def _order(self, chain: List[Op], yld: Op):
        """The chain with the ops that compute the copies' pointers and masks last, in copy order, and
        the layout each of those is copied in: every address is ready before the first copy goes out."""
        used = {v.id for c in chain for v in c.operands} | {v.id for v in yld.operands}
        ids = {id(c) for c in chain}
        tail: Dict[int, tuple] = {}
        for ld, _, _, _ in self.cp:
            for v in ld.operands[:2]:
                if v.op is not None and id(v.op) in ids and v.id not in used and id(v.op) not in tail:
                    tail[id(v.op)] = (v.op, ld.results[0])
        self.tail_layout = {id(o): ld for o, ld in tail.values()}
        return [c for c in chain if id(c) not in tail] + [o for o, _ in tail.values()]

    def _chain(self, out, chain: List[Op], env: Dict[int, Value]) -> None:
        """Clone the address chain into ``out`` with ``env`` (value id -> value) as its bindings."""
        for c in chain:
            new = Op(c.name, [env.get(v.id, v) for v in c.operands], [r.type for r in c.results],
                     dict(c.attrs), loc=c.loc)
            out.append(new)
            for r, nr in zip(c.results, new.results):
                env[r.id] = nr
                self._like(nr, r)
                if id(c) in self.tail_layout and self.plan.layouts.get(r.id) is None:
                    self._like(nr, self.tail_layout[id(c)])  # copied in the loaded tile's layout

    def _copies(self, out, rings, env, stage: Value, guard: Value, steady: bool = False) -> None:
        for (ld, _, _, _), ring in zip(self.cp, rings):
            ops = [env.get(v.id, v) for v in ld.operands[:2]] + [guard]
            attrs = {"vec": ld.attrs["pipeline"]["vec"], "masked": len(ld.operands) > 1}
            if steady:  # the copy tools are told about (the compiled kernel's memory-access report)
                attrs["source"] = str(ld.loc)
            self._op(out, "async_copy", [ring, stage] + ops, [], attrs)
        self._op(out, "async_commit_group", [], [])

    def run(self) -> None:
        loop, plan = self.loop, self.plan
        tag = loop.attrs["pipeline"]
        S, LA = tag["stages"], tag["lookahead"]
        chain, carried_idx = address_chain(loop, [ld for ld, _, _, _ in self.cp], [])
        body = loop.regions[0]
        iv, carried = body.args[0], body.args[1:]
        lb, ub, step = loop.operands[:3]
        inits = loop.operands[3:]
        yld = body.ops[-1]
        chain = self._order(chain, yld)
        pre: List[Op] = self._entry_values(inits, carried)
        self._stage_invariants(pre, body)
        rings = []
        for ld, _, is_a, _ in self.cp:
            r = self._op(pre, "ring_alloc", [], [ld.results[0].type],
                         {"stages": S, "operand": "a" if is_a else "b"}).results[0]
            self._like(r, ld.results[0])
            rings.append(r)
        # prologue: iterations 0 .. LA-1 (a copy past the end is masked off by its guard)
        cur = {i: inits[i] for i in carried_idx}
        for s in range(LA):
            iv_s = self._iv_at(pre, lb, step, s)
            guard = self._op(pre, "cmpi", [iv_s, ub], [int1], {"pred": "slt"}).results[0]
            env = {iv.id: iv_s, **{carried[i].id: cur[i] for i in carried_idx}}
            self._chain(pre, chain, env)
            self._copies(pre, rings, env, self._const(pre, s), guard)
            cur = {i: env.get(yld.operands[i].id, yld.operands[i]) for i in carried_idx}
        # the loop carries the chain's values LA iterations ahead, the read stage and the write stage
        ahead = [body.add_arg(carried[i].type) for i in carried_idx]
        for a, i in zip(ahead, carried_idx):
            self._like(a, carried[i])
        rd, wr = body.add_arg(int32), body.add_arg(int32)
        loop.operands += [cur[i] for i in carried_idx] + [self._const(pre, 0), self._const(pre, LA)]
        for i in carried_idx:
            v = Value(carried[i].type, loop, len(loop.results))
            loop.results.append(v)
            self._like(v, carried[i])
        for t in (int32, int32):
            loop.results.append(Value(t, loop, len(loop.results)))
        head: List[Op] = []
        self._op(head, "async_wait_group", [], [], {"pending": LA - 1})
        if any(o.name == "dot" and id(o) in plan.wgmma for o in body.ops):
            # wgmma reads shared memory through the async proxy: order the cp.async writes before it
            self._op(head, "fence_async_shared", [], [])
        self._op(head, "barrier", [], [])
        # refill='after_dots': the copies follow the last dot (a barrier first: every warpgroup's
        # wait_group 1 has retired last iteration's wgmma, which read the stage they overwrite)
        after_dots = tag.get("refill") == REFILL_AFTER_DOTS
        refill: List[Op] = []
        if after_dots:
            self._op(refill, "barrier", [], [])
        fill = refill if after_dots else head
        iv_pf = self._iv_at(fill, iv, step, LA)
        guard = self._op(fill, "cmpi", [iv_pf, ub], [int1], {"pred": "slt"}).results[0]
        env = {iv.id: iv_pf, **{carried[i].id: a for i, a in zip(carried_idx, ahead)}}
        self._chain(fill, chain, env)
        self._copies(fill, rings, env, wr, guard, steady=True)
        reads = []
        for (ld, _, _, _), ring in zip(self.cp, rings):
            t = self._op(head, "ring_read", [ring, rd], [ld.results[0].type]).results[0]
            self._like(t, ld.results[0])
            reads.append((ld, t))
        nxt = [env.get(yld.operands[i].id, yld.operands[i]) for i in carried_idx]
        stages = []
        for st in (rd, wr):
            inc = self._op(head, "add", [st, self._const(head, 1)], [int32]).results[0]
            wrap = self._op(head, "cmpi", [inc, self._const(head, S)], [int1], {"pred": "eq"}).results[0]
            stages.append(self._op(head, "select", [wrap, self._const(head, 0), inc], [int32]).results[0])
        ringed = {id(ld) for ld, _, _, _ in self.cp}
        kept = [o for o in body.ops if id(o) not in ringed]
        if after_dots:
            last = max(i for i, o in enumerate(kept) if o.name == "dot" and o.attrs.get("wgmma") == "async")
            kept[last + 1:last + 1] = refill
        body.ops = []
        for o in head + kept:
            body.append(o)
        for ld, t in reads:
            replace_all_uses(body, ld.results[0], t)
        yld.operands += nxt + stages
        blk = loop.block
        at = blk.ops.index(loop)
        after = Op("async_wait_all", [], [], {}, loc=loop.loc)
        blk.ops[at:at + 1] = pre + [loop, after]
        for o in pre + [after]:
            o.block = blk
