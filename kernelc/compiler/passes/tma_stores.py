"""``defer_tma_store_waits``: a TMA store (``descriptor_store`` tagged ``tma=True``) inside a loop is rewritten
into explicit ops whose wait for the copy engine comes as late as it can (docs/schedule-ir.md, "TMA stores in
loops").

A TMA store stages the tile in shared memory and one thread hands it to the copy engine. The buffer may be
written again only once the engine has read it. Lowered as one op, the elected thread waits for that read
right after issuing the store (``cp.async.bulk.wait_group.read 0``), and the next barrier holds every warp
until then: in a persistent matmul, each tile's epilogue stalls for the read of its whole C tile. Triton
waits just before the buffer is written again, so the read overlaps the next tile's K loop. This pass
writes that schedule (``KERNELC_TMA_STORE_WAIT=deferred``, the default; ``eager`` keeps the one op):

- the buffer: one ``bulk_buffer_alloc {stages=1}`` per descriptor, right after the descriptor is made, that
  only this descriptor's stores in loops use (two stores of one descriptor in a loop, tutorial 09's
  subtiled epilogue, take turns in it, as in Triton: the second waits for the first's read);
- for each store, in its place::

      %t0 = elect_one
      bulk_wait_group %t0 {pending=0, read=True}    the previous store from this buffer has read it
      barrier                                       every thread knows it
      bulk_stage_store %buf, 0, %tile               every thread writes its elements ({smem_write='stmatrix'}
                                                    for a 16-bit MMA fragment tile on sm_90)
      fence_async_shared                            generic-proxy writes before the copy engine reads them
      barrier
      bulk_store %buf, 0, %t0, %offsets             the elected thread issues the copy
      bulk_commit_group %t0

- after the outermost loop around the stores of a function: ``bulk_wait_group %t {pending=0, read=True};
  barrier``, so nothing reads the buffer when the program goes on or ends.

A store that a ``barrier`` of the same trip follows (the attention backward's dS^T store, with the TMA ring's
barrier before its refill further down the loop body) needs no barrier of its own
(``KERNELC_TMA_STORE_PUBLISH=shared``; ``own``, the default, keeps the form above): its descriptor gets two stages, a trip writes stage
``((iv - lb) / step) mod 2``, and the later barrier publishes both the staged tile and the other stage's release::

      %s = srem (sdiv (sub %iv, %lb), %step), 2
      %t0 = elect_one
      bulk_stage_store %buf, %s, %tile
      fence_async_shared
      bulk_wait_group %t0 {pending=0, read=True}    the previous trip's store (the other stage) has read it
      ...                                           the ops up to the barrier (no region, no other bulk op)
      barrier                                       the one that was there
      bulk_store %buf, %s, %t0, %offsets
      bulk_commit_group %t0

The copy is issued at that barrier rather than at the store; the previous trip's store has had a whole trip to
read its stage, so the elected thread's wait is normally already satisfied. Only the store of its descriptor in
that loop, directly in an ``scf.for`` body; otherwise (``own``) the two barriers above.

A store whose descriptor is made inside a loop (its map rebuilt on every trip, in place, while the copy
could still be reading it) and a store outside loops stay one ``descriptor_store`` (codegen/descriptors.py waits for it at once and may
stage it in a finished ring's memory: nothing follows it to overlap).
"""
from __future__ import annotations

from typing import Dict, List, Optional

from ...language.dtypes import block_type, int1, int32, scalar_of, tensor_descriptor_type
from ...options import get
from ..ir.core import Function, Op, Value
from ..shared_layouts import stmatrix_rows_fit
from .bulk_reductions import _Emit, _insert, _stage


def _parity(em: _Emit, loop: Op) -> Value:
    """The trip's stage of two, ``((iv - lb) / step) mod 2``: with a constant positive step, ``iv - lb >= 0`` and
    the unsigned forms (a shift and an ``and`` for a power-of-two step) give the same value; else signed."""
    step = loop.operands[2]
    if not (step.op is not None and step.op.name == "constant" and isinstance(step.op.attrs.get("value"), int)
            and step.op.attrs["value"] > 0):
        return _stage(em, loop, 2)
    iv, lb = loop.regions[0].args[0], loop.operands[0]
    ty = iv.type
    k = em.val("udiv", [em.val("sub", [iv, lb], ty), step], ty)
    s = em.val("and", [k, em.const(1, ty)], ty)
    return s if ty == int32 else em.val("cast", [s], int32)


def _outermost_loop(op: Op) -> Optional[Op]:
    out, b = None, op.block
    while b is not None and b.parent is not None:
        if b.parent.name in ("scf.for", "scf.while"):
            out = b.parent
        b = b.parent.block
    return out


