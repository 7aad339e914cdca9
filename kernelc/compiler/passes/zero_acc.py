"""``mark_zero_acc_dots``: a wgmma dot whose accumulator is a zero constant takes ``use_acc = false``.

``tl.dot(a, b)`` without an accumulator is ``dot(a, b, zeros)``. Lowered as it stands, the zeros are a register
tile (32 registers a thread for a 64x64 fp32 block of one warpgroup) moved into the wgmma's tied accumulator
inputs, with scale-d true. ptxas turns such zeros into ``RZ, !UPT`` where it can, but not always: in the D=128
attention backward's dK/dV loop under a producer warpgroup (240 registers a consumer) it set the second logit dot's
32 accumulator registers to zero between the two dots and waited for the first dot (``WARPGROUP.DEPBAR.LE gsb0,
0x0``) before issuing the second, which the PTX issues back to back (docs/attention.md, att24). Triton's lowering
passes no accumulator and scale-d false for such a dot.

The pass writes that down in the IR: a scalar ``constant {value=0} : i1`` as the dot's ``use_acc`` operand (the
operand flatten_loops gives a zero-started accumulator, ops.py); codegen's first K step then carries scale-d false
and, the operand being a constant false, the accumulator inputs are ``undef`` (codegen/dot.py). Runs before
``mark_uniform_warpgroups`` (the warpgroup index comes after ``use_acc``). ``KERNELC_WGMMA_ZERO_ACC`` turns it on:
``ws`` for the dots of warp-specialised consumer loops (``scf.for {ws=..}``), ``on`` for every such dot, ``auto`` (the
default) for the dots of loops whose TMA ring refills at the top of the iteration (``pipeline={..., refill='top'}``,
passes/rings.py): there ptxas moved the 64 zeros of the attention forward's logit accumulator into its registers
every trip, after the copies, instead of ``RZ, !UPT`` (fp828, sm_90a).
"""
from __future__ import annotations

from ...language.dtypes import int1, shape_of
from ..ir.core import Function, Op


def _zero_constant(v) -> bool:
    d = v.op
    return d is not None and d.name == "constant" and d.attrs.get("value") == 0 and bool(shape_of(v.type))


def _in_ws_loop(op: Op) -> bool:
    blk = op.block
    while blk is not None and blk.parent is not None:
        if blk.parent.name == "scf.for" and blk.parent.attrs.get("ws"):
            return True
        blk = blk.parent.block
    return False


def _in_top_refilled_loop(op: Op) -> bool:
    blk = op.block
    while blk is not None and blk.parent is not None:
        if blk.parent.name == "scf.for" and (blk.parent.attrs.get("pipeline") or {}).get("refill") == "top":
            return True
        blk = blk.parent.block
    return False


def mark_zero_acc_dots(fn: Function, ctx=None, mode: str = "on") -> Function:
    """Give each wgmma dot of ``fn`` whose accumulator is a zero constant tile and that has no ``use_acc`` a constant
    false one, created just before the dot; ``mode`` ``ws``: only the dots inside a warp-specialised loop; ``auto``:
    only those inside a loop whose ring refills at its top. Mutates ``fn``; ``off``: nothing."""
    if mode == "off":
        return fn
    for op in [o for o in fn.walk() if o.name == "dot" and o.attrs.get("engine") == "wgmma"]:
        if len(op.operands) != 3 or not _zero_constant(op.operands[2]):
            continue
        if mode == "ws" and not _in_ws_loop(op):
            continue
        if mode == "auto" and not _in_top_refilled_loop(op):
            continue
        c = Op("constant", [], [int1], {"value": 0}, loc=op.loc)
        c.block = op.block
        op.block.ops.insert(op.block.ops.index(op), c)
        op.operands.append(c.results[0])
    return fn
