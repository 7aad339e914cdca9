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

A store whose descriptor is made inside a loop (its map rebuilt on every trip, in place, while the copy
could still be reading it) and a store outside loops stay one ``descriptor_store`` (codegen/descriptors.py waits for it at once and may
stage it in a finished ring's memory: nothing follows it to overlap).
"""
from __future__ import annotations

from typing import Dict, List, Optional

from ...language.dtypes import int1, int32, scalar_of
from ...options import get
from ..ir.core import Function, Op, Value
from ..shared_layouts import stmatrix_rows_fit
from .bulk_reductions import _Emit, _insert


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


def defer_tma_store_waits(fn: Function, ctx=None, mode: Optional[str] = None) -> Function:
    mode = mode if mode is not None else get("KERNELC_TMA_STORE_WAIT")
    if mode != "deferred":
        return fn
    stores = [op for op in fn.walk() if op.name == "descriptor_store" and op.attrs.get("tma")
              and _outermost_loop(op) is not None and _made_outside_loops(op.operands[0])]
    buffers: Dict[int, Value] = {}
    loops_done = set()
    for st in stores:
        desc, tile = st.operands[0], st.operands[1]
        buf = buffers.get(desc.id)
        if buf is None:
            em = _Emit(st.loc)
            buf = em.val("bulk_buffer_alloc", [desc], desc.type.block_type, stages=1)
            mk = desc.op
            if mk is None:  # a block argument: at the top of the function
                _insert(fn.body, 0, em.ops)
            else:
                _insert(mk.block, mk.block.ops.index(mk) + 1, em.ops)
            buffers[desc.id] = buf
        em = _Emit(st.loc)
        zero = em.const(0)
        t0 = em.val("elect_one", [], int1)
        em.op("bulk_wait_group", [t0], pending=0, read=True)
        em.op("barrier", [])
        stage = em.op("bulk_stage_store", [buf, zero, tile])
        if _stmatrix(ctx, tile):
            stage.attrs["smem_write"] = "stmatrix"
        em.op("fence_async_shared", [])
        em.op("barrier", [])
        em.op("bulk_store", [buf, zero, t0] + list(st.operands[2:]))
        em.op("bulk_commit_group", [t0])
        block = st.block
        at = block.ops.index(st)
        block.ops.remove(st)
        _insert(block, at, em.ops)
        loop = _outermost_loop(em.ops[0])
        if id(loop) not in loops_done:
            loops_done.add(id(loop))
            after = _Emit(loop.loc)
            t1 = after.val("elect_one", [], int1)
            after.op("bulk_wait_group", [t1], pending=0, read=True)
            after.op("barrier", [])
            _insert(loop.block, loop.block.ops.index(loop) + 1, after.ops)
    return fn
