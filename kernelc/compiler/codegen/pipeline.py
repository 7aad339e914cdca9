"""Shared-memory rings of pipelined loops (docs/schedule-ir.md). Nothing here decides which loops or
loads are pipelined.

A loop's ring reaches codegen as explicit tile-IR ops: ``passes/cp_async_rings.py`` writes a cp.async
ring (``ring_alloc``, ``async_copy``, ``async_commit_group``, ``async_wait_group``, ``async_wait_all``,
``fence_async_shared``, ``stage_operand``, ``ring_read``), ``passes/tma_rings.py`` a TMA ring and a loop
with both (``tma_ring_alloc``, ``mbarrier_alloc``/``mbarrier_at``/``mbarrier_init``/``mbarrier_expect_tx``/
``mbarrier_wait``/``mbarrier_inval``, ``elect_one``, ``prefetch_tensormaps``, ``tma_copy_to_ring``,
``ring_free``). The rules at the end of this module lower them one op at a time, keeping only the ring
or barrier-group value -> shared memory map (``Lowering.rings``) and the ring_read value -> shared
operand map the dots read (``Lowering.smem_operands``).

**A warp-specialised loop** (``ws`` on the loop) is still expanded from the attributes
``passes/schedule.py`` wrote: codegen/warp_specialize.py emits the producer warp's program (the loop's
offset chain re-evaluated per iteration, ``passes/schedule_ir.address_chain``, and the copies), and
``ConsumerLoop`` below is the consumers' side of the ring (wait on a stage's "full" barrier, the dots
read it in place, release it on its "empty" barrier).
Loop-invariant dot operands (attention's Q) of a loop without a cp.async or TMA ring are staged into
shared memory once, before the loop (``stage_invariant_operands``).
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
from .lowering import Lowering, rule
from .wgmma import PingPong, tie_through_wait


class _TmaLoad:
    """A ``descriptor_load`` (TMA) feeding operand A/B of ``dot``, directly or through ``via`` (a 2-D trans)."""

    def __init__(self, op: Op, dot: Op, is_a: bool, via: Optional[Op], trans: bool):
        self.op, self.dot, self.is_a, self.via, self.trans = op, dot, is_a, via, trans
        self.value = (via or op).results[0]  # what the dot reads
        self.tmap = None
        self.box = None
        self.token = None
        self.stage_bytes = 0


class PipelinePlan:
    """A warp-specialised loop's TMA ring as ``passes/schedule.py`` wrote it down (``pipeline``/``wgmma``)."""

    def __init__(self, lw: Lowering, op: Op, stages: int, chain: List[Op], carried_idx: List[int],
                 tma_loads: List[_TmaLoad]):
        self.lw, self.op, self.S, self.chain, self.carried_idx = lw, op, stages, chain, carried_idx
        self.tma_loads = tma_loads
        # wgmma dots that stay in flight (one group) across iterations
        self.async_dots = async_dots(op)


def pipeline_of(lw: Lowering, op: Op) -> PipelinePlan:
    """The TMA ring of the warp-specialised loop ``op`` as tagged in the IR (every other ring is ops by
    now: passes/cp_async_rings.py, passes/tma_rings.py)."""
    cp, tma = ringed_operands(op)
    assert op.attrs.get("ws") and tma and not cp, "internal: a ring reached codegen unexpanded"
    tma_loads = [_TmaLoad(src, dot, is_a, via, operand_orientation(is_a, via is not None))
                 for src, dot, is_a, via in tma]
    chain, carried_idx = address_chain(op, [], [t.op for t in tma_loads])
    return PipelinePlan(lw, op, op.attrs["pipeline"]["stages"], chain, carried_idx, tma_loads)


def report_pipeline(lw: Lowering, plan: PipelinePlan) -> None:
    """Add the plan's pipelined loads to the kernel's memory-access report (for the analyzer)."""
    for t in plan.tma_loads:
        report_tma(lw, t.op, "load (TMA pipelined)", t.op.operands[0].type)


