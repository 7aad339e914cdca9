"""Numpy implementations of the GPU's scalar arithmetic: casts, C-like integer ops, tf32 rounding.

Every function takes and returns numpy arrays whose dtype is the exact element type (``bfloat16`` and
the fp8 types come from ``ml_dtypes``; pointers are ``int64`` addresses). The rules follow what the
CUDA backend emits (PTX semantics):

* float -> int conversions truncate toward zero, map NaN to 0 and saturate out-of-range values
  (``cvt.rzi`` clamps);
* fp8 conversions are torch's (>= 2.12), bit for bit (see ``fp8.py``): round to nearest even, e4m3fn
  saturates to +-448, e5m2 overflows to +-Inf, NaN becomes ``0x7F | sign``;
* integer division by zero gives all ones (``udiv``: the type's maximum, ``sdiv``: -1) and the
  remainder by zero is the dividend, as ``div``/``rem`` do on NVIDIA GPUs; ``INT_MIN / -1`` wraps;
* shifts by the type's width or more clamp like PTX ``shl``/``shr``: 0 for ``shl``/``lshr``, the
  sign fill for ``ashr`` (the shift amount is read as unsigned);
* fp16/bf16/fp8 arithmetic is computed in fp32 and rounded once to the result type (exact for
  + - * / because fp32 has more than twice their precision plus two bits).
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from ...compiler import fp8_reference as fp8
from ...language import dtypes as T

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_NP_CACHE: dict = {}


def np_dtype(ty) -> np.dtype:
    """The numpy dtype holding values of the kernelc scalar (or pointer/block) type ``ty``."""
    ty = T.scalar_of(ty)
    d = _NP_CACHE.get(ty)
    if d is None:
        if ty.is_ptr():
            d = np.dtype(np.int64)
        elif ty.numpy_name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
            d = np.dtype(getattr(ml_dtypes, ty.numpy_name))
        else:
            d = np.dtype(ty.numpy_name)
        _NP_CACHE[ty] = d
    return d


def contig(x) -> np.ndarray:
    """C-contiguous copy/view of ``x`` that keeps 0-d arrays 0-d (np.ascontiguousarray makes them 1-d)."""
    x = np.asarray(x)
    return x.copy() if x.ndim == 0 else np.ascontiguousarray(x)


_UINT_OF_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_INT_OF_SIZE = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}


def _is_std_float(d: np.dtype) -> bool:
    return d in (_F32, _F64)


def float_finfo_max(d: np.dtype) -> float:
    return float(ml_dtypes.finfo(d).max)


# ---------------------------------------------------------------------------------------------
# Float arithmetic
# ---------------------------------------------------------------------------------------------


def fbinary(f, a: np.ndarray, b: np.ndarray, out: np.dtype) -> np.ndarray:
    """``f(a, b)`` for float arrays of dtype ``out``; narrow types are computed in fp32."""
    if _is_std_float(out):
        return np.asarray(f(a, b), dtype=out)
    r = f(a.astype(_F32), b.astype(_F32))
    return float_to_float(np.asarray(r, dtype=_F32), out)


def funary(f, a: np.ndarray, out: np.dtype) -> np.ndarray:
    if _is_std_float(out):
        return np.asarray(f(a), dtype=out)
    return float_to_float(np.asarray(f(a.astype(_F32)), dtype=_F32), out)


_erf_u = np.frompyfunc(math.erf, 1, 1)


def erf(x: np.ndarray) -> np.ndarray:
    return np.asarray(_erf_u(x.astype(np.float64)), dtype=np.float64).astype(x.dtype)


def fma(a, b, c, out: np.dtype) -> np.ndarray:
    """a*b+c; fp32 (and narrower) is computed in fp64 and rounded once, which matches a fused op."""
    if out == _F64:
        return np.asarray(a * b + c, dtype=_F64)  # not fused: numpy has no fp64 fma
    r = a.astype(_F64) * b.astype(_F64) + c.astype(_F64)
    return float_to_float(r, out)


# ---------------------------------------------------------------------------------------------
# Integer arithmetic (operands share one dtype; int1 is computed as 0/1 bytes)
# ---------------------------------------------------------------------------------------------


def _unsigned_view(x: np.ndarray) -> np.ndarray:
    if x.dtype == np.bool_:
        return x.astype(np.uint8)
    return x.view(_UINT_OF_SIZE[x.dtype.itemsize])


def ibinary(f, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Wrapping integer op; int1 operands are computed mod 2."""
    if a.dtype == np.bool_:
        r = f(a.astype(np.uint8), b.astype(np.uint8))
        return (np.asarray(r).astype(np.uint8) & 1).astype(np.bool_)
    return np.asarray(f(a, b)).astype(a.dtype, copy=False)


