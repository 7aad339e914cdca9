"""Constant folding, algebraic identities, CSE and DCE on the tile IR.

Folding follows MLIR's arith folders, which Triton's canonicalizer applies: an integer compare of two constants
becomes a constant, and a ``select`` on a constant condition becomes the operand it chooses (``tl.where(C == 1,
a, b)`` with ``C`` a constexpr is a select on ``True`` from the frontend; Liger-Kernel's rope). Left in place, the
unchosen operand would count as a use: passes that ask what an address depends on (passes/l2_reuse.py) would see
it.
"""
from __future__ import annotations

from typing import Dict, List, Optional

from ...language.dtypes import dtype, pointer_type, scalar_of
from ..ir.core import Block, Function, Op, Value, replace_all_uses
from ..ir.ops import OPS


def _const_value(v: Value):
    op = v.op
    return op.attrs["value"] if op is not None and op.name == "constant" else None


def _is_const(v: Value) -> bool:
    op = v.op
    return op is not None and op.name == "constant"


def _wrap_int(x: int, t: dtype) -> int:
    bits = t.int_bitwidth
    if t.is_int1():
        return int(bool(x))
    x &= (1 << bits) - 1
    if t.is_int_signed() and x >> (bits - 1):
        x -= 1 << bits
    return x


def _convert(value, src, dst):
    if isinstance(dst, pointer_type) or isinstance(src, pointer_type):
        return None
    if dst.is_floating():
        return float(value)
    if dst.is_int():
        if isinstance(value, float):
            if value != value or value in (float("inf"), float("-inf")):
                return None
            value = int(value)  # truncates toward zero, like cvt.rzi
        return _wrap_int(int(value), dst)
    return None


_INT_FOLD = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b,
    "smax": max, "smin": min,
}


_CMP = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
        "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}


def _fold_cmpi(op: Op):
    """``cmpi`` of two integer constants: True/False, the operands read signed or unsigned as the predicate says."""
    t = op.operands[0].type
    if isinstance(scalar_of(t), pointer_type) or not scalar_of(t).is_int():
        return None
    pred = op.attrs.get("pred", "")
    rel = pred if pred in ("eq", "ne") else pred[1:]
    if rel not in _CMP:
        return None
    bits = scalar_of(t).int_bitwidth
    a, b = (int(_const_value(o)) & ((1 << bits) - 1) for o in op.operands)
    if pred[0] == "s":   # as LLVM reads it: a signed i1 true is -1
        a, b = (x - (1 << bits) if x >> (bits - 1) else x for x in (a, b))
    return _CMP[rel](a, b)


def _fold(op: Op):
    """Return a new constant value for ``op`` or None."""
    if op.name == "cmpi" and all(_is_const(o) for o in op.operands):
        return _fold_cmpi(op)
    if op.name == "cast" and _is_const(op.operands[0]):
        return _convert(_const_value(op.operands[0]), scalar_of(op.operands[0].type), scalar_of(op.results[0].type))
    if op.name in ("splat", "broadcast") and _is_const(op.operands[0]):
        return _const_value(op.operands[0])
    if op.name in _INT_FOLD and all(_is_const(o) for o in op.operands):
        t = scalar_of(op.results[0].type)
        a, b = (_const_value(o) for o in op.operands)
        return _wrap_int(_INT_FOLD[op.name](int(a), int(b)), t)
    return None


