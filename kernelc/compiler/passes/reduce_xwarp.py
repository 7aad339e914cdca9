"""How a block reduction crosses warps and lanes, written on each ``reduce``: ``xwarp="broadcast"`` and
``bfly="down"`` (absent: codegen's default forms).

A reduction to one value per block (``tl.sum(x, axis=0)`` of a row) ends with a step across warps through shared
memory. ``allreduce`` (codegen's form without the mark) has every lane store its warp's partial, one barrier, and
every warp read all ``nw`` partials and combine them with ``log2(nw)`` shuffles: one barrier. ``broadcast`` (the
default) is Triton's form: lane 0 of each warp stores, the first ``nw`` lanes of warp 0 read and combine them,
thread 0 stores the result, a second barrier, every thread reads it back. One barrier more, and yet on an H200
log_softmax's forward (8192^2 fp16, two such reductions a row) ran 0.78% faster with it, from 0.995 of Triton to
1.002 (docs/performance.md, session 19). ``bfly="down"`` runs each butterfly from the farthest lane (16, 8,
.., 1) as Triton does, instead of from the nearest (1, 2, .., 16); a float sum rounds differently.

``multi`` (the default since session 20) marks ``broadcast`` only in a kernel with two or more such reductions
(softmax's and log_softmax's forward rows: a max, then a sum) and leaves a kernel with one (their backward rows)
``allreduce``: on an H200, at each form's build without a register ceiling, log_softmax's backward (8192^2 fp16)
ran 1.003 of Triton in ``allreduce`` and 0.998 in ``broadcast``, softmax's backward 0.9985 and 0.9991
(docs/performance.md, session 20, call R1).

``lds`` (session 22) marks every reduction to one value per block: every thread reads all ``nw`` partials with
16-byte shared loads of one address a warp and combines them as a tree (one barrier, no shuffles after it).
``multi_lds`` (the default since session 22) is ``multi`` with ``lds`` where ``multi`` leaves ``allreduce`` and
the kernel has no work that could run under the cross-warp step's latency (``overlappable_work``: a load or a float
tile op that neither feeds the reduction nor reads its result). On an H200 (docs/performance.md, session 22)
softmax's backward (8192^2 fp16: all its work feeds ``sum(y * dy)`` or reads it) ran 0.65% faster with ``lds``
(1.0078 of Triton against 1.0013, 5 of 5 processes in two calls); log_softmax's backward, whose ``exp(y)`` does not
depend on ``sum(dy)``, ran 0.7% slower (ptxas interleaves those exponentials with the partials' loads and issues
the last load after the first is used), so it keeps ``allreduce``; the forwards (two reductions: broadcast) ran
0.3-0.4% slower with ``lds``.

``broadcast`` is marked only where it applies: one result per block of one 32-bit operand (f32, i32: not an
argmax's value-index pair, whose broadcast lowering no GPU run has checked), and a one-pass
kernel (no loop that loads: ``register_budget.loads_in_a_loop``). In loop kernels it changed the register
budget's builds unmeasured (a persistent row softmax 64 -> 80 registers, tutorial 05's forward losing its
launch-bound build), so they keep ``allreduce`` until measured. codegen falls back to ``allreduce`` in a
warp-specialised kernel. Knobs ``KERNELC_REDUCE_XWARP``, ``KERNELC_REDUCE_BFLY``.

Where the partials go (``KERNELC_REDUCE_SCRATCH``, :func:`mark_reduce_scratch`): every cross-warp step uses the
one scratch area at offset 0 (``shared``), so codegen's conflict tracking puts a barrier between one reduction's
last read (softmax forward: every thread reading the max) and the next one's stores (the sum's partials), as
Triton's code has. ``apart`` writes ``scratch_at`` (a byte offset) on each reduction to one value: each gets its
own area and that barrier goes; codegen still barriers wherever two accesses overlap (a loop's next iteration).

Example (broadcast, down): ``%s = reduce %x {axis=0, kind='add'}`` ->
``%s = reduce %x {axis=0, kind='add', xwarp='broadcast', bfly='down'}``
"""
from __future__ import annotations

