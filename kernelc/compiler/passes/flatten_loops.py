"""``flatten_loops``: a loop over tiles that holds one loop over K, asked for with
``tl.range(..., flatten=True)``, becomes one loop over (tile, k) pairs (docs/schedule-ir.md, "Flattened
loops"). By default (``KERNELC_FLATTEN_LOOPS=auto``) a loop whose K loop loads through TMA alone, or through
pointers alone with their tile values carried, and that asks for no warp specialisation: those measured faster
flattened (see :func:`why_not_by_default`).

Why: a ring (``schedule_pipelines``) is built for the innermost loop. Nested, it fills and drains once
per tile (a persistent matmul at K = 512 with BK = 64: a prologue every 8 steps). Flattened, the copies of
tile t+1's first K steps are issued while tile t's last steps and its epilogue run.

Before (``P``: the ops of the tile loop before the K loop, ``E``: those after it)::

    %r = scf.for %lb, %ub, %st, %o0 {flatten=True}
      ^body(%t, %o):
        P(%t, %o)
        %acc = scf.for %klb, %kub, %kst, %init
          ^body(%k, %a):  B(%k, %a, P) ; scf.yield %a2
        E(%t, %o, P, %acc) ; scf.yield %o2

After (``n_t``/``n_k``: the trip counts, computed before the loop; the K loop's inits are
loop-invariant)::

    %f, %_.. = scf.for 0, (n_k > 0 ? n_t * n_k : 0), 1, %o0, %init, 0, 0   # the K loop's num_stages/unroll,
      ^body(%i, %o, %a, %ki, %tile):                                       # the tile loop's warp_specialize
        %t = lb + tile * st ; %k = klb + ki * kst                 # tile = i / n_k, ki = i % n_k: carried counters
        P(%t, %o)                          # pure: its tile scalars and the tile values B reads are carried
        B(%k, %a, P)                      # a zero-started accumulator's dot: dot(.., %a, use_acc=(ki != 0))
        %o', %a' = scf.if (ki == n_k - 1) { E(%t, %o, P, %a2) ; scf.yield %o2, %init }
                                             else { scf.yield %o, %a2 }     # (%a' only for other carried values)
        scf.yield %o', %a', (ki + 1) % n_k, tile + (ki + 1 == n_k)
    %r = scf.if (n_k <= 0) {                                       # no K step: the tile loop without its K loop
      scf.for %lb, %ub, %st, %f { P ; E(%acc := %init) }
    } else { scf.yield %f }

Every value the K loop's loads read is then computed by pure ops from the two counters, which advance by
pure ops of themselves, so the ring passes re-evaluate it ``lookahead`` steps ahead across a tile boundary.
The scalars ``P`` computes from the tile that anything else reads (the tile's coordinates) are carried too:
the first tile's are computed before the loop, the next tile's in ``scf.if %last { P(tile + 1) }``, so a step
that ends no tile does not recompute them (09's ``_compute_pid`` divides twice); not when ``P`` reads the tile
loop's carried values or the loop asks for a producer warp (then ``P`` runs on every step). The tile values of
``P`` the K loop reads (09's ``where(offs_am < M, offs_am, 0)`` offsets) are carried with them and made in the
same branch (``KERNELC_FLATTEN_CARRY_TILES``): a step compares and selects none; ``E`` makes the tile values it
reads itself, from the carried scalars, in its branch. (``layout_assign`` gives a carried vector the slice of the
copy it feeds: no conversion through shared memory.)

Refused (a compile-log note, the loop left nested) unless: the tile loop's body is ``P``, one ``scf.for`` and
``E``, with ``P`` only arithmetic (no loads, no side effects, no regions); both steps are positive constants;
the K loop's bounds and inits do not depend on the tile (what computes them in ``P`` is made once, before the
loop).
"""
from __future__ import annotations

from typing import Dict, List, Optional

from ...language.dtypes import int1, scalar_of, shape_of
from ...options import get
from ..ir.core import Block, Function, Op, Value, clone_deep, replace_all_uses
from ..ir.ops import OPS
from .layout_assign import REMATERIALIZABLE

FLATTEN = "flatten"
# what the tile loop's body may compute before the K loop: it runs again on every flattened step (the ring
# passes' address chains take the same ops); a load would read memory the K loop may have written since
_RECOMPUTABLE = REMATERIALIZABLE | {"program_id", "num_programs"}


