"""Index and pointer tiles as polynomials (``passes/poly.py``) over uniform scalars and tile axes.

The value at element ``(x_0, .., x_n-1)`` of an integer tile built from ``arange``, ``splat``,
``expand_dims``, ``broadcast``, ``add``/``sub``/``mul`` (and widening casts, hints) is a polynomial in
the axis symbols ``("x", d)`` and in uniform scalar leaves; a pointer tile is a base pointer argument
plus such a polynomial (in elements). Leaf keys:

- ``("v", id)``: a scalar SSA value the normaliser does not look into (an argument, a program id, a
  ``sdiv``/``srem``/``smin`` result, a value loaded in the loop, ...);
- ``("t", id)``: the trip count of an ``scf.for`` with a constant positive step -- iteration ``t``
  runs with ``iv = lb + step * t``, so the induction variable is that polynomial, and ``t >= 0``;
- ``("x", d)``: the element's index along dim ``d`` of the tile being analysed.

A pointer carried by a loop and advanced by a loop-invariant uniform amount each trip
(``a_ptrs += BK * stride_ak``) is ``init + t * advance`` in iteration ``t``.

The polynomials read i32 arithmetic as integer arithmetic: a kernel whose index arithmetic
overflows addresses other elements than it means anyway (the same reading the axis analysis and
every address rewrite here make). Anything else (``%``, loaded indices, a ``trans``, a while loop's
values) has no polynomial: ``None``.

Example (the A tile of the tutorial matmul, ``offs_am = pid_m * 128 + arange(0, 128)``, in its K loop)::

    pointer(%a_ptrs) = (%a_ptr, 128*pid_m*stride_am + stride_am*x0 + 64*t + x1)
"""
from __future__ import annotations

from typing import Dict, Hashable, Optional, Tuple

from ...language.dtypes import pointer_type, scalar_of, shape_of
from ..ir.core import Block, Function, Op, Value
from .poly import Poly

Axes = Tuple[Optional[int], ...]  # per dim of a value: the analysed tile's axis, None for a size-1 dim
_TRANSPARENT = ("hint",)


def axis(d: int) -> Hashable:
    return ("x", d)


def is_axis(key) -> bool:
    return key[0] == "x"


