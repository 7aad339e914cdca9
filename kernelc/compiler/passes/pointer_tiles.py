"""Plain pointer loads that provably read a rectangular tile become tensor-descriptor loads (TMA).

On sm_90a, descriptor ops copy by TMA (``codegen/tma.py``; a descriptor made in the kernel gets its
CUtensorMap built at the kernel's entry, ``codegen/device_tensor_map.py``). This pass finds plain
``load`` ops that mean exactly what a ``descriptor_load`` means and rewrites them, so the Triton
tutorial's masked pointer matmul copies by TMA too. A load qualifies when (``passes/tile_exprs.py``
proves the forms, in polynomials over uniform scalars and the tile axes ``x_d``):

- its pointer tile is ``base + R + sum_d x_d * s_d`` with ``base`` a pointer argument, ``R`` uniform
  (it may grow by a loop-invariant amount each trip of an enclosing loop: ``a_ptrs += BK * stride_ak``),
  ``s_last`` the constant 1 and the other strides uniform values computable at kernel entry;
- its mask, if any, is a conjunction of one bound per dim, ``x_d + g_d < 0`` (``offs_m[:, None] < M``,
  or the relative ``offs_k[None, :] < K - k * BK``; ``<=``, ``>``, ``>=`` too); dims without a
  bound are read unchecked, as the original does;
- ``other`` is absent, +0 or NaN (the descriptor's padding); the load is not volatile nor ``.cv``,
  and no global write of the program may come before it (``loads_after_writes``: TMA reads through
  the async proxy, not ordered after generic writes without a proxy fence);
- TMA can copy the block and the descriptor will be TMA-eligible: base and strides 16-byte aligned
  by the axis analysis (an unaligned access keeps its plain load rather than a masked copy).

The descriptor is made per program, relative to the tile: ``R = P + Q`` where ``P`` (the terms
computable at kernel entry: program ids, arguments) moves the base, ``base' = base + P``, and ``Q``
(the terms with loop trip counts, which must be provably >= 0) splits by stride into coordinates
``q_d >= 0``. A bounded dim gets the extent ``E_d = q_d - g_d`` (must be computable at entry, i.e.
the bound moves with the pointer), so ``q_d + x_d < E_d`` is exactly the mask's ``x_d + g_d < 0``;
TMA's other check, ``0 <= q_d + x_d``, always holds -- which is why the base moves instead of the
coordinates taking ``P``: nothing has to be proven about the sign of ``pid_m * BM``. An extent
``E_d <= 0`` (the whole tile is out of bounds) becomes extent 1 with the coordinate moved past it,
since a zero-sized tensor map dim is not allowed. An unbounded dim gets the extent 2**31 - 1, the
largest the descriptor's i32 shape holds: every coordinate an i32 index can reach is inside, so
TMA checks nothing there, like the original. The ``lower_descriptors`` fallback (if TMA does not
take the op after all) builds the same addresses and the same masks back.

Not rewritten (they keep the plain load and its cp.async pipeline): ``(pid_m * BM + arange) % M``
index wraps (a remainder is no tile), gathers (``base + loaded_idx``), a non-unit or runtime last
stride, masks that are not per-dim bounds (``offs % 2 == 0``, a bound that does not move with the
advancing pointer), 1-D loads, and everything on targets without TMA or with ``KERNELC_AUTO_TMA=0``
(or ``KERNELC_TMA=0``). TMA reads a stride as unsigned: like the block-pointer conversion, strides
are taken to be positive (torch strides are; a zero or negative runtime stride is not supported).

Example (the tutorial's A load in its K loop, tile IR, names shortened)::

    %a0 = addptr (splat %a_ptr), (%offs_am[:, None] * %stride_am + %offs_k[None, :])
    %acc, %a = scf.for %k = 0 to %nk step 1 iter(%acc0, %a0) {
      %m = and (%offs_am[:, None] < %M), (%offs_k[None, :] < %K - %k * 64)
      %t = load %a, %m, 0.0 : <128x64xfp16>
      scf.yield .., (addptr %a, 64)
    }
  ->
    %base = addptr %a_ptr, %pid_m * 128 * %stride_am           // P
    %e0 = sub %M, %pid_m * 128                                  // E_0 (E_1 = %K)
    %d = make_tensor_descriptor %base, smax(%e0, 1), smax(%K, 1), cast(%stride_am) {padding='zero'}
    %acc = scf.for %k = 0 to %nk step 1 iter(%acc0) {
      %t = descriptor_load %d, 1 - smin(%e0, 1), %k * 64 + (1 - smin(%K, 1)) {block_shape=(128, 64)}
    }
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import List, Optional, Tuple

from ...language import dtypes as T
from ...language.dtypes import block_type, scalar_of, shape_of, tensor_descriptor_type
from ..codegen.device_tensor_map import PTX_ELEMTYPE, _entry_computable
from ..codegen.tma import MAX_RANK, arch_has_tma, tma_enabled, tma_type_ok
from ..ir.core import Function, Op, Value, replace_all_uses
from .axis_info import analyze
from .dead_carries import drop_dead_carries
from .poly import Poly
from .poly_emit import PolyEmitter
from .tile_exprs import TileExprs, axis, is_axis

UNBOUNDED = 2**31 - 1  # the extent of a dim the load does not check (the largest i32 shape)
_LESS = {"slt": (1, 0), "sle": (1, 1), "sgt": (-1, 0), "sge": (-1, 1)}  # a < b: a - b < 0 (sign, -1 for <=)


def auto_tma_enabled() -> bool:
    """``KERNELC_AUTO_TMA=0`` keeps plain pointer loads as they are (no descriptor rewrite)."""
    return os.environ.get("KERNELC_AUTO_TMA", "1").strip().lower() not in ("0", "false", "no", "off")


@dataclass
class TileLoad:
    """A load proven to read the tile ``base + P + sum_d (coords_d + x_d) * strides_d`` (see the module doc)."""

    load: Op
    base: Value
    base_offset: Poly  # P, computable at kernel entry
    strides: List[Poly]  # all dims but the last (stride 1)
    coords: List[Poly]  # q_d >= 0
    extents: List[Optional[Poly]]  # E_d; None: the dim is not checked
    ty: tensor_descriptor_type


def pointer_tiles_to_descriptors(fn: Function, arch: str, notes: Optional[List[str]] = None) -> Function:
    """Rewrite every provable tile load into ``make_tensor_descriptor`` (top level) + ``descriptor_load``,
    on TMA targets (sm_90a, ``KERNELC_TMA`` and ``KERNELC_AUTO_TMA`` not 0). ``notes`` gets a line per
    rewritten load, and per tile access kept off TMA with the reason. Mutates and returns ``fn``."""
    if not (arch and arch_has_tma(arch) and tma_enabled() and auto_tma_enabled()):
        return fn
    ex = TileExprs(fn)
    loads = [op for op in fn.walk() if op.name == "load" and len(shape_of(op.results[0].type)) >= 2]
    if not loads:
        return fn
    info = analyze(fn)
    after_write = loads_after_writes(fn)
    trips = {}
    changed = False
    for op in loads:
        tile, why = match_tile_load(op, fn, ex, info, arch)
        if tile is not None and id(op) in after_write:
            tile, why = None, "the program may have written global memory before it (no proxy fence)"
        where = f"{os.path.basename(op.loc.file)}:{op.loc.line}"
        if tile is None:
            if notes is not None and why:  # a near miss: a tile access that something else keeps off TMA
                notes.append(f"auto-TMA: load at {where} kept: {why}")
            continue
        _rewrite(fn, ex, tile, trips)
        changed = True
        if notes is not None:
            notes.append(f"auto-TMA: load at {where} -> descriptor_load {list(tile.ty.block_shape)} "
                         f"{tile.ty.element_ty.name} (padding {tile.ty.padding})")
    return drop_dead_carries(fn) if changed else fn


def match_tile_load(load: Op, fn: Function, ex: TileExprs, info, arch: str) -> Tuple[Optional[TileLoad], str]:
    """The ``TileLoad`` of ``load``, or (None, why not; "" if it is no tile access at all)."""
    ptr = load.operands[0]
    shape = shape_of(ptr.type)
    n = len(shape)
    if not 2 <= n <= MAX_RANK or load.attrs.get("volatile") or load.attrs.get("cache") == ".cv":
        return None, "rank, volatile or .cv"
    axes = tuple(range(n))
    pp = ex.pointer(ptr, axes)
    split = None if pp is None else _strides(pp[1], n)
    if split is None:
        return None, ""  # not a tile access at all (a gather, an index wrap, ...): nothing to say
    base = pp[0]
    if split[0] is None:
        return None, "the last stride is not the constant 1"
    strides, rest = split
    entry = lambda k: k[0] == "v" and _entry_computable([ex.values[k[1]]], fn)  # noqa: E731
    if any(not all(entry(k) for k in s.leaves()) or (s.constant() or 1) < 0 for s in strides):
        return None, "a stride is not a positive value known at kernel entry"
    bounds = _bounds(load, axes, ex, n)
    if bounds is None:
        return None, "the mask is not one bound per dim"
    pad = _padding(load)
    if pad is None:
        return None, "other is not 0 or NaN"
    base_offset, moving = rest.split(lambda m: all(entry(k) for k in m))
    coords = _coords(moving, strides)
    if coords is None:
        return None, "the offset that changes in the loop is not provably >= 0 per dim"
    extents = [None if g is None else q - g for q, g in zip(coords, bounds)]
    if any(e is not None and not all(entry(k) for k in e.leaves()) for e in extents):
        return None, "a bound does not move with the pointer (not the tile's bound)"
    if any(scalar_of(ex.loops[k[1]].regions[0].args[0].type) != T.int32 for q in coords for k in q.leaves()):
        return None, "a 64-bit loop index"
    elt = scalar_of(ptr.type).element_ty
    ty = tensor_descriptor_type(block_type(elt, tuple(shape)), pad)
    if not tma_type_ok(ty, arch) or elt.name not in PTX_ELEMTYPE:
        return None, "TMA cannot copy this block"
    tile = TileLoad(load, base, base_offset, strides, coords, extents, ty)
    if not _aligned(tile, ex, info):
        return None, "base or strides not proven 16-byte aligned"
    return tile, ""


_WRITES = ("store", "atomic_rmw", "atomic_cas", "descriptor_store")


def loads_after_writes(fn: Function) -> set:
    """``id``s of the loads that may run after a global-memory write of the same program: a write
    earlier in program order, or anywhere in a loop around the load (an earlier trip). TMA reads
    through the async proxy, which a generic-proxy write is not ordered before without a
    ``fence.proxy.async``, so such loads stay plain (a store to C after the K loop does not count)."""
    out: set = set()

    def visit(block, seen: bool) -> bool:
        for op in block.ops:
            if op.name in _WRITES:
                seen = True
            elif op.name == "load" and seen:
                out.add(id(op))
            if op.regions:
                writes = any(o.name in _WRITES for o in op.walk())
                loop = op.name in ("scf.for", "scf.while")
                for r in op.regions:
                    visit(r, seen or (loop and writes))
                seen = seen or writes
        return seen

    visit(fn.body, False)
    return out


def _strides(offset: Poly, n: int) -> Optional[Tuple[Optional[List[Poly]], Poly]]:
    """Split ``offset`` into the strides of all dims but the last (coefficients of ``x_d``; None if the
    last one is not the constant 1) and the uniform rest; None if it is not linear in every ``x_d``."""
    per_dim = [Poly() for _ in range(n)]
    rest = {}
    for mono, coef in offset.terms.items():
        xs = [k for k in mono if is_axis(k)]
        if not xs:
            rest[mono] = coef
        elif len(xs) > 1:
            return None
        else:
            d = xs[0][1]
            per_dim[d] = per_dim[d] + Poly({tuple(k for k in mono if not is_axis(k)): coef})
    if any(s.is_zero() for s in per_dim):
        return None
    return (per_dim[:-1] if per_dim[-1].constant() == 1 else None), Poly(rest)


def _bounds(load: Op, axes, ex: TileExprs, n: int) -> Optional[List[Optional[Poly]]]:
    """Per dim the ``g_d`` of the mask's ``x_d + g_d < 0`` (None: unchecked); None if the mask is no such."""
    bounds: List[Optional[Poly]] = [None] * n
    if len(load.operands) < 2:
        return bounds
    conj = _conjuncts(load.operands[1], axes, ex)
    if conj is None:
        return None
    for c in conj:
        xs = [k for k in c.leaves() if is_axis(k)]
        if len(xs) != 1:
            return None
        d = xs[0][1]
        g = c - Poly.leaf(axis(d))
        if axis(d) in g.leaves() or (bounds[d] is not None and bounds[d] != g):
            return None  # x_d's coefficient is not 1, or two different bounds
        bounds[d] = g
    return bounds


