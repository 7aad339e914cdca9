"""fp8 (e4m3fn / e5m2) conversions in LLVM IR, bit-exact with torch's casts.

Values travel as i8 bits. Two strategies, chosen by the target:

* sm_89 and newer: the PTX pair conversions ``cvt.rn.f16x2.{e4m3x2,e5m2x2}`` (exact widening) and
  ``cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32`` (round to nearest even), two values per instruction. The
  hardware saturates every overflow; torch keeps e5m2's infinities and gives NaN the input's sign,
  so a short fix-up restores those (``torch_fixup``).
* older targets (sm_80): integer bit manipulation. Widening places the fp8 fields in an fp16 and
  rescales by 2^(15 - bias) (exact, subnormals included); narrowing is torch's own algorithm
  (``compiler/fp8_reference.py`` is the same algorithm in numpy, the interpreter's reference).

Every other float type converts through fp16 (widening) or fp32 (narrowing), both exact steps.
"""
from __future__ import annotations

import struct
from typing import List, Tuple

from ...language.dtypes import FP8_FORMATS, dtype
from .emitter import Emitter

# fp8 type -> PTX name of a packed pair in cvt
PTX_PAIR = {"fp8e4nv": "e4m3x2", "fp8e5": "e5m2x2"}
from ..target_rules import FP8_HW_CVT_CAPABILITY as HW_CVT_CAPABILITY, has_fp8_cvt  # noqa: F401

F16, F32 = dtype("fp16"), dtype("fp32")


def has_hw_cvt(e: Emitter) -> bool:
    """Whether the target has the fp8 cvt instructions (the lowering sets ``e.capability``)."""
    return has_fp8_cvt(getattr(e, "capability", (9, 0)))


def _hex_f32(x: float) -> str:
    from .emitter import float_literal
    return float_literal(x, "float")


# -- widening: fp8 -> fp16 -----------------------------------------------------------------------


def to_f16_pair(e: Emitter, name: str, x0: str, x1: str) -> Tuple[str, str]:
    """Two fp8 values (i8) -> two ``half`` values, exactly."""
    if not has_hw_cvt(e):
        return to_f16_soft(e, name, x0), to_f16_soft(e, name, x1)
    lo = e.val(f"zext i8 {x0} to i16")
    hi = e.val(f"shl i16 {e.val(f'zext i8 {x1} to i16')}, 8")
    pair = e.val(f"or i16 {lo}, {hi}")
    h2 = e.asm("i32", f"cvt.rn.f16x2.{PTX_PAIR[name]} $0, $1;", "=r,h", [("i16", pair)], side_effects=False)
    v = e.val(f"bitcast i32 {h2} to <2 x half>")
    return e.val(f"extractelement <2 x half> {v}, i32 0"), e.val(f"extractelement <2 x half> {v}, i32 1")


def to_f16_soft(e: Emitter, name: str, x: str) -> str:
    """One fp8 value -> ``half`` with integer ops and one exact fp16 multiply (targets without fp8 cvt)."""
    fmt = FP8_FORMATS[name]
    b = e.val(f"zext i8 {x} to i16")
    mag = e.val(f"shl i16 {e.val(f'and i16 {b}, 127')}, {10 - fmt.mantissa}")
    sign = e.val(f"shl i16 {e.val(f'and i16 {b}, 128')}, 8")
    h = e.val(f"bitcast i16 {e.val(f'or i16 {mag}, {sign}')} to half")
    scale = 15 - fmt.bias
    if scale:  # e5m2 is the top byte of an fp16 already
        from .emitter import float_literal
        h = e.val(f"fmul half {h}, {float_literal(2.0 ** scale, 'half')}")
    # NaN: fp16's quiet NaN with the fp8 mantissa as payload, as torch widens it (e4m3fn's NaN code is
    # a finite number to the rescaling above; e5m2's NaNs would come out signalling)
    low = e.val(f"and i16 {b}, 127")
    if fmt.inf_code < 0:
        is_nan = e.val(f"icmp eq i16 {low}, {fmt.nan_code}")
    else:
        is_nan = e.val(f"icmp ugt i16 {low}, {fmt.inf_code}")
    nan = e.val(f"or i16 {e.val(f'or i16 {sign}, {mag}')}, {0x7C00 | (1 << 9)}")
    return e.val(f"select i1 {is_nan}, half {e.val(f'bitcast i16 {nan} to half')}, half {h}")


