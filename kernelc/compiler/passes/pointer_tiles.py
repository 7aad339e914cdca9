"""Plain pointer loads and stores that provably access a rectangular tile become tensor-descriptor ops (TMA).

On sm_90a, descriptor ops copy by TMA (``codegen/tma.py``; a descriptor made in the kernel gets its
CUtensorMap built at the kernel's entry, ``codegen/device_tensor_map.py``). This pass finds plain
``load``/``store`` ops that mean exactly what a ``descriptor_load``/``descriptor_store`` means and
rewrites them, so the Triton tutorial's masked pointer matmul copies by TMA too. An access qualifies
when (``passes/tile_access.py`` decides, with ``passes/tile_exprs.py`` proving the forms in
polynomials over uniform scalars and the tile axes ``x_d``):

- its pointer tile is ``base + R + sum_d x_d * s_d`` with ``base`` a pointer argument, ``R`` uniform
  (it may grow by a loop-invariant amount each trip of an enclosing loop: ``a_ptrs += BK * stride_ak``),
  ``s_last`` the constant 1 and the other strides uniform values computable at kernel entry (a 2-D
  load with ``s_0`` the constant 1 instead reads the transposed tile and takes a ``trans``);
- its mask, if any, is a conjunction of one bound per dim, ``x_d + g_d < 0`` (``offs_m[:, None] < M``,
  or the relative ``offs_k[None, :] < K - k * BK``; ``<=``, ``>``, ``>=`` too); dims without a
  bound are read unchecked, as the original does;
- a load's ``other`` is absent, +0 or NaN (the descriptor's padding); not volatile nor ``.cv``;
- its order with the program's other memory accesses survives the async proxy TMA copies through
  (``tile_access.memory_order_blocks``): no global write of the program may come before a load, and
  a store must be the program's last memory access, outside loops;
- TMA can copy the block and the descriptor will be TMA-eligible: base and strides 16-byte aligned
  by the axis analysis, and for a store the innermost extent a whole number of 16-byte chunks (an
  unproven access keeps its plain load/store rather than becoming a generic masked copy).

The descriptor is made per program, relative to the tile: ``R = P + Q`` where ``P`` (the terms
computable at kernel entry: program ids, arguments) moves the base, ``base' = base + P``, and ``Q``
(the terms with loop trip counts, which must be provably >= 0) splits by stride into coordinates
``q_d >= 0``. A bounded dim gets the extent ``E_d = q_d - g_d`` (must be computable at entry, i.e.
the bound moves with the pointer), so ``q_d + x_d < E_d`` is exactly the mask's ``x_d + g_d < 0``;
TMA's other check, ``0 <= q_d + x_d``, always holds -- which is why the base moves instead of the
coordinates taking ``P``: nothing has to be proven about the sign of ``pid_m * BM``. An extent
``E_d <= 0`` (the whole tile is out of bounds) becomes extent 16 with the coordinate moved 16 past
its start, so every element is out of bounds: a zero-sized tensor map dim is not allowed, and 16
keeps a store's innermost extent a multiple of 16 bytes. An unbounded dim gets the extent 2**31 - 1
(a store: 2**31 - 16), the largest the descriptor's i32 shape holds: the coordinates an i32 index
reaches are inside, so TMA checks nothing there, like the original. The ``lower_descriptors``
fallback (if TMA does not take the op after all) builds the same addresses and masks back.

Scope (``KERNELC_AUTO_TMA``): by default (1) only loads whose tile feeds nothing but dot operands
are rewritten -- TMA lands those in the operand layout the dot reads in place, taking the shared
memory the cp.async ring took. Other tiles would be staged through shared memory (a load read back
into registers, a store written out from it), which a plain access does not need: with a mainloop
ring that the staging cannot reuse, a kernel that fit could run out of shared memory (the tutorial
matmul at 128x256x64 with 4 stages would need 256 KiB). ``KERNELC_AUTO_TMA=all`` takes those too,
``KERNELC_AUTO_TMA=0`` nothing.

Not rewritten (they keep the plain access and, for loads, the cp.async pipeline):
``(pid_m * BM + arange) % M`` index wraps (a remainder is no tile; the tutorial's ``matmul_kernel``),
gathers (``base + loaded_idx``), a non-unit or runtime last stride, masks that are not per-dim
bounds (``offs % 2 == 0``, ``offs >= 0``, a bound that does not move with the advancing pointer),
1-D accesses, and everything on targets without TMA or with ``KERNELC_TMA=0``.

Assumptions, as elsewhere in the compiler: i32 index arithmetic is read as integer arithmetic (a
kernel whose offsets overflow addresses other elements than it means anyway); TMA reads strides as
unsigned, so like the block-pointer conversion the strides are taken to be positive (torch strides
are; a zero or negative runtime stride is not supported).

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
    %x0, %s0 = select(%e0 < 1, 16, %e0), select(%e0 < 1, 16, 0) // (%x1, %s1 the same for %K)
    %d = make_tensor_descriptor %base, %x0, %x1, cast(%stride_am) {padding='zero'}
    %acc = scf.for %k = 0 to %nk step 1 iter(%acc0) {
      %t = descriptor_load %d, %s0, %k * 64 + %s1 {block_shape=(128, 64)}
    }
"""
from __future__ import annotations

import os
from typing import List, Optional

