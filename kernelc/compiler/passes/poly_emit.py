"""Write polynomials (``passes/poly.py``) back as i32 tile-IR ops, at a chosen insertion point.

The leaves become the SSA values ``TileExprs`` recorded for them; a loop's trip count ``t`` becomes
the induction variable itself when the loop starts at 0 with step 1, else ``(iv - lb) / step``
computed once at the top of the loop body (exact: ``iv = lb + step * t``).

Arithmetic is in i32, or in i64 where the caller asks (a base offset or a stride: an original that
computed them in 64 bits, like attention's ``off_z.to(tl.int64) * stride_qz``, must not wrap here).

Example::

    emit(1024*%g*%s + 64*t - 1)  ->  %a = mul %g, %s ; %b = mul %a, 1024 ; %c = mul %k, 64
                                     %d = add %b, %c ; %e = sub %d, 1
"""
from __future__ import annotations

from typing import Dict, List, Optional

from ...language import dtypes as T
from ..ir.core import Block, Loc, Op, Value
from .poly import Poly
from .tile_exprs import TileExprs


class PolyEmitter:
    """Inserts ops before ``before`` in ``block`` (``before=None``: at the start of ``block``)."""

    def __init__(self, block: Block, before, loc: Loc, ex: TileExprs, trips: Dict[int, Value]):
        self.block, self.before, self.loc, self.ex, self.trips = block, before, loc, ex, trips
        self._start = 0  # the next position when inserting at the start of the block

    def op(self, name: str, operands: List[Value], ty, **attrs) -> Optional[Value]:
        """Insert op ``name`` (result type ``ty``; None: no result) and return its result."""
        new = Op(name, operands, [] if ty is None else [ty], attrs, loc=self.loc)
        new.block = self.block
        at = self.block.ops.index(self.before) if self.before is not None else self._start
        self.block.ops.insert(at, new)
        if self.before is None:
            self._start = at + 1
        return new.results[0] if new.results else None

    def const(self, c: int, ty=T.int32) -> Value:
        return self.op("constant", [], ty, value=int(c))

    def poly(self, p: Poly, ty=T.int32) -> Value:
        """The value of ``p`` computed in ``ty`` (i32, or i64: the leaves sign-extended first)."""
        acc = None
        # terms and factors in the program order of their leaves: leaf keys hold process-wide value ids and
        # addresses, so ordering by them changed the emitted ops (and ptxas's register allocation, up to
        # spills) with whatever the process had compiled before
        rank = self._ranks()
        order = lambda key: rank.get((key[0], key[1]), (1 << 62) + key[1])  # noqa: E731
        terms = sorted(p.terms.items(), key=lambda mc: (mc[1] < 0, len(mc[0]), sorted(map(order, mc[0]))))
        for mono, coef in terms:
            v = None
            for key in sorted(mono, key=order):
                leaf = self.leaf(key)
                if ty != T.int32:
                    leaf = self.op("cast", [leaf], ty)
                v = leaf if v is None else self.op("mul", [v, leaf], ty)
            mag = abs(coef)
            if v is None:
                v = self.const(mag, ty)
            elif mag != 1:
                v = self.op("mul", [v, self.const(mag, ty)], ty)
            if acc is None:
                acc = v if coef > 0 else self.op("sub", [self.const(0, ty), v], ty)
            else:
                acc = self.op("add" if coef > 0 else "sub", [acc, v], ty)
        return acc if acc is not None else self.const(0, ty)

    def _ranks(self) -> Dict[tuple, int]:
        """Leaf key -> position in the function (arguments first, then ops in program order)."""
        ranks = getattr(self.ex, "_leaf_ranks", None)
        if ranks is None:
            ranks = {("v", a.id): i for i, a in enumerate(self.ex.fn.body.args)}
            for op in self.ex.fn.walk():
                ranks[("t", id(op))] = len(ranks)
                for v in [*op.results, *(a for region in op.regions for a in region.args)]:
                    ranks[("v", v.id)] = len(ranks)
            self.ex._leaf_ranks = ranks
        return ranks

    def leaf(self, key) -> Value:
        if key[0] == "v":
            return self.ex.values[key[1]]
        return self.trip(self.ex.loops[key[1]])

    def trip(self, loop: Op) -> Value:
        """Loop ``loop``'s trip count in its body (one value per loop, shared by every user)."""
        if id(loop) in self.trips:
            return self.trips[id(loop)]
        body = loop.regions[0]
        iv = body.args[0]
        lb = self.ex.scalar(loop.operands[0])
        step = self.ex.scalar(loop.operands[2]).constant()
        if lb.constant() == 0 and step == 1:
            t = iv
        else:
            at = PolyEmitter(body, None, loop.loc, self.ex, self.trips)
            t = at.op("sub", [iv, loop.operands[0]], T.int32)
            if step != 1:
                t = at.op("sdiv", [t, at.const(step)], T.int32)
        self.trips[id(loop)] = t
        return t
