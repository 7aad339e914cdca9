"""Mark the cp.async copies' addresses that are one scalar pointer plus a 32-bit offset for ``mad.wide.s32``.

A copy address in a ring is ``base + offset`` with ``base`` a scalar pointer (a kernel argument, splat over the
tile) and ``offset`` a signed 32-bit tile (tutorial 09's ``a_ptr + (rows[:, None] * stride_am + ks[None, :] *
stride_ak)``). LLVM's NVPTX back end emits ``mul.wide.s32`` then ``add.s64`` for it, and ptxas turns that into one
``IMAD.WIDE`` a copy on the FMA pipe with the base in an ordinary register pair; in 09's persistent pointer GEMM it
reloads the base into registers inside the K step (``LDC.64``) and issues the 12 or 16 ``IMAD.WIDE``s back to back
after the ``HGMMA``s, where Nsight Compute showed pipe-throttle stalls. Triton's PTX has ``mad.wide.s32`` there, and
ptxas turns that into ``LEA`` / ``LEA.HI.X.SX32`` on the ALU pipe with the base in uniform registers
(docs/triton-tutorials.md, "09 persistent pointer GEMM: the copy addresses as mad.wide").

The pass writes the choice down: ``addptr {mad_wide = true}`` on each such address; codegen lowers it to one
``mad.wide.s32`` of the offset, the element size and the base. Only the addresses of ``async_copy`` ops are
marked (the epilogue's stores keep LLVM's form: marking every address raised 09's registers 221 -> 250).
``KERNELC_COPY_MAD_WIDE=0`` turns the pass off.
"""
from __future__ import annotations

from ...language.dtypes import scalar_of, shape_of
from ..ir.core import Function

# ops a scalar base passes through on its way to the tile's shape
_SPREAD = ("splat", "broadcast", "expand_dims")


def _scalar_base(v) -> bool:
    while shape_of(v.type):
        op = v.op
        if op is None or op.name not in _SPREAD:
            return False
        v = op.operands[0]
    return True


def _offset_is_i32(v) -> bool:
    el = scalar_of(v.type)
    return el.is_int() and el.is_int_signed() and el.int_bitwidth == 32


def mark_copy_mad_wide(fn: Function, ctx=None) -> Function:
    """Tag ``mad_wide=True`` on every ``addptr`` that is an ``async_copy``'s address and read by copies only, has a
    scalar pointer (spread to the tile) as its base and a signed i32 offset. Mutates ``fn``."""
    users = {}
    for o in fn.walk():
        for v in o.operands:
            users.setdefault(id(v), []).append(o)
    for cp in [o for o in fn.walk() if o.name == "async_copy"]:
        d = cp.operands[2].op
        if d is None or d.name != "addptr" or d.attrs.get("mad_wide"):
            continue
        # only an address the copies alone read: one that also starts a loop's carried pointers (tutorial 03's
        # ring fill) stays visible to LLVM, which then keeps the loop's pointer steps 32-bit (as an asm result it
        # made them 64-bit adds: 110 -> 137 instructions a K step at 128x256x64 s3 w8)
        if any(u.name != "async_copy" for u in users.get(id(d.results[0]), ())):
            continue
        if _scalar_base(d.operands[0]) and _offset_is_i32(d.operands[1]):
            d.attrs["mad_wide"] = True
    return fn