# -- narrowing: fp32 -> fp8 ----------------------------------------------------------------------


def from_f32_pair(e: Emitter, name: str, x0: str, x1: str, signs=(None, None),
                  nan_positive: bool = False) -> Tuple[str, str]:
    """Two ``float`` values -> two fp8 values (i8), as torch rounds them.  ``signs``: the sign bytes
    of the values before they were widened to float, where the widening may drop a NaN's sign;
    ``nan_positive``: the values are never negative NaNs (no sign to restore)."""
    if not has_hw_cvt(e):
        return from_f32_soft(e, name, x0, signs[0]), from_f32_soft(e, name, x1, signs[1])
    # cvt puts its first source in the high byte
    r = e.asm("i16", f"cvt.rn.satfinite.{PTX_PAIR[name]}.f32 $0, $1, $2;", "=h,f,f",
              [("float", x1), ("float", x0)], side_effects=False)
    y0 = e.val(f"trunc i16 {r} to i8")
    y1 = e.val(f"trunc i16 {e.val(f'lshr i16 {r}, 8')} to i8")
    return (torch_fixup(e, name, x0, y0, signs[0], nan_positive),
            torch_fixup(e, name, x1, y1, signs[1], nan_positive))


def _sign_byte(e: Emitter, x: str, ty: str = "float", bits: int = 32) -> str:
    """The top byte of ``x``'s bits (its sign in bit 7)."""
    raw = e.val(f"bitcast {ty} {x} to i{bits}")
    return e.val(f"trunc i{bits} {e.val(f'lshr i{bits} {raw}, {bits - 8}')} to i8")


# widening that may drop a NaN's sign: the hardware's cvt.f32.f16 returns the canonical (positive) NaN
_SIGN_BEFORE_WIDENING = {"fp16": ("half", 16)}


def _source_sign(e: Emitter, src, x: str):
    spec = _SIGN_BEFORE_WIDENING.get(src.name)
    return _sign_byte(e, x, *spec) if spec else None


def torch_fixup(e: Emitter, name: str, x: str, y: str, sign_byte=None, nan_positive: bool = False) -> str:
    """cvt.rn.satfinite -> torch: NaN is ``nan_code | sign``; e5m2 overflows to +-Inf, not +-max.
    ``nan_positive``: a NaN ``x`` is positive, and cvt's NaN is already ``nan_code``: only e5m2's
    overflow is left to fix."""
    fmt = FP8_FORMATS[name]
    if nan_positive and fmt.overflow != "inf":
        return y
    sign = e.val(f"and i8 {sign_byte or _sign_byte(e, x)}, -128")
    if nan_positive:  # only the overflow (a NaN converts to nan_code as it is)
        special, code = "false", y
    else:
        special = e.val(f"fcmp uno float {x}, 0.0")
        code = e.val(f"or i8 {sign}, {fmt.nan_code}")
    if fmt.overflow == "inf":
        # rounding to nearest even reaches the Inf code from the midpoint between max_finite and
        # overflow_at on (a tie goes to Inf when max's code is odd, as e5m2's 0x7B is)
        mid = (fmt.max_finite + fmt.overflow_at) / 2
        ax = e.call("float", "llvm.fabs.f32", [("float", x)])
        over = e.val(f"fcmp {'oge' if fmt.max_code & 1 else 'ogt'} float {ax}, {_hex_f32(mid)}")
        code = e.val(f"select i1 {over}, i8 {e.val(f'or i8 {sign}, {fmt.inf_code}')}, i8 {code}")
        special = e.val(f"or i1 {special}, {over}")
    return e.val(f"select i1 {special}, i8 {code}, i8 {y}")


