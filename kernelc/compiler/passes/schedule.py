"""Scheduling passes: decide how loops feeding tensor-core dots run and write it down in the tile IR
(docs/schedule-ir.md). Code generation reads these attributes and makes no scheduling choice itself.

- ``schedule_pipelines``: which loops get a shared-memory ring (cp.async and/or TMA copies), how many
  stages and how far ahead the copies run, which loads join the ring, and which wgmma dots stay in
  flight across iterations::

      scf.for ... {pipeline={stages=3, lookahead=2}}
        load ... {pipeline={ring='cp.async', vec=8}}
        descriptor_load ... {pipeline={ring='tma'}}
        trans ... {pipeline={ring='tma'}}          # the view a TMA-ringed tile is read through
        dot ... {wgmma='async'}

  and which TMA tiles outside a ring the dots read in place (``descriptor_load ... {in_place=True}``,
  and the 2-D ``trans`` they are read through).

- ``warp_specialize``: at most one loop per kernel gets a producer warp that fills its TMA ring::

      scf.for ... {ws={producer_warps=1, setmaxnreg=False, release='at_issue', pingpong=False}}

- ``schedule_wgmma``: in a warp-specialised loop with several wgmma dots (or a pipelined loop whose
  body issues a dot before it reads an earlier dot's result), where each result is
  waited for (``wgmma='deferred'``: at its first read; ``pin_wait=True`` when code runs before that
  read, so that ptxas keeps the wait there) and which dot the two consumer warpgroups issue in turns
  (``wgmma_turns=True``, ping-pong; ``'take'``/``'give'`` on the first/last of dots issued back to
  back, FA3's order).

The decisions follow measurements and knobs documented in docs/performance.md; the knobs are read
here (kernelc/options), never in codegen.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ...language.dtypes import scalar_of, shape_of
from ...options import get
from .. import target_rules as R
from ..codegen.descriptors import operand_orientation, smem_servable
from ..codegen.dot import MMA_SHAPES, choose_trans
from ..codegen.memory import vector_width
from ..ir.core import Block, Function, Op, Value
from .layout_assign import REMATERIALIZABLE
from .ws_consumers import specialised_loop
from .schedule_ir import CP_ASYNC, REFILL_AFTER_DOTS, TMA, address_chain, function_uses, in_place_readers, loop_path, ringed_operands
from .schedule_ir import body_defs as _body_defs, body_uses as _uses


class _Facts:
    """What the scheduling rules read about the kernel: the IR, its layout plan and axis info (the
    shape of the lowering's view, so the shared legality helpers take either)."""

    def __init__(self, fn: Function, plan, axis, num_warps: int, num_stages: int, arch: str):
        self.fn, self.plan, self.axis, self.nw, self.num_stages, self.arch = fn, plan, axis, num_warps, num_stages, arch
        self.defs: Dict[int, Op] = {}
        for op in fn.walk():
            for r in op.results:
                self.defs[r.id] = op

    def is_tile(self, v: Value) -> bool:
        return bool(shape_of(v.type))


def _facts(fn: Function, ctx) -> _Facts:
    return _Facts(fn, ctx.plan, ctx.axis, ctx.num_warps, ctx.num_stages, ctx.arch)


# -- schedule_pipelines -----------------------------------------------------------------------------


def _cp_async_loads(f: _Facts, body: Block, defs, uses) -> List[Tuple[Op, int, Optional[Op]]]:
    """(load, vector width, trans or None) per dot operand that reads a plain load cp.async can copy.

    A load joins the ring when every use is an operand of a dot of this loop body, directly or through one
    2-D ``trans`` view with no other use, and one reader reads it directly: that reader's layout choice
    (``choose_trans``) fixes which tile dim runs along the stage's rows, and every other view reads the
    same bytes in the orientation that follows (``operand_orientation``). Several readers only on wgmma
    (the attention backward's dQ loop reads K^T as the B of Q K^T and, transposed, of dS K)."""
    out = []
    top = {id(o) for o in body.ops}
    views = get("KERNELC_RING_VIEWS")
    for lop in body.ops:
        if lop.name != "load":
            continue
        readers = in_place_readers(uses, lop.results[0])
        if not readers or not all(d.name == "dot" and id(d) in top and i in (0, 1) and d.attrs.get("engine") != "fma"
                                  and f.plan.get(d.results[0]) is not None for d, i, _ in readers):
            continue
        direct = [(d, i) for d, i, via in readers if via is None]
        if not direct or (len(readers) > 1
                          and (not views or any(d.attrs.get("engine") != "wgmma" for d, _, _ in readers))):
            continue
        if len(lop.operands) > 2:
            other = f.defs.get(lop.operands[2].id)
            if other is None or other.name != "constant" or other.attrs["value"] != 0:
                continue
        # cp.async copies at least 4 bytes, along the shared-memory row (it cannot transpose: an fp32
        # B with N contiguous is stored K-major for tf32, so it keeps the register path)
        elt = scalar_of(lop.results[0].type)
        L = f.plan.get(lop.results[0])
        mask = lop.operands[1] if len(lop.operands) > 1 else None
        vec = vector_width(f, lop.operands[0], mask, L, elt.itemsize)
        run_dim = next((d for d in range(L.rank) if L.reg and L.reg[0][d]), None)
        is_a = direct[0][1] == 0
        trans = choose_trans(L, elt.itemsize, is_a)
        row_col = ((1, 0) if trans else (0, 1)) if is_a else ((0, 1) if trans else (1, 0))
        if vec * elt.itemsize < 4 or elt.name not in MMA_SHAPES or run_dim != row_col[1]:
            continue
        if len(readers) > 1:
            seen = {}
            ok = True
            for d, i, via in readers:
                t = operand_orientation(i == 0, via is not None, row_col[0])
                ok = ok and smem_servable(f, d, i, t, elt) and seen.setdefault((via or lop).results[0].id, t) == t
            if not ok:
                continue
        out += [(lop, vec, via) for _, _, via in readers]
    return out


def _tma_loads(f: _Facts, body: Block, defs, uses) -> List[Tuple[Op, Optional[Op]]]:
    """(descriptor_load, trans or None) for each dot operand that reads a ringable TMA tile in place.

    A tile joins the ring when every use is an operand of a dot of this loop body (directly or through
    one 2-D ``trans`` view with no other use) that wgmma can read from shared memory, each view in one
    orientation: one copy per stage then serves all its readers (the attention backward reads dO as the
    B of P^T dO and, transposed, of V dO^T). A tile with one entry per reader."""
    out = []
    top = {id(o) for o in body.ops}
    for src in body.ops:
        if src.name != "descriptor_load":
            continue
        readers = in_place_readers(uses, src.results[0])
        if not readers or not all(d.name == "dot" and id(d) in top and i in (0, 1) for d, i, _ in readers):
            continue
        elt = scalar_of(src.results[0].type)
        if all(smem_servable(f, d, i, operand_orientation(i == 0, via is not None), elt) for d, i, via in readers) \
                and _one_orientation_per_view(src, readers):
            out += [(src, via) for _, _, via in readers]
    return out


def _chains_only_into_itself(dot: Op, body: Block, uses) -> bool:
    """The dot's result is yielded, and the carried value it becomes is only this dot's acc. Besides the
    yield, only ops inside an ``scf.if`` after the dot may read the result (a flattened loop's epilogue,
    passes/flatten_loops.py): ``place_wgmma_waits`` waits for it inside that branch."""
    yld = body.ops[-1]
    r_uses = uses.get(dot.results[0].id, [])
    y_uses = [u for u in r_uses if u[0] is yld]
    if len(y_uses) != 1 or any(not _in_branch_after(u[0], dot, body) for u in r_uses if u[0] is not yld):
        return False
    a_uses = uses.get(body.args[1 + y_uses[0][1]].id, [])
    return len(a_uses) == 1 and a_uses[0][0] is dot and a_uses[0][1] == 2


def _in_branch_after(op: Op, dot: Op, body: Block) -> bool:
    """``op`` is nested in an ``scf.if`` of ``body`` that comes after ``dot``."""
    top = op
    while top.block is not None and top.block is not body:
        if top.block.parent is None:
            return False
        top = top.block.parent
    return top is not op and top.name == "scf.if" and top.block is body and \
        body.ops.index(top) > body.ops.index(dot)


def async_dots(f: _Facts, loop: Op, has_cp: bool, has_tma: bool, tma_values: set, staged_outside: bool):
    """(wgmma dots that may stay in flight across iterations, lookahead) of a pipelined loop.

    A TMA ring refills stage i-1 after iteration i's dots, so one wgmma group may stay in flight with the
    full S-1 lookahead -- if every operand the dots read is in shared memory for the whole iteration
    (TMA-ringed tiles; operands from outside the loop when ``staged_outside``: codegen stages those into
    shared memory before the loop). On by default (KERNELC_WGMMA_ASYNC=0 turns it off). A cp.async ring
    keeps the full S-1 lookahead too when its copies are issued after the dots (``refill='after_dots'``,
    Triton's order: ``wait_group 1`` has retired iteration i-1's wgmma, whose stage they overwrite); on by
    default since 2026-11-27 (+6-8% on an H200, docs/performance.md, "wgmma"), KERNELC_WGMMA_ASYNC=0 turns it
    off for both kinds of ring."""
    body = loop.regions[0]
    stages = loop.attrs.get("num_stages", f.num_stages)
    uses = _uses(body)
    dots = [o for o in body.ops if o.name == "dot" and o.attrs.get("engine") == "wgmma"]
    chaining = dots and all(_chains_only_into_itself(o, body, uses) for o in dots) \
        and not any(o.name == "dot" and o.attrs.get("engine") != "wgmma" for o in body.ops)
    inner = {r.id for o in body.ops for t in o.walk() for r in t.results} | {a.id for a in body.args}

    def served(v: Value) -> bool:
        if v.id in tma_values:
            return True
        return staged_outside and v.id not in inner and scalar_of(v.type).name in MMA_SHAPES

    knob = get("KERNELC_WGMMA_ASYNC")
    if has_tma:
        if knob in ("default", "on") and chaining and not has_cp and \
                all(served(o.operands[i]) for o in dots for i in (0, 1)):
            return dots, stages - 1
        return [], stages - 1
    if knob in ("default", "on") and chaining:
        return dots, stages - 1
    return [], stages - 1


def schedule_pipelines(fn: Function, ctx) -> Function:
    """Tag every loop whose dot operands get a shared-memory ring (see the module docstring)."""
    f = _facts(fn, ctx)
    for op in fn.walk():
        if op.name == "scf.for":
            _schedule_loop(f, op)
    # TMA tiles outside a ring whose every reader is a tensor-core dot operand stay where the copy put
    # them: the dots read them in place (codegen/descriptors.py), else they are read back into registers
    uses = function_uses(fn)
    for op in fn.walk():
        if op.name != "descriptor_load" or op.attrs.get("pipeline"):
            continue
        res = op.results[0]
        readers = in_place_readers(uses, res)
        elt = scalar_of(res.type)
        if readers and all(d.name == "dot" and i in (0, 1) and
                           smem_servable(f, d, i, operand_orientation(i == 0, via is not None), elt)
                           for d, i, via in readers) and _one_orientation_per_view(op, readers):
            op.attrs["in_place"] = True
            for _, _, via in readers:
                if via is not None:
                    via.attrs["in_place"] = True
    return fn


def _one_orientation_per_view(load: Op, readers) -> bool:
    """Whether the dots read each value (the loaded tile, or a trans view of it) in one orientation.
    Codegen keeps one shared-memory view per value: a tile that one dot reads K-major and another N-major
    (K as wgmma's A in K Q^T and as the B of dS^T K: the attention backward's atomic dQ) goes through
    registers; read in place it gave wrong results on an H100 (2026-11-27, tests/gpu/test_gpu_tma.py)."""
    seen = {}
    for _, i, via in readers:
        trans = operand_orientation(i == 0, via is not None)
        if seen.setdefault((via or load).results[0].id, trans) != trans:
            return False
    return True


def _schedule_loop(f: _Facts, op: Op) -> None:
    stages = op.attrs.get("num_stages", f.num_stages)
    if stages is None or stages < 2:
        return
    body = op.regions[0]
    defs, uses = _body_defs(body), _uses(body)
    cp = _cp_async_loads(f, body, defs, uses)
    tma = _tma_loads(f, body, defs, uses)
    if not cp and not tma:
        return
    cp_loads = list({id(ld): ld for ld, _, _ in cp}.values())
    if address_chain(op, cp_loads, [t for t, _ in tma]) is None:
        return
    rows = _register_tiles(f, op, cp_loads, tma, uses)
    tma_values = {(via or t).results[0].id for t, via in tma}
    dots, lookahead = async_dots(f, op, bool(cp), bool(tma), tma_values, staged_outside=True)
    if not dots:
        dots = _async_tail(f, op, bool(cp), bool(tma))
    op.attrs["pipeline"] = {"stages": stages, "lookahead": lookahead}
    if dots and cp and not tma:
        # the stage a copy overwrites is the one the wgmma left in flight last iteration was reading:
        # the copies go after this iteration's dots, whose wait_group 1 retires it (docs/schedule-ir.md)
        op.attrs["pipeline"]["refill"] = REFILL_AFTER_DOTS
    for ld, vec, via in cp:
        ld.attrs["pipeline"] = {"ring": CP_ASYNC, "vec": vec}
        if via is not None:
            via.attrs["pipeline"] = {"ring": CP_ASYNC}
    for t, via in tma:
        t.attrs["pipeline"] = {"ring": TMA}
        if via is not None:
            via.attrs["pipeline"] = {"ring": TMA}
    for t in rows:
        t.attrs["pipeline"] = {"ring": TMA, "registers": True}
    for d in dots:
        d.attrs["wgmma"] = "async"


def _reaches_a_dot(v: Value, uses) -> bool:
    """A dot reads ``v`` as an operand, directly or through views (trans, reshape, convert_layout): a dot operand
    left out of the ring for its own reasons (two orientations of one tile), which stays as it was."""
    todo, seen = [v], set()
    while todo:
        x = todo.pop()
        if x.id in seen:
            continue
        seen.add(x.id)
        for u, i in uses.get(x.id, []):
            if u.name == "dot" and i in (0, 1):
                return True
            if u.name in ("trans", "reshape", "convert_layout"):
                todo.append(u.results[0])
    return False


def _register_tiles(f: _Facts, op: Op, cp_loads, tma, uses) -> List[Op]:
    """TMA tiles of the loop body that no dot reads (attention backward's LSE and delta rows), which ride in the
    ring the dots' TMA tiles already have: each stage's barrier then covers them too, and the body reads them from
    shared memory into registers after the wait (FlashAttention-3's LSE/dPsum) instead of a copy and a wait of their
    own each trip (a ``descriptor_load`` outside a ring). Only with a TMA ring and no cp.async one (a warp-specialised
    loop's ring is TMA only), and where their offsets re-evaluate with the ring's (the address chain)."""
    if not tma or cp_loads:
        return []
    body = op.regions[0]
    defs = _body_defs(body)  # the descriptor is made outside the loop
    ringed = {id(t) for t, _ in tma}
    rows = []
    for o in body.ops:
        if o.name != "descriptor_load" or id(o) in ringed or not o.attrs.get("tma") or o.operands[0].id in defs:
            continue
        if _reaches_a_dot(o.results[0], uses):
            continue
        rows.append(o)
    if rows and address_chain(op, [], [t for t, _ in tma] + rows) is None:
        return []
    return rows


def _async_tail(f: _Facts, loop: Op, has_cp: bool, has_tma: bool) -> List[Op]:
    """The body's last dot, left in flight across the back edge (KERNELC_WGMMA_ASYNC_TAIL), when the loop's dots
    do not all chain into themselves (so :func:`async_dots` keeps none): a wgmma dot after which no other dot
    comes and whose result only its own accumulator reads (``on``), or whose carried value is only rescaled
    after the next trip's first dot (``on`` or ``rescaled``: :func:`_rescaled_into_itself`). The next iteration's first wait
    retires it, before the ring's refill (issued after the dots, into the stage it read); an A operand in
    registers stays valid for it (ptxas tracks the registers an in-flight wgmma reads). Triton's tutorial 06
    backward leaves dK += dS^T Q and dQ += dS K in flight this way."""
    tail = get("KERNELC_WGMMA_ASYNC_TAIL")
    asked = loop.attrs.get("async_tail")  # tl.range(..., async_tail=): this loop's own request
    if asked is not None:
        tail = "on" if asked else "off"
    if tail == "off" or get("KERNELC_WGMMA_ASYNC") == "off":
        return []
    body = loop.regions[0]
    if any(t.name == "dot" for o in body.ops for t in o.walk() if t.block is not body):
        return []
    dots = [o for o in body.ops if o.name == "dot"]
    if len(dots) < 2 or any(o.attrs.get("engine") != "wgmma" for o in dots):
        return []
    last = dots[-1]
    uses = _uses(body)
    if last.attrs.get("max_num_imprecise_acc") is not None or not (
            (tail == "on" and _chains_only_into_itself(last, body, uses)) or
            _rescaled_into_itself(last, dots[0], body, uses)):
        return []
    if tail == "auto" and not _rescaled_tail_fits(f, has_cp, has_tma, dots[0], last):
        return []
    return [last]


# KERNELC_WGMMA_ASYNC_TAIL=auto (the default): P V stays in flight when a thread holds at least AUTO_TAIL_MIN_S of the
# first dot's fp32 results (S), at least AUTO_TAIL_MIN_ACC of the rescaled accumulator, and at most AUTO_TAIL_MAX_LIVE
# of both together. Tutorial 06's fp8 loop at d128 128x64 s4 (64 + 128 a thread) measured 5-9% faster with it
# (H200), where smaller accumulators gained less or lost: d128 64x128 (64 + 64) +0.3-0.8%, d64 128x64 fp16 (64 + 64)
# +2.7% within a 3-4% spread, d64 64x64 (32 + 32) 2% slower, the pointer fp8 forward at D=64 (64 + 64 then) 5-19%
# slower; at 128x128 on 4 warps (128 + 128) both compilers spill and ptxas serialises every wgmma either way
# (docs/triton-tutorials.md, "06's fp8 forward at head dim 128").
AUTO_TAIL_MIN_S = 64
AUTO_TAIL_MIN_ACC = 128
AUTO_TAIL_MAX_LIVE = 192


def _rescaled_tail_fits(f: _Facts, has_cp: bool, has_tma: bool, first: Op, last: Op) -> bool:
    """``auto``'s rule for the forward's rescaled tail: a loop whose dots read only TMA rings, in a kernel without
    a producer warp (the pointer forward at D=128 is specialised, and with the tail ptxas serialised its wgmmas
    under the producer's register cap), with S and the accumulator in the bounds above."""
    if has_cp or not has_tma:
        return False
    policy = get("KERNELC_WARP_SPECIALIZE")
    for op in f.fn.walk():
        if op.name == "scf.for" and (op.attrs.get("warp_specialize") or (
                op.attrs.get("warp_specialize") is None and _wanted_by_default(op, policy, f.nw))):
            return False
    threads = 32 * f.nw
    elems = [_numel(first.results[0]) // threads, _numel(last.results[0]) // threads]
    return elems[0] >= AUTO_TAIL_MIN_S and elems[1] >= AUTO_TAIL_MIN_ACC and sum(elems) <= AUTO_TAIL_MAX_LIVE


def _numel(v: Value) -> int:
    n = 1
    for d in shape_of(v.type):
        n *= d
    return n


def _rescaled_into_itself(dot: Op, first: Op, body: Block, uses) -> bool:
    """The dot's result is only yielded, and the carried value it becomes is read once: by an elementwise op
    after the body's first dot whose result is only this dot's acc (attention's ``acc * alpha[:, None]`` before
    ``acc += P V``, tutorial 06's forward). The first dot is waited for at once (pending 0), which retires the
    tail too, and ``place_wgmma_waits`` takes the carried value through that wait, so the rescale reads it
    after it -- Triton's order: P V of one block runs under the next block's Q K^T issue and wait."""
    from ..ir.ops import OPS
    yld = body.ops[-1]
    r_uses = uses.get(dot.results[0].id, [])
    if len(r_uses) != 1 or r_uses[0][0] is not yld or first is dot or first.attrs.get("wgmma"):
        return False
    a_uses = uses.get(body.args[1 + r_uses[0][1]].id, [])
    if len(a_uses) != 1:
        return False
    scale = a_uses[0][0]
    spec = OPS.get(scale.name)
    if scale.block is not body or spec is None or not spec.elementwise or len(scale.results) != 1 or \
            body.ops.index(scale) < body.ops.index(first):
        return False
    s_uses = uses.get(scale.results[0].id, [])
    return len(s_uses) == 1 and s_uses[0][0] is dot and s_uses[0][1] == 2


# -- warp_specialize --------------------------------------------------------------------------------


# ``auto`` specialises loops with two or more dots in kernels of at least this many warps: two consumer
# warpgroups, so one's softmax overlaps the other's dots (single-dot matmul loops and 4-warp attention
# measured slower specialised; docs/performance.md, "Warp specialisation").
AUTO_MIN_WARPS = 8
PRODUCER_WARPS = 1


def _wanted_by_default(op: Op, policy: str, num_warps: int) -> bool:
    if policy != "auto":
        return policy == "all"
    return num_warps >= AUTO_MIN_WARPS and sum(o.name == "dot" for o in op.regions[0].ops) >= 2


def warp_specialize(fn: Function, ctx) -> Function:
    """Pick the loop (at most one per kernel) whose TMA ring a producer warp fills; tag it ``ws``.
    ``kl.range(..., warp_specialize=True)`` asks for it, ``False`` refuses it; other loops follow
    KERNELC_WARP_SPECIALIZE (``auto``/``all``/``none``). A tile loop that asks for it with no dot of
    its own (tutorial 09's persistent ``_ws`` kernel) has its one K loop specialised: the producer runs
    the tile loop's skeleton around the K loop's copies (``expand_warp_specialize``), the consumers the
    tile loop whole, epilogue included (passes/ws_consumers.py: ``specialised_loop``)."""
    if not R.arch_has_wgmma(ctx.arch):
        return fn
    f = _facts(fn, ctx)
    policy = get("KERNELC_WARP_SPECIALIZE")
    loops = [op for op in fn.walk() if op.name == "scf.for"]
    for i, op in enumerate(loops):
        asked = op.attrs.get("warp_specialize")
        if asked is False or (asked is None and not _wanted_by_default(op, policy, f.nw)):
            continue
        target = specialised_loop(op) if asked else op
        if target is not None and target is not op and target.attrs.get("warp_specialize") is False:
            target = None
        why = "no loop in it holds the dots (or several do)" if target is None else _why_not(f, target)
        if why is not None:
            if asked:
                f.plan.notes.append(f"{op.loc.file}:{op.loc.line}: loop not warp-specialised: {why}")
            continue
        if target is not op:
            f.plan.notes.append(f"{op.loc.file}:{op.loc.line}: warp specialisation asked here runs the loop of "
                                f"line {target.loc.line}: the producer repeats this loop's bounds around its copies")
        _tag_ws(f, target)
        # one producer per kernel: a later loop that asks for one is told, not silently left without it
        for other in loops[i + 1:]:
            if other.attrs.get("warp_specialize") and other is not target:
                f.plan.notes.append(f"{other.loc.file}:{other.loc.line}: loop not warp-specialised: the kernel's "
                                    f"producer warp serves the loop of line {target.loc.line} (one per kernel)")
        return fn
    return fn


def _tag_ws(f: _Facts, op: Op) -> None:
    cp, tma = ringed_operands(op)
    # the stage a consumer read is released one iteration late when its wgmma group stays in flight;
    # the same rule as schedule_pipelines' (operands staged before the loop count as served), else a dot
    # tagged async would have its ring stage released at issue and refilled while it still reads it
    tma_values = {(via or t).results[0].id for t, _, _, via in tma}
    lagged, _ = async_dots(f, op, bool(cp), bool(tma), tma_values, staged_outside=True)
    if not lagged:
        lagged = _ws_async_tail(f, op)
    if not lagged:  # an async tail (KERNELC_WGMMA_ASYNC_TAIL) is for loops without a producer warp
        for o in op.regions[0].ops:
            if o.name == "dot" and o.attrs.get("wgmma") == "async":
                del o.attrs["wgmma"]
    # registers move to the consumers when asked (on), or (auto) when a wgmma stays in flight across other
    # work of the iteration (FlashAttention-3's order: this block's PV during the next block's softmax):
    # with the one-warp producer's 168 registers ptxas serialises those wgmmas (C7512) and spills
    knob = get("KERNELC_WS_SETMAXNREG")
    overlap = any(_pinned(o, op.regions[0]) for o in (_deferrable(f.plan, op.regions[0]) or
                                                       _besides_async_tail(f.plan, op.regions[0])))
    setmaxnreg = f.nw == 8 and (knob == "on" or (knob == "auto" and overlap))
    dots = [o for o in op.regions[0].ops if o.name == "dot"]
    op.attrs["ws"] = {"producer_warps": 4 if setmaxnreg else PRODUCER_WARPS, "setmaxnreg": bool(setmaxnreg),
                      "release": "lagged" if lagged else "at_issue",
                      "pingpong": bool(get("KERNELC_WS_PINGPONG") and f.nw == 8 and len(dots) >= 2)}
    # the consumers' share (KERNELC_WS_CONSUMER_REGS): auto gives 240 (the producer keeping 24, FA3's split) to a
    # loop whose carried fp32 dot accumulators alone take CARRIED_ACC_REGS a consumer thread (the attention
    # backward's dK and dV: 128 at D=128 over two warpgroups), else 232; written only where not 232
    want = get("KERNELC_WS_CONSUMER_REGS")
    if want == "auto":
        want = "240" if _carried_acc_regs(op, f.nw) >= CARRIED_ACC_REGS else "232"
    if setmaxnreg and want != "232":
        op.attrs["ws"]["consumer_regs"] = int(want)


#: the ring stages a warp-specialised loop needs to keep its own async tail: released one iteration late, a stage is
#: refilled S - 2 iterations ahead of its use (with 2 the producer would wait for the consumers every iteration)
WS_TAIL_MIN_STAGES = 3


def _ws_async_tail(f: _Facts, op: Op) -> List[Op]:
    """The async tail :func:`_async_tail` left on a loop that asked for it itself (``tl.range(...,
    async_tail=True)``), kept under a producer warp: its stages are then released one iteration late
    (``release='lagged'``: the tail dot still reads its stage after the back edge; the next iteration's first wait
    retires it, and the consumers release the stage after that iteration's dots), the other dots' waits deferred
    as without a producer (:func:`_besides_async_tail`). Only the loop's own request (the knob's ``on`` stays for
    loops without a producer), with at least WS_TAIL_MIN_STAGES stages; else none (the compile log says why)."""
    tail = [o for o in op.regions[0].ops if o.name == "dot" and o.attrs.get("wgmma") == "async"]
    if not tail or op.attrs.get("async_tail") is not True:
        return []
    stages = op.attrs.get("pipeline", {}).get("stages", 0)
    if stages < WS_TAIL_MIN_STAGES:
        f.plan.notes.append(f"{op.loc.file}:{op.loc.line}: async tail dropped under the producer warp: "
                            f"{stages} stages, it needs {WS_TAIL_MIN_STAGES} (its stages are released a trip late)")
        return []
    return tail


#: carried fp32 accumulator registers a consumer thread from which KERNELC_WS_CONSUMER_REGS=auto gives it 240
CARRIED_ACC_REGS = 128


def _carried_acc_regs(op: Op, nw: int) -> int:
    """Registers a thread of ``nw`` warps holds for the loop's carried fp32 tiles that a dot of its body accumulates
    into (its ``acc`` operand is the carried value)."""
    body = op.regions[0]
    accs = {o.operands[2].id for o in body.ops if o.name == "dot" and len(o.operands) > 2}
    n = 0
    for v in body.args[1:]:
        if v.id in accs and scalar_of(v.type).name == "fp32":
            size = 1
            for d in shape_of(v.type):
                size *= d
            n += size
    return n // (32 * nw)


def _const(f: _Facts, v: Value) -> Optional[int]:
    d = f.defs.get(v.id)
    return int(d.attrs["value"]) if d is not None and d.name == "constant" else None


def _why_not(f: _Facts, op: Op) -> Optional[str]:
    for p in loop_path(op):
        if p.name != "scf.for":
            return f"it is inside `{p.name}` (only `for` loops may enclose it)"
        step = _const(f, p.operands[2])
        if step is None or step <= 0:
            return "a loop step is not a positive constant"
    cp, tma = ringed_operands(op) if op.attrs.get("pipeline") else ([], [])
    if not tma:
        return "no tensor-descriptor (TMA) loads feed its dots"
    if cp:
        return "some dot operands are loaded through pointers (cp.async)"
    body = op.regions[0]
    dots = [o for o in body.ops if o.name == "dot"]
    if not dots or any(o.attrs.get("engine") != "wgmma" for o in dots):
        return "not every dot in it runs on wgmma"
    if any(o.name == "dot" for t in body.ops for o in t.walk() if o.block is not body):
        return "a dot is nested in control flow inside it"
    chain, carried_idx = address_chain(op, [], [t for t, _, _, _ in tma])
    if any(c.regions for c in chain):
        return "the copies' offsets are computed under a branch (a flattened loop's next tile)"
    if any(shape_of(c.results[0].type) for c in chain if c.results):
        return "the copies' offsets are computed from tiles"
    carried = body.args[1:]
    if any(shape_of(carried[i].type) for i in carried_idx):
        return "the copies' offsets are loop-carried tiles"
    # what the producer computes outside the loop body: bounds of every loop on the path, the carried
    # offsets' initial values, the chain's loop-invariant inputs
    inner = {r.id for o in body.ops for t in o.walk() for r in t.results} | {a.id for a in body.args}
    need = [v for p in loop_path(op) for v in p.operands[:3]] + [op.operands[3 + i] for i in carried_idx]
    need += [v for c in chain for v in c.operands if v.id not in inner]
    ivs = {p.regions[0].args[0].id for p in loop_path(op)}
    args = {a.id for a in f.fn.body.args}
    seen = set()
    while need:
        v = need.pop()
        if v.id in seen or v.id in args or v.id in ivs:
            continue
        seen.add(v.id)
        d = f.defs.get(v.id)
        if d is None:
            return "the copies' offsets depend on a value carried by an enclosing loop"
        if shape_of(v.type) or (d.name not in REMATERIALIZABLE and d.name not in ("program_id", "num_programs")):
            return f"the copies' offsets depend on `{d.name}`"
        need.extend(d.operands)
    return None


# -- schedule_wgmma ---------------------------------------------------------------------------------


def _back_to_back_dots(body: Block) -> List[Op]:
    """The body's first dot and the dots issued right after it (only ring tiles, which the producer
    copies, in between)."""
    ops = body.ops
    i = next(k for k, o in enumerate(ops) if o.name == "dot")
    run = [ops[i]]
    for o in ops[i + 1:]:
        if o.name == "dot":
            run.append(o)
        elif not (o.name in ("descriptor_load", "trans") and o.attrs.get("pipeline")):
            break
    return run


def _deferrable(plan, body: Block) -> List[Op]:
    """The wgmma dots of a warp-specialised loop body whose waits move to their first reads: two or more,
    none in flight across iterations (KERNELC_WGMMA_DEFER)."""
    dots = [o for o in body.ops if o.name == "dot" and o.attrs.get("engine") == "wgmma"]
    if get("KERNELC_WGMMA_DEFER") and len(dots) >= 2 and not any(o.attrs.get("wgmma") == "async" for o in dots) \
            and all(o.attrs.get("max_num_imprecise_acc") is None for o in dots) \
            and not any(t.name == "dot" for o in body.ops for t in o.walk() if t.block is not body):
        return dots
    return []


def _pinned(dot: Op, body: Block) -> bool:
    return bool(get("KERNELC_WGMMA_PIN_WAITS")) and _overlaps_other_results(dot, body)


def _overlaps_other_results(dot: Op, body: Block) -> bool:
    """Whether, between ``dot``'s issue and the first op of the body that reads its result (the yield --
    the end of the iteration, where everything is waited for -- does not count), an op reads another
    dot's result: FlashAttention-3's order, where this block's PV stays on the tensor cores while the
    softmax reads the next block's scores. Only such a wait is worth pinning (ptxas would move it above
    that work and serialise the two), and only such a loop needs the registers of two live results."""
    rid = dot.results[0].id
    others = {o.results[0].id for o in body.ops if o.name == "dot" and o is not dot}
    ops = body.ops
    seen = False
    for o in ops[ops.index(dot) + 1:]:
        if o.name == "scf.yield":
            return False
        reads = {v.id for t in o.walk() for v in t.operands}
        if rid in reads:
            return seen
        seen = seen or bool(reads & others)
    return False


def _ring_deferrable(plan, op: Op) -> List[Op]:
    """The wgmma dots of a pipelined loop no producer warp fills whose waits move to their first reads
    (KERNELC_WGMMA_DEFER_RING): as in a warp-specialised loop, but only when the body already issues a dot
    before reading an earlier dot's result (the attention backward's ``dP = dO V^T`` issued with ``S``, its
    wgmma running under the softmax recompute). Otherwise deferring moves waits and overlaps nothing (a
    matmul, FA2's forward order). The ring is refilled after the dots into the stage the previous
    iteration read, and every deferred group is complete at the back edge, so no wgmma in flight reads
    a stage being refilled."""
    if not get("KERNELC_WGMMA_DEFER_RING"):
        return []
    body = op.regions[0]
    dots = _deferrable(plan, body) or _besides_async_tail(plan, body)
    if any(_overlaps_other_results(d, body) for d in dots):
        return dots
    if get("KERNELC_WGMMA_DEFER_ACC") and any(_only_accumulates_before_a_dot(d, body) for d in dots):
        return dots
    return []


def _besides_async_tail(plan, body: Block) -> List[Op]:
    """With a dot left in flight by :func:`_async_tail`: the other wgmma dots, deferrable as
    :func:`_deferrable`'s (two or more, no fp8 promotion, no dot in a nested region)."""
    dots = [o for o in body.ops if o.name == "dot" and o.attrs.get("engine") == "wgmma"]
    rest = [o for o in dots if o.attrs.get("wgmma") != "async"]
    if len(rest) == len(dots) or len(rest) < 2 or not get("KERNELC_WGMMA_DEFER"):
        return []
    if any(o.attrs.get("max_num_imprecise_acc") is not None for o in rest) or \
            any(t.name == "dot" for o in body.ops for t in o.walk() if t.block is not body):
        return []
    return rest


def _only_accumulates_before_a_dot(dot: Op, body: Block) -> bool:
    """Whether the body reads ``dot``'s result only in the yield (an accumulator carried to the next
    iteration) and issues another dot after it (KERNELC_WGMMA_DEFER_ACC): deferred, its group runs back to
    back with the next dot's and is waited for with it (the attention backward's dV += P^T dO, then
    dP^T = V dO^T, as Triton's tutorial 06 issues them)."""
    rid = dot.results[0].id
    ops = body.ops
    later = ops[ops.index(dot) + 1:]
    if not any(o.name == "dot" for o in later):
        return False
    return all(o.name == "scf.yield" for o in later if rid in {v.id for t in o.walk() for v in t.operands})


def schedule_wgmma(fn: Function, ctx) -> Function:
    """In the warp-specialised loop: with two or more wgmma dots and none in flight across iterations,
    wait for each result where it is first read (``wgmma='deferred'``, FlashAttention-3's order: the
    next QK^T overlaps this block's softmax; KERNELC_WGMMA_DEFER); with ping-pong, the loop's first dot
    is issued in turns by the two consumer warpgroups (``wgmma_turns``). In a pipelined loop without a
    producer warp, the same deferred waits where the body's order overlaps one dot with another's
    consumer (:func:`_ring_deferrable`)."""
    plan = ctx.plan
    for op in fn.walk():
        if op.name != "scf.for":
            continue
        ws = op.attrs.get("ws")
        if not ws:
            if op.attrs.get("pipeline"):
                for o in _ring_deferrable(plan, op):
                    o.attrs["wgmma"] = "deferred"
                    if _pinned(o, op.regions[0]):
                        o.attrs["pin_wait"] = True
            continue
        body = op.regions[0]
        # a loop's own async tail kept under the producer (_ws_async_tail): the other dots' waits deferred beside it
        for o in _deferrable(plan, body) or _besides_async_tail(plan, body):
            o.attrs["wgmma"] = "deferred"
            if _pinned(o, body):
                o.attrs["pin_wait"] = True
        if ws.get("pingpong"):
            run = _back_to_back_dots(body)
            if len(run) == 1:
                run[0].attrs["wgmma_turns"] = True
            else:  # FA3's order: one turn covers the next block's QK^T and this block's PV
                run[0].attrs["wgmma_turns"], run[-1].attrs["wgmma_turns"] = "take", "give"
    _step_gemm_descriptors(fn, ctx)
    return fn


def _step_gemm_descriptors(fn: Function, ctx) -> None:
    """A kernel with one dot (a GEMM's K loop): ``wgmma_desc='stepped'``, its operands' descriptors built once
    per dot and stepped along K (one 64-bit add per k step, where rebuilding one from the address costs a
    shift, a mask and an or per wgmma). Kernels with several dots keep the per-step build: stepping held the
    descriptors live across attention backward's dots and it spilled (KERNELC_WGMMA_DESC_STEPPED)."""
    from ...options import get
    if tuple(getattr(ctx, "capability", (0, 0))) < (9, 0) or not get("KERNELC_WGMMA_DESC_STEPPED"):
        return
    dots = [op for op in fn.walk() if op.name == "dot"]
    if len(dots) == 1 and dots[0].attrs.get("engine") == "wgmma":   # an mma.sync or FMA dot has no descriptors
        dots[0].attrs["wgmma_desc"] = "stepped"
