"""``expand_cp_async_rings``: the cp.async ring of a pipelined loop (``schedule_pipelines`` tagged it,
docs/schedule-ir.md) rewritten into explicit tile-IR ops, so code generation lowers one op at a time.

For a loop ``scf.for {pipeline={stages=S, lookahead=L}}`` whose ringed loads all go through cp.async
(no TMA ring, not warp-specialised), the pass writes

    %r = ring_alloc {stages=S, operand='a'|'b'}              one per ringed load, before the loop
    prologue, for s in 0..L-1: the loop's address chain re-evaluated at iteration s (cloned ops),
        async_copy %r, s, ptr [, mask], guard {vec=V}; async_commit_group
    scf.for ... iter_args(..., chain values L iterations ahead, read stage = 0, write stage = L):
        async_wait_group {pending=L-1}; barrier
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
a chain value one iteration later has the same layout and the same contiguity/divisibility). The
expansion itself is ``passes/rings.RingExpander``, shared with ``expand_tma_rings``.
"""
from __future__ import annotations

from ..ir.core import Function
from .rings import RingExpander
from .schedule_ir import ringed_operands


def expand_cp_async_rings(fn: Function, ctx) -> Function:
    loops = [op for op in fn.walk() if op.name == "scf.for" and op.attrs.get("pipeline") and not op.attrs.get("ws")]
    for loop in loops:
        cp, tma = ringed_operands(loop)
        if cp and not tma:  # with a TMA ring too: expand_tma_rings (both share one pair of stage counters)
            RingExpander(ctx, loop, cp).run()
    return fn