def from_f32_soft(e: Emitter, name: str, x: str, sign_byte=None) -> str:
    """torch's fp32 -> fp8 algorithm with integer ops (and one fp32 add for subnormal results)."""
    fmt = FP8_FORMATS[name]
    shift = 23 - fmt.mantissa
    bits = e.val(f"bitcast float {x} to i32")
    sign = sign_byte or e.val(f"trunc i32 {e.val(f'lshr i32 {bits}, 24')} to i8")
    sign = e.val(f"and i8 {sign}, -128")
    a = e.val(f"and i32 {bits}, 2147483647")
    # normal: rebias, round the dropped bits to nearest even
    odd = e.val(f"and i32 {e.val(f'lshr i32 {a}, {shift}')}, 1")
    n = e.val(f"add i32 {a}, {((fmt.bias - 127) << 23) + (1 << (shift - 1)) - 1}")
    n = e.val(f"lshr i32 {e.val(f'add i32 {n}, {odd}')}, {shift}")
    # subnormal: let the fp32 adder round to the fp8 subnormal step
    magic = (127 - fmt.bias + shift + 1) << 23
    af = e.val(f"bitcast i32 {a} to float")
    s = e.val(f"fadd float {af}, {e.val(f'bitcast i32 {magic} to float')}")
    s = e.val(f"sub i32 {e.val(f'bitcast float {s} to i32')}, {magic}")
    is_sub = e.val(f"icmp ult i32 {a}, {(127 - fmt.bias + 1) << 23}")
    r = e.val(f"trunc i32 {e.val(f'select i1 {is_sub}, i32 {s}, i32 {n}')} to i8")
    if fmt.overflow == "saturate":
        carried = e.val(f"icmp eq i8 {r}, {fmt.nan_code}")
        r = e.val(f"select i1 {carried}, i8 {fmt.max_code}, i8 {r}")
    over_code = fmt.max_code if fmt.overflow == "saturate" else fmt.inf_code
    over_bits = struct.unpack("<I", struct.pack("<f", fmt.overflow_at))[0]
    big = e.val(f"icmp uge i32 {a}, {over_bits}")
    nan = e.val(f"icmp ugt i32 {a}, {0x7F800000}")
    special = e.val(f"select i1 {nan}, i8 {fmt.nan_code}, i8 {over_code}")
    r = e.val(f"select i1 {big}, i8 {special}, i8 {r}")
    return e.val(f"or i8 {r}, {sign}")


# -- any float <-> fp8 ---------------------------------------------------------------------------


def cast_pair(e: Emitter, src, dst, x0: str, x1: str, nan_positive: bool = False) -> Tuple[str, str]:
    """Convert two values when ``src`` or ``dst`` is fp8 (two per cvt instruction on sm_89+)."""
    from .elementwise import cast
    if src.is_fp8():
        h0, h1 = to_f16_pair(e, src.name, x0, x1)
        if dst == F16:
            return h0, h1
        return cast(e, F16, dst, h0), cast(e, F16, dst, h1)
    signs = (_source_sign(e, src, x0), _source_sign(e, src, x1))
    if src != F32:
        x0, x1 = cast(e, src, F32, x0), cast(e, src, F32, x1)
    return from_f32_pair(e, dst.name, x0, x1, signs, nan_positive)


def cast_one(e: Emitter, src, dst, x: str, nan_positive: bool = False) -> str:
    """Convert one value when ``src`` or ``dst`` is fp8."""
    if src.is_fp8() and dst.is_fp8():
        h = cast_one(e, src, F16, x)
        return cast_one(e, F16, dst, h)
    if src.is_fp8():
        h = to_f16_pair(e, src.name, x, x)[0] if has_hw_cvt(e) else to_f16_soft(e, src.name, x)
        from .elementwise import cast
        return h if dst == F16 else cast(e, F16, dst, h)
    sign = _source_sign(e, src, x)
    if src != F32:
        from .elementwise import cast
        x = cast(e, src, F32, x)
    if not has_hw_cvt(e):
        return from_f32_soft(e, dst.name, x, sign)
    return from_f32_pair(e, dst.name, x, x, (sign, sign), nan_positive)[0]


def cast_many(e: Emitter, src, dst, xs: List[str], nan_positive: bool = False) -> List[str]:
    """Convert a thread's registers, pairing neighbours so one cvt serves two values (``nan_positive``:
    the values are never negative NaNs, see :func:`torch_fixup`)."""
    if src.is_fp8() and dst.is_fp8():
        return cast_many(e, F16, dst, cast_many(e, src, F16, xs))
    out: List[str] = []
    for i in range(0, len(xs) - 1, 2):
        out += cast_pair(e, src, dst, xs[i], xs[i + 1], nan_positive)
    if len(xs) % 2:
        out.append(cast_one(e, src, dst, xs[-1], nan_positive))
    return out
