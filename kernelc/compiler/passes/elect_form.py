"""Which thread drives the copy engine: the predicate ``elect_one`` stands for (``KERNELC_TMA_ELECT``).

``elect`` (the default since adf0175f, 2026-11-27): warp ``w``'s ``elect.sync`` lane. ptxas then knows one lane of a
warp holds the predicate and issues each TMA copy and barrier init under a uniform predicate (tutorial 06's
forward: no ELECT loop around each copy, docs/triton-tutorials.md "06 forward kernel: branches"); in a GEMM's
k-loop it rebuilds the copies' coordinates in ordinary registers and moves them to uniform ones every step
(matmul_tma bf16 128x128 w4 s3: 54 ``R2UR`` against 2).
``tid``: ``tid == 32 w`` (kernelc's form before adf0175f): ptxas wraps each copy in an ELECT loop instead.

The pass writes the choice on the function (``elect='tid'``) and on every ``elect_one`` (``by='tid'``); codegen
(``codegen/tma.py: elected``) lowers every copy engine predicate by it, those it forms itself (descriptor copies
outside rings, device tensor maps) included.

Example (tid): ``%t0 = elect_one`` -> ``%t0 = elect_one {by='tid'}``
"""
from __future__ import annotations

from ..ir.core import Function


def mark_elect_form(fn: Function, form: str = "elect") -> Function:
    """Set (``tid``) or clear (``elect``) the copy engine predicate's form on ``fn`` and its ``elect_one`` ops.
    Mutates ``fn``."""
    fn.attrs.pop("elect", None)
    if form == "tid":
        fn.attrs["elect"] = "tid"
    for op in fn.walk():
        if op.name == "elect_one":
            op.attrs.pop("by", None)
            if form == "tid":
                op.attrs["by"] = "tid"
    return fn
