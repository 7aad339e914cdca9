"""Which thread drives the copy engine: the predicate ``elect_one`` stands for (``KERNELC_TMA_ELECT``).

``elect`` (the default since adf0175f, 2026-11-27): warp ``w``'s ``elect.sync`` lane. ptxas then knows one lane of a
warp holds the predicate and issues each TMA copy and barrier init under a uniform predicate (tutorial 06's
forward: no ELECT loop around each copy, docs/triton-tutorials.md "06 forward kernel: branches"); in a GEMM's
k-loop it rebuilds the copies' coordinates in ordinary registers and moves them to uniform ones every step
(matmul_tma bf16 128x128 w4 s3: 54 ``R2UR`` against 2).
``tid``: ``tid == 32 w`` (kernelc's form before adf0175f): ptxas wraps each copy in an ELECT loop instead.
``auto`` (the default since session 23): ``tid`` where every loop that issues TMA copies holds exactly one dot (a
GEMM's k-loop, a persistent GEMM's tile and k-loops), unless those copies read descriptors made in the kernel
(``tl.make_tensor_descriptor``: device tensor maps) and no copying loop encloses another (a GEMM that is not
persistent, or a persistent one whose tile and k-loops ``flatten_loops`` fused into one); ``elect`` elsewhere
(attention's loops hold two dots, a warp-specialised producer's loop none). The split that measured faster each way
on an H200 (docs/performance.md, "Issue 21: the TMA copy predicate", session 24's section, and
docs/triton-tutorials.md's session-26 section): tid faster for matmul_tma and both nested persistent GEMMs (host and
kernel-made descriptors), elect faster for the attention forwards, the fp8 descriptor GEMM, attention_bwd's ds dQ
GEMM (kernel-made, not persistent) and tutorial 09's flattened persistent GEMM on kernel-made descriptors.

The pass writes the choice on the function (``elect='tid'``) and on every ``elect_one`` (``by='tid'``); codegen
(``codegen/tma.py: elected``) lowers every copy engine predicate by it, those it forms itself (descriptor copies
outside rings, device tensor maps) included.

Example (tid): ``%t0 = elect_one`` -> ``%t0 = elect_one {by='tid'}``
"""
from __future__ import annotations

from ..ir.core import Function

_LOOPS = ("scf.for", "scf.while")
_COPIES = ("tma_copy_to_ring", "descriptor_load")


def _reads_host_descriptor(copy) -> bool:
    """Whether a TMA copy reads a host descriptor: a ``make_tensor_descriptor {host_arg=...}`` behind a
    ``descriptor_load``'s descriptor or a ring copy's ring (``tma_ring_alloc %desc``); anything else (a tensor map
    built in the kernel, a value the walk cannot follow) counts as not."""
    v = copy.operands[0] if copy.operands else None
    if copy.name == "tma_copy_to_ring":
        ring = getattr(v, "op", None)
        v = ring.operands[0] if ring is not None and ring.operands else None
    mk = getattr(v, "op", None)
    return mk is not None and mk.name == "make_tensor_descriptor" and bool(mk.attrs.get("host_arg"))


def gemm_copy_loops(fn: Function) -> bool:
    """Whether ``fn`` has loops that issue TMA copies, every such loop (its nested loops included) holds exactly
    one dot, and either every copy in them reads a host descriptor or one copying loop encloses another (a
    persistent GEMM's tile loop around its k-loop; not the two flattened into one, ``flattened``)."""
    loops = [op for op in fn.walk() if op.name in _LOOPS]
    inside = {id(lp): [o for o in lp.walk() if o is not lp] for lp in loops}
    copying = [lp for lp in loops if any(o.name in _COPIES for o in inside[id(lp)])]
    if not copying or any([o.name for o in inside[id(lp)]].count("dot") != 1 for lp in copying):
        return False
    host = all(_reads_host_descriptor(o) for lp in copying for o in inside[id(lp)] if o.name in _COPIES)
    # a flattened tile loop (passes/flatten_loops.py) does not count as nested: on kernel-made descriptors it
    # measured faster under elect.sync, where the nested persistent form is faster under thread 0
    nested = any(o in copying for lp in copying for o in inside[id(lp)])
    return host or nested


def mark_elect_form(fn: Function, form: str = "auto") -> Function:
    """Set (``tid``; ``auto`` where :func:`gemm_copy_loops`) or clear (``elect``; ``auto`` elsewhere) the copy engine
    predicate's form on ``fn`` and its ``elect_one`` ops. Mutates ``fn``."""
    if form == "auto":
        form = "tid" if gemm_copy_loops(fn) else "elect"
    fn.attrs.pop("elect", None)
    if form == "tid":
        fn.attrs["elect"] = "tid"
    for op in fn.walk():
        if op.name == "elect_one":
            op.attrs.pop("by", None)
            if form == "tid":
                op.attrs["by"] = "tid"
    return fn
