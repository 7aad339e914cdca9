"""``expand_tma_rings``: the TMA ring of a pipelined loop (``schedule_pipelines`` tagged it,
docs/schedule-ir.md) rewritten into explicit tile-IR ops, so code generation lowers one op at a time.

For a loop ``scf.for {pipeline={stages=S, lookahead=L}}`` with TMA-ringed descriptor loads that no
producer warp fills (no ``ws``), the pass writes

    %r = tma_ring_alloc %desc {stages=S, operand, transposed}   one per ringed descriptor load
    %bars = mbarrier_alloc {count=S}                             one barrier per stage
    barrier; mbarrier_init (1 arrival) of each stage's barrier by the elected thread; fence_mbarrier_init;
    barrier; prefetch_tensormaps
    prologue, for s in 0..L-1: the loop's offset chain re-evaluated at iteration s (cloned ops), then the
        elected thread (and the iteration's guard): mbarrier_expect_tx on stage s's barrier and the
        tma_copy_to_ring of every ringed tile into stage s
    scf.for ... iter_args(..., chain values L iterations ahead, read stage = 0, write stage = L, phase = 0):
        mbarrier_wait on the read stage's barrier, parity = phase
        the chain at iteration i+L
        %t = ring_read %r, read stage          (replaces the load: the dot reads stage i in place)
        read/write stage + 1 mod S; phase ^= (read stage wrapped)     (ordinary add/cmpi/select/cast/xor)
        ... the body ...
        barrier; the copies of iteration i+L into the write stage (as in the prologue)
    barrier; mbarrier_inval of each barrier; ring_free of the rings (when the loop runs once)

A loop that also rings cp.async loads (a pointer operand next to a TMA one) keeps one pair of stage
counters for both: its cp.async ring is written as ``expand_cp_async_rings`` writes it (``ring_alloc``,
``async_copy``, commit/wait, ``async_wait_all``) around the TMA ops above. The decision record
(``pipeline`` on the loop, ``wgmma`` on the dots) stays. The emission order is the one the code
generator used before the ring became ops, so the generated code is unchanged.
"""
from __future__ import annotations

from typing import List

from ...language.dtypes import int1, int32, int64
from ..ir.core import Function, Op, Value, replace_all_uses
from .cp_async_rings import _Expander
from .schedule_ir import address_chain, ringed_operands


def expand_tma_rings(fn: Function, ctx) -> Function:
    loops = [op for op in fn.walk() if op.name == "scf.for" and op.attrs.get("pipeline") and not op.attrs.get("ws")]
    for loop in loops:
        cp, tma = ringed_operands(loop)
        if tma:
            _TmaExpander(ctx, loop, cp, tma).run()
    return fn


def _inside_loop(op: Op) -> bool:
    b = op.block
    while b is not None and b.parent is not None:
        if b.parent.name in ("scf.for", "scf.while"):
            return True
        b = b.parent.block
    return False


