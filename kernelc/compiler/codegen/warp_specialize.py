"""Producer/consumer warp specialisation of a TMA -> wgmma loop (sm_90a).

Without it the ring of a pipelined loop (codegen/pipeline.py) is refilled by thread 0 of the warps
that also run the dots, behind a CTA barrier per iteration. With it one extra warp only copies:

    entry      all threads: init full[s] (1 arrival + the copies' bytes) and empty[s] (one arrival
               per consumer warp) for every stage; CTA barrier; then split by warp
    producer   warp ``num_warps``, lane 0: the loop's skeleton -- its bounds, the loops around it,
               the descriptor offsets -- and per iteration: wait empty[stage] (parity phase^1: the
               phase before a fresh barrier's first counts as complete), arrive.expect_tx on
               full[stage], the TMA copies. Then it exits.
    consumers  warps 0 .. num_warps-1: the whole kernel. Per iteration: wait full[stage] (parity
               phase), the dots read the stage in place; when their wgmma group is complete (the
               next iteration's ``wait_group 1``, or the wait after the loop) lane 0 of every warp
               arrives on empty[stage].

The producer never joins a CTA barrier after the split, so the consumers' barriers are named
barrier 1 over their own threads. The ring position (stage, phase) lives in two allocas that both
sides keep up to date: loops around the pipelined one (a persistent kernel's tile loop) carry it
from one run of the inner loop to the next, so the producer runs ahead into the next tile while the
consumers finish the current one. LLVM promotes the allocas to registers.

Which loop (if any) is specialised, with how many producer warps, whether registers move
(setmaxnreg), when a stage is released and whether the consumers take turns is decided by
``passes/schedule.py`` and written on the loop as ``ws={...}`` (docs/schedule-ir.md); this module
emits it.
"""
from __future__ import annotations

from typing import List, Optional

from ...language.dtypes import scalar_of, shape_of
from .emitter import llty
from ..ir.core import Op, Value
from ..passes.schedule_ir import loop_path
from . import tma as T
from .lowering import Lowering
from .pipeline import ConsumerLoop, _eval_chain, _issue_tma, pipeline_of, prefetch_tensor_maps

CONSUMER_BARRIER = 1  # named barrier id of the consumers' CTA barriers (0 is __syncthreads)
# Two consumer warpgroups: ptxas sizes registers for the launched warps rounded up to whole warpgroups, so
# 8 + 1 warps get 168 registers each -- too few to keep a wgmma result in flight across softmax work
# (ptxas then serialises the wgmmas, C7512). KERNELC_WS_SETMAXNREG=1 makes the producer a warpgroup that
# gives registers back (setmaxnreg.dec) to the consumers (setmaxnreg.inc): 128 x 40 + 256 x 232 <= 64K
# (assembled by a standalone ptxas: nvJitLink ignores setmaxnreg, C7504). Off by default: it measured
# slower on attention (docs/performance.md, "Warp specialisation").
PRODUCER_REGS, CONSUMER_REGS = 40, 232


class WarpSpecialization:
    """The warp-specialised loop of a kernel, its pipeline and the ring's barriers."""

    def __init__(self, lw: Lowering, loop: Op, plan, path: List[Op]):
        self.lw, self.loop, self.plan, self.path = lw, loop, plan, path
        self.stage_ptr = self.phase_ptr = None
        self.bars = None  # (pool, token, offset) of 2*S barriers: full[0..S-1], empty[0..S-1]
        self.pipe = None

    @property
    def consumer_threads(self) -> int:
        return 32 * self.lw.nw

    @property
    def setmaxnreg(self) -> bool:
        return bool(self.loop.attrs["ws"]["setmaxnreg"])

    @property
    def producer_warps(self) -> int:
        """Warps launched besides the consumers: a whole warpgroup when registers move (setmaxnreg)."""
        return self.loop.attrs["ws"]["producer_warps"]

    def full(self, stage: str) -> str:
        pool, tok, off = self.bars
        return pool.address(tok, off, stage)

    def empty(self, stage: str) -> str:
        pool, tok, off = self.bars
        e = self.lw.e
        return pool.address(tok, off, e.val(f"add i32 {stage}, {self.plan.S}"))


def warp_specialization_of(lw: Lowering) -> Optional[WarpSpecialization]:
    """The loop ``passes/schedule.py`` tagged ``ws`` (at most one per kernel), with its ring, or None."""
    for op in lw.fn.walk():
        if op.name == "scf.for" and op.attrs.get("ws"):
            return WarpSpecialization(lw, op, pipeline_of(lw, op), loop_path(op))
    return None


# -- emission ------------------------------------------------------------------------------------


