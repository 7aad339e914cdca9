"""``guard_tma_writes``: a TMA bulk reduction runs only where its tensor coordinates are all >= 0.

Hopper's copy engine takes negative coordinates on loads (the box's part above or left of the tensor
reads as the padding) but stops the kernel with "an illegal instruction was encountered" on a
``cp.reduce.async.bulk.tensor`` whose box starts at a negative coordinate; boxes past the tensor's end
are fine (docs/attention.md, "desc.atomic_add at negative coordinates", for the GPU evidence). So for every
``descriptor_reduce`` that ``lower_descriptors`` left for TMA (``tma=True``), this pass proves each offset
>= 0 or guards the op with a run-time test of the unproven ones:

    descriptor_reduce %d, %t, %r, %c {tma=True}
  ->
    %ok = and (cmpi sge %r, 0), (cmpi sge %c, 0)        (only the offsets not proven >= 0)
    scf.if %ok { descriptor_reduce %d, %t, %r, %c {tma=True} }
    else { <masked relaxed atomic adds of %t, clipped to the tensor (lower_descriptors' generic rewrite)> }

The offsets are scalars, so the test is uniform across the program: every thread takes the same branch
and the staging barriers ``expand_bulk_reductions`` writes into the TMA branch are reached by all. A
reduction skipped by the else-branch leaves its loop's staging stages as they were: a stage is reused only
after the bulk groups before it have read it, and fewer groups means older ones. The interpreter runs the
generic rewrite for every reduction, so its semantics do not change.

What is proven >= 0 (``NonNegative``): constants >= 0, program ids and counts, the induction variable of an
``scf.for`` whose lower bound and step are >= 0, and ``add``/``mul``/division/remainder/shifts/``and``/
``min``/``max``/widening casts/``select``s/hints of such values (i32 wrap-around is not modelled: an
offset that overflows is outside every tensor anyway). Arguments are not: an i32 argument may be negative.

``KERNELC_TMA_WRITE_GUARD=0`` turns the pass off (the TMA op then runs at any coordinate: what the
diagnostic in bench/experiments/bulk_reduce/ needs to show the fault).
"""
from __future__ import annotations

from typing import Dict, List

from ...language.core import builder_scope, tensor
from ...language.dtypes import dtype, shape_of
from ..frontend.ir_builder import IRBuilder
from ..ir.core import Block, Function, Op, Value
from .lower_descriptors import _rewrite

# the descriptor ops whose TMA form faults at a negative coordinate (GPU evidence: docs/attention.md)
GUARDED = ("descriptor_reduce",)


def _int_bits(ty) -> int:
    """The width of a signed integer type (a cast from unsigned or bool is not a sign extension)."""
    ok = isinstance(ty, dtype) and ty.is_int() and ty.is_int_signed() and not ty.is_int1()
    return ty.int_bitwidth if ok else 0


class NonNegative:
    """Which scalar integer values of ``fn`` are provably >= 0 (memoised, conservative)."""

    def __init__(self, fn: Function):
        self.memo: Dict[int, bool] = {}
        self.ivs: Dict[int, Op] = {}  # induction variable id -> its scf.for
        for op in fn.walk():
            if op.name == "scf.for":
                self.ivs[op.regions[0].args[0].id] = op

    def __call__(self, v: Value) -> bool:
        if v.id not in self.memo:
            self.memo[v.id] = False  # a cycle (loop-carried values) proves nothing
            self.memo[v.id] = self._prove(v)
        return self.memo[v.id]

    def _prove(self, v: Value) -> bool:
        if shape_of(v.type):
            return False
        loop = self.ivs.get(v.id)
        if loop is not None:  # iv = lb + k * step, k >= 0
            return self(loop.operands[0]) and self(loop.operands[2])
        op = v.op
        if op is None:
            return False  # a kernel argument or a loop-carried value
        n, xs = op.name, op.operands
        if n == "constant":
            val = op.attrs.get("value")
            return isinstance(val, (int, bool)) and val >= 0
        if n in ("program_id", "num_programs"):
            return True
        if n in ("add", "mul", "sdiv", "udiv", "srem", "urem", "smin", "umin", "or", "xor", "lshr", "ashr"):
            return self(xs[0]) and self(xs[1])
        if n in ("and", "smax"):
            return self(xs[0]) or self(xs[1])
        if n == "select":
            return self(xs[1]) and self(xs[2])
        if n == "hint":
            return self(xs[0])
        if n == "cast":
            src, dst = _int_bits(xs[0].type), _int_bits(v.type)
            return bool(src) and dst >= src and self(xs[0])
        return False


def guard_tma_writes(fn: Function, enabled: bool = True) -> Function:
    if not enabled:
        return fn
    ops = [op for op in fn.walk() if op.name in GUARDED and op.attrs.get("tma")]
    if not ops:
        return fn
    proof = NonNegative(fn)
    for op in ops:
        unproven = [v for v in op.operands[2:] if not proof(v)]
        if unproven:
            _guard(fn, op, unproven)
    return fn


def _guard(fn: Function, op: Op, offsets: List[Value]) -> None:
    """``op`` -> ``scf.if (every offset >= 0) { op } else { masked element-wise form }``."""
    block = op.block
    builder = IRBuilder(trace_function=None)
    scratch = builder.push(Block())
    builder.loc = op.loc
    with builder_scope(builder):
        ok = None
        for v in offsets:
            c = tensor(v, v.type) >= 0
            ok = c if ok is None else ok & c
    then_b, else_b = Block(), Block()
    at = block.ops.index(op)
    block.ops.remove(op)
    then_b.append(op)
    then_b.append(Op("scf.yield", [], [], loc=op.loc))
    generic = Op(op.name, op.operands, [], {k: v for k, v in op.attrs.items() if k != "tma"}, loc=op.loc)
    else_b.append(generic)
    _rewrite(fn, else_b, generic)
    else_b.append(Op("scf.yield", [], [], loc=op.loc))
    branch = Op("scf.if", [ok.handle], [], regions=[then_b, else_b], loc=op.loc)
    for k, new in enumerate(scratch.ops + [branch]):
        new.block = block
        block.ops.insert(at + k, new)
