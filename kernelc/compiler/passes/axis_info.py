"""Axis analysis: per tile dimension, how values are laid out in memory terms.

For each integer/pointer value and each dimension d:
  contiguity[d]   runs of this many elements step by +1 along d,
  divisibility[d] the first element of each run is divisible by this power of two
                  (bytes for pointers, units for integers),
  constancy[d]    runs of this many elements are equal along d.
Loads and stores use it to pick 128-bit vector accesses and coalesced layouts; masks need constancy
over a vector to predicate it as one. Rules are per op (a table), as in Triton's AxisInfo.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import gcd
from typing import Callable, Dict, Tuple

from ...language.dtypes import pointer_type, scalar_of, shape_of
from ..ir.core import Function, Op, Value

MAX_DIV = 1 << 30


def _pow2_div(v: int) -> int:
    v = abs(int(v))
    if v == 0:
        return MAX_DIV
    return min(v & -v, MAX_DIV)


@dataclass(frozen=True)
class AxisInfo:
    contiguity: Tuple[int, ...]
    divisibility: Tuple[int, ...]
    constancy: Tuple[int, ...]
    value: object = None  # known constant value (scalar or splat)

    @staticmethod
    def unknown(rank: int) -> "AxisInfo":
        r = max(rank, 1)
        return AxisInfo((1,) * r, (1,) * r, (1,) * r)

    @staticmethod
    def const(shape, value) -> "AxisInfo":
        r = max(len(shape), 1)
        shp = shape or (1,)
        div = _pow2_div(value) if isinstance(value, int) and not isinstance(value, bool) else 1
        return AxisInfo((1,) * r, (div,) * r, tuple(shp), value)

    def meet(self, other: "AxisInfo") -> "AxisInfo":
        return AxisInfo(tuple(gcd(a, b) for a, b in zip(self.contiguity, other.contiguity)),
                        tuple(gcd(a, b) for a, b in zip(self.divisibility, other.divisibility)),
                        tuple(gcd(a, b) for a, b in zip(self.constancy, other.constancy)),
                        self.value if self.value == other.value else None)


def _shape(v: Value):
    return shape_of(v.type) or (1,)


def _elt_bytes(v: Value) -> int:
    t = scalar_of(v.type)
    return t.element_ty.itemsize if isinstance(t, pointer_type) else 1


class AxisAnalysis:
    """Runs the rules over a function (with a fixpoint over loop-carried values)."""

    def __init__(self, fn: Function):
        self.fn = fn
        self.info: Dict[int, AxisInfo] = {}
        for a, v in zip(fn.arguments, fn.body.args):
            div = a.divisibility if a.divisibility > 1 else 1
            self.info[v.id] = AxisInfo((1,), (div,), (1,), 1 if a.equal_to_1 else None)
        self._block(fn.body)

    def get(self, v: Value) -> AxisInfo:
        i = self.info.get(v.id)
        if i is None:
            i = AxisInfo.unknown(len(shape_of(v.type)))
            self.info[v.id] = i
        return i

    def _block(self, block):
        for op in block.ops:
            self._op(op)

    def _op(self, op: Op):
        if op.name == "scf.for":
            body = op.regions[0]
            lb, ub, step = (self.get(v) for v in op.operands[:3])
            sv = step.value if isinstance(step.value, int) else None
            iv_div = gcd(lb.divisibility[0], _pow2_div(sv) if sv is not None else step.divisibility[0])
            self.info[body.args[0].id] = AxisInfo((1,), (iv_div,), (1,))
            inits = op.operands[3:]
            for a, v in zip(body.args[1:], inits):
                self.info[a.id] = self.get(v)
            for _ in range(3):  # fixpoint over carried values
                self._block(body)
                yld = body.ops[-1]
                changed = False
                for a, y in zip(body.args[1:], yld.operands):
                    m = self.info[a.id].meet(self.get(y))
                    if m != self.info[a.id]:
                        self.info[a.id] = m
                        changed = True
                if not changed:
                    break
            for r, a in zip(op.results, body.args[1:]):
                self.info[r.id] = self.info[a.id]
            return
        if op.name == "scf.while":
            self._while(op)
            return
        if op.name == "scf.if":
            for region in op.regions:
                self._block(region)
            for i, r in enumerate(op.results):
                a = self.get(op.regions[0].ops[-1].operands[i])
                b = self.get(op.regions[1].ops[-1].operands[i])
                self.info[r.id] = a.meet(b)
            return
        for region in op.regions:
            for a in region.args:
                self.info[a.id] = AxisInfo.unknown(len(shape_of(a.type)))
            self._block(region)
        rule = RULES.get(op.name)
        for i, r in enumerate(op.results):
            if rule is not None and i == 0:
                try:
                    self.info[r.id] = rule(self, op)
                    continue
                except Exception:  # an analysis gap must never break compilation
                    pass
            self.info[r.id] = AxisInfo.unknown(len(shape_of(r.type)))


    def _while(self, op: Op):
        """``scf.while``: the before-region's arguments start as the inits and meet the after-region's
        yields until nothing changes (a block pointer advanced by a constant keeps its offsets'
        divisibility); unknown if that takes more than a few rounds."""
        before, after = op.regions
        if len(before.args) != len(op.operands):
            for region in op.regions:
                for a in region.args:
                    self.info[a.id] = AxisInfo.unknown(len(shape_of(a.type)))
                self._block(region)
            for r in op.results:
                self.info[r.id] = AxisInfo.unknown(len(shape_of(r.type)))
            return
        for a, v in zip(before.args, op.operands):
            self.info[a.id] = self.get(v)
        for rnd in range(6):
            self._block(before)
            cond = before.ops[-1]
            for a, v in zip(after.args, cond.operands[1:]):
                self.info[a.id] = self.get(v)
            self._block(after)
            changed = False
            for a, y in zip(before.args, after.ops[-1].operands):
                m = self.info[a.id].meet(self.get(y))
                if m != self.info[a.id]:
                    self.info[a.id] = AxisInfo.unknown(len(shape_of(a.type))) if rnd == 4 else m
                    changed = True
            if not changed:
                break
        for r, v in zip(op.results, before.ops[-1].operands[1:]):
            self.info[r.id] = self.get(v)


# -- rules -------------------------------------------------------------------------------------


def _r_constant(a, op):
    return AxisInfo.const(shape_of(op.results[0].type), op.attrs["value"])


def _r_arange(a, op):
    start, end = op.attrs["start"], op.attrs["end"]
    return AxisInfo((end - start,), (_pow2_div(start),), (1,))


def _r_splat(a, op):
    s = a.get(op.operands[0])
    shp = _shape(op.results[0])
    return AxisInfo((1,) * len(shp), (s.divisibility[0],) * len(shp), tuple(shp), s.value)


def _r_broadcast(a, op):
    s = a.get(op.operands[0])
    src, dst = _shape(op.operands[0]), _shape(op.results[0])
    con = tuple(d if sd == 1 and d != 1 else c for c, sd, d in zip(s.constancy, src, dst))
    return AxisInfo(s.contiguity, s.divisibility, con, s.value)


def _r_expand(a, op):
    s = a.get(op.operands[0])
    ax = op.attrs["axis"]
    if not shape_of(op.operands[0].type):
        s = AxisInfo((1,), (s.divisibility[0],), (1,), s.value)
        return AxisInfo((1, 1)[:len(_shape(op.results[0]))], (s.divisibility[0],) * len(_shape(op.results[0])),
                        (1,) * len(_shape(op.results[0])), s.value)
    ins = lambda t, v: t[:ax] + (v,) + t[ax:]  # noqa: E731
    # along the new dimension every element starts a run: divisible only by what all of them are (a run of
    # +1 steps is not; as Triton). Taking the runs' first element made cols[None, :] look divisible along rows,
    # so a triangular mask (cols[None, :] < rows[:, None]) read as constant over blocks: vector stores, one predicate
    div = 0
    for c, d in zip(s.contiguity, s.divisibility):
        div = gcd(div, 1 if c > 1 else d)
    return AxisInfo(ins(s.contiguity, 1), ins(s.divisibility, div or 1), ins(s.constancy, 1), s.value)


def _r_trans(a, op):
    s = a.get(op.operands[0])
    p = op.attrs["perm"]
    return AxisInfo(tuple(s.contiguity[i] for i in p), tuple(s.divisibility[i] for i in p),
                    tuple(s.constancy[i] for i in p), s.value)


def _binval(op, a, f):
    x, y = (a.get(v).value for v in op.operands)
    if isinstance(x, int) and isinstance(y, int) and not isinstance(x, bool) and not isinstance(y, bool):
        try:
            return f(x, y)
        except ZeroDivisionError:
            return None
    return None


def _r_add(a, op, sub=False):
    x, y = (a.get(v) for v in op.operands)
    scale = _elt_bytes(op.results[0]) if op.name == "addptr" else 1
    ydiv = tuple(min(d * scale, MAX_DIV) for d in y.divisibility)
    if sub:
        cont = tuple(gcd(cx, ky) for cx, ky in zip(x.contiguity, y.constancy))
    else:
        cont = tuple(max(gcd(cx, ky), gcd(kx, cy)) for cx, ky, kx, cy in
                     zip(x.contiguity, y.constancy, x.constancy, y.contiguity))
    div = tuple(gcd(dx, dy) for dx, dy in zip(x.divisibility, ydiv))
    con = tuple(gcd(kx, ky) for kx, ky in zip(x.constancy, y.constancy))
    val = _binval(op, a, (lambda p, q: p - q) if sub else (lambda p, q: p + q)) if op.name != "addptr" else None
    return AxisInfo(cont, div, con, val)


def _r_mul(a, op):
    x, y = (a.get(v) for v in op.operands)
    cont = []
    for cx, cy, xv, yv in zip(x.contiguity, y.contiguity, [x.value] * len(x.contiguity), [y.value] * len(y.contiguity)):
        cont.append(cx if yv == 1 else (cy if xv == 1 else 1))
    div = tuple(min(dx * dy, MAX_DIV) for dx, dy in zip(x.divisibility, y.divisibility))
    con = tuple(gcd(kx, ky) for kx, ky in zip(x.constancy, y.constancy))
    return AxisInfo(tuple(cont), div, con, _binval(op, a, lambda p, q: p * q))


def _r_div(a, op):
    x, y = (a.get(v) for v in op.operands)
    con = tuple(gcd(kx, ky) for kx, ky in zip(x.constancy, y.constancy))
    div = (1,) * len(con)
    if isinstance(y.value, int) and y.value > 0:
        # a contiguous run starting at a multiple of k, divided by k, is constant over k elements
        k = y.value
        con = tuple(max(c, gcd(cx, k) if dx % k == 0 else c) for c, cx, dx in zip(con, x.contiguity, x.divisibility))
        div = tuple(max(1, dx // k) if dx % k == 0 else 1 for dx in x.divisibility)
    return AxisInfo((1,) * len(con), div, con, _binval(op, a, lambda p, q: int(p / q)))


def _r_rem(a, op):
    x, y = (a.get(v) for v in op.operands)
    con = tuple(gcd(kx, ky) for kx, ky in zip(x.constancy, y.constancy))
    # x % m does not wrap inside a run that starts at a multiple of gcd(divisibilities) when m is
    # constant along the dim (Triton's rule): contiguity gcd(contig(x), div(m)).
    cont = tuple(gcd(cx, dy) if ky > 1 or len(con) == 1 else 1
                 for cx, dy, ky in zip(x.contiguity, y.divisibility, y.constancy))
    div = tuple(gcd(dx, dy) for dx, dy in zip(x.divisibility, y.divisibility))
    return AxisInfo(cont, div, con, _binval(op, a, lambda p, q: p - q * int(p / q)))


def _r_cmp(a, op):
    x, y = (a.get(v) for v in op.operands)
    con = [gcd(kx, ky) for kx, ky in zip(x.constancy, y.constancy)]
    # A contiguous run x compared with a constant y by x < y (x >= y) flips once, where x reaches y: between
    # blocks of gcd(divisibilities). x <= y, x > y flip one element later, x == y is true at one element: inside
    # a block (a vector load masked by ``offs == n`` would read past n), so only the strict-lower forms count.
    pred = op.attrs.get("pred")
    for d in range(len(con)):
        if pred in ("slt", "sge", "ult", "uge") and y.constancy[d] > 1 and x.contiguity[d] > 1:
            con[d] = max(con[d], gcd(gcd(x.contiguity[d], y.constancy[d]), gcd(x.divisibility[d], y.divisibility[d])))
        if pred in ("sgt", "sle", "ugt", "ule") and x.constancy[d] > 1 and y.contiguity[d] > 1:
            con[d] = max(con[d], gcd(gcd(y.contiguity[d], x.constancy[d]), gcd(y.divisibility[d], x.divisibility[d])))
    return AxisInfo((1,) * len(con), (1,) * len(con), tuple(con))


def _r_logic(a, op):
    infos = [a.get(v) for v in op.operands]
    con = infos[0].constancy
    for i in infos[1:]:
        con = tuple(gcd(p, q) for p, q in zip(con, i.constancy))
    if op.name == "select":
        c, x, y = infos
        cont = tuple(gcd(gcd(cx, cy), kc) for cx, cy, kc in zip(x.contiguity, y.contiguity, c.constancy))
        div = tuple(gcd(dx, dy) for dx, dy in zip(x.divisibility, y.divisibility))
        return AxisInfo(cont, div, con)
    return AxisInfo((1,) * len(con), (1,) * len(con), con)


def _r_shift(a, op):
    x, y = (a.get(v) for v in op.operands)
    con = tuple(gcd(kx, ky) for kx, ky in zip(x.constancy, y.constancy))
    if op.name == "shl" and isinstance(y.value, int) and 0 <= y.value < 31:
        return AxisInfo((1,) * len(con), tuple(min(d << y.value, MAX_DIV) for d in x.divisibility), con)
    return AxisInfo((1,) * len(con), (1,) * len(con), con)


def _r_same(a, op):
    return a.get(op.operands[0])


def _r_cast(a, op):
    s = a.get(op.operands[0])
    t = scalar_of(op.results[0].type)
    if getattr(t, "is_int", lambda: False)() or isinstance(t, pointer_type):
        return s
    return AxisInfo((1,) * len(s.contiguity), (1,) * len(s.contiguity), s.constancy)


def _r_hint(a, op):
    s = a.get(op.operands[0])
    cont, div, con = list(s.contiguity), list(s.divisibility), list(s.constancy)
    if "multiple_of" in op.attrs:
        mult = op.attrs["multiple_of"]
        div = [max(d, _pow2_div(m) * (_elt_bytes(op.results[0]) if isinstance(scalar_of(op.results[0].type), pointer_type) else 1)) for d, m in zip(div, mult)]
    if "max_contiguous" in op.attrs:
        cont = [max(c, m) for c, m in zip(cont, op.attrs["max_contiguous"])]
    if "max_constancy" in op.attrs:
        con = [max(c, m) for c, m in zip(con, op.attrs["max_constancy"])]
    return AxisInfo(tuple(cont), tuple(div), tuple(con), s.value)


def _r_pid(a, op):
    return AxisInfo((1,), (1,), (1,))


def _r_minmax(a, op):
    x, y = (a.get(v) for v in op.operands)
    con = tuple(gcd(kx, ky) for kx, ky in zip(x.constancy, y.constancy))
    return AxisInfo((1,) * len(con), tuple(gcd(p, q) for p, q in zip(x.divisibility, y.divisibility)), con)


RULES: Dict[str, Callable] = {
    "constant": _r_constant, "arange": _r_arange, "splat": _r_splat, "broadcast": _r_broadcast,
    "expand_dims": _r_expand, "trans": _r_trans, "add": _r_add, "addptr": _r_add,
    "sub": lambda a, op: _r_add(a, op, sub=True), "mul": _r_mul, "sdiv": _r_div, "udiv": _r_div,
    "srem": _r_rem, "urem": _r_rem, "cmpi": _r_cmp, "cmpf": _r_cmp, "and": _r_logic, "or": _r_logic,
    "xor": _r_logic, "select": _r_logic, "shl": _r_shift, "ashr": _r_shift, "lshr": _r_shift,
    "cast": _r_cast, "bitcast": _r_same, "convert_layout": _r_same, "hint": _r_hint, "program_id": _r_pid, "num_programs": _r_pid,
    "smax": _r_minmax, "smin": _r_minmax, "umax": _r_minmax, "umin": _r_minmax,
}


def analyze(fn: Function) -> AxisAnalysis:
    return AxisAnalysis(fn)