def emit_split(lw: Lowering, ws: WarpSpecialization) -> None:
    """At the kernel's entry: the ring, its barriers, the producer warp's whole program; emission
    continues in the consumers' block (with CTA barriers over the consumers only)."""
    e = lw.e
    plan = ws.plan
    S = plan.S
    ws.pipe = ConsumerLoop(lw, plan, ws)
    ws.pipe.tma_buffers()
    pool = T.BarrierPool.of(lw)
    tok, off = pool.take(2 * S)
    ws.bars = (pool, tok, off)
    ws.stage_ptr, ws.phase_ptr = e.fresh("ws_stage"), e.fresh("ws_phase")
    for p in (ws.stage_ptr, ws.phase_ptr):
        e.allocas.append(f"  {p} = alloca i32")
        e.emit(f"store i32 0, ptr {p}")
    t0 = T.elected(lw)
    for s in range(S):
        T.mbarrier_init(lw, ws.full(str(s)), 1, t0)
        T.mbarrier_init(lw, ws.empty(str(s)), lw.nw, t0)
    T.fence_mbarrier_init(lw)
    e.call("void", "llvm.nvvm.barrier0", [])
    producer, rest, consumers, idle = (e.label(n) for n in ("ws_producer", "ws_rest", "ws_consumers", "ws_idle"))
    e.cond_br(e.val(f"icmp ult i32 {lw.tid}, {ws.consumer_threads}"), consumers, rest)
    e.start_block(rest)
    if ws.setmaxnreg:  # the whole producer warpgroup gives its registers back before one thread works
        e.asm("void", f"setmaxnreg.dec.sync.aligned.u32 {PRODUCER_REGS};", "", [])
    e.cond_br(e.val(f"icmp eq i32 {lw.tid}, {ws.consumer_threads}"), producer, idle)
    e.start_block(idle)
    e.emit("ret void")
    e.start_block(producer)
    saved = (dict(lw.scalars), dict(lw.tiles), [dict(m) for m in lw.memo])
    prefetch_tensor_maps(lw, plan, None)
    _producer_loops(lw, ws, 0)
    e.emit("ret void")
    lw.scalars, lw.tiles, lw.memo = saved
    e.start_block(consumers)
    if ws.setmaxnreg:
        e.asm("void", f"setmaxnreg.inc.sync.aligned.u32 {CONSUMER_REGS};", "", [])
    lw.consumer_threads = ws.consumer_threads


def _producer_loops(lw: Lowering, ws: WarpSpecialization, depth: int) -> None:
    op = ws.path[depth]
    if op is not ws.loop:
        _loop_typed(lw, op, [], [], lambda iv, extras: (_producer_loops(lw, ws, depth + 1), [])[1])
        return
    e = lw.e
    plan = ws.plan
    S = plan.S
    body = op.regions[0]
    carried_idx = plan.carried_idx
    inits = [lw.scalar(op.operands[3 + i]) for i in carried_idx]
    # the offsets' loop-invariant inputs (tile coordinates: divisions LLVM may not hoist) once, before the loop
    inner = {r.id for c in body.ops for t in c.walk() for r in t.results} | {a.id for a in body.args}
    for c in plan.chain:
        for v in c.operands:
            if v.id not in inner and not shape_of(v.type):
                lw.scalar(v)
    stage0 = e.val(f"load i32, ptr {ws.stage_ptr}")
    phase0 = e.val(f"load i32, ptr {ws.phase_ptr}")
    tys = [_llty(body.args[1 + i]) for i in carried_idx]

    def step(iv, extras):
        stage, phase = extras[0], extras[1]
        cur = {i: x for i, x in zip(carried_idx, extras[2:])}
        T.mbarrier_wait(lw, ws.empty(stage), e.val(f"xor i32 {phase}, 1"))
        offsets, nxt = _eval_chain(lw, plan, iv, cur)
        _issue_tma(lw, plan, offsets, stage, ws.bars, "true")
        inc = e.val(f"add i32 {stage}, 1")
        wrap = e.val(f"icmp eq i32 {inc}, {S}")
        return [e.val(f"select i1 {wrap}, i32 0, i32 {inc}"),
                e.val(f"xor i32 {phase}, {e.val(f'zext i1 {wrap} to i32')}")] + [nxt[i] for i in carried_idx]

    phis = _loop_typed(lw, op, ["i32", "i32"] + tys, [stage0, phase0] + inits, step)
    e.emit(f"store i32 {phis[0]}, ptr {ws.stage_ptr}")
    e.emit(f"store i32 {phis[1]}, ptr {ws.phase_ptr}")


def _llty(v: Value) -> str:
    return llty(scalar_of(v.type))


def _loop_typed(lw: Lowering, op: Op, types: List[str], inits: List[str], body_fn):
    """A scalar ``for`` over ``op``'s bounds (step > 0) carrying ``inits`` (LLVM ``types``) besides the
    index; ``body_fn(iv, carried)`` emits the body and returns the next carried values. Returns the
    carried values' phis (their values after the loop)."""
    e = lw.e
    lb, ub, step = (lw.scalar(v) for v in op.operands[:3])
    ty = _llty(op.operands[0])
    pre = e.cur_label
    head, body, done = e.label("wsp_head"), e.label("wsp_body"), e.label("wsp_exit")
    e.br(head)
    e.start_block(head)
    iv = e.fresh("wsp_iv")
    phis = [e.fresh("wsp_x") for _ in inits]
    at = len(e.body)
    e.body.extend([None] * (1 + len(phis)))
    e.cond_br(e.val(f"icmp slt {ty} {iv}, {ub}"), body, done)
    e.start_block(body)
    saved = dict(lw.scalars)
    lw.push_scope()
    lw.scalars[op.regions[0].args[0].id] = iv
    nxt_extras = body_fn(iv, phis)
    nxt = e.val(f"add {ty} {iv}, {step}")
    latch = e.cur_label
    e.br(head)
    lw.pop_scope()
    lw.scalars = saved
    e.body[at] = f"  {iv} = phi {ty} [ {lb}, %{pre} ], [ {nxt}, %{latch} ]"
    for i, (p, t, init, n) in enumerate(zip(phis, types, inits, nxt_extras)):
        e.body[at + 1 + i] = f"  {p} = phi {t} [ {init}, %{pre} ], [ {n}, %{latch} ]"
    e.start_block(done)
    return phis
