"""``kl.math``: the elementwise math functions under Triton's ``tl.math`` names."""
from functools import wraps  # noqa: F401  (Triton's module exposes these helper names too)
from typing import List, TypeVar

from . import core  # noqa: F401
from .standard import (abs, ceil, cdiv, clamp, cos, div_rn, erf, exp, exp2, fdiv, floor, fma, log, log2,  # noqa: F401
                       maximum, minimum, rsqrt, sigmoid, sin, softmax, sqrt, sqrt_rn, umulhi)

T = TypeVar("T")
__all__ = ["abs", "ceil", "cdiv", "clamp", "cos", "div_rn", "erf", "exp", "exp2", "fdiv", "floor", "fma", "log",
           "log2", "maximum", "minimum", "rsqrt", "sigmoid", "sin", "softmax", "sqrt", "sqrt_rn", "umulhi"]
