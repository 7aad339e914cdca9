"""Shared-memory rings of pipelined loops (docs/schedule-ir.md). Nothing here decides which loops or
loads are pipelined.

**cp.async rings** are explicit tile-IR ops by the time they reach codegen
(``passes/cp_async_rings.py``: ``ring_alloc``, ``async_copy``, ``async_commit_group``,
``async_wait_group``, ``async_wait_all``, ``fence_async_shared``, ``ring_read``); the rules at the end of
this module lower them one op at a time, keeping only the ring value -> shared memory map
(``Lowering.rings``) and the ring_read value -> shared operand map (``Lowering.smem_operands``).

**TMA rings** (tensor-descriptor loads, ``pipeline={ring='tma'}``), and a loop that has both a TMA
ring and cp.async loads, are still expanded here (``PipelinedLoop``) from the attributes ``passes/schedule.py`` wrote (``PipelinedLoop``): the loop's address chain is re-evaluated
ahead of time with the prefetch iteration's bindings (``passes/schedule_ir.address_chain``), and the
copies complete on one mbarrier per stage:

    prologue:  init the S barriers; thread 0 copies stages 0 .. S-2
    iteration: wait on stage i's barrier (phase parity (i / S) & 1); the dot reads stage i in place
               (wgmma may stay in flight: wait_group 1 keeps one group, so stage i-1 is free);
               barrier; thread 0 copies iteration i+S-1 into stage i-1's slot
    after:     barrier, invalidate the barriers

A warp-specialised loop's consumers use the same class (codegen/warp_specialize.py fills the ring).
Loop-invariant dot operands (attention's Q) are staged into shared memory once, before the loop
(``stage_invariant_operands``).
"""
from __future__ import annotations

from typing import Dict, List, Optional

from ...language.dtypes import scalar_of, shape_of
from ..ir.core import Loc, Op
from ..passes.schedule_ir import address_chain, ringed_operands
from . import tma as T
from .descriptors import (free_regions, inside_loop, operand_orientation, report_tma, reuse_or_allocate,
                          tensor_map_of)
from .dot import MMA_SHAPES, SmemOperand, _dims, operand_geometry, store_operand, choose_trans
from .memory import report_access
from .emitter import llty
from .lowering import Lowering, Tile, rule
from .wgmma import PingPong, tie_through_wait


class _Load:
    def __init__(self, op: Op, dot: Op, is_a: bool):
        self.op, self.dot, self.is_a = op, dot, is_a
        self.trans = False
        self.geom: Optional[SmemOperand] = None
        self.tokens = None
        self.stage_bytes = 0


class _TmaLoad:
    """A ``descriptor_load`` (TMA) feeding operand A/B of ``dot``, directly or through ``via`` (a 2-D trans).
    ``views``: every (value, dot, is_a, trans) that reads the tile in place -- one copy a stage serves them
    all (the first is ``value``/``dot``/``is_a``/``trans``)."""

    def __init__(self, op: Op, dot: Op, is_a: bool, via: Optional[Op], trans: bool):
        self.op, self.dot, self.is_a, self.via, self.trans = op, dot, is_a, via, trans
        self.value = (via or op).results[0]  # what the dot reads
        self.views = [(self.value, dot, is_a, trans)]
        self.tmap = None
        self.box = None
        self.geom: Optional[SmemOperand] = None
        self.token = None
        self.stage_bytes = 0


class PipelinePlan:
    """A loop's ring as ``passes/schedule.py`` wrote it down (``pipeline``/``wgmma`` attributes)."""

    def __init__(self, lw: Lowering, op: Op, stages: int, lookahead: int, loads: List[_Load], chain: List[Op],
                 carried_idx: List[int], tma_loads: Optional[List[_TmaLoad]] = None):
        self.lw, self.op, self.S, self.loads, self.chain, self.carried_idx = lw, op, stages, loads, chain, carried_idx
        self.tma_loads: List[_TmaLoad] = list(tma_loads or [])
        self.lookahead = lookahead
        # wgmma dots that stay in flight (one group) across iterations
        self.async_dots = async_dots(op)
        self.uses_wgmma = any(o.name == "dot" and id(o) in lw.plan.wgmma for o in op.regions[0].ops)


