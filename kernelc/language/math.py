"""``kl.math``: the elementwise math functions under Triton's ``tl.math`` names."""
from .standard import (abs, ceil, cdiv, clamp, cos, div_rn, erf, exp, exp2, fdiv, floor, fma, log, log2,  # noqa: F401
                       maximum, minimum, rsqrt, sigmoid, sin, softmax, sqrt, sqrt_rn, umulhi)
