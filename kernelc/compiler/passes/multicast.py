"""``plan_multicast``: with ``num_ctas=2`` (a cluster of two programs adjacent along grid axis 0), the TMA rings
whose copies both programs of a cluster provably make alike are tagged ``multicast=2`` on the loop's ``pipeline``
(docs/schedule-ir.md); ``expand_tma_rings`` then writes them as a cluster ring:

    mbarrier_init ...; fence_mbarrier_init; cluster_barrier      (both programs' barriers exist before any copy)
    every trip: cluster_barrier before the refill                 (both programs are done with the stage it fills)
    tma_copy_to_ring {multicast=2}: issued by the program whose %cluster_ctarank is the stage's parity, with
        ctaMask 0b11: the box lands in both programs' stage and completes on both programs' barrier (each still
        expects the whole stage's bytes), so each K/V block is read from L2 once a cluster, not once a program
    cluster_barrier after the loop                                (no program leaves while its peer may write to it)

``multicast_sync='empty'`` (KERNELC_MULTICAST_SYNC): the barrier before each refill stays the CTA's, and a second
group of S barriers (two arrivals a phase) hands each stage back: at the refill, each program's elected thread
arrives on the stage's 'empty' barrier in the program that issues the stage (``mbarrier_arrive_remote``), and only
that program's elected thread waits for the phase (``mbarrier_wait_cluster``, the write stage's fill count mod 2,
carried by the loop) before its copies; the other program goes on. ``'cluster'`` (default): a cluster barrier.

Proven alike: the loop's bounds and step, every ringed copy's coordinates, and the conditions of the loops and
branches around the loop do not depend on ``program_id(0)`` (``ir/cluster.py``), the ring is TMA only (no cp.async
ring, no producer warp) with an even number of stages (the issuing program alternates with the stage), and no
``return`` sits inside a region. Otherwise the ring stays as it is, and the loop says why (``multicast_refused``,
also a compile-log note). The host's tensor maps are untouched: a multicast copy is the whole box, issued by one
program of the two.
"""
from __future__ import annotations

from ...options import get
from ..ir.cluster import cluster_varying, enclosing_control_varies
from ..ir.core import Function
from .schedule_ir import ringed_operands


def plan_multicast(fn: Function, ctx) -> Function:
    if getattr(ctx, "num_ctas", 1) != 2:
        return fn
    loops = [op for op in fn.walk() if op.name == "scf.for" and op.attrs.get("pipeline")]
    if not loops:
        return fn
    varying = cluster_varying(fn)
    nested_return = any(o.name == "return" and o.block is not fn.body for o in fn.walk())
    for loop in loops:
        cp, tma = ringed_operands(loop)
        if not tma:
            continue
        why = _refusal(loop, cp, tma, varying, nested_return)
        tag = loop.attrs["pipeline"]
        if why is None:
            tag["multicast"] = 2
            tag["multicast_sync"] = get("KERNELC_MULTICAST_SYNC")
        else:
            tag["multicast_refused"] = why
            ctx.notes.append(f"kernelc: the TMA ring of the loop at {loop.loc} is not multicast across the cluster "
                             f"(num_ctas=2): {why}")
    return fn


def _refusal(loop, cp, tma, varying, nested_return):
    """Why the loop's TMA ring may not be multicast, or None."""
    if loop.attrs.get("ws"):
        return "a producer warp fills it (warp-specialised)"
    if cp:
        return "it shares its stages with a cp.async ring"
    stages = loop.attrs["pipeline"]["stages"]
    if stages % 2:
        return f"{stages} stages (the program that issues a stage's copies alternates with the stage: an even count)"
    if any(v.id in varying for v in loop.operands[:3]):
        return "its bounds or step depend on program_id(0): the cluster's programs may run other trips"
    if enclosing_control_varies(loop, varying):
        return "it runs under a loop or branch whose bounds or condition depend on program_id(0)"
    if nested_return:
        return "the kernel returns from inside a branch or loop"
    for src, _, _, _ in tma:
        if any(v.id in varying for v in src.operands[1:]):
            return f"the coordinates of the copy at {src.loc} depend on program_id(0)"
    return None