def pipeline_of(lw: Lowering, op: Op) -> Optional[PipelinePlan]:
    """The TMA ring of loop ``op`` as tagged in the IR, with the cp.async loads of the same loop (None:
    no TMA ring; a loop with only cp.async loads has its ring as ops by now, passes/cp_async_rings.py)."""
    tag = op.attrs.get("pipeline")
    if not tag:
        return None
    cp, tma = ringed_operands(op)
    if not tma:
        assert not cp, "internal: a cp.async ring reached codegen unexpanded (passes/cp_async_rings.py)"
        return None
    loads = []
    for lop, dot, is_a, _ in cp:
        ld = _Load(lop, dot, is_a)
        ld.vec = lop.attrs["pipeline"]["vec"]
        loads.append(ld)
    tma_loads: List[_TmaLoad] = []
    by_src: Dict[int, _TmaLoad] = {}
    for src, dot, is_a, via in tma:
        trans = operand_orientation(is_a, via is not None)
        t = by_src.get(id(src))
        if t is None:
            t = by_src[id(src)] = _TmaLoad(src, dot, is_a, via, trans)
            tma_loads.append(t)
        elif (via or src).results[0].id not in {v.id for v, _, _, _ in t.views}:
            t.views.append(((via or src).results[0], dot, is_a, trans))
    chain, carried_idx = address_chain(op, [ld.op for ld in loads], [t.op for t in tma_loads])
    return PipelinePlan(lw, op, tag["stages"], tag["lookahead"], loads, chain, carried_idx, tma_loads)


def report_pipeline(lw: Lowering, plan: PipelinePlan) -> None:
    """Add the plan's pipelined loads to the kernel's memory-access report (for the analyzer)."""
    for ld in plan.loads:
        L = lw.plan.get(ld.op.results[0])
        mask = ld.op.operands[1] if len(ld.op.operands) > 1 else None
        report_access(lw, ld.op, "load (cp.async pipelined)", ld.op.operands[0], mask, L,
                      scalar_of(ld.op.results[0].type).itemsize, ld.vec)
    for t in plan.tma_loads:
        report_tma(lw, t.op, "load (TMA pipelined)", t.op.operands[0].type)


def _eval_chain(lw: Lowering, plan: PipelinePlan, iv: str, carried_vals: Dict[int, Tile]):
    """Lower the address chain with the given bindings; returns (per-load (ptrs, masks), advanced carried)."""
    body = plan.op.regions[0]
    lw.push_scope()
    saved_s = dict(lw.scalars)
    saved_t = dict(lw.tiles)
    lw.scalars[body.args[0].id] = iv
    for i in plan.carried_idx:
        a = body.args[1 + i]
        if lw.is_tile(a):
            lw.tiles[a.id] = carried_vals[i]
        else:
            lw.scalars[a.id] = carried_vals[i]
    for c in plan.chain:
        if not c.results:
            continue
        v = c.results[0]
        if not lw.is_tile(v):
            lw.lower_scalar_op(c)
        else:
            L = lw.plan.get(v)
            if L is not None:
                lw.tiles[v.id] = lw.materialize(c, v, L)
    out = []
    for ld in plan.loads:
        L = lw.plan.get(ld.op.results[0])
        ptrs = lw.get(ld.op.operands[0], L).regs
        masks = lw.operand(ld.op.operands[1], L) if len(ld.op.operands) > 1 else None
        out.append((ptrs, masks))
    for t in plan.tma_loads:  # after the cp.async loads: element offsets, outermost first
        out.append([lw.scalar(v) for v in t.op.operands[1:]])
    yld = body.ops[-1]
    advanced = {}
    for i in plan.carried_idx:
        a = body.args[1 + i]
        v = yld.operands[i]
        if lw.is_tile(a):
            advanced[i] = lw.get(v, lw.plan.get(a))
        else:
            advanced[i] = lw.scalar(v)
    lw.scalars = saved_s
    lw.tiles = saved_t
    lw.pop_scope()
    return out, advanced


def _issue(lw: Lowering, plan: PipelinePlan, addrs, stage: str, guard: Optional[str]):
    """cp.async every chunk of every pipelined load into ``stage``; one commit group."""
    e = lw.e
    for ld, (ptrs, masks) in zip(plan.loads, addrs):
        L = lw.plan.get(ld.op.results[0])

        def stage_at(ld=ld):
            return ld.geom.at(e.val(f"add i32 {ld.token}, {e.val(f'mul i32 {stage}, {ld.stage_bytes}')}"))
        copy_tile(lw, L, scalar_of(ld.op.results[0].type).itemsize, ld.vec, stage_at, ld.dims, ptrs, masks, guard)
    e.asm("void", "cp.async.commit_group;", "", [])