def flatten_loops(fn: Function, notes: List[str], mode=None, num_warps: int = 4) -> Function:
    """Flatten every ``scf.for`` tagged ``flatten=True`` that can be (see the module docstring) and that
    ``mode`` takes (``KERNELC_FLATTEN_LOOPS``: ``on``, ``off``, or ``auto`` (the default) / ``tma``: only a loop
    :func:`why_not_by_default` lets through; True/False stand for on/off). The tag is removed either way: it
    is a request, and a loop that is not flattened says why in ``notes``. ``num_warps`` sizes the registers
    a carried tile value takes (:func:`_carry_budget`)."""
    if mode is None:
        mode = get("KERNELC_FLATTEN_LOOPS")
    mode = {True: "on", False: "off"}.get(mode, mode)
    for op in [o for o in fn.walk() if o.name == "scf.for" and o.attrs.get(FLATTEN)]:
        del op.attrs[FLATTEN]
        if mode == "off":
            continue
        why = _why_not(op)
        if why is None and mode in ("auto", "tma"):
            why = why_not_by_default(op, pointers=mode == "auto", num_warps=num_warps)
            if why is not None:
                why += f" (KERNELC_FLATTEN_LOOPS={mode}{', the default' if mode == 'auto' else ''}; =1 flattens it)"
        if why is not None:
            notes.append(f"loop at {op.loc} not flattened: {why}")
            continue
        _flatten(op, num_warps, notes)
    return fn


def why_not_by_default(outer: Op, pointers: bool = True, num_warps: int = 4) -> Optional[str]:
    """Why the defaults leave a flattenable loop nested; None if they flatten it. A K loop whose loads are all
    TMA descriptor loads (an H200 measured tutorial 09's TMA kernel 2-14% faster flattened at K = 512 and 4096),
    or with ``pointers`` all pointer loads (tutorial 09's pointer kernel, an H100; slower at K = 4096 before its
    tile values were carried: docs/triton-tutorials.md, "09 persistent pointer GEMM: the tile values carried");
    not a warp-specialised tile loop (3-7% slower at K = 4096) nor one that mixes the two kinds."""
    if outer.attrs.get("warp_specialize"):
        return "the tile loop asks for warp specialisation"
    inner = _split(outer)[1]
    loads = [o for o in inner.walk() if o.name in ("load", "descriptor_load")]
    if not loads:
        return "its K loop loads nothing"
    if all(o.name == "descriptor_load" and o.attrs.get("tma") for o in loads):
        return None
    if not pointers:
        return "its K loop loads through pointers, not only TMA descriptors"
    if any(o.name != "load" for o in loads):
        return "its K loop's loads are neither all TMA descriptor loads nor all pointer loads"
    why = _carried_tiles(outer, num_warps)[1]
    return f"its K loop loads through pointers and the tile values it reads would be recomputed on every step " \
        f"({why})" if why is not None else None


def _const(v: Value) -> Optional[int]:
    d = v.op
    return d.attrs["value"] if d is not None and d.name == "constant" and isinstance(d.attrs["value"], int) \
        and not isinstance(d.attrs["value"], bool) else None


def _split(outer: Op):
    body = outer.regions[0]
    loops = [i for i, o in enumerate(body.ops) if o.regions]
    if len(loops) != 1 or body.ops[loops[0]].name != "scf.for":
        return None
    at = loops[0]
    return body.ops[:at], body.ops[at], body.ops[at + 1:-1]


def _why_not(outer: Op) -> Optional[str]:
    parts = _split(outer)
    if parts is None:
        return "its body must hold exactly one loop (an scf.for) and no other control flow"
    pre, inner, _ = parts
    for o in pre:
        if not OPS[o.name].pure:
            return f"`{o.name}` before the inner loop has side effects (it would run on every step)"
        if o.name not in _RECOMPUTABLE:
            return f"`{o.name}` before the inner loop would run on every step (only arithmetic may)"
    inv = _invariant(outer, pre)
    for name, v in (("step", outer.operands[2]), ("inner step", inner.operands[2])):
        c = _const(v)
        if c is None or c <= 0:
            return f"its {name} must be a positive constant"
    for name, v in (("inner lower bound", inner.operands[0]), ("inner upper bound", inner.operands[1])) + tuple(
            (f"inner loop's initial value {i}", x) for i, x in enumerate(inner.operands[3:])):
        if v.op is not None and v.op in pre and id(v.op) not in inv:
            return f"the {name} depends on the outer iteration"
        if v.op is None and v.owner is outer.regions[0]:
            return f"the {name} depends on the outer iteration"
    return None