def _eval_chain(lw: Lowering, plan: PipelinePlan, iv: str, carried_vals: Dict[int, str]):
    """Lower the offset chain with the given bindings; returns (per-load offsets, advanced carried)."""
    body = plan.op.regions[0]
    lw.push_scope()
    saved_s = dict(lw.scalars)
    saved_t = dict(lw.tiles)
    lw.scalars[body.args[0].id] = iv
    for i in plan.carried_idx:
        lw.scalars[body.args[1 + i].id] = carried_vals[i]  # warp_specialize: the carried offsets are scalars
    for c in plan.chain:
        if c.results:
            lw.lower_scalar_op(c)  # warp_specialize: the offsets are computed from scalars
    out = [[lw.scalar(v) for v in t.op.operands[1:]] for t in plan.tma_loads]  # element offsets, outermost first
    yld = body.ops[-1]
    advanced = {i: lw.scalar(yld.operands[i]) for i in plan.carried_idx}
    lw.scalars = saved_s
    lw.tiles = saved_t
    lw.pop_scope()
    return out, advanced


def _issue_tma(lw: Lowering, plan: PipelinePlan, offsets, stage: str, bars, pred: str):
    """Thread ``pred`` copies every TMA-pipelined tile of one iteration into ``stage``, completing on its
    barrier."""
    pool, tok, off = bars
    bar = pool.address(tok, off, stage)
    T.mbarrier_expect_tx(lw, bar, sum(t.box.nbytes for t in plan.tma_loads), pred)
    e = lw.e
    for t, offs in zip(plan.tma_loads, offsets):
        base = e.val(f"add i32 {t.token}, {e.val(f'mul i32 {stage}, {t.stage_bytes}')}")
        tmap = t.tmap.address(lw)
        T.copy_tile_in(lw, t.box, tmap, base, bar, offs, pred)


def prefetch_tensor_maps(lw: Lowering, plan: PipelinePlan, pred: Optional[str]) -> None:
    """Bring the maps of the loop's copies into the TMA unit's cache ahead of the first copy."""
    maps = {t.tmap.param: t.tmap for t in plan.tma_loads}
    for param in sorted(maps):
        T.prefetch_tensormap(lw, maps[param].address(lw), pred)