from ...language import dtypes as T
from ...language.dtypes import shape_of
from ..target_rules import arch_has_tma, tma_enabled
from ..ir.core import Function, Value, replace_all_uses, users
from .axis_info import analyze
from .dead_carries import drop_dead_carries
from .poly_emit import PolyEmitter
from .tile_access import UNBOUNDED, TileAccess, match_tile_access, memory_order_blocks
from .tile_exprs import TileExprs

EMPTY = 16  # the extent (and coordinate shift) of a dim whose bound leaves the whole tile outside


def auto_tma_scope() -> str:
    """What ``KERNELC_AUTO_TMA`` asks for: "off" (0), "all" (all), else "dots" (the default, 1)."""
    from ...options import get
    return get("KERNELC_AUTO_TMA")


def pointer_tiles_to_descriptors(fn: Function, arch: str, notes: Optional[List[str]] = None,
                                 scope: Optional[str] = None) -> Function:
    """Rewrite provable tile accesses into ``make_tensor_descriptor`` (top level) and
    ``descriptor_load``/``descriptor_store``, on TMA targets (sm_90a, ``KERNELC_TMA`` not 0). ``scope``
    (default: ``auto_tma_scope()``): "dots" takes the loads whose tile only feeds dot operands, "all"
    every load and store, "off" nothing. ``notes`` gets a line per rewritten access, and per tile
    access in scope kept off TMA with the reason. Mutates and returns ``fn``."""
    scope = scope or auto_tma_scope()
    if scope == "off" or not (arch and arch_has_tma(arch) and tma_enabled()):
        return fn
    uses = users(fn.body)
    accesses = [op for op in fn.walk() if op.name in ("load", "store") and len(shape_of(op.operands[0].type)) >= 2
                and (scope == "all" or op.name == "load" and _feeds_dots(op.results[0], uses))]
    if not accesses:
        return fn
    ex = TileExprs(fn)
    info = analyze(fn)
    blocked = memory_order_blocks(fn)
    trips = {}
    changed = False
    for op in accesses:
        tile, why = match_tile_access(op, fn, ex, info, arch)
        if tile is not None and id(op) in blocked:
            tile, why = None, blocked[id(op)]
        where = f"{op.name} at {os.path.basename(op.loc.file)}:{op.loc.line}"
        if tile is None:
            if notes is not None and why:  # a near miss: a tile access that something else keeps off TMA
                notes.append(f"auto-TMA: {where} kept: {why}")
            continue
        _rewrite(fn, ex, tile, trips)
        changed = True
        if notes is not None:
            notes.append(f"auto-TMA: {where} -> descriptor_{op.name} {list(tile.ty.block_shape)} "
                         f"{tile.ty.element_ty.name}" + (f" (padding {tile.ty.padding})" if op.name == "load" else ""))
    return drop_dead_carries(fn) if changed else fn


def _feeds_dots(v: Value, uses) -> bool:
    """Whether tile ``v`` is only read as an A/B operand of dots (directly or through a 2-D ``trans``):
    TMA then lands it in the shared-memory operand layout the dot reads in place, where a plain load
    would have gone through the cp.async ring -- no shared memory beyond what the plain load took."""
    readers = uses.get(v.id, [])
    return bool(readers) and all(
        (u.name == "dot" and u.operands[2] is not v) or
        (u.name == "trans" and len(shape_of(v.type)) == 2 and _feeds_dots(u.results[0], uses)) for u in readers)


def _rewrite(fn: Function, ex: TileExprs, tile: TileAccess, trips) -> None:
    op = tile.op
    holder = op
    while holder.block is not fn.body:
        holder = holder.block.parent
    top = PolyEmitter(fn.body, holder, op.loc, ex, trips)
    base = tile.base
    if not tile.base_offset.is_zero():  # in 64 bits: exact whether the original used 32 or 64
        base = top.op("addptr", [base, top.poly(tile.base_offset, T.int64)], base.type)
    shapes, shifts = [], []
    for e in tile.extents:
        if e is None:
            shapes.append(top.const(UNBOUNDED[op.name]))
            shifts.append(None)
            continue
        ev, empty = top.poly(e), top.const(EMPTY)
        outside = top.op("cmpi", [ev, top.const(1)], T.int1, pred="slt")  # E <= 0: no element inside
        shapes.append(top.op("select", [outside, empty, ev], T.int32))
        shifts.append(top.op("select", [outside, empty, top.const(0)], T.int32))
    strides = [top.poly(s, T.int64) for s in tile.strides]
    desc = top.op("make_tensor_descriptor", [base] + shapes + strides, tile.ty, padding=tile.ty.padding)
    here = PolyEmitter(op.block, op, op.loc, ex, trips)
    offsets = []
    for q, shift in zip(tile.coords, shifts):
        v = here.poly(q)
        offsets.append(v if shift is None else here.op("add", [v, shift], T.int32))
    if op.name == "load":
        new = here.op("descriptor_load", [desc] + offsets, tile.ty.block_type,
                      block_shape=tuple(tile.ty.block_shape), padding=tile.ty.padding)
        if tile.transposed:  # the dot reads it through the trans, in place (codegen/descriptors.py)
            new = here.op("trans", [new], op.results[0].type, perm=(1, 0))
        replace_all_uses(fn.body, op.results[0], new)
    else:
        here.op("descriptor_store", [desc, op.operands[1]] + offsets, None, block_shape=tuple(tile.ty.block_shape))
    op.block.ops.remove(op)