def _invariant(outer: Op, pre: List[Op]) -> set:
    """ids of the ops of ``pre`` that read no value of the tile loop's iteration (its induction variable,
    carried values, or ops of ``pre`` that do): made once, before the flattened loop."""
    varying = {a.id for a in outer.regions[0].args}
    out = set()
    for o in pre:
        if any(v.id in varying for v in o.operands):
            varying.update(r.id for r in o.results)
        else:
            out.add(id(o))
    return out


class _Builder:
    def __init__(self, loc):
        self.ops: List[Op] = []
        self.loc = loc

    def op(self, name, operands, ty, attrs=None) -> Value:
        o = Op(name, operands, [ty], attrs or {}, loc=self.loc)
        self.ops.append(o)
        return o.results[0]

    def const(self, value, ty) -> Value:
        return self.op("constant", [], ty, {"value": value})


# registers a thread may give to the K loop's accumulators and the carried tile values together (estimates below).
# Tutorial 09's pointer kernel on sm_90a, flattened: 128x128x64 at 4 warps (128 + 16) and 128x256x128 at 8 (128 +
# 24) carried without spills; 128x128x128 at 4 warps (128 + 32) spilled 288 bytes and reloaded 18 values a step,
# where recomputing the offsets did not spill (docs/triton-tutorials.md, "the tile values carried").
CARRY_REGISTERS = 152


def _carried_tiles(outer: Op, num_warps: int):
    """(the tile values of ``P`` that the K loop reads and the flattened loop carries, why those it reads are
    not carried or None): none past the register budget, without KERNELC_FLATTEN_CARRY_TILES, or when what
    computes them reads the tile loop's carried values."""
    pre, inner, _ = _split(outer)
    obody, ibody = outer.regions[0], inner.regions[0]
    inv = _invariant(outer, pre)
    tiles = [o for o in pre if id(o) not in inv and any(shape_of(r.type) for r in o.results)]
    body_read = {v.id for o in ibody.ops for t in o.walk() for v in t.operands}
    tv = [r for o in tiles for r in o.results if r.id in body_read]
    if not tv:
        return [], None
    if not get("KERNELC_FLATTEN_CARRY_TILES"):
        return [], "KERNELC_FLATTEN_CARRY_TILES is off"
    if any(v.owner is obody and v is not obody.args[0] for o in _needed(pre, tv) for v in o.operands):
        return [], "they depend on the tile loop's carried values"
    why = _carry_budget(tv, inner, 32 * num_warps)
    return ([], why) if why is not None else (tv, None)