def _stmatrix(ctx, tile: Value) -> bool:
    """On sm_90, a 16-bit MMA fragment tile is written into the box with ``stmatrix`` (one instruction per 8
    registers, four times fewer shared stores; Triton's epilogue does the same). Only here, in loops: the
    same choice on every TMA store cost the warp-specialised causal attention 24 B of spills (its store is
    outside loops; docs/triton-tutorials.md, "08: the epilogue through stmatrix")."""
    if ctx is None or ctx.plan is None or ctx.capability[0] < 9:
        return False
    L = ctx.plan.get(tile)
    return L is not None and stmatrix_rows_fit(L, scalar_of(tile.type).itemsize)


def _made_outside_loops(desc: Value) -> bool:
    """A map rebuilt in a loop (maps built where they are made, tutorial 08) is rewritten in its global slot on
    every trip, which a store still in flight may read: such stores keep their immediate wait."""
    return desc.op is None or _outermost_loop(desc.op) is None


def _warpgroup_bands(ctx, st: Op) -> int:
    """G >= 2 when the store's tile can be stored as G row bands, warpgroup g staging and storing band g alone:
    G consumer warpgroups whose warp bits above the first two move whole bands of rows (every other basis stays
    inside a band: no element of a band in another warpgroup, none replicated), a 2-D descriptor whose box rows
    are one swizzle panel and whose band is whole 1024-byte swizzle repeats (so the bands of a stage run on as
    the stages of a band-sized box). 0 otherwise."""
    if ctx is None or ctx.plan is None or ctx.num_warps < 8 or ctx.num_warps % 4:
        return 0
    G = ctx.num_warps // 4
    desc, tile = st.operands[0], st.operands[1]
    L = ctx.plan.get(tile)
    shape = list(desc.type.block_shape)
    eb = scalar_of(tile.type).itemsize
    if L is None or len(shape) != 2 or shape[0] % G or L.num_warps != ctx.num_warps or L.is_replicated():
        return 0
    R, C = shape[0] // G, shape[1]
    if R & (R - 1) or C * eb > 128 or (R * C * eb) % 1024:
        return 0
    wg_bases = L.warp[2:]
    if [b for b in wg_bases] != [(R << i, 0) for i in range(len(wg_bases))]:
        return 0
    if any(b[0] >= R for b in L.reg + L.lane + L.warp[:2]):
        return 0
    return G


def _split_store(em: _Emit, st: Op, buf: Value, G: int, R: int, smem_write: bool, hint) -> None:
    """The ops of a store split into warpgroup bands (``_warpgroup_bands``) in ``em``."""
    tile = st.operands[1]
    wg = em.val("warpgroup_index", [], int32, uniform=True)
    t0 = em.val("elect_one", [], int1, per_warpgroup=True)
    em.op("bulk_wait_group", [t0], pending=0, read=True)
    em.op("barrier", [], warpgroup=True)
    stage = em.op("bulk_stage_store", [buf, em.const(0), tile], parts=G)
    if smem_write:
        stage.attrs["smem_write"] = "stmatrix"
    em.op("fence_async_shared", [])
    em.op("barrier", [], warpgroup=True)
    row = em.val("add", [st.operands[2], em.val("mul", [wg, em.const(R)], int32)], int32)
    em.op("bulk_store", [buf, wg, t0, row] + list(st.operands[3:]), **hint)
    em.op("bulk_commit_group", [t0])


# ops a staged tile may wait behind until the barrier that publishes it: nothing that touches a bulk group, a
# staging buffer or the descriptor's memory, and nothing with a region (a barrier inside would be divergent)
_NOT_BETWEEN = ("descriptor_store", "descriptor_load", "descriptor_reduce", "bulk_stage_store", "bulk_store",
                "bulk_reduce", "bulk_commit_group", "bulk_wait_group", "bulk_buffer_alloc", "ws_producer")


def _later_barrier(st: Op, stores: List[Op]) -> Optional[Op]:
    """The ``barrier`` later in the store's block that can publish its staged tile, or None: the block is an
    ``scf.for`` body (its trips pick the stage), this is the only store of its descriptor in that loop, and the
    ops up to the barrier have no regions and no bulk or descriptor ops."""
    block = st.block
    loop = block.parent
    if loop is None or loop.name != "scf.for" or loop.regions[0] is not block:
        return None
    desc = st.operands[0]
    if any(o is not st and o.operands[0] is desc and _outermost_loop(o) is _outermost_loop(st) for o in stores):
        return None
    for o in block.ops[block.ops.index(st) + 1:]:
        if o.name == "barrier":
            return o
        if o.regions or o.name in _NOT_BETWEEN:
            return None
    return None