def _div_parts(a, b, signed):
    zero = b == 0
    safe_b = np.where(zero, np.ones_like(b), b)
    if signed:
        r = np.fmod(a, safe_b)  # C remainder: sign of the dividend
        # (a - r) is an exact multiple of b, so floor division is exact (INT_MIN / -1 wraps).
        q = np.floor_divide(a - r, safe_b)
    else:
        q = np.floor_divide(a, safe_b)
        r = np.remainder(a, safe_b)
    return np.asarray(q).astype(a.dtype), np.asarray(r).astype(a.dtype), zero


def idiv(a, b, signed: bool) -> np.ndarray:
    if a.dtype == np.bool_:
        return ibinary(lambda x, y: idiv(x, y, False), a, b)
    q, _, zero = _div_parts(a, b, signed)
    if zero.any():
        q = np.where(zero, np.array(-1).astype(a.dtype) if signed else np.array(np.iinfo(a.dtype).max, a.dtype), q)
    return np.asarray(q, dtype=a.dtype)


def irem(a, b, signed: bool) -> np.ndarray:
    if a.dtype == np.bool_:
        return ibinary(lambda x, y: irem(x, y, False), a, b)
    _, r, zero = _div_parts(a, b, signed)
    if zero.any():
        r = np.where(zero, a, r)
    return np.asarray(r, dtype=a.dtype)


def shift(a, b, kind: str) -> np.ndarray:
    """shl / lshr / ashr with PTX clamping of the shift amount."""
    if a.dtype == np.bool_:
        return ibinary(lambda x, y: shift(x, y, kind), a, b)
    width = a.dtype.itemsize * 8
    amt = _unsigned_view(np.asarray(b)).astype(np.uint64)
    over = amt >= width
    amt_c = np.minimum(amt, width - 1).astype(a.dtype)
    if kind == "shl":
        r = np.left_shift(a, amt_c)
        return np.asarray(np.where(over, np.zeros_like(a), r), dtype=a.dtype)
    if kind == "lshr":
        u = _unsigned_view(a)
        r = np.right_shift(u, amt_c.view(u.dtype)).view(a.dtype)
        return np.asarray(np.where(over, np.zeros_like(a), r), dtype=a.dtype)
    # ashr: arithmetic on the signed view; shifting by >= width gives the sign fill (= shift by width-1)
    s = a.view(_INT_OF_SIZE[a.dtype.itemsize])
    r = np.right_shift(s, amt_c.view(s.dtype)).view(a.dtype)
    return np.asarray(r, dtype=a.dtype)


