"""kl.extra.libdevice: every function in the interpreter against independent references (torch, Python's
math, exact rounding properties), and every libdevice symbol compiled down to a cubin on CPU."""
import functools
import math
import re
import struct

import mpmath
import numpy as np
import pytest
import torch

import kernelc
import kernelc.language as kl
from kernelc import CompilationError
from kernelc.language.extra import libdevice as ld

jit = functools.partial(kernelc.jit, interpret=True)
N = 64
NP = {"fp32": np.float32, "fp64": np.float64, "int32": np.int32, "int64": np.int64, "uint32": np.uint32,
      "uint64": np.uint64}


@jit
def _k1(a, o, N: kl.constexpr, OP: kl.constexpr):
    r = kl.arange(0, N)
    kl.store(o + r, OP(kl.load(a + r)))


@jit
def _k2(a, b, o, N: kl.constexpr, OP: kl.constexpr):
    r = kl.arange(0, N)
    kl.store(o + r, OP(kl.load(a + r), kl.load(b + r)))


@jit
def _k3(a, b, c, d, o, N: kl.constexpr, OP: kl.constexpr, NARGS: kl.constexpr):
    r = kl.arange(0, N)
    if NARGS == 3:
        kl.store(o + r, OP(kl.load(a + r), kl.load(b + r), kl.load(c + r)))
    else:
        kl.store(o + r, OP(kl.load(a + r), kl.load(b + r), kl.load(c + r), kl.load(d + r)))


def run(name, *args):
    """``libdevice.<name>`` on numpy arrays in the interpreter; the result array."""
    fn = getattr(ld, name)
    rows = ld.TABLE[name]
    key = tuple(next(k for k, v in NP.items() if np.dtype(v) == a.dtype) for a in args)
    ret = rows[key][1]
    out = np.zeros(N, np.bool_ if name in ("isnan", "isinf", "finitef", "isfinited") else NP[ret])
    if len(args) == 1:
        _k1[(1,)](args[0], out, N, fn)
    elif len(args) == 2:
        _k2[(1,)](args[0], args[1], out, N, fn)
    else:
        extra = args + (args[0],) * (4 - len(args))
        _k3[(1,)](*extra, out, N, fn, len(args))
    return out


