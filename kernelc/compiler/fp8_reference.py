"""Reference fp8 conversions in numpy, bit-exact with torch's (>= 2.12) casts.

numpy has no fp8 and ``ml_dtypes`` differs from torch at the edges (e4m3fn overflow gives NaN there,
NaN signs and payloads differ), so the encoder below is torch's own algorithm (c10 ``Float8_*.h``),
vectorised and driven by the format table ``dtypes.FP8_FORMATS``:

* float32 -> fp8 rounds to nearest even; a finite overflow or an infinity saturates to the largest
  finite value for e4m3fn and becomes +-Inf for e5m2; NaN becomes ``0x7F | sign``;
* wider sources go through float32 first (fp64 is rounded to float32, then to fp8), as torch does;
* fp8 -> wider floats is exact; a NaN keeps its sign and its mantissa bits as the payload, quiet bit
  set (what torch on x86 gives for fp32/fp16/fp64), and bfloat16 gets torch's canonical ``0x7FC0``.

The interpreter casts with these functions; the code generator folds fp8 constants with them; its
sm_80 bit-manipulation fallback is the same algorithm in LLVM IR (codegen/elementwise.py).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ..language.dtypes import FP8_FORMATS, FP8Format

_U32 = np.uint32

# numpy dtype name of a wider float -> (bit width, mantissa bits, canonical NaN bits or None)
_NAN_STYLE = {
    "float16": (16, 10, None),
    "float32": (32, 23, None),
    "float64": (64, 52, None),
    "bfloat16": (16, 7, 0x7FC0),  # torch rounds float -> bf16 with a canonical quiet NaN
}
_UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def fp8_numpy_dtype(name: str) -> np.dtype:
    """The ml_dtypes dtype that holds fp8 values of kernelc type ``name`` ("fp8e4nv" / "fp8e5")."""
    return np.dtype(ml_dtypes.float8_e4m3fn if name == "fp8e4nv" else ml_dtypes.float8_e5m2)


def encode(x, fmt: FP8Format) -> np.ndarray:
    """float32 values -> fp8 bits (uint8), round to nearest even, overflow as ``fmt.overflow`` says."""
    shape = np.shape(x)
    f = np.ascontiguousarray(np.asarray(x, dtype=np.float32)).reshape(-1)
    bits = f.view(_U32)
    sign = ((bits >> _U32(24)) & _U32(0x80)).astype(np.uint8)
    a = bits & _U32(0x7FFFFFFF)
    shift = 23 - fmt.mantissa
    # normal results: rebias the exponent, round the dropped mantissa bits to nearest even
    odd = (a >> _U32(shift)) & _U32(1)
    rebias = _U32(((fmt.bias - 127) << 23) & 0xFFFFFFFF)
    magic = _U32((127 - fmt.bias + shift + 1) << 23)
    with np.errstate(all="ignore"):  # lanes of the path not taken may wrap or be NaN
        normal = (a + rebias + _U32((1 << (shift - 1)) - 1) + odd) >> _U32(shift)
        # subnormal results: adding 2^k (k = the fp8 subnormal step's exponent + 23) lets the fp32 adder
        # round the value to a multiple of the fp8 subnormal step; the low bits are the fp8 code
        sub = (a.view(np.float32) + magic.view(np.float32)).view(_U32) - magic
    r = np.where(a < _U32((127 - fmt.bias + 1) << 23), sub, normal) & _U32(0xFF)
    over_code = fmt.max_code if fmt.overflow == "saturate" else fmt.inf_code
    if fmt.overflow == "saturate":
        r = np.where(r == fmt.nan_code, _U32(fmt.max_code), r)  # rounding carried into the NaN code
    overflow_bits = np.array(fmt.overflow_at, np.float32).view(_U32)
    r = np.where(a >= overflow_bits, np.where(a > _U32(0x7F800000), _U32(fmt.nan_code), _U32(over_code)), r)
    return (r.astype(np.uint8) | sign).reshape(shape)


def from_float(x: np.ndarray, name: str) -> np.ndarray:
    """Any float array -> fp8 values (ml_dtypes array) of kernelc type ``name``."""
    x = np.asarray(x)
    if x.dtype != np.float32:
        with np.errstate(over="ignore"):
            x = x.astype(np.float32)  # fp64 rounds to fp32 first (torch's double -> fp8 does the same)
    return encode(x, FP8_FORMATS[name]).view(fp8_numpy_dtype(name))


def to_float(x: np.ndarray, name: str, dst: np.dtype) -> np.ndarray:
    """fp8 values (ml_dtypes array) of kernelc type ``name`` -> float dtype ``dst``, NaNs as torch's."""
    fmt = FP8_FORMATS[name]
    shape = np.shape(x)
    x = np.ascontiguousarray(x).reshape(-1)
    out = x.astype(np.float32).astype(dst)  # exact: every fp8 value is representable in fp16/bf16/fp32
    nan = np.isnan(x.astype(np.float32))
    if not nan.any():
        return out.reshape(shape)
    width, mant, canonical = _NAN_STYLE[np.dtype(dst).name]
    b = x.view(np.uint8).astype(np.uint64)
    if canonical is not None:
        nb = np.full(b.shape, canonical, np.uint64)
    else:
        sign = (b >> np.uint64(7)) << np.uint64(width - 1)
        exp_ones = ((1 << (width - 1 - mant)) - 1) << mant
        payload = (b & np.uint64((1 << fmt.mantissa) - 1)) << np.uint64(mant - fmt.mantissa)
        nb = sign | np.uint64(exp_ones | (1 << (mant - 1))) | payload
    u = out.view(_UINT[width])
    u[nan] = nb[nan].astype(_UINT[width])
    return out.reshape(shape)
