"""Software pipelining of the global->shared loads that feed tensor-core dots in a loop.

For ``for k in range(...): a = load(pa, ...); b = load(pb, ...); acc = dot(a, b, acc); pa += ...``
the loads become ``cp.async`` copies straight into a ring of ``num_stages`` swizzled shared-memory
buffers, issued ``num_stages - 1`` iterations ahead:

    prologue:  copy stages 0 .. S-2 (addresses computed from the loop's own index arithmetic)
    iteration: wait for stage i, barrier, copy stage i+S-1 (into the slot iteration i-1 freed),
               ldmatrix + mma from stage i

The address chain of each load (its pointer, mask and the pointer increments in the yield) is
re-evaluated ahead of time with the prefetch iteration's bindings; anything the chain cannot be
re-evaluated for (values from other loads, nested control flow) keeps the plain lowering.
Loop-invariant dot operands (attention's Q) are staged into shared memory once, before the loop.

Tensor-descriptor loads (sm_90a TMA, codegen/descriptors.py) feeding a dot use the same ring, the
same address-chain re-evaluation and the same stage counters, with TMA copies completing on one
mbarrier per stage instead of cp.async groups:

    prologue:  init the S barriers; thread 0 copies stages 0 .. S-2
    iteration: wait on stage i's barrier (phase parity (i / S) & 1); the dot reads stage i in place
               (wgmma may stay in flight: wait_group 1 keeps one group, so stage i-1 is free);
               barrier; thread 0 copies iteration i+S-1 into stage i-1's slot
    after:     barrier, invalidate the barriers
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ...options import get

from ...language.dtypes import scalar_of, shape_of
from ..ir.core import Block, Op, Value
from ..passes.layout_assign import REMATERIALIZABLE
from .dot import MMA_SHAPES, SmemOperand, operand_geometry, store_operand, choose_trans
from .emitter import llty
from .lowering import Lowering, Tile


class _Load:
    def __init__(self, op: Op, dot: Op, is_a: bool):
        self.op, self.dot, self.is_a = op, dot, is_a
        self.trans = False
        self.geom: Optional[SmemOperand] = None
        self.tokens = None
        self.stage_bytes = 0


class _TmaLoad:
    """A ``descriptor_load`` (TMA) feeding operand A/B of ``dot``, directly or through ``via`` (a 2-D trans)."""

    def __init__(self, op: Op, dot: Op, is_a: bool, via: Optional[Op], trans: bool):
        self.op, self.dot, self.is_a, self.via, self.trans = op, dot, is_a, via, trans
        self.value = (via or op).results[0]  # what the dot reads
        self.tmap = None
        self.box = None
        self.geom: Optional[SmemOperand] = None
        self.token = None
        self.stage_bytes = 0


class PipelinePlan:
    def __init__(self, lw: Lowering, op: Op, stages: int, loads: List[_Load], chain: List[Op],
                 carried_idx: List[int], tma_loads: Optional[List[_TmaLoad]] = None):
        self.lw, self.op, self.S, self.loads, self.chain, self.carried_idx = lw, op, stages, loads, chain, carried_idx
        self.tma_loads: List[_TmaLoad] = list(tma_loads or [])
        # async_dots: wgmma dots whose accumulator only chains into themselves across iterations; they may
        # stay in flight (one group) while the next iteration starts, so the prefetch runs one stage less
        # far ahead (the slot the in-flight wgmma reads is not overwritten). Off by default
        # (KERNELC_WGMMA_ASYNC=1 enables it): the shorter prefetch measured costlier than the overlap
        # gained (docs/performance.md, "wgmma"; worth re-measuring). TMA loops refill after the dot and
        # keep the full S-1 lookahead, so there it is on by default (KERNELC_WGMMA_ASYNC=0 turns it off).
        self.async_dots: set = set()
        self.lookahead = stages - 1
        self.uses_wgmma = any(o.name == "dot" and id(o) in lw.plan.wgmma for o in op.regions[0].ops)


def _body_defs(body: Block) -> Dict[int, Op]:
    out = {}
    for op in body.ops:
        for r in op.results:
            out[r.id] = op
    return out


def _closure(values: List[Value], defs: Dict[int, Op], args: set) -> Optional[List[Op]]:
    """Ops of the body that compute ``values`` (in program order), or None if one is not re-computable."""
    need: Dict[int, Op] = {}
    stack = list(values)
    while stack:
        v = stack.pop()
        if v.id in args:
            continue
        op = defs.get(v.id)
        if op is None:
            continue  # defined outside the loop: loop-invariant
        if id(op) in need:
            continue
        if op.name not in REMATERIALIZABLE and op.name not in ("program_id", "num_programs"):
            return None
        need[id(op)] = op
        stack.extend(op.operands)
    return list(need.values())


def plan_pipeline(lw: Lowering, op: Op, report: bool = True) -> Optional[PipelinePlan]:
    """The pipeline of loop ``op`` (None: its loads keep the plain lowering). ``report``: add the
    pipelined accesses to the kernel's access report (warp specialisation plans early, then reports
    through ``report_pipeline`` when the loop is lowered)."""
    stages = op.attrs.get("num_stages", lw.num_stages)
    if stages is None or stages < 2:
        return None
    body = op.regions[0]
    defs = _body_defs(body)
    args = {a.id for a in body.args}
    uses: Dict[int, List[Tuple[Op, int]]] = {}
    for o in body.ops:
        for t in o.walk():
            for i, v in enumerate(t.operands):
                uses.setdefault(v.id, []).append((t, i))
    loads = []
    for o in body.ops:
        if o.name != "dot" or id(o) in lw.plan.dot_fma or lw.plan.get(o.results[0]) is None:
            continue
        for idx in (0, 1):
            v = o.operands[idx]
            lop = defs.get(v.id)
            if lop is None or lop.name != "load":
                continue
            if any(u is not o or i != idx for u, i in uses.get(v.id, [])):
                continue  # the loaded tile is used elsewhere too
            if len(lop.operands) > 2:
                other = lw.defs.get(lop.operands[2].id)
                if other is None or other.name != "constant" or other.attrs["value"] != 0:
                    continue
            loads.append(_Load(lop, o, idx == 0))
    tma_loads = _tma_loads(lw, body, defs, uses)
    if not loads and not tma_loads:
        return None
    # every pipelined load must be vectorisable to at least 4 bytes (cp.async's minimum), and its chunks
    # must run along the shared-memory row (cp.async copies bytes; it cannot transpose): e.g. an fp32 B
    # with N contiguous is stored K-major for tf32, so it keeps the register path that transposes.
    from .memory import vector_width
    eligible = []
    for ld in loads:
        elt = scalar_of(ld.op.results[0].type)
        L = lw.plan.get(ld.op.results[0])
        mask = ld.op.operands[1] if len(ld.op.operands) > 1 else None
        vec = vector_width(lw, ld.op.operands[0], mask, L, elt.itemsize)
        run_dim = next((d for d in range(L.rank) if L.reg and L.reg[0][d]), None)
        if vec * elt.itemsize < 4 or elt.name not in MMA_SHAPES or \
                run_dim != _dims(ld.is_a, choose_trans(L, elt.itemsize, ld.is_a))[1]:
            continue  # this operand keeps the plain (register -> shared) path
        ld.vec = vec
        eligible.append(ld)
    loads = eligible
    if not loads and not tma_loads:
        return None
    # the address chain: pointer and mask of every load (offsets of a TMA load), plus the increments of
    # the carried values they use
    wanted = [v for ld in loads for v in ld.op.operands[:2]] + [v for t in tma_loads for v in t.op.operands[1:]]
    chain = _closure(wanted, defs, args)
    if chain is None:
        return None
    used_args = {v.id for v in wanted}
    for c in chain:
        used_args.update(o.id for o in c.operands)
    carried = body.args[1:]
    carried_idx = [i for i, a in enumerate(carried) if a.id in used_args]
    yld = body.ops[-1]
    inc_chain = _closure([yld.operands[i] for i in carried_idx], defs, args)
    if inc_chain is None:
        return None
    # the chain may only read the carried values it advances itself (and the induction variable)
    allowed = {body.args[0].id} | {carried[i].id for i in carried_idx}
    for c in chain + inc_chain:
        for o in c.operands:
            if o.id in args and o.id not in allowed:
                return None
    order = {id(o): i for i, o in enumerate(body.ops)}
    full = {id(c): c for c in chain + inc_chain}
    chain_all = sorted(full.values(), key=lambda o: order[id(o)])
    plan = PipelinePlan(lw, op, stages, loads, chain_all, carried_idx, tma_loads)
    if report:
        report_pipeline(lw, plan)
    decide_async_dots(lw, plan)
    return plan


def decide_async_dots(lw: Lowering, plan: PipelinePlan) -> None:
    """Which wgmma dots may stay in flight across iterations (``plan.async_dots``), given the operands
    already staged in shared memory now (a warp-specialised loop decides again when it is lowered)."""
    body = plan.op.regions[0]
    stages = plan.S
    tma_loads, loads = plan.tma_loads, plan.loads
    uses: Dict[int, List[Tuple[Op, int]]] = {}
    for o in body.ops:
        for t in o.walk():
            for i, v in enumerate(t.operands):
                uses.setdefault(v.id, []).append((t, i))
    plan.async_dots, plan.lookahead = set(), stages - 1
    dots = [o for o in body.ops if o.name == "dot" and id(o) in lw.plan.wgmma]
    chaining = dots and all(_chains_only_into_itself(o, body, uses) for o in dots) \
        and not any(o.name == "dot" and id(o) not in lw.plan.wgmma for o in body.ops)
    if tma_loads:
        # TMA refills stage i-1 after iteration i's dot, so one wgmma group may stay in flight with the
        # full S-1 lookahead -- if nothing else the dots read is rewritten every iteration (registers
        # staged through scratch, cp.async stages on their own schedule)
        served = {t.value.id for t in tma_loads} | set(lw.smem_operands)
        if get("KERNELC_WGMMA_ASYNC") in ("default", "on") and chaining and not loads \
                and all(o.operands[i].id in served for o in dots for i in (0, 1)):
            plan.async_dots = {id(o) for o in dots}
    elif get("KERNELC_WGMMA_ASYNC") == "on" and stages >= 3 and chaining:
        plan.async_dots = {id(o) for o in dots}
        plan.lookahead = stages - 2


def report_pipeline(lw: Lowering, plan: PipelinePlan) -> None:
    """Add the plan's pipelined loads to the kernel's memory-access report (for the analyzer)."""
    from .descriptors import report_tma
    from .memory import report_access
    for ld in plan.loads:
        L = lw.plan.get(ld.op.results[0])
        mask = ld.op.operands[1] if len(ld.op.operands) > 1 else None
        report_access(lw, ld.op, "load (cp.async pipelined)", ld.op.operands[0], mask, L,
                      scalar_of(ld.op.results[0].type).itemsize, ld.vec)
    for t in plan.tma_loads:
        report_tma(lw, t.op, "load (TMA pipelined)", t.op.operands[0].type)


def _tma_loads(lw: Lowering, body: Block, defs: Dict[int, Op], uses) -> List[_TmaLoad]:
    """Descriptor loads (left in the IR for TMA) whose tile is only read, in place, by one dot operand."""
    from .descriptors import operand_orientation, smem_servable
    out = []
    only = lambda v, user, i: uses.get(v.id, []) == [(user, i)]  # noqa: E731
    for o in body.ops:
        if o.name != "dot":
            continue
        for idx in (0, 1):
            v = o.operands[idx]
            src, via = defs.get(v.id), None
            if not only(v, o, idx):
                continue
            if src is not None and src.name == "trans" and list(src.attrs.get("perm", [])) == [1, 0]:
                via, v = src, src.operands[0]
                src = defs.get(v.id)
                if not only(v, via, 0):
                    continue
            if src is None or src.name != "descriptor_load":
                continue
            trans = operand_orientation(idx == 0, via is not None)
            if smem_servable(lw, o, idx, trans, scalar_of(v.type)):
                out.append(_TmaLoad(src, o, idx == 0, via, trans))
    return out


def _chains_only_into_itself(dot: Op, body: Block, uses) -> bool:
    """The dot's result is only yielded, and the carried value it becomes is only this dot's acc."""
    yld = body.ops[-1]
    r = dot.results[0]
    r_uses = uses.get(r.id, [])
    if len(r_uses) != 1 or r_uses[0][0] is not yld:
        return False
    arg = body.args[1 + r_uses[0][1]]
    a_uses = uses.get(arg.id, [])
    return len(a_uses) == 1 and a_uses[0][0] is dot and a_uses[0][1] == 2


def _eval_chain(lw: Lowering, plan: PipelinePlan, iv: str, carried_vals: Dict[int, Tile]):
    """Lower the address chain with the given bindings; returns (per-load (ptrs, masks), advanced carried)."""
    body = plan.op.regions[0]
    lw.push_scope()
    saved_s = dict(lw.scalars)
    saved_t = dict(lw.tiles)
    lw.scalars[body.args[0].id] = iv
    for i in plan.carried_idx:
        a = body.args[1 + i]
        if lw.is_tile(a):
            lw.tiles[a.id] = carried_vals[i]
        else:
            lw.scalars[a.id] = carried_vals[i]
    for c in plan.chain:
        if not c.results:
            continue
        v = c.results[0]
        if not lw.is_tile(v):
            lw.lower_scalar_op(c)
        else:
            L = lw.plan.get(v)
            if L is not None:
                lw.tiles[v.id] = lw.materialize(c, v, L)
    out = []
    for ld in plan.loads:
        L = lw.plan.get(ld.op.results[0])
        ptrs = lw.get(ld.op.operands[0], L).regs
        masks = lw.operand(ld.op.operands[1], L) if len(ld.op.operands) > 1 else None
        out.append((ptrs, masks))
    for t in plan.tma_loads:  # after the cp.async loads: element offsets, outermost first
        out.append([lw.scalar(v) for v in t.op.operands[1:]])
    yld = body.ops[-1]
    advanced = {}
    for i in plan.carried_idx:
        a = body.args[1 + i]
        v = yld.operands[i]
        if lw.is_tile(a):
            advanced[i] = lw.get(v, lw.plan.get(a))
        else:
            advanced[i] = lw.scalar(v)
    lw.scalars = saved_s
    lw.tiles = saved_t
    lw.pop_scope()
    return out, advanced


def _issue(lw: Lowering, plan: PipelinePlan, addrs, stage: str, guard: Optional[str]):
    """cp.async every chunk of every pipelined load into ``stage``; one commit group."""
    e = lw.e
    for ld, (ptrs, masks) in zip(plan.loads, addrs):
        L = lw.plan.get(ld.op.results[0])
        elt = scalar_of(ld.op.results[0].type)
        eb = elt.itemsize
        vec = ld.vec
        nbytes = vec * eb
        coords = lw.coords(L)
        row_dim, col_dim = ld.dims
        base = e.val(f"add i32 {ld.token}, {e.val(f'mul i32 {stage}, {ld.stage_bytes}')}")
        sm = ld.geom.at(base)
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
    e.asm("void", "cp.async.commit_group;", "", [])


def _issue_tma(lw: Lowering, plan: PipelinePlan, offsets, stage: str, guard: Optional[str], bars,
               pred: Optional[str] = None):
    """One thread (``pred``; thread 0 by default) copies every TMA-pipelined tile of one iteration into
    ``stage``, completing on its barrier."""
    from . import tma as T
    e = lw.e
    pred = T.elected(lw) if pred is None else pred
    if guard is not None:
        pred = e.val(f"and i1 {pred}, {guard}")
    pool, tok, off = bars
    bar = pool.address(tok, off, stage)
    T.mbarrier_expect_tx(lw, bar, sum(t.box.nbytes for t in plan.tma_loads), pred)
    for t, offs in zip(plan.tma_loads, offsets):
        base = e.val(f"add i32 {t.token}, {e.val(f'mul i32 {stage}, {t.stage_bytes}')}")
        tmap = t.tmap.address(lw)
        T.copy_tile_in(lw, t.box, tmap, base, bar, offs, pred)


def prefetch_tensor_maps(lw: Lowering, plan: PipelinePlan, pred: Optional[str]) -> None:
    """Bring the maps of the loop's copies into the TMA unit's cache ahead of the first copy."""
    from . import tma as T
    maps = {t.tmap.param: t.tmap for t in plan.tma_loads}
    for param in sorted(maps):
        T.prefetch_tensormap(lw, maps[param].address(lw), pred)


class PipelinedLoop:
    """Drives the emission; ``lower_for`` calls prologue / iteration_start / iteration_end / finish."""

    def __init__(self, lw: Lowering, plan: PipelinePlan, ws=None):
        self.lw, self.plan = lw, plan
        self.deferred, self.release_lag = set(), bool(plan.async_dots)
        # ws: the kernel's WarpSpecialization when this is its loop (codegen/warp_specialize.py): a
        # producer warp fills the ring, this code is the consumers' side of it
        self.ws = ws

    def prologue(self, lb: str, ub: str, step: str, iv_ty: str, init_carried: Dict[int, object]):
        lw, plan = self.lw, self.plan
        e = lw.e
        S = plan.S
        if self.ws is not None:
            return self._consumer_prologue(lb, ub, iv_ty)
        for ld in plan.loads:
            dot = ld.dot
            elt = scalar_of(ld.op.results[0].type)
            eb = elt.itemsize
            M, N = shape_of(dot.results[0].type)
            K = shape_of(dot.operands[0].type)[1]
            L = lw.plan.get(ld.op.results[0])
            ld.trans = choose_trans(L, eb, ld.is_a)
            ld.geom = operand_geometry(ld.is_a, ld.trans, M if ld.is_a else N, K, eb)
            ld.dims = _dims(ld.is_a, ld.trans)
            ld.stage_bytes = (ld.geom.nbytes + 1023) // 1024 * 1024  # stages stay 1024-byte aligned
            ld.token = lw.persistent(S * ld.stage_bytes)
        if plan.tma_loads:
            self._tma_setup()
        self.iv_ty = iv_ty
        self.ub = ub
        self.step = step
        cur = dict(init_carried)
        LA = plan.lookahead
        lw.async_dots |= plan.async_dots
        n = len(plan.loads)
        for s in range(LA):
            iv_s = lb if s == 0 else e.val(f"add {iv_ty} {lb}, {e.val(f'mul {iv_ty} {step}, {s}')}")
            guard = e.val(f"icmp slt {iv_ty} {iv_s}, {ub}")
            addrs, cur = _eval_chain(lw, plan, iv_s, cur)
            if plan.loads:
                _issue(lw, plan, addrs, str(s), guard)
            if plan.tma_loads:
                _issue_tma(lw, plan, addrs[n:], str(s), guard, self.bars)
        # extra loop-carried state: prefetch bindings (S-1 iterations ahead), read and write stage
        self.extra_types = []
        self.extra_inits = []
        for i in plan.carried_idx:
            v = cur[i]
            if isinstance(v, Tile):
                ty = "ptr addrspace(1)" if True else None
                a = plan.op.regions[0].args[1 + i]
                ty = llty(scalar_of(a.type))
                self.extra_types += [ty] * len(v.regs)
                self.extra_inits += list(v.regs)
            else:
                a = plan.op.regions[0].args[1 + i]
                self.extra_types.append(llty(scalar_of(a.type)))
                self.extra_inits.append(v)
        self.n_chain = len(self.extra_types)
        self.extra_types += ["i32", "i32"]
        self.extra_inits += ["0", str(LA)]
        if plan.tma_loads:  # the phase parity of the stage read next
            self.extra_types.append("i32")
            self.extra_inits.append("0")
        return list(zip(self.extra_types, self.extra_inits))

    def _consumer_prologue(self, lb: str, ub: str, iv_ty: str):
        """Warp-specialised consumers: nothing to prefetch (the producer does); the ring position
        (read stage, phase parity) continues from where the previous run of this loop left it."""
        lw, plan = self.lw, self.plan
        e = lw.e
        self.lb, self.ub, self.iv_ty = lb, ub, iv_ty
        lw.async_dots |= plan.async_dots
        self.n_chain = 0
        stage = e.val(f"load i32, ptr {self.ws.stage_ptr}")
        phase = e.val(f"load i32, ptr {self.ws.phase_ptr}")
        self.extra_types = ["i32", "i32", "i32"]  # read stage, (unused) write stage, phase parity
        self._plan_deferred_dots()
        from .warp_specialize import PingPong
        self.pingpong = PingPong(lw) if PingPong.applies(lw, plan) else None
        if self.pingpong is not None:
            first = next(o for o in plan.op.regions[0].ops if o.name == "dot")
            lw.wgmma_turns[id(first)] = self.pingpong
            self.pingpong.before_loop()
        return [("i32", stage), ("i32", "0"), ("i32", phase)]

    def tma_buffers(self):
        """Tensor maps, boxes and the ring's stage buffers (1024-byte aligned for the 128B swizzle)."""
        from .descriptors import tensor_map_of
        lw, plan = self.lw, self.plan
        S = plan.S
        for t in plan.tma_loads:
            ty = t.op.operands[0].type
            t.tmap = tensor_map_of(lw, t.op.operands[0])
            t.box = t.tmap.box
            t.geom = t.box.smem(0)
            M, N = shape_of(t.dot.results[0].type)
            K = shape_of(t.dot.operands[0].type)[1]
            want = operand_geometry(t.is_a, t.trans, M if t.is_a else N, K, ty.element_ty.itemsize)
            assert (t.geom.rows, t.geom.cols) == (want.rows, want.cols), "internal: TMA tile is not the operand"
            t.stage_bytes = (t.box.nbytes + 1023) // 1024 * 1024
            t.token = _reuse_or_allocate(lw, S * t.stage_bytes)

    def _tma_setup(self):
        """Stage buffers and one initialised mbarrier per stage."""
        from . import tma as T
        lw, plan = self.lw, self.plan
        S = plan.S
        self.tma_buffers()
        pool = T.BarrierPool.of(lw)
        tok, off = pool.take(S)
        self.bars = (pool, tok, off)
        t0 = T.elected(lw)
        lw.barrier()  # an earlier trip of an enclosing loop is done with the ring and the barriers
        for s in range(S):
            T.mbarrier_init(lw, pool.address(tok, off, str(s)), 1, t0)
        T.fence_mbarrier_init(lw)
        lw.barrier()
        prefetch_tensor_maps(lw, plan, t0)

    def iteration_start(self, iv: str, extra_phis: List[str]) -> List[str]:
        """Wait for this iteration's stage, prefetch ahead, bind the dots' operands; returns next extras."""
        lw, plan = self.lw, self.plan
        e = lw.e
        S = plan.S
        read_stage, write_stage = extra_phis[self.n_chain], extra_phis[self.n_chain + 1]
        if self.ws is not None:
            return self._consumer_start(iv, extra_phis)
        cur: Dict[int, object] = {}
        k = 0
        body = plan.op.regions[0]
        for i in plan.carried_idx:
            a = body.args[1 + i]
            if lw.is_tile(a):
                L = lw.plan.get(a)
                cur[i] = Tile(L, extra_phis[k:k + L.num_regs])
                k += L.num_regs
            else:
                cur[i] = extra_phis[k]
                k += 1
        LA = plan.lookahead
        if plan.loads:
            e.asm("void", f"cp.async.wait_group {LA - 1};", "", [])
            # wgmma reads shared memory through the async proxy: order the cp.async writes before it
            if plan.uses_wgmma:
                e.asm("void", "fence.proxy.async.shared::cta;", "", [])
            lw.barrier()
        if plan.tma_loads:
            from . import tma as T
            pool, tok, off = self.bars
            T.mbarrier_wait(lw, pool.address(tok, off, read_stage), extra_phis[self.n_chain + 2])
        iv_pf = e.val(f"add {self.iv_ty} {iv}, {e.val(f'mul {self.iv_ty} {self.step}, {LA}')}")
        guard = e.val(f"icmp slt {self.iv_ty} {iv_pf}, {self.ub}")
        addrs, nxt = _eval_chain(lw, plan, iv_pf, cur)
        if plan.loads:
            _issue(lw, plan, addrs, write_stage, guard)
        # TMA copies for iteration i+S-1 go out after this iteration's dots (iteration_end)
        self.tma_pending = (addrs[len(plan.loads):], write_stage, guard)
        self._bind_tma_operands(read_stage)
        for ld in plan.loads:
            base = e.val(f"add i32 {ld.token}, {e.val(f'mul i32 {read_stage}, {ld.stage_bytes}')}")
            lw.smem_operands[ld.op.results[0].id] = (ld.geom.at(base), ld.trans)
            lw.skip_ops.add(id(ld.op))
        out = []
        for i in plan.carried_idx:
            v = nxt[i]
            out += list(v.regs) if isinstance(v, Tile) else [v]
        wraps = []
        for st in (read_stage, write_stage):
            inc = e.val(f"add i32 {st}, 1")
            wrap = e.val(f"icmp eq i32 {inc}, {S}")
            wraps.append(wrap)
            out.append(e.val(f"select i1 {wrap}, i32 0, i32 {inc}"))
        if plan.tma_loads:  # the parity flips each time the read stage wraps around
            out.append(e.val(f"xor i32 {extra_phis[self.n_chain + 2]}, {e.val(f'zext i1 {wraps[0]} to i32')}"))
        return out

    def _bind_tma_operands(self, read_stage: str) -> None:
        """The dots read this iteration's TMA tiles in place, in stage ``read_stage``."""
        lw, e = self.lw, self.lw.e
        for t in self.plan.tma_loads:
            base = e.val(f"add i32 {t.token}, {e.val(f'mul i32 {read_stage}, {t.stage_bytes}')}")
            lw.smem_operands[t.value.id] = (t.box.smem(base), t.trans)
            lw.skip_ops.add(id(t.op))
            if t.via is not None:
                lw.skip_ops.add(id(t.via))

    def _consumer_start(self, iv: str, extra_phis: List[str]) -> List[str]:
        """Wait until the producer's copies for this iteration landed; bind the dots' operands."""
        from . import tma as T
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
        from . import tma as T
        e = self.lw.e
        pred = e.val(f"icmp eq i32 {self.lw.lane}, 0")
        if cond is not None:
            pred = e.val(f"and i1 {pred}, {cond}")
        T.mbarrier_arrive(self.lw, self.ws.empty(stage), pred)

    def _previous_stage(self, stage: str) -> str:
        e = self.lw.e
        first = e.val(f"icmp eq i32 {stage}, 0")
        return e.val(f"select i1 {first}, i32 {self.plan.S - 1}, i32 {e.val(f'sub i32 {stage}, 1')}")

    def iteration_end(self):
        """After the body's dots: refill the slot the previous iteration read (every warp is past it)."""
        if self.ws is not None:
            # the dots of this iteration are issued; with one wgmma group left in flight the previous
            # iteration's group is complete now, else this one's is
            if self.release_lag:
                not_first = self.lw.e.val(f"icmp ne {self.iv_ty} {self.iv}, {self.lb}")
                self._release(self._previous_stage(self.read_stage), not_first)
            else:
                self._release(self.read_stage, None)
            return
        if not self.plan.tma_loads:
            return
        offsets, write_stage, guard = self.tma_pending
        self.lw.barrier()
        _issue_tma(self.lw, self.plan, offsets, write_stage, guard, self.bars)

    def finish(self, carried: Optional[List[List[str]]] = None) -> Optional[List[List[str]]]:
        """After the loop (exit block): drain what is in flight; returns ``carried`` (the loop results'
        registers per carried value) with the in-flight accumulators replaced by the wait's results."""
        e = self.lw.e
        if self.plan.async_dots:
            carried = _wait_accumulators(self.lw, self.plan, carried)
            self.lw.async_dots -= self.plan.async_dots
        if self.ws is not None:
            return self._consumer_finish(carried)
        if self.plan.loads:
            e.asm("void", "cp.async.wait_all;", "", [])
        for ld in self.plan.loads:
            self.lw.smem_operands.pop(ld.op.results[0].id, None)
        if self.plan.tma_loads:
            from . import tma as T
            lw = self.lw
            # every copy issued was waited for by its iteration; once all threads are past their last
            # wait the barriers can be invalidated (an enclosing loop initialises them again)
            lw.barrier()
            t0 = T.elected(lw)
            pool, tok, off = self.bars
            for s in range(self.plan.S):
                T.mbarrier_inval(lw, pool.address(tok, off, str(s)), t0)
            for t in self.plan.tma_loads:
                lw.smem_operands.pop(t.value.id, None)
            from .descriptors import free_regions, inside_loop
            if not inside_loop(self.plan.op):
                # the ring is dead from here on (all copies waited, all readers past the barrier): an
                # epilogue's TMA store may stage its tile there instead of growing the scratch area
                free_regions(lw).extend((t.token, self.plan.S * t.stage_bytes) for t in self.plan.tma_loads)
        return carried


    def _plan_deferred_dots(self) -> None:
        """Warp-specialised loops with several dots: each wgmma result is waited for at its first read
        (``wgmma.WgmmaGroups``), so a dot issued before independent work (attention's next QK^T before
        this block's PV and softmax, FlashAttention-3's order) overlaps it. Everything is complete again
        at the end of the iteration (``before_yield``): ptxas cannot follow a wgmma in flight across the
        back edge once two are (C7514, it would serialise them)."""
        lw, plan = self.lw, self.plan
        body = plan.op.regions[0]
        dots = [o for o in body.ops if o.name == "dot" and id(o) in lw.plan.wgmma]
        on = get("KERNELC_WGMMA_DEFER")
        if on and len(dots) >= 2 and not plan.async_dots and \
                all(o.attrs.get("max_num_imprecise_acc") is None for o in dots) and \
                not any(t.name == "dot" for o in body.ops for t in o.walk() if t.block is not body):
            self.deferred = {id(o) for o in dots}
        lw.deferred_dots |= self.deferred

    def before_yield(self, yld) -> None:
        """End of the body: wait for whatever is still in flight (see ``_plan_deferred_dots``)."""
        self.lw.wgmma_groups.complete_all()

    def _consumer_finish(self, carried):
        """Release the last stage (its wgmma group was still in flight), save the ring position."""
        lw, e = self.lw, self.lw.e
        read_stage, _, phase = self.extra_phis
        if self.pingpong is not None:
            self.pingpong.after_loop()
            lw.wgmma_turns.clear()
        lw.deferred_dots -= self.deferred
        if self.release_lag:
            ran = e.val(f"icmp slt {self.iv_ty} {self.lb}, {self.ub}")
            self._release(self._previous_stage(read_stage), ran)
        e.emit(f"store i32 {read_stage}, ptr {self.ws.stage_ptr}")
        e.emit(f"store i32 {phase}, ptr {self.ws.phase_ptr}")
        for t in self.plan.tma_loads:
            lw.smem_operands.pop(t.value.id, None)
        from .descriptors import free_regions, inside_loop
        if not inside_loop(self.plan.op):
            # every copy landed (each was waited for) and the producer issues no more: an epilogue's
            # TMA store may stage its tile in the ring (it waits at a barrier for all readers first)
            free_regions(lw).extend((t.token, self.plan.S * t.stage_bytes) for t in self.plan.tma_loads)
        return carried