class _TmaExpander(_Expander):
    def __init__(self, ctx, loop: Op, cp, tma):
        super().__init__(ctx, loop, cp)
        self.tma = tma

    def _tma_copies(self, out, rings, bars: Value, env, stage: Value, guard: Value) -> None:
        """The elected thread (where ``guard``) announces the stage's bytes and copies every ringed tile."""
        t0 = self._op(out, "elect_one", [], [int1]).results[0]
        pred = self._op(out, "and", [t0, guard], [int1]).results[0]
        bar = self._op(out, "mbarrier_at", [bars, stage], [int32]).results[0]
        nbytes = 0
        for src, _, _, _ in self.tma:
            ty = src.operands[0].type
            n = ty.element_ty.itemsize
            for d in ty.block_shape:
                n *= d
            nbytes += n
        self._op(out, "mbarrier_expect_tx", [bar, pred], [], {"bytes": nbytes})
        for (src, _, _, _), ring in zip(self.tma, rings):
            offs = [env.get(v.id, v) for v in src.operands[1:]]
            self._op(out, "tma_copy_to_ring", [ring, stage, bar, pred] + offs, [])

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
        uses_wgmma = any(o.name == "dot" and id(o) in plan.wgmma for o in body.ops)
        pre: List[Op] = self._entry_values(inits, carried)
        self._stage_invariants(pre, body)
        rings = []
        for ld, _, is_a, _ in self.cp:
            r = self._op(pre, "ring_alloc", [], [ld.results[0].type],
                         {"stages": S, "operand": "a" if is_a else "b"}).results[0]
            self._like(r, ld.results[0])
            rings.append(r)
        trings = []
        for src, _, is_a, via in self.tma:
            seen = (via or src).results[0]  # what the dot reads
            r = self._op(pre, "tma_ring_alloc", [src.operands[0]], [seen.type],
                         {"stages": S, "operand": "a" if is_a else "b", "transposed": via is not None,
                          "source": str(src.loc)}).results[0]
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
            self._tma_copies(pre, trings, bars, env, stage, guard)
            cur = {i: env.get(yld.operands[i].id, yld.operands[i]) for i in carried_idx}
        # the loop carries the chain's values LA iterations ahead, the read and write stages, the phase
        ahead = [body.add_arg(carried[i].type) for i in carried_idx]
        for a, i in zip(ahead, carried_idx):
            self._like(a, carried[i])
        rd, wr, phase = body.add_arg(int32), body.add_arg(int32), body.add_arg(int32)
        loop.operands += [cur[i] for i in carried_idx] + [self._const(pre, 0), self._const(pre, LA),
                                                          self._const(pre, 0)]
        for i in carried_idx:
            v = Value(carried[i].type, loop, len(loop.results))
            loop.results.append(v)
            self._like(v, carried[i])
        for t in (int32, int32, int32):
            loop.results.append(Value(t, loop, len(loop.results)))
        head: List[Op] = []
        if self.cp:
            self._op(head, "async_wait_group", [], [], {"pending": LA - 1})
            if uses_wgmma:  # wgmma reads shared memory through the async proxy: order the cp.async writes
                self._op(head, "fence_async_shared", [], [])
            self._op(head, "barrier", [], [])
        bar = self._op(head, "mbarrier_at", [bars, rd], [int32]).results[0]
        self._op(head, "mbarrier_wait", [bar, phase], [])
        iv_pf = self._iv_at(head, iv, step, LA)
        guard = self._op(head, "cmpi", [iv_pf, ub], [int1], {"pred": "slt"}).results[0]
        env = {iv.id: iv_pf, **{carried[i].id: a for i, a in zip(carried_idx, ahead)}}
        self._chain(head, chain, env)
        if self.cp:
            self._copies(head, rings, env, wr, guard, steady=True)
        reads = []
        for (src, _, _, via), ring in zip(self.tma, trings):
            seen = (via or src).results[0]
            t = self._op(head, "ring_read", [ring, rd], [seen.type]).results[0]
            self._like(t, seen)
            reads.append((seen, t))
        for (ld, _, _, _), ring in zip(self.cp, rings):
            t = self._op(head, "ring_read", [ring, rd], [ld.results[0].type]).results[0]
            self._like(t, ld.results[0])
            reads.append((ld.results[0], t))
        nxt = [env.get(yld.operands[i].id, yld.operands[i]) for i in carried_idx]
        stages, wraps = [], []
        for st in (rd, wr):
            inc = self._op(head, "add", [st, self._const(head, 1)], [int32]).results[0]
            wrap = self._op(head, "cmpi", [inc, self._const(head, S)], [int1], {"pred": "eq"}).results[0]
            wraps.append(wrap)
            stages.append(self._op(head, "select", [wrap, self._const(head, 0), inc], [int32]).results[0])
        # the parity of the stage read next flips each time the read stage wraps around
        flip = self._op(head, "cast", [wraps[0]], [int32]).results[0]
        nphase = self._op(head, "xor", [phase, flip], [int32]).results[0]
        # the copies of iteration i+LA go out after this iteration's dots, once every warp is past the
        # stage they overwrite (the one the previous iteration read)
        tail: List[Op] = []
        self._op(tail, "barrier", [], [])
        self._tma_copies(tail, trings, bars, env, wr, guard)
        ringed = {id(ld) for ld, _, _, _ in self.cp} | {id(t) for t, _, _, _ in self.tma} \
            | {id(via) for _, _, _, via in self.tma if via is not None}
        kept = [o for o in body.ops[:-1] if id(o) not in ringed]
        body.ops = []
        for o in head + kept + tail + [yld]:
            body.append(o)
        for old, t in reads:
            replace_all_uses(body, old, t)
        yld.operands += nxt + stages + [nphase]
        after: List[Op] = []
        if self.cp:
            self._op(after, "async_wait_all", [], [])
        self._op(after, "barrier", [], [])  # every thread is past its last wait: the barriers may go
        t0 = self._op(after, "elect_one", [], [int1]).results[0]
        for s in range(S):
            bar = self._op(after, "mbarrier_at", [bars, self._const(after, s)], [int32]).results[0]
            self._op(after, "mbarrier_inval", [bar, t0], [])
        if not _inside_loop(loop):
            # the ring is dead from here on: an epilogue's TMA store may stage its tile there
            for r in trings:
                self._op(after, "ring_free", [r], [])
        blk = loop.block
        at = blk.ops.index(loop)
        blk.ops[at:at + 1] = pre + [loop] + after
        for o in pre + after:
            o.block = blk
