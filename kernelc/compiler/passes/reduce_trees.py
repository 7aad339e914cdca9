"""Mark the reductions whose in-thread part may combine a thread's registers as a balanced tree:
``attrs["tree"] = True`` on a ``reduce`` whose combine is exactly associative and commutative (``kind`` max or min,
or add / xor on integers), so that any order gives the same bits.

Codegen (``codegen/reduce.py``) combines a thread's registers along the axis one after the other by default: a
chain of dependent instructions, each waiting for the last (fp8 attention's row max: 32 FMNMX deep per row, 21%
of the key loop's warp samples and half of them ``stall_wait``, H100 Nsight Compute 2026-11-27,
docs/attention.md). A tree is as many instructions, log2(n) deep. Float sums keep their order (a tree would round
differently). ``KERNELC_REDUCE_TREE`` turns it off.

Example: ``%m = reduce %s {axis=1, kind='max'}`` -> ``%m = reduce %s {axis=1, kind='max', tree=True}``
"""
from __future__ import annotations

from ...language.dtypes import scalar_of
from ..ir.core import Function


def mark_reduce_trees(fn: Function, enabled: bool = True) -> Function:
    """Set (``enabled``) or clear ``tree`` on every exactly associative ``reduce`` (module docstring). Mutates ``fn``."""
    for op in fn.walk():
        if op.name != "reduce":
            continue
        op.attrs.pop("tree", None)
        kind = op.attrs.get("kind")
        if not enabled or len(op.operands) != 1:
            continue
        if kind in ("max", "min") or (kind in ("add", "xor") and scalar_of(op.operands[0].type).is_int()):
            op.attrs["tree"] = True
    return fn