def _issue_tma(lw: Lowering, plan: PipelinePlan, offsets, stage: str, guard: Optional[str], bars,
               pred: Optional[str] = None):
    """One thread (``pred``; thread 0 by default) copies every TMA-pipelined tile of one iteration into
    ``stage``, completing on its barrier."""
    e = lw.e
    pred = T.elected(lw) if pred is None else pred
    if guard is not None:
        pred = e.val(f"and i1 {pred}, {guard}")
    pool, tok, off = bars
    bar = pool.address(tok, off, stage)
    T.mbarrier_expect_tx(lw, bar, sum(t.box.nbytes for t in plan.tma_loads), pred)
    for t, offs in zip(plan.tma_loads, offsets):
        base = e.val(f"add i32 {t.token}, {e.val(f'mul i32 {stage}, {t.stage_bytes}')}")
        tmap = t.tmap.address(lw)
        T.copy_tile_in(lw, t.box, tmap, base, bar, offs, pred)


def prefetch_tensor_maps(lw: Lowering, plan: PipelinePlan, pred: Optional[str]) -> None:
    """Bring the maps of the loop's copies into the TMA unit's cache ahead of the first copy."""
    maps = {t.tmap.param: t.tmap for t in plan.tma_loads}
    for param in sorted(maps):
        T.prefetch_tensormap(lw, maps[param].address(lw), pred)


