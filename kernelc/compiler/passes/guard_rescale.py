"""Mark the online-softmax rescale of a loop-carried accumulator that is mostly a multiply by exactly 1.0:
``attrs["skip_unit"] = k`` on ``fmul(acc, broadcast(expand_dims(alpha)))`` (k: the factor's operand) where ``acc``
is carried by an ``scf.for`` and ``alpha = exp2(m_old - m_new)`` with ``m_new = select(c, x, m_old)`` (or
``select(c, m_old, x)``): the conditional rescale (FlashAttention-4's slack), where a row keeps its old max, so its
factor is exp2(0) = 1.0, until the new one exceeds it by more than a slack.

Codegen (``codegen/lowering.py``) then tests, per thread, whether any factor register it holds is != 1.0 (``fcmp
une``: a NaN factor multiplies) and branches around the thread's multiplies when none is: the warp runs them only
if one of its lanes needs them (64 FMUL a thread a key block in fp8 attention's 64x128 loop at 4 warps). Exact:
``x * 1.0 == x`` for every x (the hardware's NaN for a NaN x aside, which stays a NaN). Only the slack form is
marked: with a plain ``maximum`` the factor is 1.0 only where no row's max moved, which is rarely a whole warp's
rows, and the test would cost without skipping. ``KERNELC_GUARD_RESCALE`` turns it off.

Example: ``%a = exp2 (fsub %m, (select %c, %x, %m))``; ``%r = fmul %acc, (broadcast (expand_dims %a))`` ->
``%r = fmul %acc, ... {skip_unit=1}``
"""
from __future__ import annotations

from ...language.dtypes import scalar_of
from ..ir.core import Block, Function, defining_op


def _is_carried(v) -> bool:
    return isinstance(v.owner, Block) and v.owner.parent is not None and v.owner.parent.name == "scf.for"


def _slack_factor(v) -> bool:
    """``v`` is broadcast(expand_dims(exp2(m_old - select(c, x, m_old))))."""
    d = defining_op(v)
    while d is not None and d.name in ("broadcast", "expand_dims"):
        d = defining_op(d.operands[0])
    if d is None or d.name != "exp2":
        return False
    sub = defining_op(d.operands[0])
    if sub is None or sub.name != "fsub":
        return False
    m_old, m_new = sub.operands
    sel = defining_op(m_new)
    return sel is not None and sel.name == "select" and (sel.operands[1] is m_old or sel.operands[2] is m_old)


def mark_guarded_rescales(fn: Function, enabled: bool = True) -> Function:
    """Set (``enabled``) ``skip_unit`` on, or clear it from, every fp32 tile ``fmul`` of the module docstring's
    form. Mutates ``fn``."""
    for op in fn.walk():
        if op.name != "fmul":
            continue
        op.attrs.pop("skip_unit", None)
        if not enabled or str(scalar_of(op.results[0].type)) != "fp32" or len(getattr(op.results[0].type, "shape",
                                                                                       ()) or ()) != 2:
            continue
        for k in (1, 0):
            if _is_carried(op.operands[1 - k]) and _slack_factor(op.operands[k]):
                op.attrs["skip_unit"] = k
                break
    return fn