def _identity(op: Op) -> Optional[Value]:
    """x + 0, x * 1, x - 0 -> x (same type); select(constant c, a, b) -> a or b; trans(trans(x)) -> x when the
    two permutations cancel."""
    if op.name == "trans":
        from ...options import get
        return _trans_of_trans(op) if get("KERNELC_RING_VIEWS") else None
    if op.name == "select" and _is_const(op.operands[0]):
        chosen = op.operands[1] if _const_value(op.operands[0]) else op.operands[2]
        return chosen if chosen.type == op.results[0].type else None
    if len(op.operands) != 2 or not op.results:
        return None
    a, b = op.operands
    rt = op.results[0].type
    if op.name in ("add", "sub", "or", "xor", "shl", "ashr", "lshr") and _const_value(b) == 0 and a.type == rt:
        return a
    if op.name in ("add", "or", "xor") and _const_value(a) == 0 and b.type == rt:
        return b
    if op.name == "mul" and _const_value(b) == 1 and a.type == rt:
        return a
    if op.name == "mul" and _const_value(a) == 1 and b.type == rt:
        return b
    if op.name == "addptr" and _const_value(b) == 0 and a.type == rt:
        return a
    return None


def _trans_of_trans(op: Op) -> Optional[Value]:
    """The tile ``op`` permutes back: a value read both as ``trans(x)`` and as ``trans(trans(x))`` (the
    attention backward's q^T, read as the B of k q^T and, transposed back, of dS^T q) is then read as
    ``x`` and ``trans(x)``, which the ring passes can serve from one shared-memory copy."""
    inner = op.operands[0].op
    if inner is None or inner.name != "trans" or op.attrs.get("layout") or inner.attrs.get("layout"):
        return None
    x = inner.operands[0]
    p_in, p_out = list(inner.attrs.get("perm", [])), list(op.attrs.get("perm", []))
    if len(p_in) != len(p_out) or x.type != op.results[0].type:
        return None
    return x if all(p_in[p_out[i]] == i for i in range(len(p_out))) else None


def fold_constants(fn: Function) -> Function:
    _fold_block(fn.body, fn.body)
    return fn


def _fold_block(block: Block, root: Block):
    for op in list(block.ops):
        for r in op.regions:
            _fold_block(r, root)
        v = _fold(op) if op.results else None
        if v is not None:
            new = Op("constant", [], [op.results[0].type], {"value": v}, loc=op.loc)
            new.block = block
            block.ops[block.ops.index(op)] = new
            replace_all_uses(root, op.results[0], new.results[0])
            continue
        same = _identity(op)
        if same is not None:
            replace_all_uses(root, op.results[0], same)


def _key(op: Op):
    try:
        attrs = tuple(sorted((k, repr(v)) for k, v in op.attrs.items()))
    except Exception:
        return None
    return (op.name, tuple(o.id for o in op.operands), attrs, tuple(str(r.type) for r in op.results))


def cse(fn: Function) -> Function:
    """Merge identical pure ops; a value defined in an enclosing block is reused inside regions."""
    _cse_block(fn.body, {}, fn.body)
    return fn


def _cse_block(block: Block, seen: Dict, root: Block):
    seen = dict(seen)
    for op in list(block.ops):
        d = OPS.get(op.name)
        if d is not None and d.pure and not op.regions and op.results:
            k = _key(op)
            if k is not None:
                prev = seen.get(k)
                if prev is not None:
                    for a, b in zip(op.results, prev.results):
                        replace_all_uses(root, a, b)
                    block.ops.remove(op)
                    continue
                seen[k] = op
        for r in op.regions:
            _cse_block(r, seen, root)


def dce(fn: Function) -> Function:
    """Remove pure ops whose results are unused (iterating to a fixpoint)."""
    while True:
        used = set()
        for op in fn.walk():
            for o in op.operands:
                used.add(o.id)
        removed = _dce_block(fn.body, used)
        if not removed:
            return fn


def _dce_block(block: Block, used) -> int:
    n = 0
    keep: List[Op] = []
    for op in block.ops:
        for r in op.regions:
            n += _dce_block(r, used)
        d = OPS.get(op.name)
        pure = d is not None and d.pure and op.name not in ("scf.for", "scf.if", "scf.while")
        if pure and op.results and not any(r.id in used for r in op.results):
            n += 1
            continue
        keep.append(op)
    block.ops[:] = keep
    return n


def simplify(fn: Function) -> Function:
    for p in (fold_constants, cse, fold_constants, dce):
        fn = p(fn)
    return fn
