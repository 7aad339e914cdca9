"""``expand_bulk_reductions``: every ``descriptor_reduce`` that TMA takes (``lower_descriptors`` tagged it
``tma=True``: ``desc.atomic_add`` on sm_90a) rewritten into explicit ops, so code generation lowers one op
at a time and decides nothing (docs/schedule-ir.md, "Bulk reductions").

The tile is staged in shared memory and one thread hands it to the copy engine, which adds it into global
memory (``cp.reduce.async.bulk.tensor``) while the program goes on. What this pass decides, and writes:

- the staging buffer: one ``bulk_buffer_alloc {stages=S}`` per descriptor, right after the descriptor is
  made; reductions of one descriptor in different loops (a causal kernel's diagonal and main loops) share
  it. ``S`` = ``KERNELC_BULK_REDUCE_STAGES`` (default 2) for a reduction in a loop, 1 outside loops;
  a second reduction of the same descriptor in the same loop gets a buffer of its own.
- the stage a trip writes: ``((iv - lb) / step) mod S`` of the innermost loop, as ordinary arithmetic.
- when a stage may be written again: the elected thread waits until at most ``S - 2`` of its bulk groups
  still read shared memory *before* the barrier that publishes the staged tile -- the group that read the
  stage the next trip writes (issued ``S - 1`` trips before it) is then done, and every thread knows it
  after the barrier. One barrier a trip; with ``S = 1`` the wait comes before the stage is written.
- completion: after the innermost loop around a reduction (or right after one outside loops) the elected
  thread waits for every group to complete (``read=False``), then a barrier: the next loop's first trip
  may write stage 0, and nothing is in flight when the program ends.
- which barrier publishes the staged tile: a ``barrier`` right after the reduction (a TMA ring's, before
  its refill in the attention backward's loop) serves, the reduction issued after it; else one of its own.

For a reduction in a loop the pass writes, in place of ``descriptor_reduce %d, %t, %r, %c {kind='add'}``::

    %k = sdiv (sub %iv, %lb), %step ; %s = srem %k, S     (constant 0 when S = 1)
    %t0 = elect_one
    bulk_stage_store %buf, %s, %t              every thread writes its elements into stage %s
    fence_async_shared                         generic-proxy writes before the copy engine reads them
    bulk_wait_group %t0 {pending=S-2, read=True}
    barrier                                    (or the one that follows the reduction)
    bulk_reduce %buf, %s, %t0, %r, %c {kind='add', source='file:line:col'}
    bulk_commit_group %t0

and after the loop ``bulk_wait_group %t0 {pending=0, read=False}; barrier``.

A ``bulk_add {tma=True}`` (``kl.bulk_add``, passes/bulk_adds.py) is expanded the same way, with
``bulk_add_buffer_alloc {stages=S}`` (at the top of the function: it has no descriptor; bulk_adds of one
tile type in different loops share it) and, in place of ``bulk_reduce``, ``bulk_reduce_1d %buf, %s, %t0, %p``:
one 1-D bulk reduction of the stage's bytes, which are the block in the staging order. The decision record is
these ops; the ``descriptor_reduce`` is gone. A reduction whose coordinates may be negative sits in the TMA
branch of ``guard_tma_writes``' uniform ``scf.if`` (passes/tma_write_guards.py): its ops are written there, in
that branch, and the loop around the ``scf.if`` is still the one whose trips pick the stages.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ...language.dtypes import int1, int32
from ...options import get
from ..ir.core import Block, Function, Op, Value


def _innermost_loop(op: Op) -> Optional[Op]:
    b = op.block
    while b is not None and b.parent is not None:
        if b.parent.name in ("scf.for", "scf.while"):
            return b.parent
        b = b.parent.block
    return None


def _ancestor_in(op: Op, block: Block) -> Op:
    """``op`` or the op around it that sits directly in ``block``."""
    while op.block is not block:
        op = op.block.parent
    return op


def stages_in_loops() -> int:
    return int(get("KERNELC_BULK_REDUCE_STAGES"))


class _Emit:
    def __init__(self, loc):
        self.ops: List[Op] = []
        self.loc = loc

    def op(self, name, operands, types=(), **attrs) -> Op:
        o = Op(name, list(operands), list(types), attrs, loc=self.loc)
        self.ops.append(o)
        return o

    def val(self, name, operands, ty, **attrs) -> Value:
        return self.op(name, operands, [ty], **attrs).results[0]

    def const(self, v: int, ty=int32) -> Value:
        return self.val("constant", [], ty, value=v)


def _insert(block: Block, at: int, ops: List[Op]) -> None:
    for k, o in enumerate(ops):
        o.block = block
        block.ops.insert(at + k, o)


def _stage(em: _Emit, loop: Optional[Op], S: int) -> Value:
    if loop is None or S == 1 or loop.name != "scf.for":
        return em.const(0)
    iv = loop.regions[0].args[0]
    lb, step = loop.operands[0], loop.operands[2]
    ty = iv.type
    k = em.val("sdiv", [em.val("sub", [iv, lb], ty), step], ty)
    s = em.val("srem", [k, em.const(S, ty)], ty)
    return s if ty == int32 else em.val("cast", [s], int32)


def expand_bulk_reductions(fn: Function, ctx=None) -> Function:
    reds = [op for op in fn.walk() if op.name in ("descriptor_reduce", "bulk_add") and op.attrs.get("tma")]
    if not reds:
        return fn
    S_loop = stages_in_loops()
    buffers: Dict[Tuple[int, int], Value] = {}  # (descriptor id, k-th reduction of it in one loop) -> buffer
    loops_done = set()
    for red in reds:
        desc = red.operands[0]
        flat = red.name == "bulk_add"
        loop = _innermost_loop(red)
        S = S_loop if loop is not None and loop.name == "scf.for" else 1
        if loop is not None and loop.name != "scf.for":
            S = 1  # a while loop has no trip count to pick stages from
        # the k-th reduction of this descriptor in this loop: earlier ones of the same loop hold their buffers
        if flat:  # bulk_add: the k-th of this tile type in this loop
            ty = red.operands[1].type
            k = sum(1 for r in reds[:reds.index(red)] if r.name == "bulk_add" and r.operands[1].type == ty
                    and _innermost_loop(r) is loop)
            key = ("flat", str(ty), k, S)
        else:
            k = sum(1 for r in reds[:reds.index(red)] if r.operands[0] is desc and _innermost_loop(r) is loop)
            key = (desc.id, k, S)
        buf = buffers.get(key)
        if buf is None:
            mk = None if flat else desc.op
            em = _Emit(red.loc)
            if flat:
                buf = em.val("bulk_add_buffer_alloc", [], red.operands[1].type, stages=S)
            else:
                buf = em.val("bulk_buffer_alloc", [desc], desc.type.block_type, stages=S)
            if mk is None:  # a block argument (or a bulk_add's buffer): at the top of the function
                _insert(fn.body, 0, em.ops)
            else:
                _insert(mk.block, mk.block.ops.index(mk) + 1, em.ops)
            buffers[key] = buf
        em = _Emit(red.loc)
        st = _stage(em, loop, S)
        t0 = em.val("elect_one", [], int1)
        if S == 1:
            em.op("bulk_wait_group", [t0], pending=0, read=True)
            em.op("barrier", [])
        em.op("bulk_stage_store", [buf, st, red.operands[1]])
        em.op("fence_async_shared", [])
        if S >= 2:
            em.op("bulk_wait_group", [t0], pending=S - 2, read=True)
        block = red.block
        at = block.ops.index(red)
        block.ops.remove(red)
        # a barrier right after the reduction (a TMA ring's, before its refill) publishes the staged tile
        # too: the elected thread issues the reduction after that one instead of after a barrier of its own
        shared = at < len(block.ops) and block.ops[at].name == "barrier"
        if not shared:
            em.op("barrier", [])
        _insert(block, at, em.ops)
        at += len(em.ops) + (1 if shared else 0)
        issue = _Emit(red.loc)
        if flat:
            l2 = {"l2": red.attrs["l2"]} if red.attrs.get("l2") else {}
            issue.op("bulk_reduce_1d", [buf, st, t0, red.operands[0]], kind=red.attrs["kind"], source=str(red.loc),
                     **l2)
        else:
            issue.op("bulk_reduce", [buf, st, t0] + list(red.operands[2:]), kind=red.attrs["kind"],
                     source=str(red.loc))
        issue.op("bulk_commit_group", [t0])
        if loop is None:  # nothing waits for it later: complete before the program goes on
            issue.op("bulk_wait_group", [t0], pending=0, read=False)
        _insert(block, at, issue.ops)
        if loop is not None and id(loop) not in loops_done:
            loops_done.add(id(loop))
            after = _Emit(loop.loc)
            t1 = after.val("elect_one", [], int1)
            after.op("bulk_wait_group", [t1], pending=0, read=False)
            after.op("barrier", [])
            _insert(loop.block, loop.block.ops.index(loop) + 1, after.ops)
    return fn
