"""Mark the reductions whose in-thread part may combine a thread's registers in several chains and a tree:
``attrs["tree"] = W`` on a ``reduce`` whose combine is exactly associative and commutative (``kind`` max or min,
or add / xor on integers), so that any order gives the same bits: codegen combines register r into partial
r % W, then the W partials as a balanced tree (n / W + log2(W) deep instead of n).

Codegen (``codegen/reduce.py``) combines a thread's registers along the axis one after the other by default: a
chain of dependent instructions, each waiting for the last (fp8 attention's row max: 32 FMNMX deep per row, 21%
of the key loop's warp samples and half of them ``stall_wait``, H100 Nsight Compute 2026-11-27,
docs/attention.md): 11 deep at W = 4, as many instructions. A full tree (W = n/2) was 7 deep but kept 16 partials a
row live, and the fp16 pointer forward at head dim 128, causal, spilled 8 bytes at its 168 registers; W = 4 and 8
do not. Float sums keep their order (any other rounds differently). ``KERNELC_REDUCE_TREE`` turns it off.

Example: ``%m = reduce %s {axis=1, kind='max'}`` -> ``%m = reduce %s {axis=1, kind='max', tree=4}``
"""
from __future__ import annotations

from ...language.dtypes import scalar_of
from ..ir.core import Function

#: partial results a thread keeps per output value while it combines its registers
TREE_WIDTH = 4


def mark_reduce_trees(fn: Function, enabled: bool = True) -> Function:
    """Set (``enabled``) ``tree=TREE_WIDTH`` on, or clear it from, every exactly associative ``reduce`` (module
    docstring). Mutates ``fn``."""
    for op in fn.walk():
        if op.name != "reduce":
            continue
        op.attrs.pop("tree", None)
        kind = op.attrs.get("kind")
        if not enabled or len(op.operands) != 1:
            continue
        if kind in ("max", "min") or (kind in ("add", "xor") and scalar_of(op.operands[0].type).is_int()):
            op.attrs["tree"] = TREE_WIDTH
    return fn
