"""``mark_cross_warp_reductions``: how a reduction to one value per block combines the partials of its warps.

Codegen (``codegen/reduce.py``) reduces within a thread, then across a warp's lanes with shuffles, then across
warps through shared memory. For the last step of a reduction to a single value it has two ways:

- ``butterfly`` (no attribute, the default): each lane reads one warp's partial and log2(warps) dependent
  shuffles combine them, one live register per value;
- ``gather`` (``cross_warp='gather'`` on the ``reduce`` op): each thread reads every warp's partial and combines
  them in a pairwise tree, one shared-memory latency and log2(warps) dependent combines (766f1cd's lowering,
  which bench_kernels' softmax 4096x4096 measured 2.5% faster at 16 warps than the butterfly; docs/performance.md).

``KERNELC_BLOCK_REDUCE`` picks; the pass writes the choice on each ``reduce`` op and codegen follows the tag.

    %m = reduce %x {axis=0}                      (KERNELC_BLOCK_REDUCE=gather)
  ->
    %m = reduce %x {axis=0, cross_warp='gather'}
"""
from __future__ import annotations

from ..ir.core import Function


def mark_cross_warp_reductions(fn: Function, mode: str = "butterfly") -> Function:
    """Tag every ``reduce`` op of ``fn`` with ``cross_warp=mode`` unless ``mode`` is the default ``butterfly``
    (then any tag is removed). Mutates and returns ``fn``."""
    for op in fn.walk():
        if op.name == "reduce":
            if mode == "butterfly":
                op.attrs.pop("cross_warp", None)
            else:
                op.attrs["cross_warp"] = mode
    return fn