def _conjuncts(mask: Value, axes, ex: TileExprs) -> Optional[List[Poly]]:
    """The mask as a list of polynomials ``p`` meaning ``p < 0``, all of which must hold."""
    op = mask.op
    if op is None:
        return None
    if op.name == "and":
        parts = [_conjuncts(o, axes, ex) for o in op.operands]
        return None if any(p is None for p in parts) else parts[0] + parts[1]
    if op.name in ("broadcast", "expand_dims"):
        moved = ex.moved_axes(op, axes)
        return None if moved is None else _conjuncts(op.operands[0], moved, ex)
    if op.name == "cmpi" and op.attrs["pred"] in _LESS:
        a, b = (ex.index(o, axes) for o in op.operands)
        if a is None or b is None:
            return None
        sign, le = _LESS[op.attrs["pred"]]
        return [(a - b if sign > 0 else b - a) - Poly.const(le)]
    return None


def _padding(load: Op) -> Optional[str]:
    """The descriptor padding ``other`` asks for ("zero" when absent), or None."""
    if len(load.operands) < 3:
        return "zero"
    v = load.operands[2]
    while v.op is not None and v.op.name in ("splat", "broadcast", "cast"):
        v = v.op.operands[0]
    if v.op is None or v.op.name != "constant":
        return None
    x = v.op.attrs["value"]
    if isinstance(x, float) and math.isnan(x):
        return "nan" if scalar_of(load.results[0].type).is_floating() else None
    if x == 0 and math.copysign(1.0, float(x)) > 0:  # -0.0 is not TMA's zero fill
        return "zero"
    return None


