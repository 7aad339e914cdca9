"""Counter-based random numbers (Philox 4x32-10), as in ``triton.language.random``.

Written with ordinary language ops (integer multiply-high, xor, adds), so compiled kernels and the
interpreter produce bit-identical integers for the same (seed, offset).
"""
from __future__ import annotations

from . import dtypes as T
from . import semantic
from .core import _unwrap
from .standard import cos, log, maximum, sin, sqrt, umulhi, where, zeros

# Philox 4x32 constants (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3").
PHILOX_KEY_A = 0x9E3779B9
PHILOX_KEY_B = 0xBB67AE85
PHILOX_ROUND_A = 0xD2511F53
PHILOX_ROUND_B = 0xCD9E8D57
N_ROUNDS_DEFAULT = 10


def philox_impl(c0, c1, c2, c3, k0, k1, n_rounds=N_ROUNDS_DEFAULT):
    """``n_rounds`` Philox rounds on 32-bit counters c0..c3 with key (k0, k1)."""
    for _ in range(int(_unwrap(n_rounds))):
        a = semantic.to_tensor(PHILOX_ROUND_A).to(T.uint32)
        b = semantic.to_tensor(PHILOX_ROUND_B).to(T.uint32)
        p0, p2 = c0, c2
        c0 = umulhi(b, p2) ^ c1 ^ k0
        c2 = umulhi(a, p0) ^ c3 ^ k1
        c1 = b * p2
        c3 = a * p0
        k0 = k0 + semantic.to_tensor(PHILOX_KEY_A).to(T.uint32)
        k1 = k1 + semantic.to_tensor(PHILOX_KEY_B).to(T.uint32)
    return c0, c1, c2, c3


def philox(seed, c0, c1, c2, c3, n_rounds=N_ROUNDS_DEFAULT):
    seed = semantic.to_tensor(seed)
    if not seed.dtype.is_int():
        raise TypeError(f"random seed must be an integer, got {seed.dtype}")
    seed = seed.to(T.uint64)
    c0, c1, c2, c3 = (semantic.to_tensor(c) for c in (c0, c1, c2, c3))
    if c0.dtype.primitive_bitwidth != 32:
        raise TypeError(f"random offsets must be 32-bit integers, got {c0.dtype}")
    seed_hi = ((seed >> 32) & 0xFFFFFFFF).to(T.uint32)
    seed_lo = (seed & 0xFFFFFFFF).to(T.uint32)
    c0, c1, c2, c3 = (c.to(T.uint32, bitcast=True) for c in (c0, c1, c2, c3))
    return philox_impl(c0, c1, c2, c3, seed_lo, seed_hi, n_rounds)


def randint4x(seed, offset, n_rounds=N_ROUNDS_DEFAULT):
    """Four blocks of random uint32 for each element of ``offset``."""
    offset = semantic.to_tensor(offset)
    z = zeros(offset.shape, offset.dtype) if offset.type.is_block() else semantic.to_tensor(0).to(offset.dtype)
    return philox(seed, offset, z, z, z, n_rounds)


def randint(seed, offset, n_rounds=N_ROUNDS_DEFAULT):
    """One block of random uint32 for each element of ``offset``."""
    ret, _, _, _ = randint4x(seed, offset, n_rounds)
    return ret


def uint_to_uniform_float(x):
    """Map random 32/64-bit integers to floats uniform in [0, 1)."""
    x = semantic.to_tensor(x)
    if x.dtype in (T.uint32, T.int32):
        x = x.to(T.int32, bitcast=True)
        scale = 4.6566127342e-10  # largest value with (2**31 - 1) * scale < 1 in fp32
    elif x.dtype in (T.uint64, T.int64):
        x = x.to(T.int64, bitcast=True)
        scale = 1.0842020432385337e-19
    else:
        raise TypeError(f"uint_to_uniform_float() needs 32- or 64-bit integers, got {x.dtype}")
    x = where(x < 0, -x - 1, x)
    return x * scale


def rand(seed, offset, n_rounds=N_ROUNDS_DEFAULT):
    """Uniform fp32 in [0, 1) for each element of ``offset``."""
    return uint_to_uniform_float(randint(seed, offset, n_rounds))


def rand4x(seed, offsets, n_rounds=N_ROUNDS_DEFAULT):
    i1, i2, i3, i4 = randint4x(seed, offsets, n_rounds)
    return tuple(uint_to_uniform_float(i) for i in (i1, i2, i3, i4))


def pair_uniform_to_normal(u1, u2):
    """Box-Muller transform of two uniform blocks into two standard-normal blocks."""
    u1 = maximum(1.0e-7, u1)
    th = 6.283185307179586 * u2
    r = sqrt(-2.0 * log(u1))
    return r * cos(th), r * sin(th)


def randn(seed, offset, n_rounds=N_ROUNDS_DEFAULT):
    """Standard-normal fp32 for each element of ``offset``."""
    i1, i2, _, _ = randint4x(seed, offset, n_rounds)
    n1, _ = pair_uniform_to_normal(uint_to_uniform_float(i1), uint_to_uniform_float(i2))
    return n1


def randn4x(seed, offset, n_rounds=N_ROUNDS_DEFAULT):
    u1, u2, u3, u4 = rand4x(seed, offset, n_rounds)
    n1, n2 = pair_uniform_to_normal(u1, u2)
    n3, n4 = pair_uniform_to_normal(u3, u4)
    return n1, n2, n3, n4
