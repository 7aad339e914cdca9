"""Mark atomics whose old value nothing reads: ``attrs["result_unused"] = True``.

A scalar atomic is performed by thread 0, and its old value reaches the other threads through
shared memory (a store, a barrier, a load). A lock release ``tl.atomic_xchg(Lock, 0)`` or a counter
bump whose result is dropped needs none of that; inside a lock's critical section (Triton's
layer-norm backward) the two barriers per atomic lengthen the section every contending program
waits on. For a tile atomic with replicated elements the skipped step is copying the owner's old
value to the replicas. Codegen reads the mark (``codegen/memory.py``).
"""
from __future__ import annotations

from ..ir.core import Function, users

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