class ConsumerLoop:
    """The consumers' side of a warp-specialised loop's ring (codegen/warp_specialize.py fills it);
    ``lower_for`` calls prologue / iteration_start / before_yield / iteration_end / finish."""

    def __init__(self, lw: Lowering, plan: PipelinePlan, ws):
        self.lw, self.plan, self.ws = lw, plan, ws
        # a stage is released one iteration late when its wgmma group stays in flight
        self.release_lag = plan.op.attrs["ws"]["release"] == "lagged"

    def prologue(self, lb: str, ub: str, step: str, iv_ty: str, init_carried: Dict[int, object]):
        """Nothing to prefetch (the producer does); the ring position (read stage, phase parity)
        continues from where the previous run of this loop left it."""
        lw = self.lw
        e = lw.e
        self.lb, self.ub, self.iv_ty = lb, ub, iv_ty
        stage = e.val(f"load i32, ptr {self.ws.stage_ptr}")
        phase = e.val(f"load i32, ptr {self.ws.phase_ptr}")
        self.pingpong = PingPong(lw) if self.plan.op.attrs["ws"].get("pingpong") else None
        if self.pingpong is not None:
            self.pingpong.before_loop()
        return [("i32", stage), ("i32", "0"), ("i32", phase)]  # read stage, (unused) write stage, phase parity

    def tma_buffers(self):
        """Tensor maps, boxes and the ring's stage buffers (1024-byte aligned for the 128B swizzle)."""
        lw, plan = self.lw, self.plan
        S = plan.S
        for t in plan.tma_loads:
            ty = t.op.operands[0].type
            t.tmap = tensor_map_of(lw, t.op.operands[0])
            t.box = t.tmap.box
            geom = T.box_smem(t.box, 0)
            M, N = shape_of(t.dot.results[0].type)
            K = shape_of(t.dot.operands[0].type)[1]
            want = operand_geometry(t.is_a, t.trans, M if t.is_a else N, K, ty.element_ty.itemsize)
            assert (geom.rows, geom.cols) == (want.rows, want.cols), "internal: TMA tile is not the operand"
            t.stage_bytes = (t.box.nbytes + 1023) // 1024 * 1024
            t.token = reuse_or_allocate(lw, S * t.stage_bytes)

    def _bind_tma_operands(self, read_stage: str) -> None:
        """The dots read this iteration's TMA tiles in place, in stage ``read_stage``."""
        lw, e = self.lw, self.lw.e
        for t in self.plan.tma_loads:
            base = e.val(f"add i32 {t.token}, {e.val(f'mul i32 {read_stage}, {t.stage_bytes}')}")
            lw.smem_operands[t.value.id] = (T.box_smem(t.box, base), t.trans)

    def iteration_start(self, iv: str, extra_phis: List[str]) -> List[str]:
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

    def before_yield(self, yld) -> None:
        """End of the body: wait for whatever is still in flight. Deferred dots (``wgmma='deferred'``,
        passes/schedule.py) are complete again here: ptxas cannot follow a wgmma in flight across the back
        edge once two are (C7514, it would serialise them)."""
        self.lw.wgmma_groups.complete_all()

    def iteration_end(self):
        """The dots of this iteration are issued; with one wgmma group left in flight the previous
        iteration's group is complete now, else this one's is: release that stage."""
        if self.release_lag:
            not_first = self.lw.e.val(f"icmp ne {self.iv_ty} {self.iv}, {self.lb}")
            self._release(self._previous_stage(self.read_stage), not_first)
        else:
            self._release(self.read_stage, None)

    def finish(self, carried: Optional[List[List[str]]] = None) -> Optional[List[List[str]]]:
        """After the loop (exit block): wait for the in-flight accumulators, release the last stage (its
        wgmma group was still in flight), save the ring position; returns ``carried`` (the loop results'
        registers per carried value) with the in-flight accumulators replaced by the wait's results."""
        lw, e = self.lw, self.lw.e
        if self.plan.async_dots:
            carried = wait_accumulators(lw, self.plan.op, carried)
        read_stage, _, phase = self.extra_phis
        if self.pingpong is not None:
            self.pingpong.after_loop()
        if self.release_lag:
            ran = e.val(f"icmp slt {self.iv_ty} {self.lb}, {self.ub}")
            self._release(self._previous_stage(read_stage), ran)
        e.emit(f"store i32 {read_stage}, ptr {self.ws.stage_ptr}")
        e.emit(f"store i32 {phase}, ptr {self.ws.phase_ptr}")
        for t in self.plan.tma_loads:
            lw.smem_operands.pop(t.value.id, None)
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
            if v.id in inner or v.id in lw.smem_operands or not lw.is_tile(v):
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
            lw.smem_operands[v.id] = (sm, trans)
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
    lw.smem_operands[res.id] = (sm, trans)


@rule("ring_read")
def lower_ring_read(lw: Lowering, op: Op) -> None:
    """The dot reads the stage in place: bind the result to the stage's shared-memory operand."""
    ring = lw.rings[op.operands[0].id]
    base = ring.stage_base(lw, lw.scalar(op.operands[1]))
    sm = T.box_smem(ring.box, base) if isinstance(ring, TmaRing) else ring.geom.at(base)
    lw.smem_operands[op.results[0].id] = (sm, ring.trans)


# -- the TMA ring, one op at a time (passes/tma_rings.py wrote the ops) -------------------------------


class TmaRing:
    """A ``tma_ring_alloc``'s shared memory: ``stages`` boxes of ``stage_bytes`` at ``token`` that TMA
    fills through ``tmap`` (``box``: its geometry); the dots read a stage as an operand stored ``trans``."""

    def __init__(self, token: str, tmap, trans: bool, stages: int, stage_bytes: int):
        self.token, self.tmap, self.box, self.trans = token, tmap, tmap.box, trans
        self.stages, self.stage_bytes = stages, stage_bytes

    def stage_base(self, lw: Lowering, stage: str) -> str:
        e = lw.e
        return e.val(f"add i32 {self.token}, {e.val(f'mul i32 {stage}, {self.stage_bytes}')}")


class BarrierGroup:
    """An ``mbarrier_alloc``'s barriers: ``BarrierPool.take``'s (token, offset)."""

    def __init__(self, pool, token: str, off: int):
        self.pool, self.token, self.off = pool, token, off


