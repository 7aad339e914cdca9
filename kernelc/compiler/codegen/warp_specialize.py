"""Producer/consumer warp specialisation of a TMA -> wgmma loop (sm_90a), one op at a time.

Without it the ring of a pipelined loop is refilled by thread 0 of the warps that also run the dots,
behind a CTA barrier per iteration. With it one extra warp only copies. ``passes/warp_regions.py``
writes the whole protocol as tile-IR ops (docs/schedule-ir.md): the ring and its full/empty barriers
at the kernel's entry, a ``ws_producer`` region with the producer's program, and the consumers' waits
and releases in the loop. The rules here lower the ops that are only about warp specialisation:

    ws_producer      split by warp: the consumers (warps 0 .. num_warps-1) go on after the op; the
                     first warp past them runs the region, then every producer thread exits (with
                     setmaxnreg the producer warpgroup gives its registers to the consumers first)
    ring_cursor      the ring position (stage, phase) in two allocas both sides keep up to date: loops
                     around the specialised one (a persistent kernel's tile loop) carry it from one run of
                     the inner loop to the next, so the producer runs ahead into the next tile while the
                     consumers finish the current one. LLVM promotes the allocas to registers.
    cursor_load/store, warp_leader, mbarrier_arrive, wgmma_wait_deferred, pingpong_begin/end

The producer never joins a CTA barrier after the split, so the consumers' barriers are named
barrier 1 over their own threads (``Lowering.consumer_threads``, set by the split).
"""
from __future__ import annotations

from ..ir.core import Op
from . import tma as T
from .lowering import Lowering, rule
from .wgmma import PingPong

CONSUMER_BARRIER = 1  # named barrier id of the consumers' CTA barriers (0 is __syncthreads)
# Two consumer warpgroups: ptxas sizes registers for the launched warps rounded up to whole warpgroups, so
# 8 + 1 warps get 168 registers each -- too few to keep a wgmma result in flight across softmax work
# (ptxas then serialises the wgmmas, C7512). KERNELC_WS_SETMAXNREG=1 makes the producer a warpgroup that
# gives registers back (setmaxnreg.dec) to the consumers (setmaxnreg.inc): 128 x 40 + 256 x 232 <= 64K
# (assembled by a standalone ptxas: nvJitLink ignores setmaxnreg, C7504). Off by default: it measured
# slower on attention (docs/performance.md, "Warp specialisation").
PRODUCER_REGS, CONSUMER_REGS = 40, 232
# the registers launched (168 a thread x 384 threads) the two sides split: a ws_producer's consumer_regs (240,
# KERNELC_WS_CONSUMER_REGS) leaves the producer warpgroup 24, FlashAttention-3's split
LAUNCHED_REGS = 168 * 384


def _split(op: Op):
    """(producer, consumer) registers a thread of the ws_producer ``op``'s setmaxnreg."""
    consumer = op.attrs.get("consumer_regs", CONSUMER_REGS)
    return (LAUNCHED_REGS - 256 * consumer) // 128 // 8 * 8, consumer


def producer_warps(fn) -> int:
    """Warps launched besides the consumers (the kernel's ``ws_producer``, if any)."""
    return next((op.attrs["producer_warps"] for op in fn.body.ops if op.name == "ws_producer"), 0)


@rule("ws_producer")
def lower_ws_producer(lw: Lowering, op: Op) -> None:
    e = lw.e
    consumers_n = 32 * lw.nw
    if op.attrs.get("source"):
        file, line, _ = op.attrs["source"].rsplit(":", 2)
        lw.reports["warp_specialization"] = {"file": file, "line": int(line),
                                             "producer_warps": op.attrs["producer_warps"],
                                             "stages": op.attrs["stages"]}
    producer, rest, consumers, idle = (e.label(n) for n in ("ws_producer", "ws_rest", "ws_consumers", "ws_idle"))
    e.cond_br(e.val(f"icmp ult i32 {lw.tid}, {consumers_n}"), consumers, rest)
    e.start_block(rest)
    if op.attrs["setmaxnreg"]:  # the whole producer warpgroup gives its registers back before one thread works
        e.asm("void", f"setmaxnreg.dec.sync.aligned.u32 {_split(op)[0]};", "", [])
    # the first producer warp runs the region whole (its ``elect_one {warp}`` lane issues the copies); the
    # warp index through a shuffle is warp-uniform to ptxas, so it knows the warp enters converged (else it
    # guards each elect.sync with a WARPSYNC.COLLECTIVE fallback)
    warp = e.call("i32", "llvm.nvvm.shfl.sync.idx.i32", [("i32", "-1"), ("i32", lw.warp), ("i32", "0"), ("i32", "31")])
    e.cond_br(e.val(f"icmp eq i32 {warp}, {lw.nw}"), producer, idle)
    e.start_block(idle)
    e.emit("ret void")
    e.start_block(producer)
    saved = (dict(lw.scalars), dict(lw.tiles), [dict(m) for m in lw.memo])
    lw.lower_block(op.regions[0])
    e.emit("ret void")
    lw.scalars, lw.tiles, lw.memo = saved
    e.start_block(consumers)
    if op.attrs["setmaxnreg"]:
        e.asm("void", f"setmaxnreg.inc.sync.aligned.u32 {_split(op)[1]};", "", [])
    lw.consumer_threads = consumers_n


@rule("ring_cursor")
def lower_ring_cursor(lw: Lowering, op: Op) -> None:
    e = lw.e
    cells = (e.fresh("ws_stage"), e.fresh("ws_phase"))
    for p in cells:
        e.allocas.append(f"  {p} = alloca i32")
        e.emit(f"store i32 0, ptr {p}")
    lw.rings[op.results[0].id] = dict(zip(("stage", "phase"), cells))


@rule("cursor_load")
def lower_cursor_load(lw: Lowering, op: Op) -> None:
    cell = lw.rings[op.operands[0].id][op.attrs["field"]]
    lw.scalars[op.results[0].id] = lw.e.val(f"load i32, ptr {cell}")


@rule("cursor_store")
def lower_cursor_store(lw: Lowering, op: Op) -> None:
    cell = lw.rings[op.operands[0].id][op.attrs["field"]]
    lw.e.emit(f"store i32 {lw.scalar(op.operands[1])}, ptr {cell}")


@rule("warp_leader")
def lower_warp_leader(lw: Lowering, op: Op) -> None:
    lw.scalars[op.results[0].id] = lw.e.val(f"icmp eq i32 {lw.lane}, 0")


@rule("mbarrier_arrive")
def lower_mbarrier_arrive(lw: Lowering, op: Op) -> None:
    T.mbarrier_arrive(lw, lw.scalar(op.operands[0]), lw.scalar(op.operands[1]))


@rule("pingpong_begin")
def lower_pingpong_begin(lw: Lowering, op: Op) -> None:
    PingPong(lw).before_loop()


@rule("pingpong_end")
def lower_pingpong_end(lw: Lowering, op: Op) -> None:
    PingPong(lw).after_loop()
