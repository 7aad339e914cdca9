"""fp8 (e4m3fn / e5m2) conversions in LLVM IR, bit-exact with torch's casts.

Values travel as i8 bits. Two strategies, chosen by the target:

* sm_89 and newer: the PTX pair conversions ``cvt.rn.f16x2.{e4m3x2,e5m2x2}`` (exact widening) and
  ``cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32`` (round to nearest even), two values per instruction. The
  hardware saturates every overflow; torch keeps e5m2's infinities and gives NaN the input's sign,
  so a short fix-up on the packed pair restores those (``torch_fixup_pair``).
* older targets (sm_80): integer bit manipulation. Widening places the fp8 fields in an fp16 and
  rescales by 2^(15 - bias) (exact, subnormals included); narrowing is torch's own algorithm
  (``compiler/fp8_reference.py`` is the same algorithm in numpy, the interpreter's reference).

Every other float type converts through fp16 (widening) or fp32 (narrowing), both exact steps.
"""
from __future__ import annotations

import struct
from typing import List, Optional, Tuple

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
    """Two ``float`` values -> two fp8 values (i8), as torch rounds them.  ``signs``: per value, where its sign
    bit was before it was widened to float (``(i32 word, byte)`` holding it in bit 7 of that byte; a widening
    may drop a NaN's sign; None: the float's own); ``nan_positive``: the values are never negative NaNs (no sign
    to restore)."""
    if not has_hw_cvt(e):
        return from_f32_soft(e, name, x0, signs[0]), from_f32_soft(e, name, x1, signs[1])
    # cvt puts its first source in the high byte
    r = e.asm("i16", f"cvt.rn.satfinite.{PTX_PAIR[name]}.f32 $0, $1, $2;", "=h,f,f",
              [("float", x1), ("float", x0)], side_effects=False)
    r = torch_fixup_pair(e, name, x0, x1, r, signs, nan_positive)
    return e.val(f"trunc i16 {r} to i8"), e.val(f"trunc i16 {e.val(f'lshr i16 {r}, 8')} to i8")


def _f32_sign(e: Emitter, x: str):
    return e.val(f"bitcast float {x} to i32"), 3


# widening that may drop a NaN's sign: the hardware's cvt.f32.f16 returns the canonical (positive) NaN;
# the sign is read from the source's bits (LLVM type, width, the byte with the sign)
_SIGN_BEFORE_WIDENING = {"fp16": ("half", 16, 1)}


def _source_sign(e: Emitter, src, x: str):
    """``(i32 word, byte)``: where ``x``'s sign bit is (bit 7 of that byte) when a widening to float may lose it."""
    spec = _SIGN_BEFORE_WIDENING.get(src.name)
    if spec is None:
        return None
    ty, bits, byte = spec
    return e.val(f"zext i{bits} {e.val(f'bitcast {ty} {x} to i{bits}')} to i32"), byte


def _prmt(e: Emitter, a: str, b: str, sel: int) -> str:
    """``prmt.b32``: result byte i is byte ``sel`` nibble i of the pair (a: bytes 0-3, b: 4-7); a nibble with
    bit 3 set gives that byte's sign bit replicated (0x00 or 0xFF)."""
    return e.asm("i32", "prmt.b32 $0, $1, $2, $3;", "=r,r,r,r", [("i32", a), ("i32", b), ("i32", str(sel))],
                 side_effects=False)