@rule("tma_ring_alloc")
def lower_tma_ring_alloc(lw: Lowering, op: Op) -> None:
    desc, r = op.operands[0], op.results[0]
    tm = tensor_map_of(lw, desc)
    is_a = op.attrs["operand"] == "a"
    trans = operand_orientation(is_a, op.attrs["transposed"])
    rows, cols = shape_of(r.type)
    mn, k = (rows, cols) if is_a else (cols, rows)
    want = operand_geometry(is_a, trans, mn, k, desc.type.element_ty.itemsize)
    got = T.box_smem(tm.box, 0)
    assert (got.rows, got.cols) == (want.rows, want.cols), "internal: TMA tile is not the operand"
    S = op.attrs["stages"]
    stage_bytes = (tm.box.nbytes + 1023) // 1024 * 1024  # 1024-byte aligned for the 128B swizzle
    lw.rings[r.id] = TmaRing(reuse_or_allocate(lw, S * stage_bytes), tm, trans, S, stage_bytes)


@rule("mbarrier_alloc")
def lower_mbarrier_alloc(lw: Lowering, op: Op) -> None:
    pool = T.BarrierPool.of(lw)
    tok, off = pool.take(op.attrs["count"])
    lw.rings[op.results[0].id] = BarrierGroup(pool, tok, off)


@rule("mbarrier_at")
def lower_mbarrier_at(lw: Lowering, op: Op) -> None:
    g = lw.rings[op.operands[0].id]
    lw.scalars[op.results[0].id] = g.pool.address(g.token, g.off, lw.scalar(op.operands[1]))


@rule("elect_one")
def lower_elect_one(lw: Lowering, op: Op) -> None:
    lw.scalars[op.results[0].id] = T.elected(lw)


@rule("mbarrier_init")
def lower_mbarrier_init(lw: Lowering, op: Op) -> None:
    T.mbarrier_init(lw, lw.scalar(op.operands[0]), op.attrs["count"], lw.scalar(op.operands[1]))


@rule("fence_mbarrier_init")
def lower_fence_mbarrier_init(lw: Lowering, op: Op) -> None:
    T.fence_mbarrier_init(lw)


@rule("prefetch_tensormaps")
def lower_prefetch_tensormaps(lw: Lowering, op: Op) -> None:
    pred = lw.scalar(op.operands[-1])
    maps = {}
    for d in op.operands[:-1]:
        tm = tensor_map_of(lw, d)
        maps[tm.param] = tm
    for param in sorted(maps):
        T.prefetch_tensormap(lw, maps[param].address(lw), pred)


@rule("mbarrier_expect_tx")
def lower_mbarrier_expect_tx(lw: Lowering, op: Op) -> None:
    T.mbarrier_expect_tx(lw, lw.scalar(op.operands[0]), op.attrs["bytes"], lw.scalar(op.operands[1]))


@rule("tma_copy_to_ring")
def lower_tma_copy_to_ring(lw: Lowering, op: Op) -> None:
    ring = lw.rings[op.operands[0].id]
    if op.attrs.get("source"):
        file, line, col = op.attrs["source"].rsplit(":", 2)
        report_tma(lw, _At(Loc(file, int(line), int(col))), "load (TMA pipelined)", ring.tmap.ty)
    stage, bar, pred = (lw.scalar(v) for v in op.operands[1:4])
    offs = [lw.scalar(v) for v in op.operands[4:]]
    base = ring.stage_base(lw, stage)
    T.copy_tile_in(lw, ring.box, ring.tmap.address(lw), base, bar, offs, pred)


@rule("mbarrier_wait")
def lower_mbarrier_wait(lw: Lowering, op: Op) -> None:
    T.mbarrier_wait(lw, lw.scalar(op.operands[0]), lw.scalar(op.operands[1]))


@rule("mbarrier_inval")
def lower_mbarrier_inval(lw: Lowering, op: Op) -> None:
    T.mbarrier_inval(lw, lw.scalar(op.operands[0]), lw.scalar(op.operands[1]))


@rule("ring_free")
def lower_ring_free(lw: Lowering, op: Op) -> None:
    ring = lw.rings[op.operands[0].id]
    free_regions(lw).append((ring.token, ring.stages * ring.stage_bytes))
