"""Shared by the verifier tests of the ring and warp-specialisation ops: break one attribute or operand
at a time, check the verifier names the problem, put it back, and check the IR verifies again."""
import pytest

from kernelc.compiler.ir import verify
from kernelc.compiler.ir.verifier import VerificationError


def rejects_bad_attrs(fn, cases):
    """``cases``: (op, attribute, bad value, message the verifier must give)."""
    for op, key, bad, msg in cases:
        old = op.attrs[key]
        op.attrs[key] = bad
        with pytest.raises(VerificationError, match=msg):
            verify(fn)
        op.attrs[key] = old
    verify(fn)


def rejects_bad_operands(fn, cases):
    """``cases``: (op, operand index, bad value, message the verifier must give)."""
    for op, i, bad, msg in cases:
        old = op.operands[i]
        op.operands[i] = bad
        with pytest.raises(VerificationError, match=msg):
            verify(fn)
        op.operands[i] = old
    verify(fn)
