"""Give an e5m2 cast of softmax probabilities a bound that usually proves it cannot overflow: ``attrs
["overflow_bound"] = True`` and the bound as the cast's second operand.

fp32 -> e5m2 is bit-exact with torch, which rounds ``|x| >= 61440`` to +-Inf where ``cvt.rn.satfinite`` gives
+-57344: codegen fixes each cvt pair up (``codegen/fp8.py: torch_fixup_pair``, two FADD, a PRMT and a LOP3 a
pair, and a PRMT a word because the fixed pairs no longer merge into words inside the cvt). Tutorial 06's fp8
forward rounds P to e5m2 every key block, and there no P element is ever near 61440.

The pass proves it per row at run time instead of per element: where the cast's operand ``p`` is computed by
``exp2`` or ``exp`` (never negative: ``+0 .. +Inf`` or the positive canonical NaN; the pass marks the ``exp2`` ``nonnegative``, so that its
polynomial path, if ``mark_exp2_poly`` picks it, clamps its argument to 127 and stays so too:
``codegen/elementwise.py: exp2_poly_f32``) and the same block sums ``p`` along an axis before the cast
(``reduce {kind='add'}``, the softmax row sum), every element of a row is at most the row's sum: adding values
>= 0 in fp32, in any order and with any rounding, never goes below the largest of them. So a row whose sum is
below 61440 has no element that needs the fix-up; a sum that is >= 61440, +Inf or NaN proves nothing and the
fix-up runs. The pass passes the sum, broadcast back over the summed axis, as the cast's second operand;
codegen (``codegen/fp8.py: cast_many``) tests a thread's sums, takes one vote over the warp and branches: the
bare cvts where no lane holds a sum >= 61440, the fixed-up ones where one does.

Example (tile IR)::

    %p = exp2 %d {ftz=True}
    %l = reduce %p {axis=1, kind='add'}
    %p8 = cast %p {rounding='rtne', nan_positive=True} : <128x64xfp8e5>
  ->
    %p = exp2 %d {ftz=True, nonnegative=True}
    %l = reduce %p {axis=1, kind='add'}
    %e = expand_dims %l {axis=1} : <128x1xfp32>
    %b = broadcast %e : <128x64xfp32>
    %p8 = cast %p, %b {rounding='rtne', nan_positive=True, overflow_bound=True} : <128x64xfp8e5>

Every other fp32 -> e5m2 cast of a tile (``self_bound``, KERNELC_FP8_SELF_BOUND) gets ``overflow_bound='self'``: its
values are their own bound. Codegen tests ``|x|`` (one FSETP a value, where the fix-ups cost two FADD, two PRMT
and two LOP3 a pair) and, on the path where no lane holds a value past the threshold or a NaN, keeps the bare
cvts: with no NaN there, the NaN-sign fix-up moves into the branch too. Tutorial 06's output tile
(``acc / l_i``, 128 values a thread at 128x128 on 4 warps) is such a cast::

    %o = cast %a {rounding='rtne'} : <128x128xfp8e5>
  ->
    %o = cast %a {rounding='rtne', overflow_bound='self'} : <128x128xfp8e5>
"""
from __future__ import annotations

from typing import Dict

from ...language import dtypes as T
from ...language.dtypes import block_type, scalar_of, shape_of
from ..ir.core import Block, Function, Op, defining_op

#: ops whose results are never negative (a NaN result is the positive canonical NaN)
NONNEGATIVE_OPS = ("exp2", "exp")


def mark_fp8_overflow_bounds(fn: Function, self_bound: bool = True) -> Function:
    """Bound every fp32 -> e5m2 ``cast`` of an ``exp2``/``exp`` result by that result's sum along an axis, where
    the same block computes the sum before the cast; with ``self_bound``, every other fp32 -> e5m2 cast of a
    tile of two or more dimensions by its own values (module docstring). Mutates ``fn``."""
    for op in list(fn.walk()):
        for block in op.regions:
            _mark_block(block)
    _mark_block(fn.body)
    if self_bound:
        for op in fn.walk():
            if _e5m2_tile_cast(op) and "overflow_bound" not in op.attrs:
                op.attrs["overflow_bound"] = "self"
    return fn


def _e5m2_tile_cast(op: Op) -> bool:
    """An fp32 -> fp8-with-infinities cast of a tile of two or more dimensions, with one operand."""
    if op.name != "cast" or len(op.operands) != 1 or len(shape_of(op.results[0].type) or ()) < 2:
        return False
    dst = scalar_of(op.results[0].type)
    return dst.is_fp8() and T.FP8_FORMATS[dst.name].overflow == "inf" and scalar_of(op.operands[0].type) == T.float32


def _mark_block(block: Block) -> None:
    sums: Dict[int, Op] = {}  # operand id -> the first reduce add of it in this block
    for op in list(block.ops):
        if op.name == "reduce" and op.attrs.get("kind") == "add" and len(op.operands) == 1 \
                and scalar_of(op.operands[0].type) == T.float32:
            sums.setdefault(op.operands[0].id, op)
        if not _e5m2_tile_cast(op):  # (a 1-D tile's sum is a scalar: not worth a splat)
            continue
        p = op.operands[0]
        d, s = defining_op(p), sums.get(p.id)
        if d is None or d.name not in NONNEGATIVE_OPS or s is None:
            continue
        axis = s.attrs["axis"]
        shape = list(shape_of(p.type))
        kept = block_type(T.float32, shape[:axis] + [1] + shape[axis + 1:])
        e = Op("expand_dims", [s.results[0]], [kept], {"axis": axis}, loc=op.loc)
        b = Op("broadcast", [e.results[0]], [p.type], loc=op.loc)
        at = block.ops.index(op)
        for k, new in enumerate((e, b)):
            new.block = block
            block.ops.insert(at + k, new)
        op.operands.append(b.results[0])
        op.attrs["overflow_bound"] = True
        if d.name == "exp2":  # its polynomial path too (passes/exp2_poly.py may mark it later)
            d.attrs["nonnegative"] = True
