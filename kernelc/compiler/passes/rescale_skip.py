"""Skip the online softmax's rescale where it multiplies by one: ``attrs["skip_unit"] = i`` on an fp32 ``fmul`` of a
tile by operand ``i``, a row scale broadcast over the tile (``broadcast(expand_dims(alpha))``) with
``alpha = exp2(m_old - m_new)`` and ``m_new = fmax(m_old, ...)``, or ``m_new`` that maximum moved lazily
(``passes/exp2_poly.py: lazy_reference_max``): attention's ``acc * alpha[:, None]``.

``alpha`` is exactly 1 in every row whose running maximum did not grow in this key block, and ``x * 1.0 == x`` for
every float x (NaN, infinities and signed zeros included), so the product may be skipped there without changing a
bit. Codegen (``codegen/elementwise.py: fmul_unless_unit``) tests the thread's distinct scale registers against 1.0,
takes one ``vote.any`` so the warp branches together, and multiplies only when some lane's scale is not 1 (NaN is
not). The pattern only says where skipping is likely to pay (a thread multiplies 32-64 accumulator registers by 2-4
scales); the test itself makes any marked ``fmul`` exact.

``KERNELC_RESCALE_SKIP`` turns it on (off by default until measured on a GPU).

Example (tile IR)::

    %m1 = fmax %m0, %r
    %a = exp2 (fsub %m0, %m1)
    %s = broadcast (expand_dims %a {axis=1})
    %o = fmul %acc, %s            ->    %o = fmul %acc, %s {skip_unit=1}
"""
from __future__ import annotations

from typing import Optional

from ...language.dtypes import scalar_of, shape_of
from ..ir.core import Block, Function, Value, defining_op
from .exp2_poly import lazy_reference_max

#: the fewest tile elements a thread must multiply for the test, vote and branch (~5 instructions) to be worth it
MIN_PER_THREAD = 16


def _row_scale(v: Value) -> Optional[Value]:
    """The 1-D value broadcast over rows to make ``v`` (``broadcast(expand_dims(a, axis=1))``), or None."""
    d = defining_op(v)
    if d is None or d.name != "broadcast":
        return None
    e = defining_op(d.operands[0])
    if e is None or e.name != "expand_dims" or e.attrs.get("axis") != len(shape_of(v.type)) - 1:
        return None
    return e.operands[0]


def _rescale_factor(a: Value, carried: bool = True) -> bool:
    """``a = exp2(m_old - m_new)`` with ``m_new = fmax(m_old, ...)`` (either operand order); or (``carried``) a loop's
    carried value that the body yields as such (O rescaled a trip late, after the next QK^T is issued)."""
    d = defining_op(a)
    if d is None and carried and isinstance(a.owner, Block) and a.index >= 1:
        loop = a.owner.parent
        yld = a.owner.ops[-1] if a.owner.ops else None
        if loop is not None and loop.name == "scf.for" and yld is not None and yld.name == "scf.yield" \
                and a.index - 1 < len(yld.operands):
            return _rescale_factor(yld.operands[a.index - 1], carried=False)
        return False
    if d is None or d.name != "exp2":
        return False
    s = defining_op(d.operands[0])
    if s is None or s.name != "fsub":
        return False
    old, new = s.operands
    lazy = lazy_reference_max(new)
    if lazy is not None and lazy[1].id == old.id:  # the reference max kept unless it grew by more than a threshold
        new = lazy[0]
    n = defining_op(new)
    return n is not None and n.name == "fmax" and any(o.id == old.id for o in n.operands)


def mark_unit_scale_skips(fn: Function, enabled: bool = False, num_warps: int = 4) -> Function:
    """Set (``enabled``) or clear ``skip_unit`` on every rescale ``fmul`` of the module docstring. Mutates ``fn``."""
    for op in fn.walk():
        if op.name != "fmul":
            continue
        op.attrs.pop("skip_unit", None)
        shape = shape_of(op.results[0].type)
        if not enabled or len(shape) != 2 or scalar_of(op.results[0].type).name != "fp32":
            continue
        n = shape[0] * shape[1]
        if n // (32 * num_warps) < MIN_PER_THREAD:
            continue
        for i in (1, 0):
            a = _row_scale(op.operands[i])
            if a is not None and _rescale_factor(a) and _row_scale(op.operands[1 - i]) is None:
                op.attrs["skip_unit"] = i
                break
    return fn