def torch_fixup_pair(e: Emitter, name: str, x0: str, x1: str, r: str, signs=(None, None),
                     nan_positive: bool = False) -> str:
    """``r``, the i16 that ``cvt.rn.satfinite`` made of ``x0`` (low byte) and ``x1`` (high byte) -> torch's two
    codes, with a few ops on the whole pair (never split into bytes):

    * e5m2 overflow: torch rounds ``|x| >= 61440`` (the midpoint between max 57344 and 65536; a tie goes to the
      even code, Inf's 0x7C) and +-Inf to +-Inf (``sign | 0x7C``) where satfinite gives ``sign | 0x7B``; the two
      codes differ in bits 0-2. ``t = 61439.996 - |x|`` (the float just below 61440) is negative exactly there;
      a NaN gives the canonical NaN, positive, as every NVIDIA float op does (``passes/fp_contract.py:
      POSITIVE_NAN_OPS`` relies on the same). One byte permute spreads each t's sign over a byte, and
      ``r ^= signs & 0x0707``: two FADD, a PRMT and a LOP3 a pair;
    * NaN sign: torch's NaN is ``sign | 0x7F``, satfinite's is 0x7F. Every other code satfinite gives already
      carries the value's sign in bit 7, so the two sign bits are or-ed in unconditionally:
      ``r |= sign(x0) << 7 | sign(x1) << 15``, a PRMT and a LOP3 (none when ``nan_positive``). ``signs`` says
      where a sign is when not in the float (see :func:`from_f32_pair`)."""
    if FP8_FORMATS[name].overflow == "inf":
        r = _overflow_to_inf(e, name, x0, x1, r)
    if not nan_positive:
        r = _nan_signs(e, x0, x1, r, signs)
    return r


def _overflow_threshold(name: str) -> float:
    """The smallest magnitude torch rounds to Inf: the midpoint between max and the next power of two (the tie
    goes to Inf: max's code is odd)."""
    fmt = FP8_FORMATS[name]
    assert fmt.overflow == "inf" and fmt.max_code & 1 and fmt.inf_code == fmt.max_code + 1
    return (fmt.max_finite + fmt.overflow_at) / 2


def _below_threshold(e: Emitter, name: str, x: str) -> str:
    """i32: the bits of ``61439.996 - |x|`` (the float just below the threshold), negative where ``x`` overflows."""
    below = struct.unpack("<I", struct.pack("<f", _overflow_threshold(name)))[0] - 1
    # inline abs and sub: ptxas folds the abs into the FADD (LLVM's fabs would be an integer and)
    ax = e.asm("float", "abs.f32 $0, $1;", "=f,f", [("float", x)], side_effects=False)
    return e.asm("i32", f"sub.f32 $0, 0f{below:08X}, $1;", "=r,f", [("float", ax)], side_effects=False)


def _overflow_to_inf(e: Emitter, name: str, x0: str, x1: str, r: str) -> str:
    fmt = FP8_FORMATS[name]
    ts = [_below_threshold(e, name, x) for x in (x0, x1)]
    over = e.val(f"trunc i32 {_prmt(e, ts[0], ts[1], 0xFB)} to i16")  # bytes 0, 1: 0xFF where t0 / t1 < 0
    return e.val(f"xor i16 {r}, {e.val(f'and i16 {over}, {(fmt.max_code ^ fmt.inf_code) * 0x0101}')}")


def _overflow_to_inf_word(e: Emitter, name: str, xs: List[str], w: str) -> str:
    """:func:`_overflow_to_inf` on a word of two cvt pairs (``xs``: its four values, low byte first)."""
    fmt = FP8_FORMATS[name]
    ts = [_below_threshold(e, name, x) for x in xs]
    flip = fmt.max_code ^ fmt.inf_code
    # bytes 0, 1 / 2, 3 of the two permutes: 0xFF where the value overflows (their other bytes are copies of
    # t's low bytes, masked off): two LOP3, each ``w ^= perm & mask``
    lo, hi = _prmt(e, ts[0], ts[1], 0xFB), _prmt(e, ts[2], ts[3], 0xFB00)
    w = e.val(f"xor i32 {w}, {e.val(f'and i32 {lo}, {flip * 0x0101}')}")
    return e.val(f"xor i32 {w}, {e.val(f'and i32 {hi}, {flip * 0x01010000}')}")


def _nan_signs(e: Emitter, x0: str, x1: str, r: str, signs=(None, None)) -> str:
    (w0, b0), (w1, b1) = (sg or _f32_sign(e, x) for sg, x in zip(signs, (x0, x1)))
    sign = e.val(f"trunc i32 {_prmt(e, w0, w1, b0 | (4 + b1) << 4)} to i16")  # bytes 0, 1: the sign bytes
    return e.val(f"or i16 {r}, {e.val(f'and i16 {sign}, {-0x7F80}')}")  # 0x8080