def _carry_budget(tv: List[Value], inner: Op, threads: int) -> Optional[str]:
    """Why the tile values ``tv`` are not carried (None: they are): a thread's share of the K loop's tile-shaped
    carried values (the accumulators, fp32 in registers) plus, for each carried vector, the 16-byte vectors a
    thread copies of the tile it indexes (a row offset per vector: the most values of it a thread holds), over
    CARRY_REGISTERS."""
    ibody = inner.regions[0]
    acc = sum(_numel(a.type) * max(1, scalar_of(a.type).primitive_bitwidth // 32) for a in ibody.args[1:]
              if shape_of(a.type)) // threads
    carried = 0
    for v in tv:
        n = _numel(v.type)
        derived, ld = {v.id}, None
        for o in (t for x in ibody.ops for t in x.walk()):
            if o.name == "load" and o.operands[0].id in derived:
                ld = o
                break
            if any(x.id in derived for x in o.operands):
                derived.update(r.id for r in o.results)
        if ld is not None:
            elt = max(1, scalar_of(ld.results[0].type).primitive_bitwidth // 8)
            n = min(n, max(1, _numel(ld.results[0].type) * elt // 16 // threads))
        carried += n
    if acc + carried > CARRY_REGISTERS:
        return f"about {carried} registers a thread beside {acc} of accumulators (more than {CARRY_REGISTERS})"
    return None


def _numel(ty) -> int:
    n = 1
    for d in shape_of(ty):
        n *= d
    return n


def _needed(ops: List[Op], want) -> List[Op]:
    """The ops of ``ops`` (in order) that compute the values ``want`` (values or value ids), through one
    another."""
    need = {w if isinstance(w, int) else w.id for w in want}
    out = []
    for o in reversed(ops):
        if any(r.id in need for r in o.results):
            out.append(o)
            need.update(v.id for t in o.walk() for v in t.operands)
    return out[::-1]


def _tile_values(b: "_Builder", pre: List[Op], iv: Value, t0: Value, carried: List[Value]) -> List[Value]:
    """The first tile's ``carried`` values (coordinates, tile values), computed before the loop (as the ring
    passes evaluate a step past the end: a program without a tile computes them for a tile it does not have)."""
    env = {iv.id: t0}
    for o in _needed(pre, carried):
        b.ops.append(clone_deep(o, env))
    return [env[v.id] for v in carried]


def _zero_started_accumulators(inner: Op) -> Dict[int, int]:
    """{carried index: id(dot)} of the K loop's accumulators that start at zero and that only their dot reads
    (as its accumulator, which the loop yields): flattened, such a dot takes ``use_acc`` instead of a reset."""
    body = inner.regions[0]
    yld = body.ops[-1]
    out = {}
    for j, (init, arg) in enumerate(zip(inner.operands[3:], body.args[1:])):
        d = init.op
        if d is None or d.name != "constant" or d.attrs["value"] != 0 or not shape_of(init.type):
            continue
        readers = [(t, i) for o in body.ops for t in o.walk() for i, v in enumerate(t.operands) if v is arg]
        if len(readers) != 1:
            continue
        dot, i = readers[0]
        if dot.name == "dot" and i == 2 and len(dot.operands) == 3 and dot.block is body and \
                yld.operands[j] is dot.results[0]:
            out[j] = id(dot)
    return out


def _trip_count(b: _Builder, lb: Value, ub: Value, step: int) -> Value:
    """max(0, ceil((ub - lb) / step)) for a positive step."""
    ty = lb.type
    n = b.op("sub", [ub, lb], ty)
    if step != 1:
        n = b.op("sdiv", [b.op("add", [n, b.const(step - 1, ty)], ty), b.const(step, ty)], ty)
    return b.op("smax", [n, b.const(0, ty)], ty)


def _flatten(outer: Op, num_warps: int = 4, notes: Optional[List[str]] = None) -> None:
    pre, inner, post = _split(outer)
    obody, ibody = outer.regions[0], inner.regions[0]
    olb, oub, ostep = outer.operands[:3]
    ilb, iub, istep = inner.operands[:3]
    oinit, iinit = outer.operands[3:], inner.operands[3:]
    ty, ity = olb.type, ilb.type
    b = _Builder(outer.loc)
    # what the K loop's bounds and inits read in the tile loop's body (loop-invariant: _why_not) is made
    # before the flattened loop
    hoist: Dict[int, Value] = {}
    need = {id(v.op) for v in list(inner.operands[:3]) + list(iinit) if v.op is not None and v.op in pre}
    for o in reversed(pre):
        if id(o) in need:
            need.update(id(x.op) for x in o.operands if x.op is not None and x.op in pre)
    for o in pre:
        if id(o) in need:
            b.ops.append(clone_deep(o, hoist))
    ilb, iub, istep = (hoist.get(v.id, v) for v in (ilb, iub, istep))
    iinit = [hoist.get(v.id, v) for v in iinit]
    n_t = _trip_count(b, olb, oub, _const(ostep))
    n_k = _trip_count(b, ilb, iub, _const(istep))
    n_k = n_k if ity == ty else b.op("cast", [n_k], ty)
    zero = b.const(0, ty)
    has_k = b.op("cmpi", [n_k, zero], int1, {"pred": "sgt"})
    # no K step: no flattened step either (the tile loop below runs instead); the divisor is never 0, also
    # where the ring passes evaluate a step past the end
    total = b.op("select", [has_k, b.op("mul", [n_t, n_k], ty), zero], ty)
    n_k1 = b.op("smax", [n_k, b.const(1, ty)], ty)

    # the tile's coordinates: the scalars P computes from the tile that anything else reads are carried, the
    # next tile's computed in a branch on each tile's last step (not on every step); not when P reads the
    # tile loop's carried values (the next tile's would depend on its epilogue): then P runs on every step
    inv = _invariant(outer, pre)
    scal = [o for o in pre if id(o) not in inv and not any(shape_of(r.type) for r in o.results)]
    s_ids = {id(o) for o in scal}
    tiles = [o for o in pre if id(o) not in inv and id(o) not in s_ids]
    reads_carried = any(v.owner is obody and v is not obody.args[0] for o in scal for v in o.operands)
    # (nor when the loop asks for a producer warp: its program re-evaluates the coordinates without branches)
    branch = not reads_carried and not outer.attrs.get("warp_specialize")
    # the tile values the K loop reads (09's wrapped row and column offsets) are carried as well, computed in the
    # same branch, so a step that ends no tile does not recompute them either (KERNELC_FLATTEN_CARRY_TILES); the
    # epilogue computes its own from the coordinates, in its branch
    tv, why = _carried_tiles(outer, num_warps) if branch else ([], None)
    if why is not None and notes is not None:
        notes.append(f"loop at {outer.loc}: the tile values its K loop reads are recomputed on every step, not "
                     f"carried: {why}")
    e_read = {v.id for o in post + [obody.ops[-1]] for t in o.walk() for v in t.operands}
    e_tiles = _needed(tiles, e_read) if tv else []
    per_step = [o for o in pre if id(o) not in s_ids and (not tv or id(o) in inv)]
    outside = [t for o in per_step + e_tiles for t in o.walk()] + \
        [t for o in ibody.ops + post + [obody.ops[-1]] for t in o.walk()]
    read = {v.id for t in outside for v in t.operands}
    coords = [r for o in scal for r in o.results if r.id in read] if branch else []
    # the flattened loop; it also carries the step's K index and tile number (counters, not i / n_k: the
    # ring passes advance them ahead with the same increments, no division per step)
    n_o, n_i, n_c = len(oinit), len(iinit), len(coords)
    nblk = Block([ty] + [a.type for a in obody.args[1:]] + [a.type for a in ibody.args[1:]] + [ty, ty] +
                 [v.type for v in coords] + [v.type for v in tv])
    o_c, i_c = nblk.args[1:1 + n_o], nblk.args[1 + n_o:1 + n_o + n_i]
    ki, tile = nblk.args[1 + n_o + n_i:3 + n_o + n_i]
    c_c = nblk.args[3 + n_o + n_i:3 + n_o + n_i + n_c]
    t_c = nblk.args[3 + n_o + n_i + n_c:]
    h = _Builder(outer.loc)
    t_iv = h.op("add", [olb, h.op("mul", [tile, ostep], ty)], ty)
    ki_i = ki if ity == ty else h.op("cast", [ki], ity)
    k_iv = h.op("add", [ilb, h.op("mul", [ki_i, istep], ity)], ity)
    env: Dict[int, Value] = {obody.args[0].id: t_iv, ibody.args[0].id: k_iv}
    env.update({a.id: v for a, v in zip(obody.args[1:], o_c)})
    env.update({a.id: v for a, v in zip(ibody.args[1:], i_c)})
    env.update({v.id: a for v, a in zip(coords + tv, list(c_c) + list(t_c))})
    for o in h.ops:
        nblk.append(o)
    c_init = _tile_values(b, pre, obody.args[0], olb, coords + tv)
    flat_pre = per_step if coords or tv else pre
    direct = _zero_started_accumulators(inner)
    first = None
    for o in flat_pre + ibody.ops[:-1]:
        c = clone_deep(o, env)
        nblk.append(c)
        if id(o) in direct.values():
            # the tile's first K step ignores the carried accumulator (wgmma's scale-d): the dot's result is
            # carried straight on, nothing reads it outside the dot before the tile's last step
            if first is None:
                first = Op("cmpi", [ki, zero], [int1], {"pred": "ne"}, loc=outer.loc)
                nblk.ops.insert(len(nblk.ops) - 1, first)
                first.block = nblk
            c.operands.append(first.results[0])
    k_next = [env.get(v.id, v) for v in ibody.ops[-1].operands]
    reset = [j for j in range(len(i_c)) if j not in direct]
    last = _Builder(outer.loc)
    ki1 = last.op("add", [ki, last.const(1, ty)], ty)
    is_last = last.op("cmpi", [ki1, n_k1], int1, {"pred": "eq"})
    ki_next = last.op("select", [is_last, last.const(0, ty), ki1], ty)
    tile_next = last.op("select", [is_last, last.op("add", [tile, last.const(1, ty)], ty), tile], ty)
    for o in last.ops:
        nblk.append(o)
    c_next = []
    if coords or tv:
        nt, keep = Block(), Block()
        step_b = _Builder(outer.loc)
        t_next = step_b.op("add", [t_iv, ostep], ty)
        for o in step_b.ops:
            nt.append(o)
        nenv = {obody.args[0].id: t_next}
        for o in _needed(pre, coords + tv) if tv else scal:
            nt.append(clone_deep(o, nenv))
        nt.append(Op("scf.yield", [nenv[v.id] for v in coords + tv], [], loc=outer.loc))
        keep.append(Op("scf.yield", list(c_c) + list(t_c), [], loc=outer.loc))
        nx = Op("scf.if", [is_last], [v.type for v in coords + tv], regions=[nt, keep], loc=outer.loc)
        nblk.append(nx)
        c_next = list(nx.results)
    then, other = Block(), Block()
    tenv = dict(env)
    tenv.update({r.id: v for r, v in zip(inner.results, k_next)})
    for o in e_tiles:  # the epilogue's tile values, from the tile's coordinates (carried ones are the K loop's)
        then.append(clone_deep(o, tenv))
    for o in post:
        then.append(clone_deep(o, tenv))
    then.append(Op("scf.yield", [tenv.get(v.id, v) for v in obody.ops[-1].operands] + [iinit[j] for j in reset], [],
                   loc=obody.ops[-1].loc))
    other.append(Op("scf.yield", list(o_c) + [k_next[j] for j in reset], [], loc=obody.ops[-1].loc))
    br = Op("scf.if", [is_last], [v.type for v in o_c] + [i_c[j].type for j in reset], regions=[then, other],
            loc=outer.loc)
    nblk.append(br)
    nxt = list(br.results[:len(o_c)])
    kept = iter(br.results[len(o_c):])
    nxt += [k_next[j] if j in direct else next(kept) for j in range(len(i_c))]
    nblk.append(Op("scf.yield", nxt + [ki_next, tile_next] + c_next, [], loc=ibody.ops[-1].loc))
    attrs = {k: v for k, v in inner.attrs.items() if k in ("num_stages", "unroll")}
    if "warp_specialize" in outer.attrs:
        attrs["warp_specialize"] = outer.attrs["warp_specialize"]
    attrs["flattened"] = True  # a persistent tile loop and its K loop in one: later passes key on it (elect_form)
    flat = Op("scf.for", [zero, total, b.const(1, ty)] + list(oinit) + list(iinit) + [zero, zero] + c_init,
              [v.type for v in nblk.args[1:]], attrs, regions=[nblk], loc=inner.loc)

    # no K step: every tile still runs P and E, with the K loop's results equal to its inits (the flattened
    # loop ran no step, so its results are the tile loop's inits)
    nenv: Dict[int, Value] = {}
    eblk = Block([a.type for a in obody.args], [a.name for a in obody.args])
    nenv.update({a.id: na for a, na in zip(obody.args, eblk.args)})
    for o in pre:
        eblk.append(clone_deep(o, nenv))
    nenv.update({r.id: nenv.get(v.id, v) for r, v in zip(inner.results, inner.operands[3:])})
    for o in post + [obody.ops[-1]]:
        eblk.append(clone_deep(o, nenv))
    flat_out = flat.results[:n_o]
    plain = Op("scf.for", [olb, oub, ostep] + list(flat_out), [r.type for r in outer.results],
               {k: v for k, v in outer.attrs.items() if k not in (FLATTEN, "warp_specialize")}, regions=[eblk],
               loc=outer.loc)
    no_k = Op("cmpi", [n_k, zero], [int1], {"pred": "sle"}, loc=outer.loc)
    yes, no = Block(), Block()
    yes.append(plain)
    yes.append(Op("scf.yield", list(plain.results), [], loc=outer.loc))
    no.append(Op("scf.yield", list(flat_out), [], loc=outer.loc))
    guard = Op("scf.if", [no_k.results[0]], [r.type for r in outer.results], regions=[yes, no], loc=outer.loc)
    blk = outer.block
    at = blk.ops.index(outer)
    new = b.ops + [flat, no_k, guard]
    blk.ops[at:at + 1] = new
    for o in new:
        o.block = blk
    # the tile loop's results are now the guard's
    root = blk
    while root.parent is not None:
        root = root.parent.block
    for old, nv in zip(outer.results, guard.results):
        replace_all_uses(root, old, nv)
