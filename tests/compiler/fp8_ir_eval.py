"""Run the straight-line LLVM IR that ``codegen/fp8.py`` emits for the fp32/fp16/bf16 -> fp8 narrowing on the
host, over numpy arrays (one lane per element), so its arithmetic can be checked on millions of inputs.

Every value is held as raw bits (``uint64``) with its LLVM type. The PTX inline assembly the lowering uses is
modelled by what the PTX ISA says it does:

* ``cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32``: round to nearest even; a finite overflow and an infinity give
  +-max; a NaN gives the NaN code 0x7F (``nan_sign=True``: 0x7F with the input's sign -- the fix-up must be
  right for either);
* ``abs.f32``: clears the sign bit; ``sub.f32 c, a``: IEEE round to nearest, a NaN result is the canonical
  NaN 0x7FFFFFFF (NVIDIA's float ops do not propagate payloads or signs);
* ``prmt.b32`` in its default mode: result byte i is byte ``sel[4i+2:4i]`` of ``{b, a}``, replicated sign bit
  if ``sel[4i+3]`` is set;
* ``fpext half`` (``cvt.f32.f16``): exact; a NaN becomes the canonical positive NaN (the sign is lost, which
  is why the lowering reads the sign from the half's bits).
"""
from __future__ import annotations

import re
from typing import Dict, Tuple

import numpy as np

from kernelc.compiler import fp8_reference as REF
from kernelc.language.dtypes import FP8_FORMATS

U64 = np.uint64
_WIDTH = {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64, "half": 16, "bfloat": 16, "float": 32}


def _mask(ty: str) -> np.uint64:
    return U64((1 << _WIDTH[ty]) - 1)


def _f32(bits: np.ndarray) -> np.ndarray:
    return bits.astype(np.uint32).view(np.float32)