class PipelinedLoop:
    """Drives the emission; ``lower_for`` calls prologue / iteration_start / iteration_end / finish."""

    def __init__(self, lw: Lowering, plan: PipelinePlan, ws=None):
        self.lw, self.plan = lw, plan
        # a warp-specialised loop releases a stage one iteration late when its wgmma group stays in flight
        self.release_lag = ws is not None and plan.op.attrs["ws"]["release"] == "lagged"
        # ws: the kernel's WarpSpecialization when this is its loop (codegen/warp_specialize.py): a
        # producer warp fills the ring, this code is the consumers' side of it
        self.ws = ws

    def prologue(self, lb: str, ub: str, step: str, iv_ty: str, init_carried: Dict[int, object]):
        lw, plan = self.lw, self.plan
        e = lw.e
        S = plan.S
        if self.ws is not None:
            return self._consumer_prologue(lb, ub, iv_ty)
        for ld in plan.loads:
            dot = ld.dot
            elt = scalar_of(ld.op.results[0].type)
            eb = elt.itemsize
            M, N = shape_of(dot.results[0].type)
            K = shape_of(dot.operands[0].type)[1]
            L = lw.plan.get(ld.op.results[0])
            ld.trans = choose_trans(L, eb, ld.is_a)
            ld.geom = operand_geometry(ld.is_a, ld.trans, M if ld.is_a else N, K, eb)
            ld.dims = _dims(ld.is_a, ld.trans)
            ld.stage_bytes = (ld.geom.nbytes + 1023) // 1024 * 1024  # stages stay 1024-byte aligned
            ld.token = lw.persistent(S * ld.stage_bytes)
        if plan.tma_loads:
            self._tma_setup()
        self.iv_ty = iv_ty
        self.ub = ub
        self.step = step
        cur = dict(init_carried)
        LA = plan.lookahead
        n = len(plan.loads)
        for s in range(LA):
            iv_s = lb if s == 0 else e.val(f"add {iv_ty} {lb}, {e.val(f'mul {iv_ty} {step}, {s}')}")
            guard = e.val(f"icmp slt {iv_ty} {iv_s}, {ub}")
            addrs, cur = _eval_chain(lw, plan, iv_s, cur)
            if plan.loads:
                _issue(lw, plan, addrs, str(s), guard)
            if plan.tma_loads:
                _issue_tma(lw, plan, addrs[n:], str(s), guard, self.bars)
        # extra loop-carried state: prefetch bindings (S-1 iterations ahead), read and write stage
        self.extra_types = []
        self.extra_inits = []
        for i in plan.carried_idx:
            v = cur[i]
            if isinstance(v, Tile):
                a = plan.op.regions[0].args[1 + i]
                ty = llty(scalar_of(a.type))
                self.extra_types += [ty] * len(v.regs)
                self.extra_inits += list(v.regs)
            else:
                a = plan.op.regions[0].args[1 + i]
                self.extra_types.append(llty(scalar_of(a.type)))
                self.extra_inits.append(v)
        self.n_chain = len(self.extra_types)
        self.extra_types += ["i32", "i32"]
        self.extra_inits += ["0", str(LA)]
        if plan.tma_loads:  # the phase parity of the stage read next
            self.extra_types.append("i32")
            self.extra_inits.append("0")
        return list(zip(self.extra_types, self.extra_inits))

    def _consumer_prologue(self, lb: str, ub: str, iv_ty: str):
        """Warp-specialised consumers: nothing to prefetch (the producer does); the ring position
        (read stage, phase parity) continues from where the previous run of this loop left it."""
        lw, plan = self.lw, self.plan
        e = lw.e
        self.lb, self.ub, self.iv_ty = lb, ub, iv_ty
        self.n_chain = 0
        stage = e.val(f"load i32, ptr {self.ws.stage_ptr}")
        phase = e.val(f"load i32, ptr {self.ws.phase_ptr}")
        self.extra_types = ["i32", "i32", "i32"]  # read stage, (unused) write stage, phase parity
        self.pingpong = PingPong(lw) if plan.op.attrs["ws"].get("pingpong") else None
        if self.pingpong is not None:
            self.pingpong.before_loop()
        return [("i32", stage), ("i32", "0"), ("i32", phase)]

    def tma_buffers(self):
        """Tensor maps, boxes and the ring's stage buffers (1024-byte aligned for the 128B swizzle)."""
        lw, plan = self.lw, self.plan
        S = plan.S
        for t in plan.tma_loads:
            ty = t.op.operands[0].type
            t.tmap = tensor_map_of(lw, t.op.operands[0])
            t.box = t.tmap.box
            t.geom = T.box_smem(t.box, 0)
            for _, dot, is_a, trans in t.views:
                M, N = shape_of(dot.results[0].type)
                K = shape_of(dot.operands[0].type)[1]
                want = operand_geometry(is_a, trans, M if is_a else N, K, ty.element_ty.itemsize)
                assert (t.geom.rows, t.geom.cols) == (want.rows, want.cols), "internal: TMA tile is not the operand"
            t.stage_bytes = (t.box.nbytes + 1023) // 1024 * 1024
            t.token = reuse_or_allocate(lw, S * t.stage_bytes)

    def _tma_setup(self):
        """Stage buffers and one initialised mbarrier per stage."""
        lw, plan = self.lw, self.plan
        S = plan.S
        self.tma_buffers()
        pool = T.BarrierPool.of(lw)
        tok, off = pool.take(S)
        self.bars = (pool, tok, off)
        t0 = T.elected(lw)
        lw.barrier()  # an earlier trip of an enclosing loop is done with the ring and the barriers
        for s in range(S):
            T.mbarrier_init(lw, pool.address(tok, off, str(s)), 1, t0)
        T.fence_mbarrier_init(lw)
        lw.barrier()
        prefetch_tensor_maps(lw, plan, t0)

    def iteration_start(self, iv: str, extra_phis: List[str]) -> List[str]:
        """Wait for this iteration's stage, prefetch ahead, bind the dots' operands; returns next extras."""
        lw, plan = self.lw, self.plan
        e = lw.e
        S = plan.S
        read_stage, write_stage = extra_phis[self.n_chain], extra_phis[self.n_chain + 1]
        if self.ws is not None:
            return self._consumer_start(iv, extra_phis)
        cur: Dict[int, object] = {}
        k = 0
        body = plan.op.regions[0]
        for i in plan.carried_idx:
            a = body.args[1 + i]
            if lw.is_tile(a):
                L = lw.plan.get(a)
                cur[i] = Tile(L, extra_phis[k:k + L.num_regs])
                k += L.num_regs
            else:
                cur[i] = extra_phis[k]
                k += 1
        LA = plan.lookahead
        if plan.loads:
            e.asm("void", f"cp.async.wait_group {LA - 1};", "", [])
            # wgmma reads shared memory through the async proxy: order the cp.async writes before it
            if plan.uses_wgmma:
                e.asm("void", "fence.proxy.async.shared::cta;", "", [])
            lw.barrier()
        if plan.tma_loads:
            pool, tok, off = self.bars
            T.mbarrier_wait(lw, pool.address(tok, off, read_stage), extra_phis[self.n_chain + 2])
        iv_pf = e.val(f"add {self.iv_ty} {iv}, {e.val(f'mul {self.iv_ty} {self.step}, {LA}')}")
        guard = e.val(f"icmp slt {self.iv_ty} {iv_pf}, {self.ub}")
        addrs, nxt = _eval_chain(lw, plan, iv_pf, cur)
        if plan.loads:
            _issue(lw, plan, addrs, write_stage, guard)
        # TMA copies for iteration i+S-1 go out after this iteration's dots (iteration_end)
        self.tma_pending = (addrs[len(plan.loads):], write_stage, guard)
        self._bind_tma_operands(read_stage)
        for ld in plan.loads:
            base = e.val(f"add i32 {ld.token}, {e.val(f'mul i32 {read_stage}, {ld.stage_bytes}')}")
            lw.smem_operands[ld.op.results[0].id] = (ld.geom.at(base), ld.trans)
        out = []
        for i in plan.carried_idx:
            v = nxt[i]
            out += list(v.regs) if isinstance(v, Tile) else [v]
        wraps = []
        for st in (read_stage, write_stage):
            inc = e.val(f"add i32 {st}, 1")
            wrap = e.val(f"icmp eq i32 {inc}, {S}")
            wraps.append(wrap)
            out.append(e.val(f"select i1 {wrap}, i32 0, i32 {inc}"))
        if plan.tma_loads:  # the parity flips each time the read stage wraps around
            out.append(e.val(f"xor i32 {extra_phis[self.n_chain + 2]}, {e.val(f'zext i1 {wraps[0]} to i32')}"))
        return out

    def _bind_tma_operands(self, read_stage: str) -> None:
        """The dots read this iteration's TMA tiles in place, in stage ``read_stage``."""
        lw, e = self.lw, self.lw.e
        for t in self.plan.tma_loads:
            base = e.val(f"add i32 {t.token}, {e.val(f'mul i32 {read_stage}, {t.stage_bytes}')}")
            for value, _, _, trans in t.views:
                lw.smem_operands[value.id] = (T.box_smem(t.box, base), trans)

    def _consumer_start(self, iv: str, extra_phis: List[str]) -> List[str]:
        """Wait until the producer's copies for this iteration landed; bind the dots' operands."""
        lw, e, S = self.lw, self.lw.e, self.plan.S
        read_stage, write_stage, phase = extra_phis
        self.iv, self.read_stage, self.extra_phis = iv, read_stage, extra_phis
        T.mbarrier_wait(lw, self.ws.full(read_stage), phase)
        self._bind_tma_operands(read_stage)
        inc = e.val(f"add i32 {read_stage}, 1")
        wrap = e.val(f"icmp eq i32 {inc}, {S}")
        nxt = e.val(f"select i1 {wrap}, i32 0, i32 {inc}")
        return [nxt, write_stage, e.val(f"xor i32 {phase}, {e.val(f'zext i1 {wrap} to i32')}")]

    def _release(self, stage: str, cond: Optional[str]) -> None:
        """Lane 0 of every consumer warp arrives on the stage's "empty" barrier: its readers are done."""
        e = self.lw.e
        pred = e.val(f"icmp eq i32 {self.lw.lane}, 0")
        if cond is not None:
            pred = e.val(f"and i1 {pred}, {cond}")
        T.mbarrier_arrive(self.lw, self.ws.empty(stage), pred)

    def _previous_stage(self, stage: str) -> str:
        e = self.lw.e
        first = e.val(f"icmp eq i32 {stage}, 0")
        return e.val(f"select i1 {first}, i32 {self.plan.S - 1}, i32 {e.val(f'sub i32 {stage}, 1')}")

    def iteration_end(self):
        """After the body's dots: refill the slot the previous iteration read (every warp is past it)."""
        if self.ws is not None:
            # the dots of this iteration are issued; with one wgmma group left in flight the previous
            # iteration's group is complete now, else this one's is
            if self.release_lag:
                not_first = self.lw.e.val(f"icmp ne {self.iv_ty} {self.iv}, {self.lb}")
                self._release(self._previous_stage(self.read_stage), not_first)
            else:
                self._release(self.read_stage, None)
            return
        if not self.plan.tma_loads:
            return
        offsets, write_stage, guard = self.tma_pending
        self.lw.barrier()
        _issue_tma(self.lw, self.plan, offsets, write_stage, guard, self.bars)

    def finish(self, carried: Optional[List[List[str]]] = None) -> Optional[List[List[str]]]:
        """After the loop (exit block): drain what is in flight; returns ``carried`` (the loop results'
        registers per carried value) with the in-flight accumulators replaced by the wait's results."""
        e = self.lw.e
        if self.plan.async_dots:
            carried = wait_accumulators(self.lw, self.plan.op, carried)
        if self.ws is not None:
            return self._consumer_finish(carried)
        if self.plan.loads:
            e.asm("void", "cp.async.wait_all;", "", [])
        for ld in self.plan.loads:
            self.lw.smem_operands.pop(ld.op.results[0].id, None)
        if self.plan.tma_loads:
            lw = self.lw
            # every copy issued was waited for by its iteration; once all threads are past their last
            # wait the barriers can be invalidated (an enclosing loop initialises them again)
            lw.barrier()
            t0 = T.elected(lw)
            pool, tok, off = self.bars
            for s in range(self.plan.S):
                T.mbarrier_inval(lw, pool.address(tok, off, str(s)), t0)
            for t in self.plan.tma_loads:
                for value, _, _, _ in t.views:
                    lw.smem_operands.pop(value.id, None)
            if not inside_loop(self.plan.op):
                # the ring is dead from here on (all copies waited, all readers past the barrier): an
                # epilogue's TMA store may stage its tile there instead of growing the scratch area
                free_regions(lw).extend((t.token, self.plan.S * t.stage_bytes) for t in self.plan.tma_loads)
        return carried


    def before_yield(self, yld) -> None:
        """End of the body: wait for whatever is still in flight. Deferred dots (``wgmma='deferred'``,
        passes/schedule.py) are complete again here: ptxas cannot follow a wgmma in flight across the back
        edge once two are (C7514, it would serialise them)."""
        self.lw.wgmma_groups.complete_all()

    def _consumer_finish(self, carried):
        """Release the last stage (its wgmma group was still in flight), save the ring position."""
        lw, e = self.lw, self.lw.e
        read_stage, _, phase = self.extra_phis
        if self.pingpong is not None:
            self.pingpong.after_loop()
        if self.release_lag:
            ran = e.val(f"icmp slt {self.iv_ty} {self.lb}, {self.ub}")
            self._release(self._previous_stage(read_stage), ran)
        e.emit(f"store i32 {read_stage}, ptr {self.ws.stage_ptr}")
        e.emit(f"store i32 {phase}, ptr {self.ws.phase_ptr}")
        for t in self.plan.tma_loads:
            for value, _, _, _ in t.views:
                lw.smem_operands.pop(value.id, None)
        if not inside_loop(self.plan.op):
            # every copy landed (each was waited for) and the producer issues no more: an epilogue's
            # TMA store may stage its tile in the ring (it waits at a barrier for all readers first)
            free_regions(lw).extend((t.token, self.plan.S * t.stage_bytes) for t in self.plan.tma_loads)
        return carried