_rng = np.random.default_rng(7)
NORMAL = _rng.standard_normal(N) * 2
UNIT = _rng.uniform(-0.99, 0.99, N)
POS = _rng.uniform(0.05, 20, N)
GE1 = _rng.uniform(1.0, 5, N)
OPEN01 = _rng.uniform(0.01, 0.99, N)
OPEN02 = _rng.uniform(0.01, 1.99, N)
SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -2.5, 2.5] * (N // 8))

T = torch.from_numpy


def _mp(f, order):
    """An mpmath reference (torch's Bessel functions are only accurate to ~1e-7)."""
    return lambda x: torch.tensor([float(f(order, float(v))) for v in x], dtype=torch.float64)

# name: (domain, reference on a float64 torch tensor)
UNARY = {
    "acos": (UNIT, torch.acos), "acosh": (GE1, torch.acosh), "asin": (UNIT, torch.asin),
    "asinh": (NORMAL, torch.asinh), "atan": (NORMAL, torch.atan), "atanh": (UNIT, torch.atanh),
    "cbrt": (NORMAL, lambda x: torch.sign(x) * torch.abs(x) ** (1 / 3)), "ceil": (NORMAL, torch.ceil),
    "cos": (NORMAL, torch.cos), "cosh": (NORMAL, torch.cosh), "cospi": (NORMAL, lambda x: torch.cos(math.pi * x)),
    "erf": (NORMAL, torch.erf), "erfc": (NORMAL, torch.erfc), "erfcinv": (OPEN02, lambda x: torch.erfinv(1 - x)),
    "erfcx": (NORMAL, torch.special.erfcx), "erfinv": (UNIT, torch.erfinv), "exp": (NORMAL, torch.exp),
    "exp10": (NORMAL, lambda x: 10 ** x), "exp2": (NORMAL, torch.exp2), "expm1": (NORMAL, torch.expm1),
    "floor": (NORMAL, torch.floor), "j0": (POS, _mp(mpmath.besselj, 0)), "j1": (POS, _mp(mpmath.besselj, 1)),
    "y0": (POS, _mp(mpmath.bessely, 0)), "y1": (POS, _mp(mpmath.bessely, 1)),
    "cyl_bessel_i0": (NORMAL, torch.special.i0), "cyl_bessel_i1": (NORMAL, torch.special.i1),
    "lgamma": (POS, torch.lgamma), "tgamma": (POS / 2, lambda x: torch.exp(torch.lgamma(x))),
    "log": (POS, torch.log), "log10": (POS, torch.log10), "log1p": (POS, torch.log1p), "log2": (POS, torch.log2),
    "logb": (NORMAL * 100, lambda x: torch.floor(torch.log2(torch.abs(x)))),
    "nearbyint": (NORMAL * 3, torch.round), "rint": (NORMAL * 3, torch.round),
    "round": (np.r_[NORMAL[:N - 4] * 3, [0.5, -0.5, 2.5, -1.5]],
              lambda x: torch.sign(x) * torch.floor(torch.abs(x) + 0.5)),
    "rcbrt": (POS, lambda x: x ** (-1 / 3)), "rsqrt": (POS, torch.rsqrt), "rsqrt_rn": (POS, torch.rsqrt),
    "saturatef": (NORMAL, lambda x: torch.clamp(x, 0, 1)),
    "sin": (NORMAL, torch.sin), "sinh": (NORMAL, torch.sinh), "sinpi": (NORMAL, lambda x: torch.sin(math.pi * x)),
    "sqrt": (POS, torch.sqrt), "tan": (UNIT, torch.tan), "tanh": (NORMAL, torch.tanh), "trunc": (NORMAL, torch.trunc),
    "normcdf": (NORMAL, torch.special.ndtr), "normcdfinv": (OPEN01, torch.special.ndtri),
    "abs": (NORMAL, torch.abs), "fast_cosf": (NORMAL, torch.cos), "fast_sinf": (NORMAL, torch.sin),
    "fast_tanf": (UNIT, torch.tan), "fast_expf": (NORMAL, torch.exp), "fast_exp10f": (NORMAL, lambda x: 10 ** x),
    "fast_logf": (POS, torch.log), "fast_log2f": (POS, torch.log2), "fast_log10f": (POS, torch.log10),
    "double2float_rn": (NORMAL, lambda x: x),
}
BINARY = {
    "atan2": (NORMAL, NORMAL[::-1], torch.atan2), "copysign": (NORMAL, NORMAL[::-1], torch.copysign),
    "fdim": (NORMAL, NORMAL[::-1], lambda x, y: torch.clamp(x - y, min=0)),
    "fmod": (NORMAL * 5, NORMAL[::-1], torch.fmod), "hypot": (NORMAL, NORMAL[::-1], torch.hypot),
    "pow": (POS, NORMAL, torch.pow), "fast_powf": (POS, NORMAL, torch.pow),
    "fast_dividef": (NORMAL, POS, torch.div),
    "remainder": (NORMAL * 5, NORMAL[::-1], lambda x, y: x - y * torch.round(x / y)),
    "rhypot": (NORMAL, NORMAL[::-1], lambda x, y: 1 / torch.hypot(x, y)),
    "nextafter": (NORMAL, NORMAL[::-1], None),
}


def _tol(ret):
    return dict(rtol=2e-6, atol=1e-6) if ret == "fp32" else dict(rtol=1e-9, atol=1e-12)


def _float_rows(name):
    return [(k, r) for k, (_, r) in ld.TABLE[name].items() if all(t in ("fp32", "fp64") for t in k)]


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_float_functions_match_torch(name):
    dom, ref = UNARY[name]
    for key, ret in _float_rows(name):
        x = dom.astype(NP[key[0]])
        got = run(name, x)
        want = ref(T(x.astype(np.float64))).numpy().astype(NP[ret])
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), **_tol(ret),
                                   err_msg=f"libdevice.{name}{key}")


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_float_functions_match_torch(name):
    a, b, ref = BINARY[name]
    for key, ret in _float_rows(name):
        x, y = a.astype(NP[key[0]]), b.astype(NP[key[1]])
        got = run(name, x, y)
        if ref is None:  # nextafter: exact in the argument type
            want = np.nextafter(x, y)
        else:
            want = ref(T(x.astype(np.float64)), T(y.astype(np.float64))).numpy().astype(NP[ret])
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), **_tol(ret),
                                   err_msg=f"libdevice.{name}{key}")


