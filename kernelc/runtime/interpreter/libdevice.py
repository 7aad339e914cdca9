"""numpy versions of the libdevice functions (``kl.extra.libdevice``) for the interpreter.

``IMPLS[name](args, out)`` computes the function named ``name`` in ``kernelc/language/extra/libdevice.py``
on numpy arrays (already of the signature's types) and returns an array of numpy dtype ``out``.
Transcendental functions are computed in fp64 and rounded once to the result type (libdevice's fp32
versions are within a few ulp of that). Directed-rounding variants (``add_rd``, ``float2int_ru``,
``sqrt_rz``, ...) are computed exactly with ``fractions.Fraction`` and rounded in their direction.
Bessel functions and a few inverses come from ``scipy.special`` when it is installed.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


def _f64(x):
    return np.asarray(x).astype(_F64)


def _vec(f):
    """Elementwise Python function over fp64 arrays (NaN where ``f`` raises a domain error)."""
    def safe(*xs):
        try:
            return f(*xs)
        except (ValueError, ZeroDivisionError):
            return math.nan
        except OverflowError:
            return math.inf

    def apply(*arrs):
        arrs = np.broadcast_arrays(*[np.asarray(a) for a in arrs])
        out = np.empty(arrs[0].shape, dtype=np.float64)
        flat = [a.reshape(-1) for a in arrs]
        o = out.reshape(-1)
        for i in range(o.size):
            o[i] = safe(*[v[i].item() for v in flat])
        return out
    return apply


def _mp_fallback(name):
    """The same special function with mpmath (installed with torch's sympy), element by element."""
    import mpmath as mp
    f = {"j0": lambda x: mp.besselj(0, x), "j1": lambda x: mp.besselj(1, x), "y0": lambda x: mp.bessely(0, x),
         "y1": lambda x: mp.bessely(1, x), "i0": lambda x: mp.besseli(0, x), "i1": lambda x: mp.besseli(1, x),
         "jv": mp.besselj, "yv": mp.bessely, "erfinv": mp.erfinv, "erfcinv": lambda y: mp.erfinv(1 - y),
         "erfcx": lambda x: mp.exp(x * x) * mp.erfc(x), "ndtri": lambda p: mp.sqrt(2) * mp.erfinv(2 * p - 1)}[name]
    def real(*xs):
        v = f(*xs)
        return float(v) if mp.im(v) == 0 else math.nan  # outside the real domain (y0 of x < 0)
    return _vec(real)


def _scipy(name):
    """A ``scipy.special`` function; without scipy, the same function from mpmath."""
    def f(*xs):
        try:
            import scipy.special as sp
        except ImportError:
            try:
                return _mp_fallback(name)(*xs)
            except ImportError:
                raise NotImplementedError(f"libdevice {name} in the interpreter needs scipy or mpmath "
                                          f"(pip install scipy); compiled kernels call libdevice directly") from None
        return getattr(sp, name)(*xs)
    return f


# -- exact directed rounding -------------------------------------------------------------------


def _round_fraction(q: Fraction, mode: str, fmt: np.dtype):
    """The ``fmt`` float nearest ``q`` in direction ``mode`` (rn: nearest even, rd, ru, rz)."""
    try:
        r = fmt.type(float(q))
    except OverflowError:
        r = fmt.type(math.inf if q > 0 else -math.inf)
    cands = {r, np.nextafter(r, fmt.type(-np.inf)), np.nextafter(r, fmt.type(np.inf))}
    vals = [(c, Fraction(float(c)) if np.isfinite(c) else None) for c in cands]
    if mode == "rz":
        mode = "rd" if q >= 0 else "ru"
    if mode == "rd":
        ok = [c for c, v in vals if (v is None and c < 0) or (v is not None and v <= q)]
        return max(ok)
    if mode == "ru":
        ok = [c for c, v in vals if (v is None and c > 0) or (v is not None and v >= q)]
        return min(ok)
    fin = [(abs(v - q), c) for c, v in vals if v is not None]
    if not fin:
        return r
    best = min(d for d, _ in fin)
    ties = [c for d, c in fin if d == best]
    if len(ties) == 1:
        return ties[0]
    bits = {_F32: np.uint32, _F64: np.uint64}[fmt]
    return next(c for c in ties if int(np.array(c, fmt).view(bits)) % 2 == 0)


def _exact(fn, mode):
    """A directed-rounding op: ``fn`` on exact Fractions; non-finite inputs fall back to float math."""
    def impl(args, out):
        arrs = np.broadcast_arrays(*[np.asarray(a) for a in args])
        res = np.empty(arrs[0].shape, out)
        flat = [a.reshape(-1) for a in arrs]
        o = res.reshape(-1)
        for i in range(o.size):
            xs = [v[i] for v in flat]
            if any(isinstance(x, np.floating) and not np.isfinite(x) for x in xs):
                with np.errstate(all="ignore"):
                    o[i] = out.type(fn(*[float(x) for x in xs], exact=False))
                continue
            try:
                q = fn(*[Fraction(int(x)) if isinstance(x, np.integer) else Fraction(float(x)) for x in xs],
                       exact=True)
            except ZeroDivisionError:
                with np.errstate(all="ignore"):
                    o[i] = out.type(fn(*[float(x) for x in xs], exact=False))
                continue
            o[i] = _round_fraction(q, mode, out) if isinstance(q, Fraction) else out.type(q)
        return res
    return impl


def _add(a, b, exact):
    return a + b


def _sub(a, b, exact):
    return a - b


def _mul(a, b, exact):
    return a * b


def _div(a, b, exact):
    if not exact:
        return np.float64(a) / np.float64(b)
    return a / b


def _rcp(a, exact):
    return _div(Fraction(1) if exact else 1.0, a, exact)


def _fmaf(a, b, c, exact):
    return a * b + c


def _conv(a, exact):
    return a


def _sqrt_directed(mode):
    """sqrt rounded in direction ``mode``: the neighbours of the fp64 root, compared exactly by squares."""
    def impl(args, out):
        x = np.asarray(args[0])
        res = np.sqrt(x.astype(out))
        flat, o = x.reshape(-1), res.reshape(-1)
        for i in range(o.size):
            v = float(flat[i])
            if not np.isfinite(v) or v <= 0:
                continue
            q = Fraction(v)
            r = out.type(math.sqrt(v))
            cands = sorted({np.nextafter(r, out.type(-np.inf)), r, np.nextafter(r, out.type(np.inf))})
            lo = max(c for c in cands if Fraction(float(c)) ** 2 <= q)
            hi = min(c for c in cands if Fraction(float(c)) ** 2 >= q)
            if mode in ("rd", "rz"):
                o[i] = lo
            elif mode == "ru":
                o[i] = hi
            else:
                mid = (Fraction(float(lo)) + Fraction(float(hi))) / 2
                o[i] = lo if mid * mid > q else hi
        return res
    return impl


# -- float -> integer with a rounding direction ---------------------------------------------------

_INT_RANGE = {"int": np.int32, "uint": np.uint32, "ll": np.int64, "ull": np.uint64}
_ROUND = {"rd": np.floor, "ru": np.ceil, "rn": np.rint, "rz": np.trunc}


def _to_int(mode, target):
    """cvt.r*.{s,u}{32,64}: round, saturate to ``target``'s range, NaN -> 0; the bits are returned as
    ``out`` (Triton types the unsigned conversions' results as signed integers of the same width)."""
    target = np.dtype(target)

    def impl(args, out):
        x = _f64(args[0])
        t = _ROUND[mode](x)
        info = np.iinfo(target)
        res = np.zeros(t.shape, target)
        nan = np.isnan(t)
        big = t >= float(info.max)
        small = t <= float(info.min)
        mid = ~(nan | big | small)
        res[mid] = t[mid].astype(out)
        res[big] = info.max
        res[small] = info.min
        return res.view(out) if np.dtype(out).itemsize == target.itemsize else res.astype(out)
    return impl


# -- integer helpers -----------------------------------------------------------------------------


def _bits(a):
    return a.dtype.itemsize * 8


def _clz(args, out):
    a = np.asarray(args[0])
    n = _bits(a)
    u = a.view(np.uint32 if n == 32 else np.uint64).astype(object)
    return np.array([n - int(v).bit_length() for v in u.reshape(-1)], out).reshape(a.shape)


def _popc(args, out):
    a = np.asarray(args[0])
    u = a.view(np.uint32 if _bits(a) == 32 else np.uint64).astype(object)
    return np.array([bin(int(v)).count("1") for v in u.reshape(-1)], out).reshape(a.shape)


def _brev(args, out):
    a = np.asarray(args[0])
    n = _bits(a)
    u = a.view(np.uint32 if n == 32 else np.uint64).reshape(-1)
    r = [int(format(int(v), f"0{n}b")[::-1], 2) for v in u]
    return np.array(r, np.uint32 if n == 32 else np.uint64).view(out).reshape(a.shape)


def _ffs(args, out):
    a = np.asarray(args[0])
    u = a.view(np.uint32 if _bits(a) == 32 else np.uint64).reshape(-1)
    return np.array([(int(v) & -int(v)).bit_length() for v in u], out).reshape(a.shape)


def _byte_perm(args, out):
    x, y, s = (np.asarray(v).astype(np.int64) & 0xFFFFFFFF for v in args)
    x, y, s = np.broadcast_arrays(x, y, s)
    src = (y << 32) | x  # bytes 0-3 from x, 4-7 from y
    res = np.zeros(x.shape, np.int64)
    for k in range(4):
        sel = (s >> (4 * k)) & 7
        res |= ((src >> (8 * sel)) & 0xFF) << (8 * k)
    return res.astype(np.uint32).view(np.int32).astype(out)


def _mulhi(args, out):
    a, b = (np.asarray(v) for v in args)
    from .numerics import mulhi
    return mulhi(a, b, a.dtype.kind == "i").astype(out)


def _mul24(args, out):
    a, b = (np.asarray(v).astype(np.int64) for v in args)
    signed = np.dtype(out).kind == "i"
    m = 0xFFFFFF

    def low24(v):
        v = v & m
        return np.where(v >= 1 << 23, v - (1 << 24), v) if signed else v
    return (low24(a) * low24(b)).astype(np.int64).astype(np.uint64 if not signed else np.int64) \
        .astype(out)


def _hadd(rounding):
    def impl(args, out):
        a, b = (np.asarray(v).astype(np.int64) for v in args)
        return ((a + b + rounding) >> 1).astype(out)
    return impl


def _sad(args, out):
    a, b, c = (np.asarray(v).astype(np.int64) for v in args)
    return (np.abs(a - b) + c).astype(np.uint64).astype(out)


# -- bit reinterpretation ------------------------------------------------------------------------


def _view(dst):
    return lambda args, out: np.ascontiguousarray(np.asarray(args[0])).view(dst).astype(out)


def _hiint(args, out):
    return (np.asarray(args[0], _F64).view(np.int64) >> 32).astype(np.int32).astype(out)


def _loint(args, out):
    return (np.asarray(args[0], _F64).view(np.uint64) & 0xFFFFFFFF).astype(np.uint32).view(np.int32).astype(out)


def _hilo(args, out):
    hi, lo = (np.asarray(v).astype(np.int64) for v in args)
    u = ((hi & 0xFFFFFFFF) << 32) | (lo & 0xFFFFFFFF)
    return u.astype(np.uint64).view(_F64).astype(out)


def _rcp64h(args, out):
    # the GPU's rcp.approx.ftz.f64 keeps about 20 mantissa bits; the interpreter gives the exact
    # reciprocal truncated to its high word (the same 20 bits)
    r = 1.0 / _f64(args[0])
    return (r.view(np.uint64) & np.uint64(0xFFFFFFFF00000000)).view(_F64).astype(out)


# -- float functions -------------------------------------------------------------------------------


def _fl(f):
    """A float function computed in fp64 and rounded once to the result type."""
    def impl(args, out):
        with np.errstate(all="ignore"):
            r = f(*[_f64(a) for a in args])
        return np.asarray(r).astype(out)
    return impl


def _same(f):
    """A function computed in the arguments' own precision (exact in it: nextafter, copysign, ...)."""
    def impl(args, out):
        return np.asarray(f(*[np.asarray(a).astype(out) for a in args])).astype(out)
    return impl


def _round_half_away(x):
    return np.copysign(np.floor(np.abs(x) + 0.5), x)


def _logb(x):
    m, e = np.frexp(x)
    r = (e - 1).astype(np.float64)
    r = np.where(x == 0, -np.inf, r)
    return np.where(np.isinf(x), np.inf, np.where(np.isnan(x), np.nan, r))


def _ilogb(args, out):
    x = _f64(args[0])
    _, e = np.frexp(x)
    r = (e - 1).astype(np.int64)
    r = np.where(x == 0, -2**31, r)
    r = np.where(np.isnan(x), -2**31, np.where(np.isinf(x), 2**31 - 1, r))
    return r.astype(out)


def _saturate(x):
    return np.where(np.isnan(x), 0.0, np.clip(x, 0.0, 1.0))


def _flag(f):
    return lambda args, out: f(_f64(args[0])).astype(out)


def _ldexp(args, out):
    x, n = np.asarray(args[0]), np.asarray(args[1])
    return np.ldexp(x.astype(out), np.clip(n.astype(np.int64), -10000, 10000).astype(np.int32)).astype(out)


def _bessel_n(name):
    def impl(args, out):
        n, x = np.asarray(args[0]), _f64(args[1])
        return np.asarray(_scipy(name)(n.astype(np.float64), x)).astype(out)
    return impl


def _erfcinv(y):
    return _scipy("erfcinv")(y)


_erf_v = _vec(math.erf)
_erfc_v = _vec(math.erfc)
_lgamma_v = _vec(math.lgamma)
_gamma_v = _vec(math.gamma)
_remainder_v = _vec(math.remainder)


def _tgamma(x):
    r = _gamma_v(x)
    return np.where(x == -np.inf, np.nan, np.where(x == np.inf, np.inf, r))


def _lgamma(x):
    return np.where(np.isinf(x), np.inf, _lgamma_v(x))


IMPLS = {
    # integers
    "clz": _clz, "popc": _popc, "brev": _brev, "ffs": _ffs, "byte_perm": _byte_perm, "mulhi": _mulhi,
    "mul24": _mul24, "hadd": _hadd(0), "rhadd": _hadd(1), "sad": _sad,
    "abs": lambda args, out: np.abs(np.asarray(args[0])).astype(out),
    # bits
    "double_as_longlong": _view(np.int64), "longlong_as_double": _view(np.float64),
    "float_as_int": _view(np.int32), "float_as_uint": _view(np.uint32), "int_as_float": _view(np.float32),
    "uint_as_float": _view(np.float32), "double2hiint": _hiint, "double2loint": _loint,
    "hiloint2double": _hilo, "rcp64h": _rcp64h,
    # one-argument float functions
    **{n: _fl(f) for n, f in {
        "acos": np.arccos, "acosh": np.arccosh, "asin": np.arcsin, "asinh": np.arcsinh, "atan": np.arctan,
        "atanh": np.arctanh, "cbrt": np.cbrt, "ceil": np.ceil, "cos": np.cos, "cosh": np.cosh,
        "cospi": lambda x: np.cos(np.pi * np.remainder(x, 2.0)), "erf": _erf_v, "erfc": _erfc_v,
        "erfcinv": _erfcinv, "erfcx": _scipy("erfcx"), "erfinv": _scipy("erfinv"), "exp": np.exp,
        "exp10": lambda x: np.power(10.0, x), "exp2": np.exp2, "expm1": np.expm1,
        "fast_cosf": np.cos, "fast_exp10f": lambda x: np.power(10.0, x), "fast_expf": np.exp,
        "fast_log10f": np.log10, "fast_log2f": np.log2, "fast_logf": np.log, "fast_sinf": np.sin,
        "fast_tanf": np.tan, "floor": np.floor, "j0": _scipy("j0"), "j1": _scipy("j1"),
        "y0": _scipy("y0"), "y1": _scipy("y1"), "cyl_bessel_i0": _scipy("i0"), "cyl_bessel_i1": _scipy("i1"),
        "lgamma": _lgamma, "tgamma": _tgamma, "log": np.log, "log10": np.log10, "log1p": np.log1p,
        "log2": np.log2, "logb": _logb, "nearbyint": np.rint, "rint": np.rint, "round": _round_half_away,
        "normcdf": lambda x: 0.5 * _erfc_v(-x / math.sqrt(2.0)), "normcdfinv": _scipy("ndtri"),
        "rcbrt": lambda x: 1.0 / np.cbrt(x), "rsqrt": lambda x: 1.0 / np.sqrt(x),
        "rsqrt_rn": lambda x: 1.0 / np.sqrt(x), "saturatef": _saturate, "sin": np.sin, "sinh": np.sinh,
        "sinpi": lambda x: np.sin(np.pi * np.remainder(x, 2.0)), "sqrt": np.sqrt, "tan": np.tan,
        "tanh": np.tanh, "trunc": np.trunc, "llrint": np.rint, "llround": _round_half_away,
    }.items()},
    # two and more arguments
    **{n: _fl(f) for n, f in {
        "atan2": np.arctan2, "fdim": lambda x, y: np.where(x > y, x - y, 0.0), "fmod": np.fmod,
        "hypot": np.hypot, "pow": np.power, "fast_powf": np.power, "fast_dividef": np.true_divide,
        "remainder": _remainder_v, "rhypot": lambda x, y: 1.0 / np.hypot(x, y),
        "norm3d": lambda a, b, c: np.sqrt(a * a + b * b + c * c),
        "rnorm3d": lambda a, b, c: 1.0 / np.sqrt(a * a + b * b + c * c),
        "norm4d": lambda a, b, c, d: np.sqrt(a * a + b * b + c * c + d * d),
        "rnorm4d": lambda a, b, c, d: 1.0 / np.sqrt(a * a + b * b + c * c + d * d),
        "jn": None, "yn": None,
    }.items() if f is not None},
    "jn": _bessel_n("jv"), "yn": _bessel_n("yv"),
    "copysign": _same(np.copysign), "nextafter": _same(np.nextafter), "ldexp": _ldexp, "scalbn": _ldexp,
    "ilogb": _ilogb,
    "signbit": _flag(np.signbit), "isnan": _flag(np.isnan), "isinf": _flag(np.isinf),
    "finitef": _flag(np.isfinite), "isfinited": _flag(np.isfinite),
    "fma": _exact(_fmaf, "rn"),
}
# llrint/llround return int64
IMPLS["llrint"] = lambda args, out: np.rint(_f64(args[0])).astype(out)
IMPLS["llround"] = lambda args, out: _round_half_away(_f64(args[0])).astype(out)

for _m in ("rd", "rn", "ru", "rz"):
    IMPLS[f"add_{_m}"] = _exact(_add, _m)
    IMPLS[f"sub_{_m}"] = _exact(_sub, _m)
    IMPLS[f"mul_{_m}"] = _exact(_mul, _m)
    IMPLS[f"div_{_m}"] = _exact(_div, _m)
    IMPLS[f"rcp_{_m}"] = _exact(_rcp, _m)
    IMPLS[f"fma_{_m}"] = _exact(_fmaf, _m)
    IMPLS[f"sqrt_{_m}"] = _sqrt_directed(_m)
    IMPLS[f"double2float_{_m}"] = _exact(_conv, _m)
    for _src in ("int", "uint", "ll", "ull"):
        IMPLS[f"{_src}2float_{_m}"] = _exact(_conv, _m)
        IMPLS[f"{_src}2double_{_m}"] = _exact(_conv, _m)
        IMPLS[f"double2{_src}_{_m}"] = _to_int(_m, _INT_RANGE[_src])
        IMPLS[f"float2{_src}_{_m}"] = _to_int(_m, _INT_RANGE[_src])
del _m, _src