def _coords(moving: Poly, strides: List[Poly]) -> Optional[List[Poly]]:
    """Split the loop-varying offset ``Q = sum_d q_d * s_d`` by stride, each ``q_d`` provably >= 0
    (trip counts with positive coefficients)."""
    coords = []
    for s in strides:
        if moving.is_zero():
            coords.append(Poly())
            continue
        if len(s.terms) != 1:
            return None
        (mono, coef), = s.terms.items()
        q, moving = moving.divide_monomial(mono, coef)
        coords.append(q)
    coords.append(moving)
    for q in coords:
        if any(c <= 0 or any(k[0] != "t" for k in m) for m, c in q.terms.items()):
            return None
    return coords


def _aligned(tile: TileLoad, ex: TileExprs, info) -> bool:
    """What ``device_map_eligible`` will check after the rewrite: base and byte strides 16-aligned."""
    def leaf_div(k):
        return info.get(ex.values[k[1]]).divisibility[0] if k[0] == "v" else 1

    eb = tile.ty.element_ty.itemsize
    base_div = min(info.get(tile.base).divisibility[0], tile.base_offset.divisibility(leaf_div) * eb)
    return base_div % 16 == 0 and all((s.divisibility(leaf_div) * eb) % 16 == 0 for s in tile.strides)