class TileExprs:
    """The normaliser of one function; results are memoised per (value, axes)."""

    def __init__(self, fn: Function):
        self.fn = fn
        self.values: Dict[int, Value] = {}  # ("v", id) leaves -> their value
        self.loops: Dict[int, Op] = {}  # ("t", id) leaves -> their scf.for
        self._memo: Dict[tuple, Optional[Poly]] = {}
        self._args = {a.id for a in fn.body.args}

    # -- integers ----------------------------------------------------------------------------------

    def scalar(self, v: Value) -> Optional[Poly]:
        """A uniform integer scalar as a polynomial over scalar leaves."""
        return self.index(v, ())

    def index(self, v: Value, axes: Axes) -> Optional[Poly]:
        """An integer tile (or scalar, ``axes == ()``) as a polynomial; None if it is not one."""
        key = (v.id, axes)
        if key not in self._memo:
            self._memo[key] = self._index(v, axes)
        return self._memo[key]

    def _index(self, v: Value, axes: Axes) -> Optional[Poly]:
        t = scalar_of(v.type)
        if isinstance(t, pointer_type) or not t.is_int() or t.is_int1():
            return None
        op = v.op
        if op is None:
            return self._block_arg(v) if not axes else None
        if op.name == "constant":
            val = op.attrs["value"]
            return Poly.const(val) if isinstance(val, int) and not isinstance(val, bool) else None
        if op.name in ("add", "sub", "mul"):
            a, b = (self.index(o, axes) for o in op.operands)
            if a is None or b is None:
                return None
            return a + b if op.name == "add" else a - b if op.name == "sub" else a * b
        if op.name in _TRANSPARENT or (op.name == "cast" and _widens(op)):
            return self.index(op.operands[0], axes)
        if not axes:
            return self._leaf(v)
        if op.name == "arange":
            start, end = op.attrs["start"], op.attrs["end"]
            return Poly.const(start) + (Poly.leaf(axis(axes[0])) if axes[0] is not None and end - start > 1
                                        else Poly())
        moved = self.moved_axes(op, axes)
        return None if moved is None else self.index(op.operands[0], moved)

    def moved_axes(self, op: Op, axes: Axes) -> Optional[Axes]:
        """The axes of a shape op's operand (``splat``: a scalar; ``expand_dims``, ``broadcast``)."""
        if op.name == "splat":
            return ()
        if op.name == "expand_dims":
            k = op.attrs["axis"]
            return axes[:k] + axes[k + 1:]
        if op.name == "broadcast":
            src = shape_of(op.operands[0].type)
            if len(src) != len(axes):
                return None
            return tuple(None if s == 1 else a for s, a in zip(src, axes))
        return None

    def _leaf(self, v: Value) -> Optional[Poly]:
        if scalar_of(v.type).name != "int32":
            return None  # leaves are re-emitted as i32 arithmetic
        self.values[v.id] = v
        return Poly.leaf(("v", v.id))

    def _block_arg(self, v: Value) -> Optional[Poly]:
        """A function argument is a leaf; a ``scf.for`` induction variable is ``lb + step * t``."""
        if v.id in self._args:
            return self._leaf(v)
        loop = _loop_of(v)
        if loop is None or v is not loop.regions[0].args[0]:
            return self._leaf(v) if loop is not None and _is_uniform_carry(v) else None
        step, lb = self.scalar(loop.operands[2]), self.scalar(loop.operands[0])
        step = step.constant() if step is not None else None
        if step is None or step <= 0 or lb is None:
            return self._leaf(v)
        self.loops[id(loop)] = loop
        return lb + Poly.const(step) * Poly.leaf(("t", id(loop)))

    # -- pointers ----------------------------------------------------------------------------------

    def pointer(self, v: Value, axes: Axes) -> Optional[Tuple[Value, Poly]]:
        """A pointer tile as (base pointer argument, element offset polynomial); None if not one."""
        op = v.op
        if op is None:
            if v.id in self._args:
                return v, Poly()
            loop = _loop_of(v)
            return self._carried(loop, v, axes) if loop is not None and v.index > 0 else None
        if op.name == "addptr":
            p = self.pointer(op.operands[0], axes)
            off = self.index(op.operands[1], axes)
            return None if p is None or off is None else (p[0], p[1] + off)
        if op.name in _TRANSPARENT:
            return self.pointer(op.operands[0], axes)
        moved = self.moved_axes(op, axes)
        return None if moved is None else self.pointer(op.operands[0], moved)

    def _carried(self, loop: Op, arg: Value, axes: Axes) -> Optional[Tuple[Value, Poly]]:
        """A loop-carried pointer advanced by a loop-invariant uniform amount per trip."""
        body = loop.regions[0]
        j = arg.index - 1
        init = self.pointer(loop.operands[3 + j], axes)
        iv = self.scalar(body.args[0])
        trip = ("t", id(loop))
        if init is None or iv is None or trip not in iv.leaves():
            return None
        advance, cur = Poly(), body.ops[-1].operands[j]
        while cur is not arg:
            op = cur.op
            if op is None or op.block is not body or op.name not in ("addptr",) + _TRANSPARENT:
                return None
            if op.name == "addptr":
                off = self.index(op.operands[1], axes)
                if off is None:
                    return None
                advance = advance + off
            cur = op.operands[0]
        if any(is_axis(k) or self._inside(k, loop) for k in advance.leaves()):
            return None  # the advance must be the same uniform amount every trip
        return init[0], init[1] + Poly.leaf(trip) * advance

    def _inside(self, key, loop: Op) -> bool:
        """Whether leaf ``key`` is defined inside ``loop`` (so it may change from trip to trip)."""
        if key[0] == "t":  # a trip count changes inside its own loop and in those around it
            blk = self.loops[key[1]].regions[0]
        else:
            v = self.values[key[1]]
            blk = v.owner if isinstance(v.owner, Block) else v.owner.block
        while blk is not None:
            if blk.parent is loop:
                return True
            blk = blk.parent.block if blk.parent is not None else None
        return False


def _widens(op: Op) -> bool:
    """An int -> int cast that keeps every value (sign extension, or the same width)."""
    src, dst = scalar_of(op.operands[0].type), scalar_of(op.results[0].type)
    if isinstance(src, pointer_type) or isinstance(dst, pointer_type) or not (src.is_int() and dst.is_int()):
        return False
    if src.is_int1() or dst.is_int1():
        return False
    return dst.int_bitwidth > src.int_bitwidth and src.is_int_signed() and dst.is_int_signed() or \
        dst.int_bitwidth == src.int_bitwidth and src.is_int_signed() == dst.is_int_signed()


def _loop_of(v: Value) -> Optional[Op]:
    """The ``scf.for`` whose body ``v`` is an argument of (None otherwise)."""
    blk = v.owner if isinstance(v.owner, Block) else None
    if blk is None or blk.parent is None or blk.parent.name != "scf.for":
        return None
    return blk.parent


def _is_uniform_carry(v: Value) -> bool:
    """A carried scalar (uniform; it changes from trip to trip, which ``_inside`` sees)."""
    return not shape_of(v.type)