from ...language.dtypes import scalar_of, shape_of
from ..ir.core import Function, defining_op, users
from ..ir.ops import OPS
from .register_budget import loads_in_a_loop, one_value

_B32 = ("fp32", "i32", "u32")   # str() of the scalar types codegen stores with one 32-bit register


def _broadcastable(op) -> bool:
    """A reduction to one value per block of one 32-bit operand: the form codegen lowers as ``broadcast``."""
    return one_value(op) and len(op.operands) == 1 and all(str(scalar_of(v.type)) in _B32 for v in op.operands)


def overlappable_work(fn: Function, red) -> bool:
    """Whether ``fn`` loads or computes (float or math ops) a tile that neither feeds the reduction ``red`` nor
    reads its result: work ptxas can schedule under the latency of ``red``'s cross-warp step (log_softmax's
    backward: ``exp(y)``, y's load; softmax's backward has none: everything feeds ``sum(y * dy)`` or reads it)."""
    use = users(fn.body)
    before, stack = set(), list(red.operands)
    while stack:
        d = defining_op(stack.pop())
        if d is not None and id(d) not in before:
            before.add(id(d))
            stack.extend(d.operands)
    after, stack = set(), list(red.results)
    while stack:
        for u in use.get(stack.pop().id, []):
            if id(u) not in after:
                after.add(id(u))
                stack.extend(u.results)
    for op in fn.walk():
        if op is red or id(op) in before or id(op) in after or not op.results or not shape_of(op.results[0].type):
            continue
        if op.name == "load" or (op.name in OPS and OPS[op.name].category in ("float", "math")):
            return True
    return False


def mark_reduce_xwarp(fn: Function, xwarp: str = "allreduce", bfly: str = "up") -> Function:
    """Set or clear ``xwarp`` and ``bfly`` on every ``reduce`` (module docstring). ``xwarp``: allreduce (no mark),
    broadcast (every such reduction of a one-pass kernel), multi (those of a one-pass kernel with two or more),
    lds (every reduction to one value) or multi_lds (multi, and lds where multi leaves allreduce and
    ``overlappable_work`` finds nothing).
    Mutates ``fn``."""
    onepass = not loads_in_a_loop(fn)
    reduces = [op for op in fn.walk() if op.name == "reduce"]
    mark = xwarp == "broadcast" or (xwarp in ("multi", "multi_lds") and sum(map(_broadcastable, reduces)) >= 2)
    for op in reduces:
        op.attrs.pop("xwarp", None)
        op.attrs.pop("bfly", None)
        if xwarp == "lds" and one_value(op):
            op.attrs["xwarp"] = "lds"
        elif mark and onepass and _broadcastable(op):
            op.attrs["xwarp"] = "broadcast"
        elif xwarp == "multi_lds" and onepass and one_value(op) and not overlappable_work(fn, op):
            op.attrs["xwarp"] = "lds"
        if bfly == "down":
            op.attrs["bfly"] = "down"
    return fn


def scratch_bytes(op, num_warps: int) -> int:
    """An upper bound on the scratch a reduction to one value needs for its cross-warp step (codegen/reduce.py:
    one partial per warp and operand, each operand's area 16-byte aligned)."""
    return sum((num_warps * max(1, scalar_of(v.type).primitive_bitwidth // 8) + 15) // 16 * 16 for v in op.operands)


def mark_reduce_scratch(fn: Function, mode: str = "shared", num_warps: int = 4) -> Function:
    """Set (``apart``: every reduction to one value per block; ``loops``: those inside a loop) or clear (``shared``)
    ``scratch_at``: consecutive 16-byte aligned areas, one a reduction, in program order (module docstring).
    Mutates ``fn``."""
    in_loop = {id(o) for op in fn.walk() if op.name in ("scf.for", "scf.while") for o in op.walk() if o is not op}
    off = 0
    for op in fn.walk():
        if op.name != "reduce":
            continue
        op.attrs.pop("scratch_at", None)
        if (mode == "apart" or (mode == "loops" and id(op) in in_loop)) and one_value(op):
            op.attrs["scratch_at"] = off
            off += scratch_bytes(op, num_warps)
    return fn
