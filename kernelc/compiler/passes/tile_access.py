"""Which plain loads and stores access a rectangular tile of a strided tensor, proven (the analysis of
``passes/pointer_tiles.py``; the forms and the reasoning are in that module's docstring).

``match_tile_access`` reads a ``load``/``store``'s pointer tile and mask as polynomials
(``passes/tile_exprs.py``; for a 2-D load also with the dims swapped, a transposed tile) and returns a
``TileAccess``: the tensor (base pointer argument, strides),
the part of the offset that moves the base (``P``, computable at kernel entry), the per-dim
coordinates (``q_d >= 0``) and extents (``E_d``, None for an unchecked dim), and the descriptor type.
``memory_order_blocks`` names the accesses whose order with other memory accesses of the program an
async-proxy (TMA) copy would not keep.

Example (the tutorial's masked A load)::

    load %a_ptrs, (%offs_am[:, None] < %M) & (%offs_k[None, :] < %K - %k * 64), 0.0
      -> TileAccess(base=%a_ptr, base_offset=128*pid_m*stride_am, strides=[stride_am],
                    coords=[0, 64*t], extents=[M - 128*pid_m, K], ty=tensordesc<fp16[128, 64]>)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Tuple

from ...language import dtypes as T
from ...language.dtypes import block_type, scalar_of, shape_of, tensor_descriptor_type
from ..target_rules import MAX_RANK, TMA_PTX_ELEMTYPE as PTX_ELEMTYPE, store_extent_ok, tma_type_ok
from .lower_descriptors import entry_computable as _entry_computable
from ..ir.core import Function, Op, Value
from .poly import Poly
from .tile_exprs import TileExprs, axis, is_axis

# the extent of a dim the access does not check: the largest i32 (a load), or the largest multiple of
# 16 below it (a store: TMA stores need an innermost extent of whole 16-byte chunks)
UNBOUNDED = {"load": 2**31 - 1, "store": 2**31 - 16}
_LESS = {"slt": (1, 0), "sle": (1, 1), "sgt": (-1, 0), "sge": (-1, 1)}  # a < b: a - b < 0 (sign, -1 for <=)
_MEMORY = ("load", "store", "atomic_rmw", "atomic_cas", "descriptor_load", "descriptor_store", "descriptor_reduce")


@dataclass
class TileAccess:
    """A load/store proven to access ``base + P + sum_d (coords_d + x_d) * strides_d`` where the mask
    is ``coords_d + x_d < extents_d`` for every checked dim (see ``passes/pointer_tiles.py``)."""

    op: Op
    base: Value
    base_offset: Poly  # P, computable at kernel entry
    strides: List[Poly]  # all dims but the last (stride 1)
    coords: List[Poly]  # q_d >= 0
    extents: List[Optional[Poly]]  # E_d; None: the dim is not checked
    ty: tensor_descriptor_type  # per dim of the tensor (the descriptor), outermost first
    transposed: bool = False  # a 2-D load whose contiguous dim is its first: the tile is ty's transpose


def match_tile_access(op: Op, fn: Function, ex: TileExprs, info, arch: str) -> Tuple[Optional[TileAccess], str]:
    """The ``TileAccess`` of a ``load``/``store``, or (None, why not; "" if it is no tile access at all).
    ``info``: the function's axis analysis (the alignment proof)."""
    ptr = op.operands[0]
    shape = shape_of(ptr.type)
    n = len(shape)
    if not 2 <= n <= MAX_RANK or op.attrs.get("volatile") or op.attrs.get("cache") == ".cv":
        return None, "rank, volatile or .cv"
    for axes in _orders(op, n):
        pp = ex.pointer(ptr, axes)
        split = None if pp is None else _strides(pp[1], n)
        if split is None:
            return None, ""  # not a tile access at all (a gather, an index wrap, ...): nothing to say
        if split[0] is not None:
            break
    else:
        return None, "the last stride is not the constant 1"
    base = pp[0]
    strides, rest = split
    entry = lambda k: k[0] == "v" and _entry_computable([ex.values[k[1]]], fn)  # noqa: E731
    if any(not all(entry(k) for k in s.leaves()) or (s.constant() or 1) < 0 for s in strides):
        return None, "a stride is not a positive value known at kernel entry"
    mask_at = 2 if op.name == "store" else 1
    bounds = _bounds(op.operands[mask_at] if len(op.operands) > mask_at else None, axes, ex, n)
    if bounds is None:
        return None, "the mask is not one bound per dim"
    pad = _padding(op) if op.name == "load" else "zero"
    if pad is None:
        return None, "other is not 0 or NaN"
    base_offset, moving = rest.split(lambda m: all(entry(k) for k in m))
    coords = _coords(moving, strides, bounds, entry)
    if coords is None:
        return None, "the offset that changes in the loop is not the bounds' (a bound that does not move with " \
                     "the pointer), or not provably >= 0"
    extents = [None if g is None else q - g for q, g in zip(coords, bounds)]
    if any(e is not None and not all(entry(k) for k in e.leaves()) for e in extents):
        return None, "a bound does not move with the pointer (not the tile's bound)"
    if any(scalar_of(ex.loops[k[1]].regions[0].args[0].type) != T.int32 for q in coords for k in q.leaves()):
        return None, "a 64-bit loop index"
    elt = scalar_of(ptr.type).element_ty
    ty = tensor_descriptor_type(block_type(elt, tuple(shape[axes.index(d)] for d in range(n))), pad)
    if not tma_type_ok(ty, arch) or elt.name not in PTX_ELEMTYPE:
        return None, "TMA cannot copy this block"
    tile = TileAccess(op, base, base_offset, strides, coords, extents, ty, axes != tuple(range(n)))
    if not _aligned(tile, ex, info):
        return None, "base or strides (or a stored row's extent) not proven 16-byte aligned"
    return tile, ""


