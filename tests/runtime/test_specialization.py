"""Specialisation keys (dtype, 16-byte alignment, ==1, divisibility by 16) and recompile logging."""
import numpy as np
import pytest
import torch

import kernelc
import kernelc.language as kl
from kernelc.runtime.launcher import Specializer, _log_recompile


@kernelc.jit(do_not_specialize=["m"])
def k(x_ptr, n, m, scale, flag, BLOCK: kl.constexpr):
    pass


def _sig(*args, BLOCK=16):
    spec = Specializer(k)
    vals = list(args) + [BLOCK]
    mask = [False] * len(args) + [True]
    return spec.signature(spec.key(vals, mask)), spec.key(vals, mask)


def test_pointer_int_float_bool_specialisation():
    x = torch.zeros(64)
    (sig, cx, div, eq1, kinds), key = _sig(x, 32, 7, 0.5, True)
    assert sig == {"x_ptr": "*fp32", "n": "i32", "m": "i32", "scale": "fp32", "flag": "i1"}
    assert cx == {"BLOCK": 16}
    assert div == {"x_ptr": 16, "n": 16}          # aligned pointer, n divisible by 16; m not specialised
    assert eq1 == ()
    assert kinds == ["ptr", "i32", "i32", "fp32", "i1"]
    (sig, _, div, eq1, _), _ = _sig(x[1:], 1, 1, 0.5, False)
    assert "x_ptr" not in div                      # offset by 4 bytes: not 16-byte aligned
    assert eq1 == ("n",)                           # n == 1 becomes a constant; m is do_not_specialize
    (sig, _, _, _, _), _ = _sig(torch.zeros(4, dtype=torch.bfloat16), 2**40, 3, 1.0, True)
    assert sig["x_ptr"] == "*bf16" and sig["n"] == "i64"


def test_keys_differ_exactly_when_specialisation_differs():
    x = torch.zeros(64)
    _, a = _sig(x, 32, 7, 0.5, True)
    _, b = _sig(x, 48, 9, 0.25, True)   # same classes of values: same kernel
    _, c = _sig(x, 33, 7, 0.5, True)    # 33 is not divisible by 16: new kernel
    assert a == b and a != c


def test_log_recompiles_names_the_argument(capsys):
    x = torch.zeros(64)
    _, a = _sig(x, 32, 7, 0.5, True)
    _, c = _sig(x, 33, 7, 0.5, True)
    _log_recompile(k, (c, 4, 3, 0), {(a, 4, 3, 0): None})
    err = capsys.readouterr().err
    assert "recompiling k (#2) because n: i32 (was i32 divisible by 16)" in err


def test_unsupported_argument_type_is_named():
    spec = Specializer(k)
    with pytest.raises(TypeError, match="argument 'n'"):
        spec.key([torch.zeros(4), "oops", 1, 1.0, True, 16], [False] * 5 + [True])
