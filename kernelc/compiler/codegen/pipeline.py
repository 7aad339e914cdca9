"""Shared-memory rings of pipelined loops (docs/schedule-ir.md). Nothing here decides which loops or
loads are pipelined.

A loop's ring reaches codegen as explicit tile-IR ops: ``passes/cp_async_rings.py`` writes a cp.async
ring (``ring_alloc``, ``async_copy``, ``async_commit_group``, ``async_wait_group``, ``async_wait_all``,
``fence_async_shared``, ``stage_operand``, ``ring_read``), ``passes/tma_rings.py`` a TMA ring and a loop
with both (``tma_ring_alloc``, ``mbarrier_alloc``/``mbarrier_at``/``mbarrier_init``/``mbarrier_expect_tx``/
``mbarrier_wait``/``mbarrier_inval``, ``elect_one``, ``prefetch_tensormaps``, ``tma_copy_to_ring``,
``ring_free``), ``passes/warp_regions.py`` the ring of a warp-specialised loop (the same ops, and those
of codegen/warp_specialize.py). The rules at the end of this module lower them one op at a time,
keeping only the ring or barrier-group value -> shared memory map (``Lowering.rings``) and the
ring_read value -> shared operand map the dots read (``Lowering.smem_operands``).
Loop-invariant dot operands (attention's Q) reach codegen as ``stage_operand`` ops
(``passes/stage_operands.py``).
"""
from __future__ import annotations

from typing import Optional

from ...language.dtypes import scalar_of, shape_of
from ..ir.core import Loc, Op
from . import tma as T
from .descriptors import free_regions, operand_orientation, read_tile, report_tma, reuse_or_allocate, tensor_map_of
from .dot import MMA_SHAPES, SmemOperand, _dims, operand_geometry, store_operand, choose_trans
from .memory import report_access
from .emitter import llty
from .lowering import Lowering, Tile, rule


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
    nbytes = op.attrs["stages"] * stage_bytes
    tok = lw.placed(op, nbytes) or lw.persistent(nbytes)
    lw.rings[r.id] = Ring(tok, geom, trans, _dims(is_a, trans), stage_bytes)


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
    sm = geom.at(lw.placed(op, geom.nbytes) or lw.persistent(geom.nbytes))
    store_operand(lw, t, llty(elt), elt.itemsize, sm, *_dims(is_a, trans))
    lw.smem_operands[res.id] = (sm, trans, is_a)


@rule("ring_read")
def lower_ring_read(lw: Lowering, op: Op) -> None:
    """The dot reads the stage in place: bind the result to the stage's shared-memory operand."""
    ring = lw.rings[op.operands[0].id]
    base = ring.stage_base(lw, lw.scalar(op.operands[1]))
    sm = T.box_smem(ring.box, base) if isinstance(ring, TmaRing) else ring.geom.at(base)
    if op.attrs.get("registers"):  # a tile no dot reads: into registers of its layout (ld.shared)
        res = op.results[0]
        L = lw.plan.get(res)
        lw.tiles[res.id] = Tile(L, read_tile(lw, sm, L, scalar_of(res.type), ring.tmap.ty.block_shape))
        return
    trans = ring.trans
    if "operand" in op.attrs:  # another view of a ringed tile (passes/rings.py): its own orientation
        row_dim = 0 if isinstance(ring, TmaRing) else ring.dims[0]
        trans = operand_orientation(op.attrs["operand"] == "a", op.attrs["transposed"], row_dim)
    lw.smem_operands[op.results[0].id] = (sm, trans)


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
    S = op.attrs["stages"]
    if op.attrs["operand"] == "none":  # read into registers (no operand geometry); stages 1024-byte aligned as
        stage_bytes = (tm.box.nbytes + 1023) // 1024 * 1024  # passes/smem_offsets.buffer_bytes sizes every ring
        tok = lw.placed(op, S * stage_bytes) or reuse_or_allocate(lw, S * stage_bytes)
        lw.rings[r.id] = TmaRing(tok, tm, False, S, stage_bytes)
        return
    is_a = op.attrs["operand"] == "a"
    trans = operand_orientation(is_a, op.attrs["transposed"])
    rows, cols = shape_of(r.type)
    mn, k = (rows, cols) if is_a else (cols, rows)
    want = operand_geometry(is_a, trans, mn, k, desc.type.element_ty.itemsize)
    got = T.box_smem(tm.box, 0)
    assert (got.rows, got.cols) == (want.rows, want.cols), "internal: TMA tile is not the operand"
    S = op.attrs["stages"]
    stage_bytes = (tm.box.nbytes + 1023) // 1024 * 1024  # 1024-byte aligned for the 128B swizzle
    tok = lw.placed(op, S * stage_bytes) or reuse_or_allocate(lw, S * stage_bytes)
    lw.rings[r.id] = TmaRing(tok, tm, trans, S, stage_bytes)


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
    lw.scalars[op.results[0].id] = T.elected(lw, op.attrs.get("warp", 0))


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
        # a one-stage ring is a single tile issued ahead of its first read (passes/tma_prefetch.py), not a pipeline
        kind = "load (TMA issued early)" if ring.stages == 1 else "load (TMA pipelined)"
        report_tma(lw, _At(Loc(file, int(line), int(col))), kind, ring.tmap.ty, ring.tmap)
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