def async_dots(loop: Op) -> set:
    """Ids of the loop's wgmma dots that stay in flight across iterations (``wgmma='async'``)."""
    return {id(o) for o in loop.regions[0].ops if o.name == "dot" and o.attrs.get("wgmma") == "async"}


def wait_accumulators(lw: Lowering, loop: Op, carried: Optional[List[List[str]]]):
    """``wgmma.wait_group 0`` that takes the in-flight accumulators (the carried values the async dots
    are yielded as) and hands them back (``wgmma.tie_through_wait``): a conversion sunk into the loop
    exit cannot read registers the tensor cores still write (ptxas would serialise every wgmma, C7514)."""
    body = loop.regions[0]
    yld = body.ops[-1]
    dots = async_dots(loop)
    idx = sorted({i for i, v in enumerate(yld.operands) if v.op is not None and id(v.op) in dots})
    regs = [r for i in idx for r in carried[i]] if carried is not None else []
    vals = tie_through_wait(lw, 0, regs)
    if not regs:
        return carried
    out = list(carried)
    k = 0
    for i in idx:
        out[i] = vals[k:k + len(carried[i])]
        k += len(carried[i])
    return out


def stage_invariant_operands(lw: Lowering, op: Op) -> None:
    """Before a loop: copy dot operands that do not change in the loop into shared memory once."""
    body = op.regions[0]
    inner = {r.id for o in body.ops for t in o.walk() for r in t.results} | {a.id for a in body.args}
    e = lw.e
    staged = False
    for o in body.ops:
        if o.name != "dot" or id(o) in lw.plan.dot_fma or lw.plan.get(o.results[0]) is None:
            continue
        for idx in (0, 1):
            v = o.operands[idx]
            if v.id in inner or v.id in lw.smem_operands or (v.id, idx == 0) in lw.smem_operands or not lw.is_tile(v):
                continue
            elt = scalar_of(v.type)
            if elt.name not in MMA_SHAPES:
                continue
            M, N = shape_of(o.results[0].type)
            K = shape_of(o.operands[0].type)[1]
            t = lw.get(v)
            trans = choose_trans(t.layout, elt.itemsize, idx == 0)
            geom = operand_geometry(idx == 0, trans, M if idx == 0 else N, K, elt.itemsize)
            tok = lw.persistent(geom.nbytes)
            sm = geom.at(tok)
            store_operand(lw, t, llty(elt), elt.itemsize, sm, *_dims(idx == 0, trans))
            # keyed by role: a K that is one dot's A and another's B is staged once for each
            lw.smem_operands[(v.id, idx == 0)] = (sm, trans)
            staged = True
    if staged:
        if any(id(o) in lw.plan.wgmma for o in body.ops):
            e.asm("void", "fence.proxy.async.shared::cta;", "", [])
        lw.barrier()