def defer_tma_store_waits(fn: Function, ctx=None, mode: Optional[str] = None) -> Function:
    mode = mode if mode is not None else get("KERNELC_TMA_STORE_WAIT")
    if mode != "deferred":
        return fn
    stores = [op for op in fn.walk() if op.name == "descriptor_store" and op.attrs.get("tma")
              and _outermost_loop(op) is not None and _made_outside_loops(op.operands[0])]
    publish = get("KERNELC_TMA_STORE_PUBLISH")
    evict_first = get("KERNELC_TMA_STORE_L2") == "evict_first"
    shared = {id(st): _later_barrier(st, stores) for st in stores} if publish == "shared" else {}
    # a descriptor's stages: 2 when every store of it is published by a later barrier (they alternate), else 1
    n_stages: Dict[int, int] = {}
    for st in stores:
        d = st.operands[0].id
        n_stages[d] = min(n_stages.get(d, 2), 2 if shared.get(id(st)) is not None else 1)
    # a descriptor whose every store (and every use) is one-stage and splits into the same warpgroup bands: its box
    # becomes one band (its map is built with it), its buffer one stage a band
    bands: Dict[int, int] = {}
    if get("KERNELC_TMA_STORE_SPLIT"):
        for st in stores:
            d = st.operands[0]
            made = d.op is not None and d.op.name == "make_tensor_descriptor" and not d.op.attrs.get("host_arg")
            g = _warpgroup_bands(ctx, st) if n_stages[d.id] == 1 and made else 0
            bands[d.id] = g if bands.get(d.id, g) == g else 0
        for st in stores:
            desc = st.operands[0]
            if bands.get(desc.id) and any(o.name != "descriptor_store" or o not in stores
                                          for o in fn.walk() if any(v is desc for v in o.operands)):
                bands[desc.id] = 0  # another use of the descriptor reads its box whole
        banded = set()
        for st in stores:
            desc = st.operands[0]
            G = bands.get(desc.id, 0)
            if G and desc.id not in banded:
                banded.add(desc.id)
                shape = list(desc.type.block_shape)
                desc.type = tensor_descriptor_type(block_type(desc.type.element_ty, [shape[0] // G] + shape[1:]),
                                                   desc.type.padding)
    buffers: Dict[int, Value] = {}
    loops_done = set()
    for st in stores:
        desc, tile = st.operands[0], st.operands[1]
        S = n_stages[desc.id]
        G = bands.get(desc.id, 0)
        buf = buffers.get(desc.id)
        if buf is None:
            em = _Emit(st.loc)
            buf = em.val("bulk_buffer_alloc", [desc], desc.type.block_type, stages=G or S)
            mk = desc.op
            if mk is None:  # a block argument: at the top of the function
                _insert(fn.body, 0, em.ops)
            else:
                _insert(mk.block, mk.block.ops.index(mk) + 1, em.ops)
            buffers[desc.id] = buf
        em = _Emit(st.loc)
        block = st.block
        stage = None
        hint = {"l2_hint": "evict_first"} if evict_first else {}
        if G:
            _split_store(em, st, buf, G, desc.type.block_shape[0], _stmatrix(ctx, tile), hint)
            at = block.ops.index(st)
            block.ops.remove(st)
            _insert(block, at, em.ops)
        elif S == 2:
            bar = shared[id(st)]
            s = _parity(em, block.parent)
            t0 = em.val("elect_one", [], int1)
            stage = em.op("bulk_stage_store", [buf, s, tile])
            em.op("fence_async_shared", [])
            em.op("bulk_wait_group", [t0], pending=0, read=True)
            issue = _Emit(st.loc)
            issue.op("bulk_store", [buf, s, t0] + list(st.operands[2:]), **hint)
            issue.op("bulk_commit_group", [t0])
            at = block.ops.index(st)
            block.ops.remove(st)
            _insert(block, at, em.ops)
            _insert(block, block.ops.index(bar) + 1, issue.ops)
        else:
            zero = em.const(0)
            t0 = em.val("elect_one", [], int1)
            em.op("bulk_wait_group", [t0], pending=0, read=True)
            em.op("barrier", [])
            stage = em.op("bulk_stage_store", [buf, zero, tile])
            em.op("fence_async_shared", [])
            em.op("barrier", [])
            em.op("bulk_store", [buf, zero, t0] + list(st.operands[2:]), **hint)
            em.op("bulk_commit_group", [t0])
            at = block.ops.index(st)
            block.ops.remove(st)
            _insert(block, at, em.ops)
        if stage is not None and _stmatrix(ctx, tile):
            stage.attrs["smem_write"] = "stmatrix"
        loop = _outermost_loop(em.ops[0])
        if id(loop) not in loops_done:
            loops_done.add(id(loop))
            after = _Emit(loop.loc)
            # with bands, each warpgroup's elected thread waits for its own bulk groups
            t1 = after.val("elect_one", [], int1, **({"per_warpgroup": True} if G else {}))
            after.op("bulk_wait_group", [t1], pending=0, read=True)
            after.op("barrier", [])
            _insert(loop.block, loop.block.ops.index(loop) + 1, after.ops)
    return fn
