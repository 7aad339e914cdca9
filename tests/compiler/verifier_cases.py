"""Shared by the verifier tests of the ring and warp-specialisation ops: break one attribute or operand
at a time, check the verifier names the problem, put it back, and check the IR verifies again."""
import pytest

from kernelc.compiler.ir import verify
from kernelc.compiler.ir.verifier import VerificationError


def _rejects(fn, field, cases):
    for op, key, bad, msg in cases:
        where = getattr(op, field)  # op.attrs (keyed by name) or op.operands (by index)
        old = where[key]
        where[key] = bad
        with pytest.raises(VerificationError, match=msg):
            verify(fn)
        where[key] = old
    verify(fn)


def rejects_bad_attrs(fn, cases):
    """``cases``: (op, attribute, bad value, message the verifier must give)."""
    _rejects(fn, "attrs", cases)


def rejects_bad_operands(fn, cases):
    """``cases``: (op, operand index, bad value, message the verifier must give)."""
    _rejects(fn, "operands", cases)


def first_ops(fn, *names):
    """The first op of each name in ``fn``, in the order asked."""
    ops = list(fn.walk())
    return [next(o for o in ops if o.name == n) for n in names]
