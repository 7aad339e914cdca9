"""``guard_tma_writes``: a TMA copy into global memory runs only where its tensor coordinates are all >= 0.

Hopper's copy engine takes negative coordinates on loads (the box's part above or left of the tensor
reads as the padding) but stops the kernel with "an illegal instruction was encountered" on a shared ->
global copy whose box starts at a negative coordinate: ``cp.reduce.async.bulk.tensor`` (``desc.atomic_add``)
and ``cp.async.bulk.tensor`` stores (``desc.store``) alike, while boxes past the tensor's end are clipped as
documented (docs/attention.md, "desc.atomic_add at negative coordinates", for the GPU evidence). So for every
``descriptor_reduce`` (and, with ``KERNELC_TMA_WRITE_GUARD=all``, ``descriptor_store``) that
``lower_descriptors`` left for TMA (``tma=True``), this pass proves each offset >= 0 or guards the op with a
run-time test of the unproven ones:

    descriptor_reduce %d, %t, %r, %c {tma=True}
  ->
    %ok = and (cmpi sge %r, 0), (cmpi sge %c, 0)        (only the offsets not proven >= 0)
    scf.if %ok { descriptor_reduce %d, %t, %r, %c {tma=True} }
    else { <masked relaxed atomic adds of %t, clipped to the tensor (lower_descriptors' generic rewrite)> }

(a store: the masked store in the else-branch). A store ``lower_descriptors`` already split on its inner
extent (``scf.if %extent_ok { TMA store } else { masked store }``) gets the test and-ed into that condition
instead of a second branch.

The offsets are scalars, so the test is uniform across the program: every thread takes the same branch, and
the barriers of the TMA path (the store's, the staging barriers ``expand_bulk_reductions`` writes into the
branch) are reached by all. A reduction skipped by the else-branch leaves its loop's staging stages as they
were: a stage is reused only after the bulk groups before it have read it, and fewer groups means older ones.
The interpreter runs the generic rewrite for every descriptor op, so its semantics do not change.

What is proven >= 0 (``NonNegative``): constants >= 0, program ids and counts, the induction variable of an
``scf.for`` whose lower bound and step are >= 0, and ``add``/``mul``/``sdiv``/``min``/``max``/``or``/
``select``s/widening casts/hints of such values; a remainder, an unsigned quotient or a right shift of a
value >= 0 (whatever the divisor: C's remainder takes the dividend's sign). i32 wrap-around is not modelled
(an offset that overflows is outside every tensor anyway). Arguments are not: an i32 argument may be negative.

``KERNELC_TMA_WRITE_GUARD`` picks the ops: ``reduce`` (default) the reductions; ``all`` stores too, which is
not the default because the masked path of an unproven store costs the kernels with TMA-store epilogues their
warp specialisation or registers (the matmul's and attention's tile coordinates come from i32 arguments:
docs/attention.md has the numbers); ``off`` none (the TMA op at any coordinate: what the diagnostic in
bench/experiments/bulk_reduce/ needs to show the fault).
"""
from __future__ import annotations

from typing import Dict, List

from ...language.core import builder_scope, tensor
from ...language.dtypes import dtype, shape_of
from ..frontend.ir_builder import IRBuilder
from ..ir.core import Block, Function, Op, Value
from .lower_descriptors import branch_to_generic

# KERNELC_TMA_WRITE_GUARD -> the descriptor ops guarded. Both fault at a negative coordinate (GPU evidence:
# docs/attention.md); stores only on request, as their masked path costs the TMA-store epilogues of the
# matmul and attention kernels (whose coordinates are not provable from i32 arguments) registers and warp
# specialisation
GUARDED = {"reduce": ("descriptor_reduce",), "all": ("descriptor_reduce", "descriptor_store"), "off": ()}


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
        if n in ("srem", "urem", "udiv", "lshr", "ashr"):  # C remainders take the dividend's sign
            return self(xs[0])
        if n in ("add", "mul", "sdiv", "smin", "umin", "or", "xor"):
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


def guard_tma_writes(fn: Function, mode: str = "reduce") -> Function:
    """Guard the TMA ops of ``GUARDED[mode]`` whose offsets are not proven >= 0 (mode: KERNELC_TMA_WRITE_GUARD)."""
    ops = [op for op in fn.walk() if op.name in GUARDED[mode] and op.attrs.get("tma")]
    if not ops:
        return fn
    proof = NonNegative(fn)
    for op in ops:
        unproven = [v for v in op.operands[2:] if not proof(v)]
        if unproven:
            _guard(fn, op, unproven)
    return fn


def _extent_branch(op: Op):
    """The ``scf.if`` of ``lower_descriptors``' split of a store on its inner extent, if ``op`` is its TMA store."""
    parent = op.block.parent
    if op.attrs.get("extent_checked") and parent is not None and parent.name == "scf.if" and \
            op.block is parent.regions[0] and [o.name for o in op.block.ops] == [op.name, "scf.yield"]:
        return parent
    return None


def _guard(fn: Function, op: Op, offsets: List[Value]) -> None:
    """``op`` -> ``scf.if (every offset >= 0) { op } else { masked element-wise form }``, or the test and-ed
    into the extent test of a store already split on it."""
    split = _extent_branch(op)
    builder = IRBuilder(trace_function=None)
    scratch = builder.push(Block())
    builder.loc = op.loc
    with builder_scope(builder):
        ok = None
        for v in offsets:
            c = tensor(v, v.type) >= 0
            ok = c if ok is None else ok & c
        if split is not None:
            cond = split.operands[0]
            ok = tensor(cond, cond.type) & ok
    if split is not None:
        block = split.block
        at = block.ops.index(split)
        for k, new in enumerate(scratch.ops):
            new.block = block
            block.ops.insert(at + k, new)
        split.operands[0] = ok.handle
        return
    branch_to_generic(fn, op, ok.handle, scratch.ops, ("tma",))
