"""Mark atomics whose old value nothing reads: ``attrs["result_unused"] = True``.

A scalar atomic is performed by thread 0, and its old value reaches the other threads through
shared memory (a store, a barrier, a load). A lock release ``tl.atomic_xchg(Lock, 0)`` or a counter
bump whose result is dropped needs none of that; inside a lock's critical section (Triton's
layer-norm backward) the two barriers per atomic lengthen the section every contending program
waits on. For a tile atomic with replicated elements the skipped step is copying the owner's old
value to the replicas. Codegen reads the mark (``codegen/memory.py``).

``vectorize_atomics``: on sm_90 a floating-point add whose old value nobody reads can be one
``red.global.add.v{2,4}.f32`` over contiguous elements instead of one
``atom`` with its own 64-bit address per element. Where the pointer tile's axis info proves
contiguous, aligned addresses, the pass writes ``vec=N`` on the op; layout assignment then gives the
atomic a layout with N contiguous elements per thread, and codegen issues one vector ``red`` per N.
"""
from __future__ import annotations

from ..ir.core import Function, users
from ...language.dtypes import scalar_of, shape_of
from .axis_info import analyze

ATOMICS = ("atomic_rmw", "atomic_cas")


def mark_unused_atomic_results(fn: Function) -> Function:
    """Set ``result_unused`` on every atomic whose result no op reads (clear it on the others). Mutates ``fn``."""
    use = users(fn.body)
    for op in fn.walk():
        if op.name in ATOMICS:
            if use.get(op.results[0].id):
                op.attrs.pop("result_unused", None)
            else:
                op.attrs["result_unused"] = True
    return fn


# PTX's vector red: .relaxed or .release only, .add of .f32 in 2 or 4 elements (sm_90+)
_VECTOR_SEMS = ("relaxed", "release")


def vectorize_atomics(fn: Function, arch_major: int) -> Function:
    """Write ``vec`` (elements per ``red``) on tile fp32 atomic adds that can be vector reductions.
    Run after ``mark_unused_atomic_results``. Mutates ``fn``."""
    if arch_major < 9:
        return fn
    axis = None
    for op in fn.walk():
        if op.name != "atomic_rmw":
            continue
        op.attrs.pop("vec", None)
        ptr = op.operands[0]
        shape = shape_of(ptr.type)
        if not shape or op.attrs.get("kind") != "fadd" or not op.attrs.get("result_unused") \
                or op.attrs.get("sem", "acq_rel") not in _VECTOR_SEMS or scalar_of(op.operands[1].type).name != "fp32":
            continue
        axis = axis or analyze(fn)
        info = axis.get(ptr)
        d = max(range(len(shape)), key=lambda i: (info.contiguity[i], i))
        vec = min(4, shape[d], info.contiguity[d], max(1, info.divisibility[d] // 4))
        if len(op.operands) > 2 and shape_of(op.operands[2].type):
            vec = min(vec, axis.get(op.operands[2]).constancy[d])
        vec = 1 << (max(1, vec).bit_length() - 1)
        if vec > 1:
            op.attrs["vec"] = vec
    return fn