def from_f32_soft(e: Emitter, name: str, x: str, sign=None) -> str:
    """torch's fp32 -> fp8 algorithm with integer ops (and one fp32 add for subnormal results); ``sign``: where
    the value's sign bit was before a widening to float (see :func:`from_f32_pair`)."""
    fmt = FP8_FORMATS[name]
    shift = 23 - fmt.mantissa
    bits = e.val(f"bitcast float {x} to i32")
    word, byte = sign or (bits, 3)
    top = e.val(f"trunc i32 {e.val(f'lshr i32 {word}, {8 * byte}') if byte else word} to i8")
    sign = e.val(f"and i8 {top}, -128")
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
    signs = (None, None) if nan_positive else (_source_sign(e, src, x0), _source_sign(e, src, x1))
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
    sign = None if nan_positive else _source_sign(e, src, x)
    if src != F32:
        from .elementwise import cast
        x = cast(e, src, F32, x)
    if not has_hw_cvt(e):
        return from_f32_soft(e, dst.name, x, sign)
    return from_f32_pair(e, dst.name, x, x, (sign, sign), nan_positive)[0]


def cast_many(e: Emitter, src, dst, xs: List[str], nan_positive: bool = False,
              bound: Optional[List[str]] = None, word_order: Optional[List[int]] = None,
              self_bound: bool = False) -> List[str]:
    """Convert a thread's registers, pairing neighbours so one cvt serves two values (``nan_positive``:
    the values are never negative NaNs, see :func:`torch_fixup_pair`; ``bound``: fp32 registers that bound
    the values' magnitudes, or are NaN, and ``word_order``: the words a reader takes the bytes in, see
    :func:`cast_many_bounded`; ``self_bound``: the values are their own bound, see :func:`cast_many_bounded`)."""
    if src.is_fp8() and dst.is_fp8():
        return cast_many(e, F16, dst, cast_many(e, src, F16, xs))
    if src == F32 and has_hw_cvt(e) and FP8_FORMATS[dst.name].overflow == "inf":
        if self_bound:
            return cast_many_bounded(e, dst.name, xs, xs, nan_positive, word_order, self_bound=True)
        if bound is not None:
            return cast_many_bounded(e, dst.name, xs, bound, nan_positive, word_order)
    out: List[str] = []
    for i in range(0, len(xs) - 1, 2):
        out += cast_pair(e, src, dst, xs[i], xs[i + 1], nan_positive)
    if len(xs) % 2:
        out.append(cast_one(e, src, dst, xs[-1], nan_positive))
    return out