# -- the cp.async ring, one op at a time (passes/cp_async_rings.py wrote the ops) -----------------------


class Ring:
    """A ``ring_alloc``'s shared memory: ``stages`` buffers of ``stage_bytes`` at ``token``, each laid
    out as the dot operand ``geom`` (``trans``: stored K-major); ``dims``: (row, col) tile dims."""

    def __init__(self, token: str, geom: SmemOperand, trans: bool, dims, stage_bytes: int):
        self.token, self.geom, self.trans, self.dims, self.stage_bytes = token, geom, trans, dims, stage_bytes

    def stage_base(self, lw: Lowering, stage: str) -> str:
        e = lw.e
        return e.val(f"add i32 {self.token}, {e.val(f'mul i32 {stage}, {self.stage_bytes}')}")


class _At:
    """Where a report entry points (the load an ``async_copy`` stands for)."""

    def __init__(self, loc: Loc):
        self.loc = loc


@rule("ring_alloc")
def lower_ring_alloc(lw: Lowering, op: Op) -> None:
    r = op.results[0]
    L = lw.plan.get(r)
    eb = scalar_of(r.type).itemsize
    is_a = op.attrs["operand"] == "a"
    rows, cols = shape_of(r.type)
    mn, k = (rows, cols) if is_a else (cols, rows)
    trans = choose_trans(L, eb, is_a)
    geom = operand_geometry(is_a, trans, mn, k, eb)
    stage_bytes = (geom.nbytes + 1023) // 1024 * 1024  # stages stay 1024-byte aligned
    lw.rings[r.id] = Ring(lw.persistent(op.attrs["stages"] * stage_bytes), geom, trans, _dims(is_a, trans),
                          stage_bytes)