def _rewrite(fn: Function, ex: TileExprs, tile: TileLoad, trips) -> None:
    load = tile.load
    holder = load
    while holder.block is not fn.body:
        holder = holder.block.parent
    top = PolyEmitter(fn.body, holder, load.loc, ex, trips)
    base = tile.base
    if not tile.base_offset.is_zero():
        base = top.op("addptr", [base, top.poly(tile.base_offset)], base.type)
    shapes, shifts = [], []
    for e in tile.extents:
        if e is None:
            shapes.append(top.const(UNBOUNDED))
            shifts.append(None)
            continue
        ev, one = top.poly(e), top.const(1)
        shapes.append(top.op("smax", [ev, one], T.int32))
        shifts.append(top.op("sub", [one, top.op("smin", [ev, one], T.int32)], T.int32))  # 0 unless E <= 0
    strides = [top.op("cast", [top.poly(s)], T.int64) for s in tile.strides]
    desc = top.op("make_tensor_descriptor", [base] + shapes + strides, tile.ty, padding=tile.ty.padding)
    here = PolyEmitter(load.block, load, load.loc, ex, trips)
    offsets = []
    for q, shift in zip(tile.coords, shifts):
        v = here.poly(q)
        offsets.append(v if shift is None else here.op("add", [v, shift], T.int32))
    new = here.op("descriptor_load", [desc] + offsets, load.results[0].type,
                  block_shape=tuple(tile.ty.block_shape), padding=tile.ty.padding)
    replace_all_uses(fn.body, load.results[0], new)
    load.block.ops.remove(load)