def cast_many_bounded(e: Emitter, name: str, xs: List[str], bound: List[str], nan_positive: bool = False,
                      word_order: Optional[List[int]] = None, self_bound: bool = False) -> List[str]:
    """fp32 -> e5m2 of a thread's registers where ``bound[i] >= |xs[i]|`` or is NaN (``passes/fp8_bounds.py``):
    the cvt pairs, then one test of the thread's distinct bounds (a broadcast repeats registers) against the
    overflow threshold, one ``vote.any`` so the warp branches together, and the overflow fix-up
    (:func:`torch_fixup_pair`) only on the branch where some lane's bound is not below it (a NaN bound is not).
    ``word_order`` (the cast's ``words='a8'``, passes/narrow_carries.py): the branches join in the words of two
    cvt pairs each that the reader (an fp8 wgmma A operand, ``fp8_words.py``) takes, not in pairs, so that the
    second cvt of a word still merges into the first's register (``F2FP ... MERGE_C``) -- a phi per pair cost a
    byte permute per word after the join.

    ``self_bound`` (``overflow_bound='self'``, passes/fp8_bounds.py): ``bound`` is ``xs``, tested as ``|x|`` (one
    FSETP a value, the abs folded). A value that is NaN or not below the threshold sends the warp to the fix-up
    branch, so on the other path there is no NaN either: the NaN signs are fixed up in the branch too, and the path
    taken is the bare cvts."""
    pairs = [(xs[i], xs[i + 1]) for i in range(0, len(xs) - 1, 2)] + ([(xs[-1], xs[-1])] if len(xs) % 2 else [])
    rs = [e.asm("i16", f"cvt.rn.satfinite.{PTX_PAIR[name]}.f32 $0, $1, $2;", "=h,f,f", [("float", x1), ("float", x0)],
                side_effects=False) for x0, x1 in pairs]
    groups = _pair_words(word_order, len(xs))
    limit = _hex_f32(_overflow_threshold(name))
    big = None
    for b in dict.fromkeys(bound):
        if self_bound:  # inline abs: ptxas folds it into the compare (LLVM's fabs would be an integer and)
            b = e.asm("float", "abs.f32 $0, $1;", "=f,f", [("float", b)], side_effects=False)
        c = e.val(f"fcmp uge float {b}, {limit}")
        big = c if big is None else e.val(f"or i1 {big}, {c}")
    big = e.call("i1", "llvm.nvvm.vote.any.sync", [("i32", "-1"), ("i1", big)])

    def joined(vals):  # what crosses the join: words of two pairs, or the pairs
        if groups is None:
            return [("i16", v) for v in vals]
        out = []
        for a, b in groups:
            v = e.val(f"insertelement <2 x i16> undef, i16 {vals[a]}, i32 0")
            v = e.val(f"insertelement <2 x i16> {v}, i16 {vals[b]}, i32 1")
            out.append(("i32", e.val(f"bitcast <2 x i16> {v} to i32")))
        return out

    fast = joined(rs)
    head, fix, done = e.cur_label, e.label("fp8_overflow"), e.label("fp8_narrowed")
    e.cond_br(big, fix, done)
    e.start_block(fix)
    if self_bound:  # the whole fix-up here (overflow and NaN signs): the branch is rare, words may be taken apart
        slow = joined([torch_fixup_pair(e, name, x0, x1, r, nan_positive=nan_positive) for (x0, x1), r in zip(pairs, rs)])
    elif groups is None:
        slow = joined([_overflow_to_inf(e, name, x0, x1, r) for (x0, x1), r in zip(pairs, rs)])
    else:  # fixed up word by word, so that the words are not taken apart before the branch
        slow = [("i32", _overflow_to_inf_word(e, name, [*pairs[a], *pairs[b]], w)) for (a, b), (_, w) in zip(groups, fast)]
    e.br(done)
    e.start_block(done)
    merged = [e.val(f"phi {t} [{f}, %{head}], [{s_}, %{fix}]") for (t, f), (_, s_) in zip(fast, slow)]  # phis first
    if groups is None:
        rs = merged
    else:
        rs = [None] * len(pairs)
        for w, (a, b) in zip(merged, groups):
            v = e.val(f"bitcast i32 {w} to <2 x i16>")
            rs[a], rs[b] = (e.val(f"extractelement <2 x i16> {v}, i32 {h}") for h in (0, 1))
    out: List[str] = []
    for (x0, x1), r in zip(pairs, rs):
        if not nan_positive and not self_bound:
            r = _nan_signs(e, x0, x1, r)
        out += [e.val(f"trunc i16 {r} to i8"), e.val(f"trunc i16 {e.val(f'lshr i16 {r}, 8')} to i8")]
    return out[:len(xs)]


def _pair_words(order: Optional[List[int]], n: int):
    """``order`` (registers grouped four to a word) as pairs of cvt-pair indices, or None where a word is not two
    whole cvt pairs (register 2k with 2k + 1)."""
    if order is None or n % 4 or sorted(order) != list(range(n)):
        return None
    groups = []
    for w in range(0, n, 4):
        a, b = order[w:w + 2], order[w + 2:w + 4]
        if not (a[0] % 2 == 0 and a[1] == a[0] + 1 and b[0] % 2 == 0 and b[1] == b[0] + 1):
            return None
        groups.append((a[0] // 2, b[0] // 2))
    return groups
