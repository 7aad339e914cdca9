"""The ring expansion shared by ``expand_cp_async_rings`` (passes/cp_async_rings.py) and
``expand_tma_rings`` (passes/tma_rings.py): one pipelined loop (``schedule_pipelines`` tagged it,
docs/schedule-ir.md) rewritten into explicit ring ops, in the order the code generator emitted them
before the rings became ops (so the generated code did not change). The module docstrings of the two
passes show what is written; a loop with both kinds of ringed loads shares one pair of stage counters.
"""
from __future__ import annotations

from typing import Dict, List

from ...language.dtypes import int1, int32, int64
from ..ir.core import Op, Value, clone_deep, clone_op, replace_all_uses
from .schedule_ir import REFILL_AFTER_DOTS, REFILL_TOP, address_chain, inside_loop
from .stage_operands import entry_values, stage_invariants


def ring_operand(is_a) -> str:
    """A TMA ring's ``operand``: the dot operand its first reader reads, or 'none' (read into registers)."""
    return "none" if is_a is None else "a" if is_a else "b"


class RingExpander:
    """Rewrites one pipelined loop (no ``ws``): ``cp``/``tma`` are its ringed loads as
    ``schedule_ir.ringed_operands`` lists them; either may be empty (not both)."""

    def __init__(self, ctx, loop: Op, cp, tma=()):
        self.ctx, self.loop = ctx, loop
        self.plan, self.axis = ctx.plan, ctx.axis
        # a cp.async load several dots read has one ring, laid out for its first direct reader (``cp`` keeps
        # that entry); ``cp_views`` every other value the dots read of it (the load, or a trans of it)
        self.cp, self.cp_views, first = [], [], {}
        for ld, _, _, _ in cp:
            if id(ld) not in first:
                first[id(ld)] = len(self.cp)
                self.cp.append(next(c for c in cp if c[0] is ld and c[3] is None))
        for ld, _, is_a, via in cp:
            if via is not None and all(v is not via.results[0] for v, _, _, _ in self.cp_views):
                self.cp_views.append((via.results[0], first[id(ld)], is_a, via))
        # a TMA tile several dots read (directly or through one trans each) has one ring: ``tma`` keeps its
        # first reader's entry, ``views`` every distinct (value the dots read, ring index, is_a, via)
        self.tma, self.views, seen_src, seen_view = [], [], {}, set()
        for src, dot, is_a, via in tma:
            if id(src) not in seen_src:
                seen_src[id(src)] = len(self.tma)
                self.tma.append((src, dot, is_a, via))
            v = (via or src).results[0]
            if v.id not in seen_view:
                seen_view.add(v.id)
                self.views.append((v, seen_src[id(src)], is_a, via))

    def _ring_reads(self, head: List[Op], trings, rd: Value, attrs=None):
        """A ``ring_read`` of each view of the TMA tiles (one per ring for a tile one dot reads); a view that
        reads its ring in another orientation than the ring's first reader says so (``operand``/``transposed``)."""
        reads = []
        for v, k, is_a, via in self.views:
            src, _, is_a0, via0 = self.tma[k]
            a = dict(attrs(src)) if attrs else {}
            if is_a0 is None:  # a tile no dot reads: into registers (passes/schedule.py, _register_tiles)
                a["registers"] = True
            elif v is not (via0 or src).results[0]:
                a.update(operand="a" if is_a else "b", transposed=via is not None)
            t = self._op(head, "ring_read", [trings[k], rd], [v.type], a).results[0]
            self._like(t, v)
            reads.append((v, t))
        return reads

    def _ringed_ops(self):
        return {id(t) for t, _, _, _ in self.tma} | {id(via) for _, _, _, via in self.views if via is not None} | \
            {id(ld) for ld, _, _, _ in self.cp} | {id(via) for _, _, _, via in self.cp_views}

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
            # (an scf.if of the chain: a flattened loop's next tile, computed in its branch)
            new = clone_deep(c, env) if c.regions else clone_op(c, [env.get(v.id, v) for v in c.operands])
            out.append(new)
            for r, nr in zip(c.results, new.results):
                env[r.id] = nr
                self._like(nr, r)
                if id(c) in self.tail_layout and self.plan.layouts.get(r.id) is None:
                    self._like(nr, self.tail_layout[id(c)])  # copied in the loaded tile's layout

    def _for_copies(self, chain: List[Op]) -> set:
        """ids of the chain's ops the cp.async copies' pointers and masks read (through one another)."""
        want = {v.id for ld, _, _, _ in self.cp for v in ld.operands[:2]}
        out = set()
        for c in reversed(chain):
            if any(r.id in want for r in c.results):
                out.add(id(c))
                want.update(x.id for t in c.walk() for x in t.operands)
        return out

    def _copies(self, out, rings, env, stage: Value, guard: Value, steady: bool = False) -> None:
        for (ld, _, _, _), ring in zip(self.cp, rings):
            ops = [env.get(v.id, v) for v in ld.operands[:2]] + [guard]
            attrs = {"vec": ld.attrs["pipeline"]["vec"], "masked": len(ld.operands) > 1}
            if steady:  # the copy tools are told about (the compiled kernel's memory-access report)
                attrs["source"] = str(ld.loc)
            self._op(out, "async_copy", [ring, stage] + ops, [], attrs)
        self._op(out, "async_commit_group", [], [])

    def _stage_bytes(self) -> int:
        """Bytes one stage's TMA copies bring (what its barrier expects)."""
        n = 0
        for src, _, _, _ in self.tma:
            ty = src.operands[0].type
            b = ty.element_ty.itemsize
            for d in ty.block_shape:
                b *= d
            n += b
        return n

    def _tma_copies(self, out, rings, bars: Value, env, stage: Value, guard: Value, steady: bool = False) -> None:
        """The elected thread (where ``guard``) announces the stage's bytes and copies every ringed tile."""
        t0 = self._op(out, "elect_one", [], [int1]).results[0]
        pred = self._op(out, "and", [t0, guard], [int1]).results[0]
        bar = self._op(out, "mbarrier_at", [bars, stage], [int32]).results[0]
        self._op(out, "mbarrier_expect_tx", [bar, pred], [], {"bytes": self._stage_bytes()})
        for (src, _, _, _), ring in zip(self.tma, rings):
            offs = [env.get(v.id, v) for v in src.operands[1:]]
            # the copy in the loop body names the load it stands for (the kernel's memory-access report)
            self._op(out, "tma_copy_to_ring", [ring, stage, bar, pred] + offs, [],
                     {"source": str(src.loc)} if steady else {})

    def _tma_setup(self, pre: List[Op], S: int):
        """The TMA rings, one barrier per stage initialised by the elected thread, the maps prefetched."""
        trings = []
        for src, _, is_a, via in self.tma:
            seen = (via or src).results[0]  # what the dot reads
            r = self._op(pre, "tma_ring_alloc", [src.operands[0]], [seen.type],
                         {"stages": S, "operand": ring_operand(is_a), "transposed": via is not None}).results[0]
            self._like(r, seen)
            trings.append(r)
        bars = self._op(pre, "mbarrier_alloc", [], [int64], {"count": S}).results[0]
        t0 = self._op(pre, "elect_one", [], [int1]).results[0]
        self._op(pre, "barrier", [], [])  # an earlier trip of an enclosing loop is done with the ring
        for s in range(S):
            bar = self._op(pre, "mbarrier_at", [bars, self._const(pre, s)], [int32]).results[0]
            self._op(pre, "mbarrier_init", [bar, t0], [], {"count": 1})
        self._op(pre, "fence_mbarrier_init", [], [])
        self._op(pre, "barrier", [], [])
        descs = []
        for src, _, _, _ in self.tma:
            if all(d is not src.operands[0] for d in descs):
                descs.append(src.operands[0])
        self._op(pre, "prefetch_tensormaps", descs + [t0], [])
        return trings, bars

    def _tma_teardown(self, after: List[Op], trings, bars: Value, S: int) -> None:
        self._op(after, "barrier", [], [])  # every thread is past its last wait: the barriers may go
        t0 = self._op(after, "elect_one", [], [int1]).results[0]
        for s in range(S):
            bar = self._op(after, "mbarrier_at", [bars, self._const(after, s)], [int32]).results[0]
            self._op(after, "mbarrier_inval", [bar, t0], [])
        if not inside_loop(self.loop):
            # the ring is dead from here on: an epilogue's TMA store may stage its tile there
            for r in trings:
                self._op(after, "ring_free", [r], [])

    def _refill_top(self, after_dots) -> bool:
        """KERNELC_TMA_REFILL_TOP, or the loop's own request (``tl.range(..., refill_top=)``, which wins): a TMA-only
        ring whose loop leaves no wgmma in flight across the back edge."""
        from ...options import get
        asked = self.loop.attrs.get("refill_top")
        if not (get("KERNELC_TMA_REFILL_TOP") if asked is None else asked) or self.cp or after_dots:
            return False
        return not any(o.name == "dot" and o.attrs.get("wgmma") == "async" for o in self.loop.walk())

    def run(self) -> None:
        loop, plan = self.loop, self.plan
        tag = loop.attrs["pipeline"]
        S, LA = tag["stages"], tag["lookahead"]
        chain, carried_idx = address_chain(loop, [ld for ld, _, _, _ in self.cp], [t for t, _, _, _ in self.tma])
        body = loop.regions[0]
        iv, carried = body.args[0], body.args[1:]
        lb, ub, step = loop.operands[:3]
        inits = loop.operands[3:]
        yld = body.ops[-1]
        chain = self._order(chain, yld)
        pre: List[Op] = entry_values(plan, loop)
        stage_invariants(plan, self.axis, loop, pre)
        rings = []
        for ld, _, is_a, _ in self.cp:
            r = self._op(pre, "ring_alloc", [], [ld.results[0].type],
                         {"stages": S, "operand": "a" if is_a else "b"}).results[0]
            self._like(r, ld.results[0])
            rings.append(r)
        trings, bars = self._tma_setup(pre, S) if self.tma else ([], None)
        # prologue: iterations 0 .. LA-1 (a copy past the end is switched off by its guard)
        cur = {i: inits[i] for i in carried_idx}
        for s in range(LA):
            iv_s = self._iv_at(pre, lb, step, s)
            guard = self._op(pre, "cmpi", [iv_s, ub], [int1], {"pred": "slt"}).results[0]
            env = {iv.id: iv_s, **{carried[i].id: cur[i] for i in carried_idx}}
            self._chain(pre, chain, env)
            stage = self._const(pre, s)
            if self.cp:
                self._copies(pre, rings, env, stage, guard)
            if self.tma:
                self._tma_copies(pre, trings, bars, env, stage, guard)
            cur = {i: env.get(yld.operands[i].id, yld.operands[i]) for i in carried_idx}
        # the loop carries the chain's values LA iterations ahead, the read and write stages (and with a
        # TMA ring the phase parity of the stage read next)
        ahead = [body.add_arg(carried[i].type) for i in carried_idx]
        for a, i in zip(ahead, carried_idx):
            self._like(a, carried[i])
        counters = [body.add_arg(int32) for _ in range(3 if self.tma else 2)]
        rd, wr = counters[:2]
        loop.operands += [cur[i] for i in carried_idx] + [self._const(pre, 0), self._const(pre, LA)]
        if self.tma:
            loop.operands.append(self._const(pre, 0))
        for i in carried_idx:
            v = Value(carried[i].type, loop, len(loop.results))
            loop.results.append(v)
            self._like(v, carried[i])
        for t in counters:
            loop.results.append(Value(t.type, loop, len(loop.results)))
        head: List[Op] = []
        if self.cp:
            # no fence.proxy.async before the wgmmas that read the stage: neither Triton 3.6 nor CUTLASS's sm90
            # cp.async + GMMA mainloops emit one after cp.async's own completion wait, and the per-iteration
            # MEMBAR.ALL.CTA + FENCE.VIEW.ASYNC.S it costs measured up to 16% on an H200 (tutorial 03, 64x256x32,
            # docs/triton-tutorials.md, "03 matmul"); registers stored by st.shared still get theirs
            self._op(head, "async_wait_group", [], [], {"pending": LA - 1})
            self._op(head, "barrier", [], [])
        if self.tma:
            bar = self._op(head, "mbarrier_at", [bars, rd], [int32]).results[0]
            self._op(head, "mbarrier_wait", [bar, counters[2]], [])
        # refill='after_dots': the chain and the cp.async copies follow the last dot (a barrier first: every
        # warpgroup's wait_group 1 has retired last iteration's wgmma, which read the stage they overwrite)
        after_dots = tag.get("refill") == REFILL_AFTER_DOTS
        refill: List[Op] = []
        if after_dots:
            self._op(refill, "barrier", [], [])
        fill = refill if after_dots else head
        iv_pf = self._iv_at(fill, iv, step, LA)
        guard = self._op(fill, "cmpi", [iv_pf, ub], [int1], {"pred": "slt"}).results[0]
        env = {iv.id: iv_pf, **{carried[i].id: a for i, a in zip(carried_idx, ahead)}}
        first = self._for_copies(chain) if self.cp and not self.tma else None
        if first is not None and any(c.regions for c in chain if id(c) not in first):
            # a branch that only advances the carried values (a flattened loop's next tile) goes after the
            # copies, which do not wait for it (before them, it splits them: ptxas repeats its guards after it)
            self._chain(fill, [c for c in chain if id(c) in first], env)
            self._copies(fill, rings, env, wr, guard, steady=True)
            self._chain(fill, [c for c in chain if id(c) not in first], env)
        else:
            self._chain(fill, chain, env)
            if self.cp:
                self._copies(fill, rings, env, wr, guard, steady=True)
        fill_end = len(head)
        reads = self._ring_reads(head, trings, rd)
        for (ld, _, _, _), ring in zip(self.cp, rings):
            t = self._op(head, "ring_read", [ring, rd], [ld.results[0].type]).results[0]
            self._like(t, ld.results[0])
            reads.append((ld.results[0], t))
        for v, k, is_a, via in self.cp_views:  # another view of a ringed load: its own orientation
            t = self._op(head, "ring_read", [rings[k], rd], [v.type], {"operand": "a" if is_a else "b",
                                                                       "transposed": True}).results[0]
            self._like(t, v)
            reads.append((v, t))
        nxt = [env.get(yld.operands[i].id, yld.operands[i]) for i in carried_idx]
        stages, wraps = [], []
        for st in (rd, wr):
            inc = self._op(head, "add", [st, self._const(head, 1)], [int32]).results[0]
            wrap = self._op(head, "cmpi", [inc, self._const(head, S)], [int1], {"pred": "eq"}).results[0]
            wraps.append(wrap)
            stages.append(self._op(head, "select", [wrap, self._const(head, 0), inc], [int32]).results[0])
        tail: List[Op] = []
        if self.tma:
            # the parity of the stage read next flips each time the read stage wraps around
            flip = self._op(head, "cast", [wraps[0]], [int32]).results[0]
            stages.append(self._op(head, "xor", [counters[2], flip], [int32]).results[0])
            if self._refill_top(after_dots):
                # no wgmma outlives its iteration: every warp past a barrier at the top of this iteration is done
                # with the stage the previous one read, so its copies go out now, a whole iteration ahead, and
                # this iteration's wait for its own stage comes after them
                tag["refill"] = REFILL_TOP
                top: List[Op] = []
                self._op(top, "barrier", [], [])
                self._tma_copies(top, trings, bars, env, wr, guard, steady=True)
                wait = head[:2]
                assert [o.name for o in wait] == ["mbarrier_at", "mbarrier_wait"]
                # after the guard and the chain of iteration i+LA (the copies' coordinates), before the reads
                head[fill_end:fill_end] = top + wait
                del head[:2]
            else:
                # the copies of iteration i+LA go out after this iteration's dots, once every warp is past the
                # stage they overwrite (the one the previous iteration read)
                self._op(tail, "barrier", [], [])
                self._tma_copies(tail, trings, bars, env, wr, guard, steady=True)
        ringed = self._ringed_ops()
        kept = [o for o in body.ops[:-1] if id(o) not in ringed]
        if after_dots:
            last = max(i for i, o in enumerate(kept) if o.name == "dot" and o.attrs.get("wgmma") == "async")
            kept[last + 1:last + 1] = refill
        if tail:
            # a branch after the dots (a flattened loop's epilogue, passes/flatten_loops.py) runs with the next
            # copies already in flight: they go before it
            last = max((i for i, o in enumerate(kept) if o.name == "dot"), default=-1)
            at = next((i for i, o in enumerate(kept) if i > last and o.name == "scf.if"), None)
            if at is not None:
                kept[at:at] = tail
                tail = []
        body.ops = []
        for o in head + kept + tail + [yld]:
            body.append(o)
        for old, t in reads:
            replace_all_uses(body, old, t)
        yld.operands += nxt + stages
        after: List[Op] = []
        if self.cp:
            self._op(after, "async_wait_all", [], [])
        if self.tma:
            self._tma_teardown(after, trings, bars, S)
        blk = loop.block
        at = blk.ops.index(loop)
        blk.ops[at:at + 1] = pre + [loop] + after
        for o in pre + after:
            o.block = blk