def _orders(op: Op, n: int):
    """The ways to read the access's dims as the descriptor's (axes: access dim -> descriptor dim): as
    they are, and for a 2-D load also transposed -- a tile whose contiguous dim is its first (a
    K-major B operand, attention's K^T) is the transpose of a descriptor tile."""
    yield tuple(range(n))
    if n == 2 and op.name == "load":
        yield (1, 0)


def memory_order_blocks(fn: Function) -> dict:
    """``{id(op): why}`` for the loads and stores that must keep their plain (generic-proxy) access:
    TMA copies go through the async proxy, which is not ordered with the program's generic accesses
    without a ``fence.proxy.async``. A load may not follow a global write of the program (earlier in
    program order, or anywhere in a loop around it: an earlier trip); a store must be the program's
    last memory access, outside any loop (its own next trip). A store to C after the K loop is fine."""
    out = {}
    order = [op for op in fn.walk() if op.name in _MEMORY]
    last = order[-1] if order else None
    write_seen = _writes_before(fn)
    for op in order:
        if op.name == "load" and id(op) in write_seen:
            out[id(op)] = "the program may have written (or read a flag in) global memory before it (no proxy fence)"
        elif op.name == "store" and (op is not last or _in_loop(op)):
            out[id(op)] = "other memory accesses of the program may follow it (no proxy fence)"
    return out


def _in_loop(op: Op) -> bool:
    while op.block is not None and op.block.parent is not None:
        op = op.block.parent
        if op.name in ("scf.for", "scf.while"):
            return True
    return False


_WRITES = ("store", "atomic_rmw", "atomic_cas", "descriptor_store", "descriptor_reduce", "bulk_add")


def _orders_memory(op: Op) -> bool:
    """A write of the program, or a volatile / ``.cv`` load (a flag read that orders other programs'
    writes before what follows it: data read after it must not go through the async proxy either)."""
    return op.name in _WRITES or (op.name == "load" and (op.attrs.get("volatile") or op.attrs.get("cache") == ".cv"))


def _writes_before(fn: Function) -> set:
    """``id``s of the loads that may run after a global-memory write of the same program (or a flag
    read, ``_orders_memory``): earlier in program order, or anywhere in a loop around the load (an
    earlier trip)."""
    out: set = set()

    def visit(block, seen: bool) -> bool:
        for op in block.ops:
            if op.name == "load" and seen:
                out.add(id(op))
            if _orders_memory(op):
                seen = True
            if op.regions:
                writes = any(_orders_memory(o) for o in op.walk())
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


def _bounds(mask: Optional[Value], axes, ex: TileExprs, n: int) -> Optional[List[Optional[Poly]]]:
    """Per dim the ``g_d`` of the mask's ``x_d + g_d < 0`` (None: unchecked); None if the mask is no such."""
    bounds: List[Optional[Poly]] = [None] * n
    if mask is None:
        return bounds
    conj = _conjuncts(mask, axes, ex)
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
    if op.name == "cmpi" and op.attrs["pred"] in _LESS and scalar_of(op.operands[0].type) == T.int32:
        # (an i32 compare: its bound fits the descriptor's i32 extent)
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


def _coords(moving: Poly, strides: List[Poly], bounds, entry) -> Optional[List[Poly]]:
    """Split the loop-varying offset ``Q = sum_d q_d * s_d`` into per-dim coordinates, each provably
    >= 0 (trip counts with positive coefficients). A bounded dim's coordinate is the part of its
    bound ``g_d`` that varies (its extent ``q_d - g_d`` must not vary); the rest of ``Q`` goes to the
    unbounded dims by dividing by their strides, the last (stride 1) taking what remains. Reading the
    masks first settles what strides alone cannot: a row stride equal to the column step."""
    n = len(strides) + 1
    stride = strides + [Poly.const(1)]
    coords: List[Optional[Poly]] = [None] * n
    for d, g in enumerate(bounds):
        if g is not None:
            coords[d] = g.split(lambda m: not all(entry(k) for k in m))[0]
            moving = moving - coords[d] * stride[d]
    for d in range(n):
        if coords[d] is not None:
            continue
        if d == n - 1 or moving.is_zero():
            coords[d], moving = moving, Poly()
            continue
        if len(stride[d].terms) != 1:
            return None
        (mono, coef), = stride[d].terms.items()
        coords[d], moving = moving.divide_monomial(mono, coef)
    if not moving.is_zero():
        return None  # a loop-varying offset no unbounded dim can take
    for q in coords:
        if any(c <= 0 or any(k[0] != "t" for k in m) for m, c in q.terms.items()):
            return None
    return coords


def _aligned(tile: TileAccess, ex: TileExprs, info) -> bool:
    """What ``device_map_eligible`` will check after the rewrite: base and byte strides 16-aligned, and
    for a store the innermost extent a whole number of 16-byte chunks."""
    def leaf_div(k):
        return info.get(ex.values[k[1]]).divisibility[0] if k[0] == "v" else 1

    eb = tile.ty.element_ty.itemsize
    base_div = min(info.get(tile.base).divisibility[0], tile.base_offset.divisibility(leaf_div) * eb)
    if base_div % 16 or any((s.divisibility(leaf_div) * eb) % 16 for s in tile.strides):
        return False
    inner = tile.extents[-1]
    return tile.op.name == "load" or store_extent_ok(16 if inner is None else inner.divisibility(leaf_div), eb)
