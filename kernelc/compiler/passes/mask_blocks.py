"""``mark_uniform_masks``: a tile compare (first of all a pipelined copy's mask) that is the same over aligned blocks of the tile
says so (``uniform=[b0, b1, ..]`` on the ``cmpi``), so code generation computes it once per block a thread
holds instead of once per register.

Why: a GEMM's K mask (tutorial 03: ``offs_k[:, None] < K - k * BLOCK_SIZE_K``) is a row of K offsets compared
with a bound; with K divisible by 16 (the runtime's specialisation) it changes only at multiples of 16 rows.
A thread's cp.async copies of B sit 8 rows apart, so two of them share each value; computed per register,
every copy paid its own compare and the selects of its source size (42 predicate instructions per iteration
at 128x256x64 against Triton's 26, docs/triton-tutorials.md). Triton deduplicates an elementwise result
over its constancy when it lowers it; here the pass decides and the op carries it.

When a compare is uniform over a block of ``b`` elements along dimension ``d`` (``b`` a power of two, blocks
aligned at multiples of ``b``), from the operands' axis facts (``passes/axis_info.py``):

- both operands constant over it (``gcd`` of their constancies);
- ``x < y`` / ``x >= y`` (``slt``, ``sge``, ``ult``, ``uge``) with ``x`` contiguous over the block and its
  first element divisible by ``b``, ``y`` constant over it and divisible by ``b``: the result flips only
  where ``x`` reaches ``y``, a multiple of ``b``, i.e. between blocks; likewise ``y > x`` / ``y <= x``. The
  non-strict forms the other way round (``x <= y``) flip inside a block and are left alone.

Which compares are marked where their blocks are uniform: those that reach a cp.async ring's load
mask (through ``broadcast``/``expand_dims``/``reshape``/``and``/``or``), which the GEMM loops pay per
iteration, and since 2026-11-28, in a one-pass kernel without dots (no loop that loads), all others too: an
elementwise or reduction kernel's ``cols < N`` feeds its loads, selects and stores over every register a thread holds (tutorial 05's dx
kernel at 16384 columns made 78 compares against Triton's 22, docs/triton-tutorials.md). Since 2026-11-29
(``invariant``, the default), in a loop kernel without dots also a compare made before a loop and read in it
(passes/loop_masks.py: layer_norm bwd's row loop kept its 16 per-element masks in general registers). In kernels with dots
too (``KERNELC_UNIFORM_MASKS=all``) that changes the PTX of 40 GEMM and attention kernels of
scripts/ptx_corpus.py; measured on an H200 in docs/performance.md (fifteenth session), not the default. Runs after ``schedule_wgmma`` (the rings are decided) and
before ``expand_cp_async_rings``, which clones the address chain with its attributes.
"""
from __future__ import annotations

from math import gcd
from typing import List, Optional, Tuple

from ...language.dtypes import shape_of
from ..ir.core import Function, Op
from .loop_masks import compares_read_in_loops
from .register_budget import loads_in_a_loop

_THROUGH = frozenset({"broadcast", "expand_dims", "reshape", "and", "or"})
_LOWER = frozenset({"slt", "sge", "ult", "uge"})    # x < y flips where x reaches y
_UPPER = frozenset({"sgt", "sle", "ugt", "ule"})    # y > x: the same with the operands swapped


def uniform_blocks(op: Op, axis) -> Optional[Tuple[int, ...]]:
    """The block shape over which ``op`` (a ``cmpi`` on tiles) is uniform, or None if it is not (> 1) anywhere."""
    shape = shape_of(op.results[0].type)
    if op.name != "cmpi" or not shape:
        return None
    x, y = (axis.get(v) for v in op.operands[:2])
    pred = op.attrs.get("pred")
    out = []
    for d, n in enumerate(shape):
        b = gcd(x.constancy[d], y.constancy[d])
        for run, bound in ((x, y), (y, x)):
            if (pred in _LOWER) != (run is x) or pred not in _LOWER | _UPPER:
                continue
            if run.contiguity[d] > 1 and bound.constancy[d] > 1:
                b = max(b, gcd(gcd(run.contiguity[d], run.divisibility[d]), gcd(bound.divisibility[d],
                                                                              bound.constancy[d])))
        b = min(b, n)
        out.append(b & -b)   # a power of two (aligned blocks)
    return tuple(out) if any(b > 1 for b, n in zip(out, shape) if n > 1) else None


def mark_uniform_masks(fn: Function, ctx, mode: str = "invariant") -> Function:
    """Mark the uniform compares (KERNELC_UNIFORM_MASKS): ``mode`` all (every tile compare), nodots (every tile
    compare in a kernel without dots, else as rings), onepass (as nodots, but only in a kernel with no loop that
    loads, else as rings), invariant (as onepass, and in a loop kernel without dots also the compares a loop
    reads from outside it: passes/loop_masks.py) or rings (only those reaching a cp.async ring's load mask).
    Mutates ``fn``."""
    axis = ctx.axis
    if axis is None:
        return fn
    seen = set()
    no_dots = not any(op.name == "dot" for op in fn.walk())
    # onepass: in a loop kernel (tutorial 05's forward) the widened code moved the fill policy to the launch
    # bound's build, measured 3-11% slower at 1024-4096 columns on an H200 (docs/performance.md)
    one_pass = no_dots and not loads_in_a_loop(fn)
    if mode == "all" or (mode == "nodots" and no_dots) or (mode in ("onepass", "invariant") and one_pass):
        # every other tile compare: an elementwise kernel's `cols < N` feeds its selects and masks over all the
        # registers a thread holds (tutorial 05's dx kernel: 78 compares against Triton's 22)
        for op in fn.walk():
            if op.name == "cmpi" and "uniform" not in op.attrs and shape_of(op.results[0].type):
                b = uniform_blocks(op, axis)
                if b is not None:
                    op.attrs["uniform"] = b
    elif mode == "invariant" and no_dots:
        # a mask made before a loop and read in it: its per-element predicates live across every trip (layer_norm
        # bwd: 12 P2R in the row loop). The compares made inside a loop stay per element here: marking those too
        # (nodots) moved tutorial 05's forward to the launch bound's build, 3-11% slower at 1024-4096 columns
        for op in compares_read_in_loops(fn):
            if "uniform" not in op.attrs and shape_of(op.results[0].type):
                b = uniform_blocks(op, axis)
                if b is not None:
                    op.attrs["uniform"] = b
    for ld in [o for o in fn.walk() if o.name == "load" and o.attrs.get("pipeline") and len(o.operands) > 1]:
        todo: List = [ld.operands[1]]
        while todo:
            v = todo.pop()
            op = v.op
            if op is None or id(op) in seen:
                continue
            seen.add(id(op))
            if op.name in _THROUGH:
                todo.extend(o for o in op.operands if shape_of(o.type))
            elif op.name == "cmpi":
                b = uniform_blocks(op, axis)
                if b is not None:
                    op.attrs["uniform"] = b
    return fn