def mulhi(a, b, signed: bool) -> np.ndarray:
    """High half of the 2N-bit product of N-bit integers (N = 32 or 64)."""
    bits = a.dtype.itemsize * 8
    if bits <= 32:
        wide = np.int64 if signed else np.uint64
        p = a.astype(wide) * b.astype(wide)
        return np.asarray(p >> bits).astype(a.dtype)
    ua, ub = a.view(np.uint64), b.view(np.uint64)
    m32 = np.uint64(0xFFFFFFFF)
    s32 = np.uint64(32)
    al, ah = ua & m32, ua >> s32
    bl, bh = ub & m32, ub >> s32
    ll = al * bl
    lh = al * bh
    hl = ah * bl
    hh = ah * bh
    mid = (ll >> s32) + (lh & m32) + (hl & m32)
    hi = hh + (lh >> s32) + (hl >> s32) + (mid >> s32)
    if signed:
        hi = hi - np.where(a < 0, ub, np.uint64(0)) - np.where(b < 0, ua, np.uint64(0))
    return np.asarray(hi, dtype=np.uint64).view(a.dtype)


def icmp(a, b, pred: str) -> np.ndarray:
    if pred in ("ult", "ule", "ugt", "uge"):
        a, b = _unsigned_view(a), _unsigned_view(b)
    elif pred in ("slt", "sle", "sgt", "sge") and a.dtype.kind == "u":
        a, b = a.view(_INT_OF_SIZE[a.dtype.itemsize]), b.view(_INT_OF_SIZE[a.dtype.itemsize])
    op = pred[1:] if pred[0] in "su" else pred
    return np.asarray(_CMP_UFUNC[op](a, b))


_CMP_UFUNC = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
              "ge": np.greater_equal}


def fcmp(a, b, pred: str) -> np.ndarray:
    if not _is_std_float(a.dtype):
        a, b = a.astype(_F32), b.astype(_F32)
    if pred == "une":
        return np.asarray(np.not_equal(a, b))  # true when either is NaN
    return np.asarray(_CMP_UFUNC[pred[1:]](a, b))  # ordered: false when either is NaN


# ---------------------------------------------------------------------------------------------
# Casts
# ---------------------------------------------------------------------------------------------


def _round_to_odd_f32(x64: np.ndarray) -> np.ndarray:
    """fp64 -> fp32 rounding to odd: a following RNE rounding to a narrower type is then exact."""
    y = x64.astype(_F32)
    yb = y.view(np.uint32).copy()
    yd = y.astype(_F64)
    inexact = (yd != x64) & np.isfinite(x64)
    over = inexact & (np.abs(yd) > np.abs(x64))
    yb = np.where(over, yb - np.uint32(1), yb)  # step toward zero: truncation
    yb = np.where(inexact, yb | np.uint32(1), yb)
    return yb.view(_F32)


def _toward_zero(y: np.ndarray, src: np.ndarray) -> np.ndarray:
    """Given y = RNE(src) in y's type, step one ulp toward zero where |y| > |src| (-> RTZ)."""
    yd = y.astype(_F64)
    s = src.astype(_F64)
    fix = np.isfinite(s) & (np.abs(yd) > np.abs(s))
    if not fix.any():
        return y
    u = y.view(_UINT_OF_SIZE[y.dtype.itemsize])
    u = np.where(fix, u - u.dtype.type(1), u).astype(u.dtype)
    return u.view(y.dtype)


# numpy dtype of each fp8 type -> kernelc name (the key of dtypes.FP8_FORMATS)
FP8_NAMES = {np.dtype(ml_dtypes.float8_e4m3fn): "fp8e4nv", np.dtype(ml_dtypes.float8_e5m2): "fp8e5"}


def float_to_float(x: np.ndarray, dst: np.dtype, rounding: str = "rtne") -> np.ndarray:
    x = np.asarray(x)
    if x.dtype == dst:
        return x
    if x.dtype in FP8_NAMES:  # exact widening (torch's NaN payloads); fp8 -> fp8 goes through fp32
        wide = dst if dst not in FP8_NAMES else _F32
        x = fp8.to_float(x, FP8_NAMES[x.dtype], wide)
        if x.dtype == dst:
            return x
    if dst in FP8_NAMES:  # round to nearest even only: the semantic layer rejects rtz for fp8
        return fp8.from_float(x, FP8_NAMES[dst])
    src_wide = _F64 if x.dtype == _F64 else _F32
    s = x.astype(src_wide)  # exact
    if dst == _F64:
        return s.astype(_F64)
    if dst == _F32 or dst == np.float16:
        y = s.astype(dst)
    elif s.dtype == _F64:
        y = _round_to_odd_f32(s).astype(dst)
    else:
        y = s.astype(dst)
    if rounding == "rtz":
        y = _toward_zero(y, s)
    return y