def test_mixed_and_many_argument_functions():
    x, n = NORMAL, (_rng.integers(-5, 6, N)).astype(np.int32)
    for t in (np.float32, np.float64):
        np.testing.assert_array_equal(run("ldexp", x.astype(t), n), np.ldexp(x.astype(t), n))
        np.testing.assert_array_equal(run("scalbn", x.astype(t), n), np.ldexp(x.astype(t), n))
        a, b, c, d = (v.astype(t) for v in (NORMAL, NORMAL[::-1], UNIT, POS))
        f64 = [torch.from_numpy(v.astype(np.float64)) for v in (a, b, c, d)]
        tol = _tol("fp32" if t == np.float32 else "fp64")
        np.testing.assert_allclose(run("norm3d", a, b, c), torch.sqrt(f64[0] ** 2 + f64[1] ** 2 + f64[2] ** 2), **tol)
        np.testing.assert_allclose(run("rnorm3d", a, b, c), torch.rsqrt(f64[0] ** 2 + f64[1] ** 2 + f64[2] ** 2), **tol)
        n4 = f64[0] ** 2 + f64[1] ** 2 + f64[2] ** 2 + f64[3] ** 2
        np.testing.assert_allclose(run("norm4d", a, b, c, d), torch.sqrt(n4), **tol)
        np.testing.assert_allclose(run("rnorm4d", a, b, c, d), torch.rsqrt(n4), **tol)
        np.testing.assert_allclose(run("fma", a, b, c), f64[0] * f64[1] + f64[2], **tol)
    k = np.full(N, 2, np.int32)
    for name, f in (("jn", mpmath.besselj), ("yn", mpmath.bessely)):
        want = np.array([float(f(2, float(v))) for v in POS])
        np.testing.assert_allclose(run(name, k, POS), want, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(run(name, k, POS.astype(np.float32)), want, rtol=5e-5, atol=1e-5)


def test_classification_and_integer_results():
    for t in (np.float32, np.float64):
        x = SPECIALS.astype(t)
        sfx = "f" if t == np.float32 else "d"
        np.testing.assert_array_equal(run("isnan", x), np.isnan(x))
        np.testing.assert_array_equal(run("isinf", x), np.isinf(x))
        np.testing.assert_array_equal(run("finitef" if sfx == "f" else "isfinited", x), np.isfinite(x))
        np.testing.assert_array_equal(run("signbit", x) != 0, np.signbit(x))
        y = NORMAL.astype(t) * 1000
        np.testing.assert_array_equal(run("ilogb", y), [math.frexp(float(v))[1] - 1 for v in y])
        np.testing.assert_array_equal(run("llrint", y), np.rint(y).astype(np.int64))
        np.testing.assert_array_equal(run("llround", y), [int(math.copysign(math.floor(abs(v) + 0.5), v)) for v in y])
    assert run("ilogb", np.zeros(N, np.float32))[0] == -2**31


MODES = ("rd", "rn", "ru", "rz")


def _bracket(got, exact_rn, name):
    rd, rn, ru, rz = (got[m] for m in MODES)
    np.testing.assert_array_equal(rn, exact_rn, err_msg=f"{name}_rn is not IEEE round-to-nearest")
    assert (rd <= rn).all() and (rn <= ru).all(), name
    assert ((rd == ru) | (np.nextafter(rd, np.inf) == ru)).all(), f"{name}: rd and ru are not neighbours"
    assert ((rd == rn) | (ru == rn)).all()
    np.testing.assert_array_equal(rz, np.where(rn >= 0, rd, ru), err_msg=f"{name}_rz")
    assert (rd != ru).any(), f"{name}: no inexact case tested"


@pytest.mark.parametrize("t", [np.float32, np.float64])
def test_directed_rounding_arithmetic(t):
    """rn equals numpy's IEEE op; rd/ru bracket it one ulp apart; rz rounds toward zero."""
    a, b, c = (v.astype(t) for v in (NORMAL, NORMAL[::-1] + 0.1, UNIT))
    cases = {
        "add": ((a, b), a + b), "sub": ((a, b), a - b), "mul": ((a, b), a * b), "div": ((a, b), a / b),
        "rcp": ((b,), t(1) / b), "sqrt": ((np.abs(a),), np.sqrt(np.abs(a))),
    }
    for name, (args, rn) in cases.items():
        _bracket({m: run(f"{name}_{m}", *args) for m in MODES}, rn, name)
    fma_rn = np.array([float(np.longdouble(x) * np.longdouble(y) + np.longdouble(z))
                       for x, y, z in zip(a, b, c)]) if t == np.float32 else None
    got = {m: run(f"fma_{m}", a, b, c) for m in MODES}
    if fma_rn is not None:  # fp32: the exact product fits fp64, so one fp64 add rounds once more only rarely
        np.testing.assert_allclose(got["rn"], fma_rn.astype(np.float32), rtol=1e-7)
    assert (got["rd"] <= got["ru"]).all() and (got["rd"] != got["ru"]).any()


def test_directed_rounding_conversions():
    d = NORMAL * 1e3
    _bracket({m: run(f"double2float_{m}", d) for m in MODES}, d.astype(np.float32), "double2float")
    big = _rng.integers(-2**62, 2**62, N).astype(np.int64)
    _bracket({m: run(f"ll2float_{m}", big) for m in MODES}, big.astype(np.float32), "ll2float")
    _bracket({m: run(f"ll2double_{m}", big) for m in MODES}, big.astype(np.float64), "ll2double")
    ubig = big.view(np.uint64)
    _bracket({m: run(f"ull2float_{m}", ubig) for m in MODES}, ubig.astype(np.float32), "ull2float")
    i32 = _rng.integers(-2**31, 2**31 - 1, N).astype(np.int32)
    _bracket({m: run(f"int2float_{m}", i32) for m in MODES}, i32.astype(np.float32), "int2float")
    _bracket({m: run(f"uint2float_{m}", i32.view(np.uint32)) for m in MODES}, i32.view(np.uint32).astype(np.float32),
             "uint2float")
    np.testing.assert_array_equal(run("int2double_rn", i32), i32.astype(np.float64))
    np.testing.assert_array_equal(run("uint2double_rn", i32.view(np.uint32)), i32.view(np.uint32).astype(np.float64))
    rounders = {"rd": np.floor, "rn": np.rint, "ru": np.ceil, "rz": np.trunc}
    x = np.r_[NORMAL[:N - 4] * 10, [np.nan, 1e30, -1e30, 2.5]]
    for src, st in (("float", np.float32), ("double", np.float64)):
        for dst, it in (("int", np.int32), ("uint", np.uint32), ("ll", np.int64), ("ull", np.uint64)):
            info = np.iinfo(it)
            for m, f in rounders.items():
                v = x.astype(st)
                want = [0 if math.isnan(r) else min(max(int(r), int(info.min)), int(info.max)) if math.isfinite(r)
                        else (int(info.max) if r > 0 else int(info.min)) for r in f(v.astype(np.float64))]
                got = run(f"{src}2{dst}_{m}", v).view(it)  # Triton types unsigned results as signed
                assert [int(g) for g in got] == want, f"{src}2{dst}_{m}"


def test_bit_reinterpretation():
    f = NORMAL.astype(np.float32)
    d = NORMAL.astype(np.float64)
    np.testing.assert_array_equal(run("float_as_int", f), f.view(np.int32))
    np.testing.assert_array_equal(run("float_as_uint", f).view(np.uint32), f.view(np.uint32))  # typed int32
    np.testing.assert_array_equal(run("int_as_float", f.view(np.int32)), f)
    np.testing.assert_array_equal(run("uint_as_float", f.view(np.uint32)), f)
    np.testing.assert_array_equal(run("double_as_longlong", d), d.view(np.int64))
    np.testing.assert_array_equal(run("longlong_as_double", d.view(np.int64)), d)
    hi = [struct.unpack("<ii", struct.pack("<d", v))[1] for v in d]
    lo = [struct.unpack("<ii", struct.pack("<d", v))[0] for v in d]
    np.testing.assert_array_equal(run("double2hiint", d), hi)
    np.testing.assert_array_equal(run("double2loint", d), lo)
    np.testing.assert_array_equal(run("hiloint2double", np.array(hi, np.int32), np.array(lo, np.int32)), d)
    r = run("rcp64h", d)
    np.testing.assert_allclose(r, 1 / d, rtol=2.0 ** -19)  # 20 mantissa bits kept
    assert (r.view(np.uint64) & 0xFFFFFFFF == 0).all()


def test_integer_functions():
    i32 = _rng.integers(-2**31, 2**31 - 1, N).astype(np.int32)
    j32 = _rng.integers(-2**31, 2**31 - 1, N).astype(np.int32)
    i64 = _rng.integers(-2**63, 2**63 - 1, N).astype(np.int64)
    u = lambda v, bits: int(v) & ((1 << bits) - 1)  # noqa: E731
    np.testing.assert_array_equal(run("clz", i32), [32 - u(v, 32).bit_length() for v in i32])
    np.testing.assert_array_equal(run("clz", i64), [64 - u(v, 64).bit_length() for v in i64])
    np.testing.assert_array_equal(run("popc", i64), [bin(u(v, 64)).count("1") for v in i64])
    np.testing.assert_array_equal(run("brev", i32).view(np.uint32),
                                  [int(f"{u(v, 32):032b}"[::-1], 2) for v in i32])
    np.testing.assert_array_equal(run("ffs", i32), [(u(v, 32) & -u(v, 32)).bit_length() for v in i32])
    np.testing.assert_array_equal(run("mulhi", i32, j32), [(int(a) * int(b)) >> 32 for a, b in zip(i32, j32)])
    uu, vv = i32.view(np.uint32), j32.view(np.uint32)
    np.testing.assert_array_equal(run("mulhi", uu, vv), [(int(a) * int(b)) >> 32 for a, b in zip(uu, vv)])
    np.testing.assert_array_equal(run("mulhi", i64, i64[::-1].copy()),
                                  [(int(a) * int(b)) >> 64 for a, b in zip(i64, i64[::-1])])
    s24 = lambda v: (u(v, 24) ^ 0x800000) - 0x800000  # noqa: E731
    np.testing.assert_array_equal(run("mul24", i32, j32),
                                  [((s24(a) * s24(b) + 2**31) % 2**32) - 2**31 for a, b in zip(i32, j32)])
    np.testing.assert_array_equal(run("hadd", i32, j32), [(int(a) + int(b)) >> 1 for a, b in zip(i32, j32)])
    np.testing.assert_array_equal(run("rhadd", i32, j32), [(int(a) + int(b) + 1) >> 1 for a, b in zip(i32, j32)])
    small = (i32 % 1000).astype(np.int32)
    np.testing.assert_array_equal(run("sad", small, small[::-1].copy(), small.view(np.uint32) % 7),
                                  [abs(int(a) - int(b)) + int(c) % 7 for a, b, c in
                                   zip(small, small[::-1], small.view(np.uint32))])
    np.testing.assert_array_equal(run("abs", i64), np.abs(i64))
    # byte_perm: selector nibble k picks byte (s >> 4k) & 7 of the 8-byte value {y, x}
    sel = np.full(N, 0x3210, np.int32)
    np.testing.assert_array_equal(run("byte_perm", i32, j32, sel), i32)
    sel = np.full(N, 0x7654, np.int32)
    np.testing.assert_array_equal(run("byte_perm", i32, j32, sel), j32)
    sel = np.full(N, 0x0123, np.int32)
    np.testing.assert_array_equal(run("byte_perm", i32, j32, sel).view(np.uint32),
                                  [int.from_bytes(u(v, 32).to_bytes(4, "little")[::-1], "little") for v in i32])


def test_every_function_has_an_interpreter_test():
    tested = set(UNARY) | set(BINARY) | {
        "ldexp", "scalbn", "norm3d", "rnorm3d", "norm4d", "rnorm4d", "fma", "jn", "yn", "isnan", "isinf",
        "finitef", "isfinited", "signbit", "ilogb", "llrint", "llround", "float_as_int", "float_as_uint",
        "int_as_float", "uint_as_float", "double_as_longlong", "longlong_as_double", "double2hiint",
        "double2loint", "hiloint2double", "rcp64h", "clz", "popc", "brev", "ffs", "mulhi", "mul24", "hadd",
        "rhadd", "sad", "byte_perm", "int2double_rn", "uint2double_rn"}
    for op in ("add", "sub", "mul", "div", "rcp", "sqrt", "fma", "double2float", "ll2float", "ll2double",
               "ull2float", "int2float", "uint2float"):
        tested |= {f"{op}_{m}" for m in MODES}
    for s in ("float", "double"):
        for d in ("int", "uint", "ll", "ull"):
            tested |= {f"{s}2{d}_{m}" for m in MODES}
    untested = set(ld.TABLE) - tested
    # ull2double_* share ll2double's exact path; checked here against numpy's nearest rounding
    assert untested == {f"ull2double_{m}" for m in MODES}, sorted(untested)
    big = _rng.integers(0, 2**64 - 1, N, dtype=np.uint64)
    _bracket({m: run(f"ull2double_{m}", big) for m in MODES}, big.astype(np.float64), "ull2double")


def test_type_mismatch_names_the_function_and_signatures():
    with pytest.raises(CompilationError) as ei:
        _k1[(1,)](np.zeros(N, np.float16), np.zeros(N, np.float16), N, ld.exp)
    msg = str(ei.value)
    assert "libdevice.exp() has no version for argument types (fp16)" in msg and "(fp32) or (fp64)" in msg
    assert "test_libdevice.py" in msg and "^" in msg


def test_every_libdevice_symbol_compiles_to_a_cubin():
    """One kernel calls every function with every signature: LLVM links each __nv_* symbol from
    libdevice.10.bc and the PTX assembles (sm_90a)."""
    ck = kernelc.compile(_all_kernel, dict(f_ptr="*fp32", d_ptr="*fp64", i_ptr="*i32", l_ptr="*i64", u_ptr="*u32",
                                           ul_ptr="*u64", o_ptr="*fp64"), {"OP": _call_all}, target="sm_90a")
    want = {s for rows in ld.TABLE.values() for s, _ in rows.values()}
    called = set(re.findall(r"call \S+ @(__nv_\w+)\(", ck.asm["llir"]))
    assert want <= called, sorted(want - called)
    assert len(want) == 313 and ck.asm["cubin"]
    assert re.search(r"\bpopc\.b32\b", ck.asm["ptx"]) and re.search(r"\bfma\.rz\.f32\b", ck.asm["ptx"])


_ARG = {"fp32": 0, "fp64": 1, "int32": 2, "int64": 3, "uint32": 4, "uint64": 5}


def _call_all(xs):
    acc = kl.zeros([32], kl.float64)
    for name, rows in ld.TABLE.items():
        for sig in rows:
            acc += getattr(ld, name)(*[xs[_ARG[t]] for t in sig]).to(kl.float64)
    return acc


@kernelc.jit
def _all_kernel(f_ptr, d_ptr, i_ptr, l_ptr, u_ptr, ul_ptr, o_ptr, OP: kl.constexpr):
    r = kl.arange(0, 32)
    xs = (kl.load(f_ptr + r), kl.load(d_ptr + r), kl.load(i_ptr + r), kl.load(l_ptr + r), kl.load(u_ptr + r),
          kl.load(ul_ptr + r))
    kl.store(o_ptr + r, OP(xs))


@kl.core.extern
def _my_exp(x):
    return kl.core.extern_elementwise("", "", [x], {(kl.core.dtype("fp32"),): ("__nv_expf", kl.core.dtype("fp32")),
                                                    (kl.core.dtype("fp64"),): ("__nv_exp", kl.core.dtype("fp64"))},
                                      is_pure=True)


def _bad_extern(x):
    return kl.core.extern_elementwise("mylib", "/x.bc", [x], {(kl.core.dtype("fp32"),): ("my_fn", kl.core.dtype("fp32"))},
                                      is_pure=True)


def test_core_extern_elementwise_wrappers_like_tritons_own():
    x = NORMAL.astype(np.float32)
    out = np.zeros(N, np.float32)
    _k1[(1,)](x, out, N, _my_exp)
    np.testing.assert_allclose(out, np.exp(x.astype(np.float64)), rtol=2e-7)
    with pytest.raises(CompilationError, match="'my_fn' is not supported by kernelc: only libdevice"):
        _k1[(1,)](x, out, N, _bad_extern)


def test_special_functions_without_scipy_use_mpmath(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "scipy.special", None)  # `import scipy.special` now fails
    for name in ("j1", "y0", "erfinv", "normcdfinv", "cyl_bessel_i1"):
        dom, ref = UNARY[name]
        got = run(name, dom.astype(np.float64))
        np.testing.assert_allclose(got, ref(T(dom.astype(np.float64))).numpy(), rtol=1e-9, atol=1e-12, err_msg=name)


def test_python_numbers_take_the_type_a_signature_needs():
    d = POS.astype(np.float64)
    out = np.zeros(N, np.float64)
    _k1[(1,)](d, out, N, lambda x: ld.pow(x, 2.0))  # 2.0 would be fp32: no (fp64, fp32) signature
    np.testing.assert_allclose(out, d ** 2, rtol=1e-15)
    _k1[(1,)](d, out, N, lambda x: ld.ldexp(x, 3))
    np.testing.assert_array_equal(out, d * 8)
    _k1[(1,)](d, out, N, lambda x: ld.fdim(x, 1))  # an int literal where fp64 is needed
    np.testing.assert_allclose(out, np.maximum(d - 1, 0), rtol=1e-15)