@rule("async_copy")
def lower_async_copy(lw: Lowering, op: Op) -> None:
    """cp.async every ``vec``-element chunk of this thread's part of the tile into the stage."""
    ring_v, stage_v, ptr_v = op.operands[:3]
    ring = lw.rings[ring_v.id]
    L = lw.plan.get(ring_v)
    eb = scalar_of(ring_v.type).itemsize
    vec = op.attrs["vec"]
    ptrs = lw.get(ptr_v, L).regs
    masks = lw.operand(op.operands[3], L) if op.attrs["masked"] else None
    guard = lw.scalar(op.operands[-1])
    if op.attrs.get("source"):
        file, line, col = op.attrs["source"].rsplit(":", 2)
        report_access(lw, _At(Loc(file, int(line), int(col))), "load (cp.async pipelined)", ptr_v,
                      op.operands[3] if op.attrs["masked"] else None, L, eb, vec)
    stage = lw.scalar(stage_v)
    copy_tile(lw, L, eb, vec, lambda: ring.geom.at(ring.stage_base(lw, stage)), ring.dims, ptrs, masks, guard)


def copy_tile(lw: Lowering, L, eb: int, vec: int, stage_at, dims, ptrs, masks, guard: Optional[str]) -> None:
    """cp.async every ``vec``-element chunk of this thread's registers of a tile in layout ``L`` into the
    shared operand ``stage_at()`` returns (``dims``: the tile's row and column dims there); masked-off chunks and all of
    them when ``guard`` is false read as zero."""
    e = lw.e
    nbytes = vec * eb
    coords = lw.coords(L)
    row_dim, col_dim = dims
    sm = stage_at()
    own = lw.owner_predicate(L)
    for g in range(0, L.num_regs, vec):
        off = sm.offset(lw, coords[g][row_dim], coords[g][col_dim])
        p = e.val(f"getelementptr i8, ptr addrspace(3) @global_smem, i32 {off}")
        saddr = e.val(f"ptrtoint ptr addrspace(3) {p} to i32")
        m = masks[g] if masks is not None else "true"
        if guard is not None:
            m = guard if m == "true" else e.val(f"and i1 {m}, {guard}")
        src_size = e.val(f"select i1 {m}, i32 {nbytes}, i32 0") if m != "true" else str(nbytes)
        cache = ".cg" if nbytes == 16 else ".ca"
        if own is not None:
            e.asm("void", f"@$3 cp.async{cache}.shared.global [$0], [$1], {nbytes}, $2;", "r,l,r,b",
                  [("i32", saddr), ("ptr addrspace(1)", ptrs[g]), ("i32", src_size), ("i1", own)])
        else:
            e.asm("void", f"cp.async{cache}.shared.global [$0], [$1], {nbytes}, $2;", "r,l,r",
                  [("i32", saddr), ("ptr addrspace(1)", ptrs[g]), ("i32", src_size)])