def _bits32(f: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(f, np.float32).view(np.uint32).astype(U64)


def satfinite(x_bits: np.ndarray, name: str, nan_sign: bool = False) -> np.ndarray:
    """The byte ``cvt.rn.satfinite`` gives for fp32 values (bits)."""
    fmt = FP8_FORMATS[name]
    x = _f32(x_bits)
    with np.errstate(invalid="ignore"):
        clipped = np.where(np.isnan(x), np.float32(0), np.clip(x, -fmt.max_finite, fmt.max_finite)).astype(np.float32)
    out = REF.encode(clipped, fmt).astype(U64)
    nan = np.isnan(x)
    sign = (x_bits >> U64(24)) & U64(0x80)
    return np.where(nan, U64(fmt.nan_code) | (sign if nan_sign else U64(0)), out)


def _prmt(a: np.ndarray, b: np.ndarray, sel: np.ndarray) -> np.ndarray:
    pool = a | (b << U64(32))
    out = np.zeros_like(a)
    for i in range(4):
        nib = (sel >> U64(4 * i)) & U64(0xF)
        byte = (pool >> ((nib & U64(7)) * U64(8))) & U64(0xFF)
        rep = np.where(byte & U64(0x80), U64(0xFF), U64(0))
        out |= np.where(nib & U64(8), rep, byte) << U64(8 * i)
    return out


def run(lines, env: Dict[str, Tuple[str, np.ndarray]], nan_sign: bool = False, warp: int = 32
        ) -> Dict[str, Tuple[str, np.ndarray]]:
    """Evaluate ``lines`` (``name = instruction``) with ``env``: name -> (LLVM type, bits). Unknown instructions
    fail the test, so the model covers exactly what the lowering emits. Branches: every block is evaluated for
    every lane (the lowering's blocks have no side effects), and a ``phi`` takes, per lane, the value of the
    block the lane came from: a block entered by ``br i1 %c, label %T, ...`` is ``%c``'s lanes; ``vote.any``
    is over consecutive groups of ``warp`` lanes."""
    def get(tok, ty):
        if tok.startswith("%"):
            return env[tok][1]
        if tok == "undef":
            return U64(0)
        return U64(int(tok) & int(_mask(ty)))

    taken: Dict[str, np.ndarray] = {}  # block label -> lanes that entered it by a conditional branch
    for ln in lines:
        if re.match(r"\s*[\w.]+:$", ln) or re.match(r"\s*br label %", ln):
            continue
        if m := re.match(r"\s*br i1 (%\S+), label %([\w.]+), label %([\w.]+)$", ln):
            c = env[m.group(1)][1].astype(bool)
            taken[m.group(2)], taken[m.group(3)] = c, ~c
            continue
        m = re.match(r"\s*(%\S+) = (.*)$", ln)
        assert m, ln
        dst, rhs = m.groups()
        if m2 := re.match(r"phi (\w+) \[(\S+), %([\w.]+)\], \[(\S+), %([\w.]+)\]$", rhs):
            ty, a, la, b, lb = m2.groups()
            if lb in taken:
                env[dst] = (ty, np.where(taken[lb], get(b, ty), get(a, ty)))
            else:
                env[dst] = (ty, np.where(taken[la], get(a, ty), get(b, ty)))
            continue
        if m2 := re.match(r"fcmp (uge|oge|olt) float (\S+), (\S+)$", rhs):
            pred, a, b = m2.groups()
            x = _f32(env[a][1])
            y = np.float32(np.array([int(b, 16)], np.uint64).view(np.float64)[0])  # LLVM's hex double
            with np.errstate(invalid="ignore"):
                r = {"uge": ~(x < y), "oge": x >= y, "olt": x < y}[pred]
            env[dst] = ("i1", r.astype(U64))
            continue
        if m2 := re.match(r"call i1 @llvm\.nvvm\.vote\.any\.sync\(i32 -1, i1 (\S+)\)$", rhs):
            v = env[m2.group(1)][1].astype(bool).reshape(-1, warp).any(axis=1)
            env[dst] = ("i1", np.repeat(v, warp).astype(U64))
            continue
        if m2 := re.match(r"insertelement <2 x i16> (\S+), i16 (\S+), i32 ([01])$", rhs):
            v, x, h = m2.groups()
            sh = U64(16 * int(h))
            env[dst] = ("i32", (get(v, "i32") & ~(U64(0xFFFF) << sh) & U64(0xFFFFFFFF)) | (get(x, "i16") << sh))
            continue
        if m2 := re.match(r"extractelement <2 x i16> (\S+), i32 ([01])$", rhs):
            env[dst] = ("i16", (env[m2.group(1)][1] >> U64(16 * int(m2.group(2)))) & U64(0xFFFF))
            continue
        if m2 := re.match(r"bitcast (?:<2 x i16>|i32) (\S+) to (?:<2 x i16>|i32)$", rhs):
            env[dst] = ("i32", env[m2.group(1)][1])
            continue
        elif m2 := re.match(r"(and|or|xor|shl|lshr|add) (i\d+) (\S+), (\S+)$", rhs):
            op, ty, a, b = m2.groups()
            x, y = get(a, ty), get(b, ty)
            f = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
                 "shl": lambda p, q: p << q, "lshr": lambda p, q: p >> q, "add": lambda p, q: p + q}[op]
            env[dst] = (ty, f(x, y) & _mask(ty))
        elif m2 := re.match(r"(zext|trunc|bitcast) (\w+) (\S+) to (\w+)$", rhs):
            op, ty, a, to = m2.groups()
            env[dst] = (to, get(a, ty) & _mask(to))
        elif m2 := re.match(r"fpext (half|bfloat) (\S+) to float$", rhs):
            ty, a = m2.groups()
            h = get(a, ty)
            if ty == "bfloat":
                env[dst] = ("float", h << U64(16))
            else:
                f = h.astype(np.uint16).view(np.float16).astype(np.float32)
                env[dst] = ("float", np.where(np.isnan(f), U64(0x7FFFFFFF), _bits32(f)))
        elif m2 := re.match(r'call i16 asm "cvt\.rn\.satfinite\.(e4m3x2|e5m2x2)\.f32 \$0, \$1, \$2;", '
                            r'"=h,f,f"\(float (\S+), float (\S+)\)$', rhs):
            kind, hi, lo = m2.groups()
            name = {"e4m3x2": "fp8e4nv", "e5m2x2": "fp8e5"}[kind]
            env[dst] = ("i16", satfinite(env[lo][1], name, nan_sign) | satfinite(env[hi][1], name, nan_sign) << U64(8))
        elif m2 := re.match(r'call float asm "abs\.f32 \$0, \$1;", "=f,f"\(float (\S+)\)$', rhs):
            env[dst] = ("float", env[m2.group(1)][1] & U64(0x7FFFFFFF))
        elif m2 := re.match(r'call i32 asm "sub\.f32 \$0, 0f([0-9A-F]{8}), \$1;", "=r,f"\(float (\S+)\)$', rhs):
            c = np.array([int(m2.group(1), 16)], np.uint32).view(np.float32)[0]
            with np.errstate(invalid="ignore", over="ignore"):
                d = (c - _f32(env[m2.group(2)][1])).astype(np.float32)
            env[dst] = ("i32", np.where(np.isnan(d), U64(0x7FFFFFFF), _bits32(d)))
        elif m2 := re.match(r'call i32 asm "prmt\.b32 \$0, \$1, \$2, \$3;", "=r,r,r,r"\(i32 (\S+), i32 (\S+), '
                            r'i32 (\S+)\)$', rhs):
            a, b, s = m2.groups()
            env[dst] = ("i32", _prmt(get(a, "i32"), get(b, "i32"), get(s, "i32")))
        else:
            raise AssertionError(f"the model does not know: {ln}")
    return env
