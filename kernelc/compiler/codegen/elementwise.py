"""Per-element lowering rules for elementwise tile-IR ops: one function per op, applied to every
register a thread holds. Fast approximate instructions where Triton uses them (exp/exp2/log2
via ex2/lg2.approx, `/` as div.full.f32) and for fp32 log (lg2.approx unless KERNELC_LOG_F32=libdevice, Triton's),
accurate libdevice calls elsewhere (sin, cos, erf, fp64).
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional

from ...language.dtypes import dtype, pointer_type, scalar_of
from .emitter import Emitter, llty

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


def _f(e: Emitter, ty, x):
    return e.val(x)


def _is_f32(t) -> bool:
    return getattr(t, "name", "") == "fp32"


def _libdevice(name32, name64):
    def rule(e, t, args, attrs):
        ty = llty(t)
        name = name32 if ty == "float" else name64
        return e.call(ty, name, [(ty, a) for a in args])
    return rule


def _approx(ptx_op, name64, pre=None, post=None):
    """fp32: one approximate PTX instruction (optionally scaled); fp64: libdevice."""
    def rule(e, t, args, attrs):
        ty = llty(t)
        if ty != "float":
            return e.call(ty, name64, [(ty, args[0])])
        x = args[0]
        if pre is not None:
            x = e.val(f"fmul float {x}, {_flit(pre)}")
        y = e.asm("float", f"{ptx_op} $0, $1;", "=f,f", [("float", x)], side_effects=False)
        if post is not None:
            y = e.val(f"fmul float {y}, {_flit(post)}")
        return y
    return rule


def _flit(x: float) -> str:
    from .emitter import float_literal
    return float_literal(x, "float")


def _intrinsic(name):
    def rule(e, t, args, attrs):
        ty = llty(t)
        suffix = {"float": "f32", "double": "f64", "half": "f16", "bfloat": "bf16"}.get(ty, ty)
        return e.call(ty, f"llvm.{name}.{suffix}", [(ty, a) for a in args])
    return rule


def _binop(inst):
    def rule(e, t, args, attrs):
        return e.val(f"{inst} {llty(t)} {args[0]}, {args[1]}")
    return rule


def _contract(attrs) -> str:
    """LLVM's ``contract`` flag for an op marked by passes/fp_contract.py: LLVM may fuse a*b+c into fma and
    emits mul.f32/add.f32 rather than mul.rn/add.rn, which ptxas would not fuse."""
    return "contract " if attrs.get("contract") else ""


def _fbinop(inst):
    def rule(e, t, args, attrs):
        return e.val(f"{inst} {_contract(attrs)}{llty(t)} {args[0]}, {args[1]}")
    return rule


def _fdiv(e, t, args, attrs):
    ty = llty(t)
    if ty == "float" and not attrs.get("ieee"):
        # Triton's `/` on fp32: div.full.f32 (approximate, max 2 ulp), much faster than div.rn.
        return e.asm("float", "div.full.f32 $0, $1, $2;", "=f,f,f", [("float", args[0]), ("float", args[1])],
                     side_effects=False)
    return e.val(f"fdiv {ty} {args[0]}, {args[1]}")


def _fminmax(which):
    def rule(e, t, args, attrs):
        ty = llty(t)
        suffix = {"float": "f32", "double": "f64", "half": "f16", "bfloat": "bf16"}[ty]
        if attrs.get("propagate_nan") == "all":
            name = f"llvm.{'maximum' if which == 'max' else 'minimum'}.{suffix}"
        else:
            name = f"llvm.{'maxnum' if which == 'max' else 'minnum'}.{suffix}"
        return e.call(ty, name, [(ty, a) for a in args])
    return rule


def _iminmax(name):
    def rule(e, t, args, attrs):
        ty = llty(t)
        return e.call(ty, f"llvm.{name}.{ty}", [(ty, a) for a in args])
    return rule


def _mulhi(signed):
    def rule(e, t, args, attrs):
        ty = llty(t)
        bits = int(ty[1:])
        wide = f"i{2 * bits}"
        ext = "sext" if signed else "zext"
        a = e.val(f"{ext} {ty} {args[0]} to {wide}")
        b = e.val(f"{ext} {ty} {args[1]} to {wide}")
        p = e.val(f"mul {wide} {a}, {b}")
        h = e.val(f"lshr {wide} {p}, {bits}")
        return e.val(f"trunc {wide} {h} to {ty}")
    return rule


def _iabs(e, t, args, attrs):
    ty = llty(t)
    return e.call(ty, f"llvm.abs.{ty}", [(ty, args[0]), ("i1", "false")])


def _fneg(e, t, args, attrs):
    # contract too: LLVM folds a negation into the multiply that uses it, keeping only flags both carry
    return e.val(f"fneg {_contract(attrs)}{llty(t)} {args[0]}")


def _fma(e, t, args, attrs):
    ty = llty(t)
    suffix = {"float": "f32", "double": "f64", "half": "f16", "bfloat": "bf16"}[ty]
    return e.call(ty, f"llvm.fma.{suffix}", [(ty, a) for a in args])


def _exp2_f32(e, x, ftz=False):
    op = "ex2.approx.ftz.f32" if ftz else "ex2.approx.f32"
    return e.asm("float", f"{op} $0, $1;", "=f,f", [("float", x)], side_effects=False)


#: 2^f ~ 1 + c1 f + ... + cd f^d on [-1/2, 1/2]: c1..cd by degree, minimax in relative error with c0 = 1 exactly
#: (so that 2^-127, the clamp, comes out as +0), rounded to fp32; the relative error of the fp32 Horner
#: evaluation is below EXP2_POLY_MAX_REL_ERROR (tests/compiler/test_exp2_poly.py sweeps it)
EXP2_POLY_COEFFS = {2: (0.7029417753219604, 0.2398640364408493),
                    3: (0.6932829022407532, 0.2422109693288803, 0.055009059607982635)}
EXP2_POLY_MAX_REL_ERROR = {2: 2.0 ** -8.9, 3: 2.0 ** -13.2}
_ROUND_MAGIC = 12582912.0  # 1.5 * 2^23: x + it rounds x to an integer held in the low mantissa bits


def exp2_poly_f32(e, x, degree=3, nonnegative=False):
    """2^x on the FMA pipe (no MUFU): x clamped to >= -127 (-inf and NaN too), ``j = round(x)`` by adding 1.5 * 2^23,
    ``f = x - j`` in [-1/2, 1/2], a polynomial for 2^f, and ``j`` added to its exponent bits (the low mantissa
    bits of the rounded sum, shifted up by 23). 8 instructions at degree 3. Results below 2^-126 are 0 or
    subnormal (ex2.approx.ftz gives 0); valid for x < 127.5 (passes/exp2_poly.py marks only softmax arguments).
    ``nonnegative`` (the exp2's ``nonnegative`` mark, passes/fp8_bounds.py): x also clamped to <= 127, so that the
    result is positive and finite (2^127 from 127 on) for every x -- past 127.5 the exponent add carries into
    the sign bit; one more FMNMX."""
    c = e.call("float", "llvm.maxnum.f32", [("float", x), ("float", _flit(-127.0))])
    if nonnegative:
        c = e.call("float", "llvm.minnum.f32", [("float", c), ("float", _flit(127.0))])
    t = e.val(f"fadd float {c}, {_flit(_ROUND_MAGIC)}")
    j = e.val(f"fsub float {t}, {_flit(_ROUND_MAGIC)}")
    f = e.val(f"fsub float {c}, {j}")
    coeffs = EXP2_POLY_COEFFS[degree]
    p = _flit(coeffs[-1])
    for ck in list(coeffs[:-1])[::-1] + [1.0]:
        p = e.call("float", "llvm.fma.f32", [("float", p), ("float", f), ("float", _flit(ck))])
    pi = e.val(f"bitcast float {p} to i32")
    ti = e.val(f"bitcast float {t} to i32")
    sh = e.val(f"shl i32 {ti}, 23")
    return e.val(f"bitcast i32 {e.val(f'add i32 {pi}, {sh}')} to float")


def poly_registers(n: int, num: int, den: int) -> List[bool]:
    """Which of a thread's ``n`` registers an ``exp2 {poly}`` computes by the polynomial: ``num`` of every ``den``,
    evenly spread (register r when floor((r + 1) num / den) > floor(r num / den))."""
    return [((r % den) + 1) * num // den > (r % den) * num // den for r in range(n)]


def exp2_split(e, xs: List[str], poly, nonnegative: bool = False) -> List[str]:
    """An fp32 ``exp2 {ftz, poly}`` (passes/exp2_poly.py) over a thread's registers: the registers
    :func:`poly_registers` picks on the FMA pipe, the others on MUFU (ex2.approx.ftz)."""
    pick = poly_registers(len(xs), poly["num"], poly["den"])
    return [exp2_poly_f32(e, x, poly["degree"], nonnegative) if p else _exp2_f32(e, x, ftz=True)
            for x, p in zip(xs, pick)]


def _exp(e, t, args, attrs):
    ty = llty(t)
    if ty != "float":
        return e.call(ty, "__nv_exp", [(ty, args[0])])
    return _exp2_f32(e, e.val(f"fmul {_contract(attrs)}float {args[0]}, {_flit(LOG2E)}"))


def _exp2(e, t, args, attrs):
    ty = llty(t)
    if ty != "float":
        return e.call(ty, "__nv_exp2", [(ty, args[0])])
    return _exp2_f32(e, args[0], ftz=bool(attrs.get("ftz")))  # passes/fp_contract.py: mark_exp2_ftz


def _log(e, t, args, attrs):
    ty = llty(t)
    if ty != "float":
        return e.call(ty, "__nv_log", [(ty, args[0])])
    if not attrs.get("approx"):   # passes/fp_contract.py: mark_log_approx (KERNELC_LOG_F32=libdevice)
        return e.call(ty, "__nv_logf", [(ty, args[0])])
    y = e.asm("float", "lg2.approx.f32 $0, $1;", "=f,f", [("float", args[0])], side_effects=False)
    return e.val(f"fmul {_contract(attrs)}float {y}, {_flit(LN2)}")  # contract: may fuse with an add after


def _log2(e, t, args, attrs):
    ty = llty(t)
    if ty != "float":
        return e.call(ty, "__nv_log2", [(ty, args[0])])
    return e.asm("float", "lg2.approx.f32 $0, $1;", "=f,f", [("float", args[0])], side_effects=False)


def _sqrt(e, t, args, attrs):
    ty = llty(t)
    if ty != "float":
        return e.call(ty, "llvm.sqrt.f64", [(ty, args[0])])
    return e.asm("float", "sqrt.approx.f32 $0, $1;", "=f,f", [("float", args[0])], side_effects=False)


def _sqrt_rn(e, t, args, attrs):
    ty = llty(t)
    suffix = "f32" if ty == "float" else "f64"
    return e.call(ty, f"llvm.sqrt.{suffix}", [(ty, args[0])])


def _rsqrt(e, t, args, attrs):
    ty = llty(t)
    if ty != "float":
        return e.call(ty, "__nv_rsqrt", [(ty, args[0])])
    return e.asm("float", "rsqrt.approx.f32 $0, $1;", "=f,f", [("float", args[0])], side_effects=False)


def _tanh(e, t, args, attrs):
    ty = llty(t)
    if ty != "float":
        return e.call(ty, "__nv_tanh", [(ty, args[0])])
    return e.asm("float", "tanh.approx.f32 $0, $1;", "=f,f", [("float", args[0])], side_effects=False)


def _extern(e, t, args, attrs, operand_types=()):
    """A libdevice call; int32 and uint32 share LLVM's i32 (the symbol decides signedness)."""
    return e.call(llty(t), attrs["symbol"], [(llty(ot), a) for ot, a in zip(operand_types, args)])


def _inline_asm(e, t, args, attrs, operand_types=()):
    # i1 results/operands travel as the predicate-free 8/32-bit values the constraints name
    return e.asm(llty(t), attrs["asm"], attrs["constraints"], [(llty(ot), a) for ot, a in zip(operand_types, args)],
                 side_effects=not attrs.get("pure", True))


#: rules that need the operands' element types (mixed-type signatures such as ldexp(fp32, int32))
TYPED_RULES = {"extern_elementwise": _extern, "inline_asm": _inline_asm}


def _cmp(kind):
    def rule(e, t, args, attrs, operand_type=None):
        ty = llty(operand_type)
        return e.val(f"{kind} {attrs['pred']} {ty} {args[0]}, {args[1]}")
    return rule


RULES: Dict[str, Callable] = {
    "fadd": _fbinop("fadd"), "fsub": _fbinop("fsub"), "fmul": _fbinop("fmul"), "frem": _binop("frem"),
    "fdiv": _fdiv, "fmax": _fminmax("max"), "fmin": _fminmax("min"), "fneg": _fneg,
    "fabs": _intrinsic("fabs"), "floor": _intrinsic("floor"), "ceil": _intrinsic("ceil"),
    "exp": _exp, "exp2": _exp2, "log": _log, "log2": _log2, "sqrt": _sqrt, "sqrt_rn": _sqrt_rn,
    "rsqrt": _rsqrt, "tanh": _tanh,
    "sin": _libdevice("__nv_sinf", "__nv_sin"), "cos": _libdevice("__nv_cosf", "__nv_cos"),
    "erf": _libdevice("__nv_erff", "__nv_erf"), "fma": _fma,
    "add": _binop("add"), "sub": _binop("sub"), "mul": _binop("mul"), "sdiv": _binop("sdiv"),
    "udiv": _binop("udiv"), "srem": _binop("srem"), "urem": _binop("urem"), "and": _binop("and"),
    "or": _binop("or"), "xor": _binop("xor"), "shl": _binop("shl"), "ashr": _binop("ashr"),
    "lshr": _binop("lshr"), "smax": _iminmax("smax"), "smin": _iminmax("smin"), "umax": _iminmax("umax"),
    "umin": _iminmax("umin"), "umulhi": _mulhi(False), "smulhi": _mulhi(True), "iabs": _iabs,
}
CMP_RULES = {"cmpi": _cmp("icmp"), "cmpf": _cmp("fcmp")}


# fp8 has no arithmetic instructions: compute in fp32 and round once to fp8, as the interpreter does
# (exact for + - * because fp32 holds the exact result of two fp8 operands). Triton lets these
# typecheck and then fails in LLVM; kernelc gives them this meaning instead.
def _fp8_via_f32(rule):
    def wrapped(e, t, args, attrs):
        if not t.is_fp8():
            return rule(e, t, args, attrs)
        f32 = dtype("fp32")
        return cast(e, f32, t, rule(e, f32, [cast(e, t, f32, a) for a in args], attrs))
    return wrapped


def _fp8_cmp_via_f32(rule):
    def wrapped(e, t, args, attrs, operand_type=None):
        if operand_type is None or not operand_type.is_fp8():
            return rule(e, t, args, attrs, operand_type=operand_type)
        f32 = dtype("fp32")
        return rule(e, t, [cast(e, operand_type, f32, a) for a in args], attrs, operand_type=f32)
    return wrapped


for _name in ("fadd", "fsub", "fmul", "frem", "fdiv", "fmax", "fmin", "fneg", "fabs", "floor", "ceil", "exp",
              "exp2", "log", "log2", "sqrt", "sqrt_rn", "rsqrt", "tanh", "sin", "cos", "erf", "fma"):
    RULES[_name] = _fp8_via_f32(RULES[_name])
CMP_RULES["cmpf"] = _fp8_cmp_via_f32(CMP_RULES["cmpf"])


# -- casts -------------------------------------------------------------------------------------


def cast(e: Emitter, src, dst, x: str, rounding: str = "rtne") -> str:
    """Convert one value from element type ``src`` to ``dst``."""
    if isinstance(src, pointer_type) or isinstance(dst, pointer_type):
        if isinstance(src, pointer_type) and isinstance(dst, pointer_type):
            return x
        if isinstance(src, pointer_type):
            v = e.val(f"ptrtoint ptr addrspace(1) {x} to i64")
            return v if llty(dst) == "i64" else e.val(f"icmp ne i64 {v}, 0") if dst.is_int1() else e.val(f"trunc i64 {v} to {llty(dst)}")
        return e.val(f"inttoptr {llty(src)} {x} to ptr addrspace(1)")
    s, d = llty(src), llty(dst)
    if src.is_fp8() or dst.is_fp8():
        from .fp8 import cast_one
        return cast_one(e, src, dst, x)
    if src.is_int() and dst.is_int():
        sb, db = src.int_bitwidth, dst.int_bitwidth
        if sb == db:
            return x
        if db < sb:
            return e.val(f"trunc {s} {x} to {d}")
        return e.val(f"{'zext' if src.is_int_unsigned() else 'sext'} {s} {x} to {d}")
    if src.is_int() and dst.is_floating():
        return e.val(f"{'uitofp' if src.is_int_unsigned() else 'sitofp'} {s} {x} to {d}")
    if src.is_floating() and dst.is_int():
        if dst.is_int1():
            return e.val(f"fcmp une {s} {x}, 0.0")
        f = "fptoui" if dst.is_int_unsigned() else "fptosi"
        return e.call(d, f"llvm.{f}.sat.{d}.{_fsuffix(s)}", [(s, x)])
    # float -> float
    if src.primitive_bitwidth < dst.primitive_bitwidth or (s == "half" and d == "bfloat") or (s == "bfloat" and d == "half"):
        if {s, d} == {"half", "bfloat"}:
            x = e.val(f"fpext {s} {x} to float")
            return e.val(f"fptrunc float {x} to {d}")
        return e.val(f"fpext {s} {x} to {d}")
    if rounding == "rtz":
        ptx = {("float", "half"): "cvt.rz.f16.f32", ("float", "bfloat"): "cvt.rz.bf16.f32",
               ("double", "float"): "cvt.rz.f32.f64"}.get((s, d))
        if ptx:
            cons = {"half": "h", "bfloat": "h", "float": "f"}[d]
            src_c = {"float": "f", "double": "d"}[s]
            out_ty = {"half": "i16", "bfloat": "i16", "float": "float"}[d]
            r = e.asm(out_ty, f"{ptx} $0, $1;", f"={cons},{src_c}", [(s, x)], side_effects=False)
            return e.val(f"bitcast i16 {r} to {d}") if out_ty == "i16" else r
    return e.val(f"fptrunc {s} {x} to {d}")


def _fsuffix(ty: str) -> str:
    return {"float": "f32", "double": "f64", "half": "f16", "bfloat": "bf16"}[ty]


def cast_many(e: Emitter, src, dst, xs: List[str], rounding: str = "rtne", nan_positive: bool = False,
              bound: Optional[List[str]] = None, word_order: Optional[List[int]] = None,
              self_bound: bool = False) -> List[str]:
    """Convert all registers of a thread; fp8 conversions go two at a time (one cvt per pair).
    ``nan_positive``: the values' NaNs are positive (``passes/fp_contract.py: mark_positive_nan_casts``);
    ``bound``: registers bounding the values' magnitudes (``passes/fp8_bounds.py``); ``word_order``: how a reader
    groups the bytes into words (``codegen/fp8.py: cast_many_bounded``); ``self_bound``: the values bound
    themselves (``overflow_bound='self'``)."""
    if not isinstance(src, pointer_type) and not isinstance(dst, pointer_type) and (src.is_fp8() or dst.is_fp8()):
        from .fp8 import cast_many as fp8_cast_many
        return fp8_cast_many(e, src, dst, xs, nan_positive, bound, word_order, self_bound)
    return [cast(e, src, dst, x, rounding) for x in xs]


def bitcast(e: Emitter, src, dst, x: str) -> str:
    s, d = llty(src), llty(dst)
    if s == d:
        return x
    return e.val(f"bitcast {s} {x} to {d}")


def constant(value, t) -> str:
    """LLVM literal for a Python constant of element type ``t``."""
    from .emitter import float_literal
    if isinstance(t, pointer_type):
        return "null" if not value else f"inttoptr (i64 {int(value)} to ptr addrspace(1))"
    ty = llty(t)
    if t.is_fp8():  # folded exactly as the interpreter (and torch) round it
        import numpy as np
        from ..fp8_reference import from_float
        return str(int(from_float(np.array(float(value), np.float64), t.name).view(np.int8)))
    if t.is_floating():
        return float_literal(float(value), ty)
    if t.is_int1():
        return "true" if value else "false"
    v = int(value)
    bits = t.int_bitwidth
    v &= (1 << bits) - 1
    if v >> (bits - 1):
        v -= 1 << bits
    return str(v)