@rule("async_commit_group")
def lower_async_commit_group(lw: Lowering, op: Op) -> None:
    lw.e.asm("void", "cp.async.commit_group;", "", [])


@rule("async_wait_group")
def lower_async_wait_group(lw: Lowering, op: Op) -> None:
    lw.e.asm("void", f"cp.async.wait_group {op.attrs['pending']};", "", [])


@rule("async_wait_all")
def lower_async_wait_all(lw: Lowering, op: Op) -> None:
    lw.e.asm("void", "cp.async.wait_all;", "", [])


@rule("fence_async_shared")
def lower_fence_async_shared(lw: Lowering, op: Op) -> None:
    lw.e.asm("void", "fence.proxy.async.shared::cta;", "", [])


@rule("stage_operand")
def lower_stage_operand(lw: Lowering, op: Op) -> None:
    """Store the tile to shared memory once, in the dot operand's layout; the dots read it there."""
    v, res = op.operands[0], op.results[0]
    elt = scalar_of(v.type)
    t = lw.get(v)
    if elt.name not in MMA_SHAPES:  # no tensor-core dot reads it: the registers as they are
        lw.tiles[res.id] = t
        return
    is_a = op.attrs["operand"] == "a"
    rows, cols = shape_of(v.type)
    mn, k = (rows, cols) if is_a else (cols, rows)
    trans = choose_trans(t.layout, elt.itemsize, is_a)
    geom = operand_geometry(is_a, trans, mn, k, elt.itemsize)
    sm = geom.at(lw.persistent(geom.nbytes))
    store_operand(lw, t, llty(elt), elt.itemsize, sm, *_dims(is_a, trans))
    lw.smem_operands[res.id] = (sm, trans, is_a)


@rule("ring_read")
def lower_ring_read(lw: Lowering, op: Op) -> None:
    """The dot reads the stage in place: bind the result to the stage's shared-memory operand."""
    ring = lw.rings[op.operands[0].id]
    base = ring.stage_base(lw, lw.scalar(op.operands[1]))
    lw.smem_operands[op.results[0].id] = (ring.geom.at(base), ring.trans)