def _reuse_or_allocate(lw: Lowering, nbytes: int) -> str:
    """A persistent buffer of ``nbytes``: the ring of a loop that already finished if one is big enough
    (a causal attention's diagonal loop takes the main loop's), else a new one. Reuse is safe: every copy
    into the old ring was waited for, and the new ring's setup starts with a barrier past its readers."""
    from .descriptors import free_regions
    free = free_regions(lw)
    for i, (tok, size) in enumerate(free):
        if size >= nbytes:
            del free[i]
            return tok
    return lw.persistent(nbytes)


def _wait_accumulators(lw: Lowering, plan: PipelinePlan, carried: Optional[List[List[str]]]):
    """``wgmma.wait_group 0`` that takes the in-flight accumulators (the carried values the async dots
    are yielded as) and hands them back (``wgmma.tie_through_wait``): a conversion sunk into the loop
    exit cannot read registers the tensor cores still write (ptxas would serialise every wgmma, C7514)."""
    from .wgmma import tie_through_wait
    body = plan.op.regions[0]
    yld = body.ops[-1]
    idx = sorted({i for i, v in enumerate(yld.operands) if v.op is not None and id(v.op) in plan.async_dots})
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


def _dims(is_a: bool, trans: bool) -> Tuple[int, int]:
    """(row_dim, col_dim) of the loaded tile in the operand's shared-memory rows/columns."""
    if is_a:
        return (1, 0) if trans else (0, 1)
    return (0, 1) if trans else (1, 0)


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