def float_to_int(x: np.ndarray, dst: np.dtype) -> np.ndarray:
    """cvt.rzi: truncate toward zero, NaN -> 0, saturate to the destination range."""
    if dst == np.bool_:
        return x.astype(_F64) != 0
    t = np.trunc(np.asarray(x).astype(_F64))
    info = np.iinfo(dst)
    nan = np.isnan(t)
    big = t >= float(info.max)
    small = t <= float(info.min)
    mid = ~(nan | big | small)
    out = np.zeros(t.shape, dst)
    out[mid] = t[mid].astype(dst)
    out[big] = info.max
    out[small] = info.min
    return out


def int_to_float(x: np.ndarray, dst: np.dtype) -> np.ndarray:
    if dst == _F32 or dst == _F64:
        return np.asarray(x).astype(dst)
    return float_to_float(np.asarray(x).astype(_F64), dst)


def cast(x: np.ndarray, src, dst, rounding: str = "rtne") -> np.ndarray:
    """Value conversion of ``x`` (element type ``src``) to element type ``dst`` (kernelc types)."""
    dnp = np_dtype(dst)
    if src.is_ptr() or dst.is_ptr():
        if dst.is_int1():
            return np.asarray(x != 0)
        return contig(x).view(dnp)  # int64 <-> pointer <-> uint64: same bits
    if src.is_floating():
        if dst.is_floating():
            return float_to_float(x, dnp, rounding)
        return float_to_int(x, dnp)
    if dst.is_floating():
        return int_to_float(x, dnp)
    if dst.is_int1():
        return np.asarray(x != 0)
    return np.asarray(x).astype(dnp)  # int -> int wraps (sign-extends signed sources, zero-extends int1/unsigned)


def bitcast(x: np.ndarray, dst) -> np.ndarray:
    dnp = np_dtype(dst)
    return contig(x).view(dnp)


def round_tf32(x: np.ndarray) -> np.ndarray:
    """fp32 -> tf32 (10 mantissa bits), round to nearest, ties away from zero (cvt.rna.tf32.f32)."""
    x = np.ascontiguousarray(x, dtype=_F32)
    b = x.view(np.uint32)
    r = ((b + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).astype(np.uint32)
    r = np.where(np.isfinite(x), r, b)
    return r.view(_F32)


def constant(value, ty) -> np.ndarray:
    """A Python scalar as an array of type ``ty`` (block types are filled)."""
    shape = T.shape_of(ty)
    elt = T.scalar_of(ty)
    d = np_dtype(elt)
    if hasattr(value, "item") and not isinstance(value, np.ndarray):
        value = value.item()
    if elt.is_ptr() or (not elt.is_floating() and not elt.is_int1()):
        if isinstance(value, float):
            if math.isnan(value):
                v = np.zeros((), d)
            else:
                v = float_to_int(np.array(value), d if not elt.is_ptr() else np.dtype(np.int64))
        else:
            bits = 64 if elt.is_ptr() else elt.int_bitwidth
            iv = int(value) & ((1 << bits) - 1)
            v = np.array(iv, dtype=_UINT_OF_SIZE[bits // 8]).view(d)
    elif elt.is_int1():
        v = np.array(bool(value))
    else:
        v = float_to_float(np.array(float(value), _F64), d)
    v = np.asarray(v, dtype=d).reshape(())
    if shape:
        return np.full(shape, v, dtype=d)
    return v.copy()
