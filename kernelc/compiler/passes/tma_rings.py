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
generator used before the ring became ops, so the generated code is the same but for one redundant
barrier fewer after the loop (docs/schedule-ir.md, "Checking that nothing changed").
The expansion itself is ``passes/rings.RingExpander``, shared with ``expand_cp_async_rings``.
"""
from __future__ import annotations

from ..ir.core import Function
from .rings import RingExpander
from .schedule_ir import ringed_operands


def expand_tma_rings(fn: Function, ctx) -> Function:
    loops = [op for op in fn.walk() if op.name == "scf.for" and op.attrs.get("pipeline") and not op.attrs.get("ws")]
    for loop in loops:
        cp, tma = ringed_operands(loop)
        if tma:
            RingExpander(ctx, loop, cp, tma).run()
    return fn
