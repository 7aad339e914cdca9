"""Semantics of every language operation, written once against the active builder.

Each function here checks its operands, applies Triton's promotion and broadcasting rules, computes
the result type and asks the builder for one tile-IR op (see ``kernelc/compiler/ir/ops.py`` for the
op vocabulary). Errors are ``TypeError``/``ValueError`` with one-sentence messages; the frontend and
the interpreter attach the kernel file, line and caret.
"""
from __future__ import annotations

import builtins
import numbers

from . import dtypes as T
from .core import _unwrap, _unwrap_shape, current_builder, tensor
from .dtypes import base_type, block_type, dtype, pointer_type, scalar_of, shape_of, with_scalar

# ---------------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------------


def _b():
    return current_builder()


def _make(op, operands, ty, **attrs) -> tensor:
    return tensor(_b().create(op, [o.handle for o in operands], ty, **attrs), ty)


def literal_type(x) -> dtype:
    """Type of a Python literal, as Triton types it."""
    if isinstance(x, bool):
        return T.int1
    if isinstance(x, int):
        if -2**31 <= x < 2**31:
            return T.int32
        if 2**31 <= x < 2**32:
            return T.uint32
        if -2**63 <= x < 2**63:
            return T.int64
        if 2**63 <= x < 2**64:
            return T.uint64
        raise ValueError(f"integer literal {x} does not fit in 64 bits")
    if isinstance(x, float):
        import math
        if x == 0 or math.isinf(x) or math.isnan(x) or 1.1754943508222875e-38 <= abs(x) <= 3.4028234663852886e38:
            return T.float32
        return T.float64
    raise TypeError(f"expected a tensor or a number, got {type(x).__name__} {x!r}")


def to_tensor(x) -> tensor:
    x = _unwrap(x)
    if isinstance(x, tensor):
        return x
    if isinstance(x, numbers.Number) and not isinstance(x, (bool, int, float)):
        x = x.item() if hasattr(x, "item") else float(x)  # numpy scalars
    ty = literal_type(x)
    return tensor(_b().constant(x, ty), ty)


def _is_literal(x) -> bool:
    x = _unwrap(x)
    return isinstance(x, (bool, int, float)) or (isinstance(x, numbers.Number) and not isinstance(x, tensor))


def full(shape, value, dt) -> tensor:
    shape = _unwrap_shape(shape)
    dt = _as_dtype(dt)
    value = _unwrap(value)
    if isinstance(value, tensor):
        if value.type.is_block():
            raise TypeError(f"full() value must be a scalar, got a tile of shape {value.shape}")
        return splat(cast(value, dt), shape)
    ty = block_type(dt, shape) if shape else dt
    return tensor(_b().constant(value, ty), ty)


def _as_dtype(dt) -> base_type:
    dt = _unwrap(dt)
    if isinstance(dt, T.unsupported_dtype):
        raise dt.error()
    if isinstance(dt, str):
        return T.parse_type(dt)
    if isinstance(dt, base_type):
        return dt
    try:  # torch / numpy dtypes
        import numpy as np
        return T.dtype(np.dtype(dt).name)
    except Exception:
        pass
    name = str(dt).replace("torch.", "")
    try:
        return T.dtype(name)
    except ValueError:
        raise TypeError(f"expected a kernelc dtype (e.g. kl.float32), got {dt!r}") from None


# ---------------------------------------------------------------------------------------------
# Shapes and broadcasting
# ---------------------------------------------------------------------------------------------


def splat(x: tensor, shape) -> tensor:
    shape = tuple(shape)
    if x.type.is_block():
        raise TypeError("cannot splat a tile")
    if not shape:
        return x
    return _make("splat", [x], block_type(x.type, shape))


def broadcast_to(x, shape) -> tensor:
    x = to_tensor(x)
    shape = _unwrap_shape(shape)
    if not x.type.is_block():
        return splat(x, shape)
    src = tuple(x.shape)
    if src == shape:
        return x
    if len(src) < len(shape):
        for _ in builtins.range(len(shape) - len(src)):
            x = expand_dims(x, 0)
        src = tuple(x.shape)
    if len(src) != len(shape):
        raise ValueError(f"cannot broadcast a tile of shape {list(src)} to {list(shape)}: more dimensions than the target")
    for s, d in zip(src, shape):
        if s != d and s != 1:
            raise ValueError(f"cannot broadcast a tile of shape {list(src)} to {list(shape)}")
    return _make("broadcast", [x], block_type(x.dtype, shape))


def broadcast_shapes(a, b):
    a, b = tuple(a), tuple(b)
    if len(a) < len(b):
        a = (1,) * (len(b) - len(a)) + a
    if len(b) < len(a):
        b = (1,) * (len(a) - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise ValueError(f"shape mismatch: cannot broadcast tiles of shapes {list(a)} and {list(b)}")
    return tuple(out)


def broadcast_pair(a: tensor, b: tensor):
    ab, bb = a.type.is_block(), b.type.is_block()
    if not ab and not bb:
        return a, b
    if ab and not bb:
        return a, splat(b, a.shape)
    if bb and not ab:
        return splat(a, b.shape), b
    shape = broadcast_shapes(a.shape, b.shape)
    return broadcast_to(a, shape), broadcast_to(b, shape)


def expand_dims(x, axis) -> tensor:
    x = to_tensor(x)
    axis = _unwrap(axis)
    axes = list(axis) if isinstance(axis, (tuple, list)) else [axis]
    ndim = len(x.shape) + len(axes)
    axes = sorted(a + ndim if a < 0 else a for a in axes)
    for a in axes:
        if not 0 <= a < ndim:
            raise ValueError(f"expand_dims axis {a} is out of range for a result with {ndim} dimensions")
    for a in axes:
        shape = list(x.shape)
        shape.insert(a, 1)
        if not x.type.is_block():
            x = splat(x, (1,))
        else:
            x = _make("expand_dims", [x], block_type(x.dtype, shape), axis=a)
    return x


def reshape(x, shape, can_reorder=False) -> tensor:
    x = to_tensor(x)
    shape = _unwrap_shape(shape)
    numel = 1
    for s in shape:
        numel *= s
    if numel != x.numel:
        raise ValueError(f"cannot reshape a tile of shape {x.shape} ({x.numel} elements) to {list(shape)} ({numel} elements)")
    if not x.type.is_block():
        return splat(x, shape)
    if tuple(x.shape) == shape:
        return x
    if not shape:
        raise ValueError("cannot reshape a tile to a scalar; index or reduce it instead")
    return _make("reshape", [x], block_type(x.dtype, shape))


def trans(x, dims) -> tensor:
    x = to_tensor(x)
    dims = _unwrap(dims)
    n = len(x.shape)
    if dims is None or dims == () or dims == []:
        if n != 2:
            raise ValueError(f"trans() without dims needs a 2-D tile, got {n}-D; pass the permutation")
        dims = (1, 0)
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    dims = tuple(_unwrap(d) for d in dims)
    if sorted(dims) != list(builtins.range(n)):
        raise ValueError(f"trans/permute dims {list(dims)} are not a permutation of {list(builtins.range(n))}")
    if dims == tuple(builtins.range(n)):
        return x
    shape = [x.shape[d] for d in dims]
    return _make("trans", [x], block_type(x.dtype, shape), perm=dims)


def getitem(x: tensor, slices) -> tensor:
    slices = _unwrap(slices)
    if not isinstance(slices, tuple):
        slices = (slices,)
    out = x
    dim = 0
    new_axes = []
    for s in slices:
        if s is None:
            new_axes.append(dim)
            dim += 1
        elif isinstance(s, builtins.slice):
            if not (s.start is None and s.stop is None and s.step is None):
                raise ValueError("only `:` and `None` are supported when indexing a tile; use masks and offsets")
            dim += 1
        elif s is Ellipsis:
            raise ValueError("`...` is not supported when indexing a tile; spell out the `:`s")
        else:
            raise ValueError(f"tiles can only be indexed with `None` and `:`, got {s!r}")
    if dim - len(new_axes) != len(x.shape):
        raise ValueError(f"index has {dim - len(new_axes)} `:` but the tile has {len(x.shape)} dimensions")
    for a in new_axes:
        out = expand_dims(out, a) if out.type.is_block() or a == 0 else expand_dims(out, a)
    return out


def join(a, b) -> tensor:
    a, b = to_tensor(a), to_tensor(b)
    a, b = binary_op_type_checking(a, b, allow_lhs_ptr=True, allow_rhs_ptr=True, arithmetic_check=False)
    if a.dtype != b.dtype:
        raise TypeError(f"join() needs tiles of the same dtype, got {a.dtype} and {b.dtype}")
    shape = list(a.shape) + [2]
    if not a.type.is_block():
        a, b = splat(a, (1,)), splat(b, (1,))
        shape = [1, 2]
    return _make("join", [a, b], block_type(a.dtype, shape))


def split(x):
    x = to_tensor(x)
    if not x.shape or x.shape[-1] != 2:
        raise ValueError(f"split() needs a tile whose last dimension is 2, got shape {x.shape}")
    shape = x.shape[:-1]
    ty = block_type(x.dtype, shape) if shape else x.dtype
    hs = _b().create_multi("split", [x.handle], [ty, ty])
    return tensor(hs[0], ty), tensor(hs[1], ty)


def cat(a, b, can_reorder=False) -> tensor:
    a, b = to_tensor(a), to_tensor(b)
    if a.dtype != b.dtype or a.shape[1:] != b.shape[1:] or not a.shape:
        raise ValueError(f"cat() needs tiles of one dtype and equal trailing shape, got {a.type} and {b.type}")
    shape = [a.shape[0] + b.shape[0]] + a.shape[1:]
    return _make("cat", [a, b], block_type(a.dtype, shape))


# ---------------------------------------------------------------------------------------------
# Type promotion (Triton's rules)
# ---------------------------------------------------------------------------------------------


def integer_promote(a: dtype, b: dtype) -> dtype:
    if a.int_signedness == b.int_signedness:
        return a if a.int_bitwidth > b.int_bitwidth else b
    if a.is_int_unsigned():
        return a if a.int_bitwidth >= b.int_bitwidth else b
    return b if b.int_bitwidth >= a.int_bitwidth else a


def computation_type(a: dtype, a_lit: bool, b: dtype, b_lit: bool, div_or_mod: bool) -> dtype:
    # A Python literal of a lower-or-equal kind does not take part in promotion (as in PyTorch); an integer
    # literal is of the same kind as a signed or unsigned integer tile.
    if a_lit != b_lit:
        lit, ten = (a, b) if a_lit else (b, a)
        if lit.kind.promotion_rank <= ten.kind.promotion_rank:
            if div_or_mod and ten in (T.float16, T.bfloat16):
                return T.float32
            return ten
    if a.is_fp64() or b.is_fp64():
        return T.float64
    if a.is_fp32() or b.is_fp32():
        return T.float32
    if a.is_fp16() or b.is_fp16():
        return T.float32 if div_or_mod else T.float16
    if a.is_bf16() or b.is_bf16():
        if div_or_mod:
            return T.float32
        return T.bfloat16 if (a.is_bf16() and b.is_bf16()) else T.float32
    if a.is_fp8() and b.is_fp8():
        return a if a == b else T.float16
    if a.is_fp8() or b.is_fp8():  # Triton: "unexpected type" (fp8 never promotes with integers)
        raise TypeError(f"cannot combine {a} and {b}: fp8 tiles only combine with floats, fp8 tiles and "
                        f"Python numbers; convert first, e.g. x.to(kl.float16)")
    if div_or_mod and a.int_signedness != b.int_signedness:
        raise TypeError(f"cannot use /, // or % with {a} and {b} because they have different signedness; "
                        f"cast them to the same signedness")
    return integer_promote(a, b)


def binary_op_type_checking(lhs, rhs, allow_lhs_ptr=False, allow_rhs_ptr=False, arithmetic_check=True,
                            div_or_mod=False):
    lhs_lit, rhs_lit = _is_literal(lhs), _is_literal(rhs)
    lhs_val, rhs_val = _unwrap(lhs), _unwrap(rhs)
    lhs, rhs = to_tensor(lhs), to_tensor(rhs)
    lt, rt = lhs.dtype, rhs.dtype
    if lt.is_ptr() and not allow_lhs_ptr:
        raise TypeError(f"unsupported operand type {lt} for this operation")
    if rt.is_ptr() and not allow_rhs_ptr:
        raise TypeError(f"unsupported operand type {rt} for this operation")
    if arithmetic_check and not lt.is_ptr() and not rt.is_ptr():
        ret = computation_type(lt, lhs_lit, rt, rhs_lit, div_or_mod)
        for lit, val in ((lhs_lit, lhs_val), (rhs_lit, rhs_val)):
            if lit and ret.is_int_unsigned() and isinstance(val, (int, float)) and val < 0:
                raise ValueError(f"cannot combine an unsigned tile ({ret}) with the negative constant {val}")
        lhs, rhs = cast(lhs, ret), cast(rhs, ret)
    return broadcast_pair(lhs, rhs)


# ---------------------------------------------------------------------------------------------
# Arithmetic
# ---------------------------------------------------------------------------------------------


def add(a, b) -> tensor:
    a, b = binary_op_type_checking(a, b, True, True)
    if a.dtype.is_ptr() and b.dtype.is_ptr():
        raise TypeError("cannot add two pointers")
    if b.dtype.is_ptr():
        a, b = b, a
    if a.dtype.is_ptr():
        _check_offset(b)
        return _make("addptr", [a, b], a.type)
    return _make("fadd" if a.dtype.is_floating() else "add", [a, b], a.type)


def _check_offset(off):
    if not off.dtype.is_int():
        raise TypeError(f"pointer offsets must be integers, got {off.dtype}")


def sub(a, b) -> tensor:
    a, b = binary_op_type_checking(a, b, True, False)
    if a.dtype.is_ptr():
        _check_offset(b)
        return _make("addptr", [a, neg(b)], a.type)
    return _make("fsub" if a.dtype.is_floating() else "sub", [a, b], a.type)


def mul(a, b) -> tensor:
    a, b = binary_op_type_checking(a, b)
    return _make("fmul" if a.dtype.is_floating() else "mul", [a, b], a.type)


def truediv(a, b) -> tensor:
    a_lit, b_lit = _is_literal(a), _is_literal(b)
    a, b = to_tensor(a), to_tensor(b)
    at, bt = a.dtype, b.dtype
    if at.is_ptr() or bt.is_ptr():
        raise TypeError("unsupported operand type for /: pointers")
    if at.is_floating() and bt.is_int():
        b = cast(b, at)
    elif at.is_int() and bt.is_floating():
        a = cast(a, bt)
    elif at.is_int() and bt.is_int():
        a, b = cast(a, T.float32), cast(b, T.float32)
    elif at != bt:
        ret = computation_type(at, a_lit, bt, b_lit, True)
        a, b = cast(a, ret), cast(b, ret)
    if a.dtype in (T.float16, T.bfloat16) or a.dtype.is_fp8():
        # PTX has no fp16 division: divide in fp32 (Triton's rule for literal-free operands too).
        a, b = cast(a, T.float32), cast(b, T.float32)
    a, b = broadcast_pair(a, b)
    return _make("fdiv", [a, b], a.type)


def floordiv(a, b) -> tensor:
    a, b = binary_op_type_checking(a, b, div_or_mod=True)
    if a.dtype.is_floating():
        return float_math("floor", truediv(a, b))
    return _make("udiv" if a.dtype.is_int_unsigned() else "sdiv", [a, b], a.type)


def mod(a, b) -> tensor:
    a, b = binary_op_type_checking(a, b, div_or_mod=True)
    if a.dtype.is_floating():
        return _make("frem", [a, b], a.type)
    return _make("urem" if a.dtype.is_int_unsigned() else "srem", [a, b], a.type)


def pow_(a, b) -> tensor:
    raise TypeError("`**` is not supported on tiles; use kl.exp2(y * kl.log2(x)) or repeated multiplication")


def neg(x) -> tensor:
    x = to_tensor(x)
    if x.dtype.is_ptr():
        raise TypeError("cannot negate a pointer")
    if x.dtype.is_floating():
        return _make("fneg", [x], x.type)
    return sub(_zero_like(x), x)


def _zero_like(x):
    return tensor(_b().constant(0, x.dtype), x.dtype)


def invert(x) -> tensor:
    x = to_tensor(x)
    if not x.dtype.is_int():
        raise TypeError(f"~ needs an integer tile, got {x.dtype}")
    ones = tensor(_b().constant(1 if x.dtype.is_int1() else -1 if x.dtype.is_int_signed() else (1 << x.dtype.int_bitwidth) - 1, x.dtype), x.dtype)
    return xor_(x, ones)


def _bitwise_check(a, b):
    a, b = binary_op_type_checking(a, b, arithmetic_check=False)
    at, bt = a.dtype, b.dtype
    if not at.is_int() or not bt.is_int():
        raise TypeError(f"bitwise operations need integer tiles, got {at} and {bt}")
    ret = integer_promote(at, bt)
    return broadcast_pair(cast(a, ret), cast(b, ret))


def and_(a, b) -> tensor:
    a, b = _bitwise_check(a, b)
    return _make("and", [a, b], a.type)


def or_(a, b) -> tensor:
    a, b = _bitwise_check(a, b)
    return _make("or", [a, b], a.type)


def xor_(a, b) -> tensor:
    a, b = _bitwise_check(a, b)
    return _make("xor", [a, b], a.type)


def shl(a, b) -> tensor:
    a, b = _bitwise_check(a, b)
    return _make("shl", [a, b], a.type)


def shr(a, b) -> tensor:
    a, b = _bitwise_check(a, b)
    return _make("lshr" if a.dtype.is_int_unsigned() else "ashr", [a, b], a.type)


def logical_and(a, b) -> tensor:
    return and_(_to_bool(a), _to_bool(b))


def logical_or(a, b) -> tensor:
    return or_(_to_bool(a), _to_bool(b))


def logical_not(a) -> tensor:
    a = _to_bool(a)
    return xor_(a, True)


def _to_bool(x) -> tensor:
    x = to_tensor(x)
    return x if x.dtype.is_int1() else not_equal(x, 0)


# Comparison predicates: (signed int, unsigned int, float).
_CMP = {
    "less": ("slt", "ult", "olt"), "less_equal": ("sle", "ule", "ole"),
    "greater": ("sgt", "ugt", "ogt"), "greater_equal": ("sge", "uge", "oge"),
    "equal": ("eq", "eq", "oeq"), "not_equal": ("ne", "ne", "une"),
}


def _compare(name, a, b) -> tensor:
    a, b = binary_op_type_checking(a, b, True, True)
    t = a.dtype
    si, ui, f = _CMP[name]
    if t.is_floating():
        op, pred = "cmpf", f
    else:
        op, pred = "cmpi", (ui if (t.is_ptr() or t.is_int_unsigned()) else si)
    return _make(op, [a, b], with_scalar(a.type, T.int1), pred=pred)


def less(a, b):
    return _compare("less", a, b)


def less_equal(a, b):
    return _compare("less_equal", a, b)


def greater(a, b):
    return _compare("greater", a, b)


def greater_equal(a, b):
    return _compare("greater_equal", a, b)


def equal(a, b):
    return _compare("equal", a, b)


def not_equal(a, b):
    return _compare("not_equal", a, b)


def where(cond, x, y) -> tensor:
    cond = _to_bool(cond)
    x, y = binary_op_type_checking(x, y, True, True)
    if cond.type.is_block() or x.type.is_block():
        shape = broadcast_shapes(cond.shape, x.shape)
        cond, x, y = broadcast_to(cond, shape), broadcast_to(x, shape), broadcast_to(y, shape)
    return _make("select", [cond, x, y], x.type)


def minimum(x, y, propagate_nan=None) -> tensor:
    return _minmax("min", x, y, propagate_nan)


def maximum(x, y, propagate_nan=None) -> tensor:
    return _minmax("max", x, y, propagate_nan)


def _minmax(which, x, y, propagate_nan):
    x, y = binary_op_type_checking(x, y)
    t = x.dtype
    if t.is_floating():
        return _make("f" + which, [x, y], x.type, propagate_nan=_nan_mode(propagate_nan))
    return _make(("u" if t.is_int_unsigned() else "s") + which, [x, y], x.type)


def _nan_mode(p) -> str:
    p = _unwrap(p)
    if p is None:
        return "none"
    name = getattr(p, "name", p)
    name = str(name).lower()
    if name not in ("none", "all"):
        raise ValueError(f"propagate_nan must be kl.PropagateNan.NONE or ALL, got {p!r}")
    return name


def clamp(x, lo, hi, propagate_nan=None) -> tensor:
    x = to_tensor(x)
    if not x.dtype.is_floating():
        raise TypeError(f"clamp() needs a floating-point tile, got {x.dtype}; use minimum/maximum for integers")
    return minimum(maximum(x, lo, propagate_nan), hi, propagate_nan)


def fma(x, y, z) -> tensor:
    x, y = binary_op_type_checking(x, y)
    x, z = binary_op_type_checking(x, z)
    x, y = binary_op_type_checking(x, y)
    if not x.dtype.is_floating():
        return add(mul(x, y), z)
    return _make("fma", [x, y, z], x.type)


def umulhi(x, y) -> tensor:
    x, y = binary_op_type_checking(x, y)
    if not x.dtype.is_int() or x.dtype.int_bitwidth not in (32, 64):
        raise TypeError(f"umulhi() needs 32- or 64-bit integer tiles, got {x.dtype}")
    return _make("umulhi" if x.dtype.is_int_unsigned() else "smulhi", [x, y], x.type)


# ---------------------------------------------------------------------------------------------
# Math
# ---------------------------------------------------------------------------------------------

# Float math ops: fp16/bf16/fp8 inputs are computed in fp32 and cast back, as Triton does.
FLOAT_MATH = ("exp", "exp2", "log", "log2", "sqrt", "sqrt_rn", "rsqrt", "sin", "cos", "erf", "floor",
              "ceil", "tanh")


def float_math(name, x) -> tensor:
    x = to_tensor(x)
    t = x.dtype
    if not t.is_floating():
        raise TypeError(f"{name}() needs a floating-point tile, got {t}; cast it first with .to(kl.float32)")
    if t in (T.float32, T.float64):
        return _make(name, [x], x.type)
    return cast(_make(name, [cast(x, T.float32)], with_scalar(x.type, T.float32)), t)


def abs_(x) -> tensor:
    x = to_tensor(x)
    t = x.dtype
    if t.is_floating():
        return _make("fabs", [x], x.type)
    if t.is_int_unsigned():
        return x
    if t.is_int():
        return _make("iabs", [x], x.type)
    raise TypeError(f"abs() needs a numeric tile, got {t}")





def fdiv(x, y, ieee_rounding=False) -> tensor:
    x, y = to_tensor(x), to_tensor(y)
    if not x.dtype.is_floating() or not y.dtype.is_floating():
        raise TypeError(f"fdiv() needs floating-point tiles, got {x.dtype} and {y.dtype}")
    x, y = binary_op_type_checking(x, y)
    return _make("fdiv", [x, y], x.type, ieee=bool(_unwrap(ieee_rounding)))


def div_rn(x, y) -> tensor:
    return fdiv(x, y, True)


# ---------------------------------------------------------------------------------------------
# Casts
# ---------------------------------------------------------------------------------------------


def cast(x, dst, fp_downcast_rounding=None) -> tensor:
    x = to_tensor(x)
    dst = _as_dtype(dst)
    if isinstance(dst, block_type):
        dst = dst.element_ty
    src = x.dtype
    if src == dst:
        return x
    ty = with_scalar(x.type, dst)
    if fp_downcast_rounding is not None:
        if fp_downcast_rounding not in ("rtne", "rtz"):
            raise ValueError(f"fp_downcast_rounding must be 'rtne' or 'rtz', got {fp_downcast_rounding!r}")
        if not (src.is_floating() and dst.is_floating() and dst.primitive_bitwidth < src.primitive_bitwidth):
            raise ValueError("fp_downcast_rounding applies only to floating-point downcasts")
        if dst.is_fp8() and fp_downcast_rounding != "rtne":
            raise ValueError("conversions to fp8 round to nearest even only (the GPU's fp8 cvt has no "
                             "round-toward-zero form); leave fp_downcast_rounding unset")
    if dst.is_ptr() and not (src.is_ptr() or (src.is_int() and src.int_bitwidth == 64)):
        raise TypeError(f"cannot cast {src} to the pointer type {dst}; only int64 and pointers can")
    if src.is_ptr() and not (dst.is_ptr() or dst in (T.int64, T.uint64, T.int1)):
        raise TypeError(f"cannot cast the pointer type {src} to {dst}; cast to kl.int64 first")
    if dst.is_int1() and not src.is_ptr():
        return not_equal(x, 0)
    return _make("cast", [x], ty, rounding=fp_downcast_rounding or "rtne")


def bitcast(x, dst) -> tensor:
    x = to_tensor(x)
    dst = _as_dtype(dst)
    src = x.dtype
    if src == dst:
        return x
    if src.primitive_bitwidth != dst.primitive_bitwidth:
        raise TypeError(f"cannot bitcast {src} ({src.primitive_bitwidth} bits) to {dst} ({dst.primitive_bitwidth} bits)")
    return _make("bitcast", [x], with_scalar(x.type, dst))


# ---------------------------------------------------------------------------------------------
# Creation and program ids
# ---------------------------------------------------------------------------------------------


def arange(start, end) -> tensor:
    start, end = _unwrap(start), _unwrap(end)
    for v, n in ((start, "start"), (end, "end")):
        if isinstance(v, tensor):
            raise TypeError(f"arange() {n} must be a compile-time constant (kl.constexpr), got a runtime tensor")
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(f"arange() {n} must be an integer, got {v!r}")
    if end <= start:
        raise ValueError(f"arange() needs end > start, got arange({start}, {end})")
    if end - start > 1 << 20:
        raise ValueError(f"arange({start}, {end}) has {end - start} elements; tiles are limited to 2**20 elements")
    if end > 2**31 or start < -2**31:
        raise ValueError("arange() bounds must fit in int32")
    ty = block_type(T.int32, (end - start,))
    return tensor(_b().create("arange", [], ty, start=start, end=end), ty)


def program_id(axis) -> tensor:
    axis = _unwrap(axis)
    if axis not in (0, 1, 2):
        raise ValueError(f"program_id axis must be 0, 1 or 2, got {axis!r}")
    return tensor(_b().create("program_id", [], T.int32, axis=axis), T.int32)


def num_programs(axis) -> tensor:
    axis = _unwrap(axis)
    if axis not in (0, 1, 2):
        raise ValueError(f"num_programs axis must be 0, 1 or 2, got {axis!r}")
    return tensor(_b().create("num_programs", [], T.int32, axis=axis), T.int32)


# ---------------------------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------------------------

CACHE_MODIFIERS = ("", ".ca", ".cg", ".cv", ".cs", ".wb", ".wt", ".lu")
EVICTION_POLICIES = ("", "evict_first", "evict_last", "evict_normal")


def _check_choice(name, value, allowed):
    value = _unwrap(value) or ""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {[a for a in allowed if a]}, got {value!r}")
    return value


def _pointer_operand(ptr, what):
    ptr = _unwrap(ptr)
    if not isinstance(ptr, tensor) or not ptr.dtype.is_ptr():
        got = ptr.dtype if isinstance(ptr, tensor) else type(ptr).__name__
        raise TypeError(f"{what}() needs a pointer (or a tile of pointers) as its first argument, got {got}")
    return ptr


def _storage_type(elt: dtype) -> dtype:
    # Booleans live in memory as bytes.
    return T.int8 if elt.is_int1() else elt


def load(ptr, mask=None, other=None, cache_modifier="", eviction_policy="", volatile=False) -> tensor:
    ptr = _pointer_operand(ptr, "load")
    cache = _check_choice("cache_modifier", cache_modifier, CACHE_MODIFIERS)
    evict = _check_choice("eviction_policy", eviction_policy, EVICTION_POLICIES)
    elt = ptr.dtype.element_ty
    mem = _storage_type(elt)
    shape = tuple(ptr.shape)
    operands = [ptr]
    mask, other = _unwrap(mask), _unwrap(other)
    if mask is not None:
        mask = _to_bool(mask)
        shape = broadcast_shapes(shape, mask.shape) if (mask.type.is_block() or shape) else shape
        ptr = broadcast_to(ptr, shape) if shape else ptr
        mask = broadcast_to(mask, shape) if shape else mask
        operands = [ptr, mask]
        if other is not None:
            other = cast(to_tensor(other), mem)
            other = broadcast_to(other, shape) if shape else other
            operands.append(other)
    elif other is not None:
        # Without a mask, `other` is never used (Triton ignores it too).
        pass
    ty = block_type(mem, shape) if shape else mem
    val = _make("load", operands, ty, cache=cache, eviction=evict, volatile=bool(_unwrap(volatile)))
    return cast(val, T.int1) if elt.is_int1() else val


def store(ptr, value, mask=None, cache_modifier="", eviction_policy="") -> None:
    ptr = _pointer_operand(ptr, "store")
    cache = _check_choice("cache_modifier", cache_modifier, CACHE_MODIFIERS)
    evict = _check_choice("eviction_policy", eviction_policy, EVICTION_POLICIES)
    elt = ptr.dtype.element_ty
    value = to_tensor(value)
    if value.dtype.is_ptr() and not elt.is_ptr():
        raise TypeError(f"cannot store a pointer into memory of {elt}")
    shape = tuple(ptr.shape)
    if value.type.is_block():
        shape = broadcast_shapes(shape, value.shape)
    mask = _unwrap(mask)
    if mask is not None:
        mask = _to_bool(mask)
        if mask.type.is_block():
            shape = broadcast_shapes(shape, mask.shape)
    if shape:
        ptr = broadcast_to(ptr, shape)
    value = cast(value, _storage_type(elt))
    if shape:
        value = broadcast_to(value, shape)
    operands = [ptr, value]
    if mask is not None:
        operands.append(broadcast_to(mask, shape) if shape else mask)
    _b().create("store", [o.handle for o in operands], None, cache=cache, eviction=evict)
    return None


SEMANTICS = ("acq_rel", "acquire", "release", "relaxed")
SCOPES = ("gpu", "cta", "sys")

# Atomic kinds by element kind: float, signed, unsigned.
_ATOMIC_KIND = {
    "add": ("fadd", "add", "add"), "max": ("fmax", "max", "umax"), "min": ("fmin", "min", "umin"),
    "xchg": ("xchg", "xchg", "xchg"), "and": (None, "and", "and"), "or": (None, "or", "or"),
    "xor": (None, "xor", "xor"),
}


def _atomic_common(ptr, val, mask, sem, scope, what):
    ptr = _pointer_operand(ptr, what)
    sem = _check_choice("sem", sem or "acq_rel", SEMANTICS)
    scope = _check_choice("scope", scope or "gpu", SCOPES)
    elt = ptr.dtype.element_ty
    if elt.is_int1() or (elt.is_int() and elt.int_bitwidth < 16) or elt.is_fp8():
        raise TypeError(f"{what}() does not support {elt} memory; use 16-, 32- or 64-bit types")
    val = cast(to_tensor(val), elt)
    shape = tuple(ptr.shape)
    if val.type.is_block():
        shape = broadcast_shapes(shape, val.shape)
    mask = _unwrap(mask)
    if mask is not None:
        mask = _to_bool(mask)
        if mask.type.is_block():
            shape = broadcast_shapes(shape, mask.shape)
    if shape:
        ptr, val = broadcast_to(ptr, shape), broadcast_to(val, shape)
        if mask is not None:
            mask = broadcast_to(mask, shape)
    return ptr, val, mask, sem, scope, elt, shape


def atomic_rmw(kind, ptr, val, mask=None, sem=None, scope=None) -> tensor:
    ptr, val, mask, sem, scope, elt, shape = _atomic_common(ptr, val, mask, sem, scope, f"atomic_{kind}")
    fk, sk, uk = _ATOMIC_KIND[kind]
    op = fk if elt.is_floating() else (uk if elt.is_int_unsigned() else sk)
    if op is None:
        raise TypeError(f"atomic_{kind}() needs integer memory, got {elt}")
    operands = [ptr, val] + ([mask] if mask is not None else [])
    ty = block_type(elt, shape) if shape else elt
    return _make("atomic_rmw", operands, ty, kind=op, sem=sem, scope=scope)


def atomic_cas(ptr, cmp, val, sem=None, scope=None) -> tensor:
    ptr, val, _, sem, scope, elt, shape = _atomic_common(ptr, val, None, sem, scope, "atomic_cas")
    if elt.primitive_bitwidth not in (16, 32, 64):
        raise TypeError(f"atomic_cas() needs 16-, 32- or 64-bit memory, got {elt}")
    cmp = cast(to_tensor(cmp), elt)
    if shape:
        cmp = broadcast_to(cmp, shape)
    ty = block_type(elt, shape) if shape else elt
    return _make("atomic_cas", [ptr, cmp, val], ty, sem=sem, scope=scope)


# ---------------------------------------------------------------------------------------------
# Hints, debugging
# ---------------------------------------------------------------------------------------------


def hint(x, name, values) -> tensor:
    x = to_tensor(x)
    values = _unwrap(values)
    if isinstance(values, int):
        values = [values]
    values = tuple(int(_unwrap(v)) for v in values)
    if len(values) != max(1, len(x.shape)):
        raise ValueError(f"{name}() needs one value per dimension ({max(1, len(x.shape))}), got {list(values)}")
    if any(v < 1 for v in values):
        raise ValueError(f"{name}() values must be positive, got {list(values)}")
    if not x.dtype.is_int() and not x.dtype.is_ptr():
        raise TypeError(f"{name}() applies to integer or pointer tiles, got {x.dtype}")
    return _make("hint", [x], x.type, **{name: values})


def device_print(prefix, args, hex=False) -> None:
    tensors = [to_tensor(a) for a in args]
    _b().create("print", [t.handle for t in tensors], None, prefix=str(prefix), hex=bool(hex),
                types=tuple(t.type for t in tensors))


def device_assert(cond, msg="", mask=None) -> None:
    cond = _to_bool(cond)
    if mask is not None:
        cond = logical_or(cond, logical_not(_to_bool(mask)))
    _b().create("assert", [cond.handle], None, msg=str(msg))


def debug_barrier() -> None:
    _b().create("barrier", [], None)


# ---------------------------------------------------------------------------------------------
# Linear algebra
# ---------------------------------------------------------------------------------------------

INPUT_PRECISIONS = ("tf32", "tf32x3", "ieee")


def dot(a, b, acc=None, input_precision=None, allow_tf32=None, max_num_imprecise_acc=None,
        out_dtype=T.float32) -> tensor:
    a, b = to_tensor(a), to_tensor(b)
    input_precision, allow_tf32 = _unwrap(input_precision), _unwrap(allow_tf32)
    if input_precision is None:
        input_precision = "ieee" if allow_tf32 is False else "tf32"
    input_precision = str(input_precision).lower()
    if input_precision not in INPUT_PRECISIONS:
        raise ValueError(f"input_precision must be one of {list(INPUT_PRECISIONS)}, got {input_precision!r}")
    ra, rb = len(a.shape), len(b.shape)
    if ra not in (2, 3) or ra != rb:
        raise ValueError(f"dot() needs two 2-D tiles (or two 3-D batched tiles), got shapes {a.shape} and {b.shape}")
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"dot() inner dimensions differ: {a.shape} @ {b.shape} (K={a.shape[-1]} vs {b.shape[-2]})")
    if ra == 3 and a.shape[0] != b.shape[0]:
        raise ValueError(f"dot() batch dimensions differ: {a.shape[0]} vs {b.shape[0]}")
    at, bt = a.dtype, b.dtype
    if at.is_ptr() or bt.is_ptr() or at.is_int1() or bt.is_int1():
        raise TypeError(f"dot() needs numeric tiles, got {at} and {bt}")
    if at != bt and not (at.is_fp8() and bt.is_fp8()):
        common = computation_type(at, False, bt, False, False)
        a, b = cast(a, common), cast(b, common)
        at = bt = common
    out_dtype = _as_dtype(out_dtype)
    if at.is_int():
        ret = T.int32
    elif out_dtype == T.float16 and at in (T.float16,) or (at.is_fp8() and out_dtype == T.float16):
        ret = T.float16
    else:
        ret = T.float32 if not at.is_fp64() else T.float64
    shape = a.shape[:-1] + [b.shape[-1]]
    acc = _unwrap(acc)
    if acc is None:
        acc = full(shape, 0, ret)
    else:
        acc = to_tensor(acc)
        if acc.shape != shape:
            raise ValueError(f"dot() accumulator has shape {acc.shape}, expected {shape}")
        ret = acc.dtype
    ty = block_type(ret, shape)
    extra = {}
    mnia = _unwrap(max_num_imprecise_acc)
    if mnia is not None:  # unset: the tensor cores' own fp8 accumulation (Triton's default on Hopper)
        if at.is_fp8() and mnia > a.shape[-1]:
            raise ValueError(f"max_num_imprecise_acc ({mnia}) must be <= K ({a.shape[-1]})")
        extra["max_num_imprecise_acc"] = int(mnia)
    return _make("dot", [a, b, acc], ty, input_precision=input_precision, **extra)


# ---------------------------------------------------------------------------------------------
# Reductions and scans
# ---------------------------------------------------------------------------------------------


def _norm_axis(axis, ndim, what):
    if axis is None:
        return None
    axis = _unwrap(axis)
    if not isinstance(axis, int):
        raise TypeError(f"{what} axis must be a constant integer, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"{what} axis {axis} is out of range for a {ndim}-D tile")
    return axis % ndim


def reduce(inputs, axis, combine_fn, keep_dims=False, kind=None):
    """Reduce one tile or a tuple of tiles along ``axis`` with ``combine_fn``.

    ``kind`` names a known combine ("add", "max", "min", "argmax", ...) so builders may take a fast
    path; ``combine_fn`` stays the definition of the semantics.
    """
    single = isinstance(inputs, tensor) or not isinstance(inputs, (tuple, list))
    inputs = [to_tensor(inputs)] if single else [to_tensor(i) for i in inputs]
    in_ndim = len(inputs[0].shape)
    axis, keep_dims = _unwrap(axis), bool(_unwrap(keep_dims))
    if axis is None:
        inputs = [reshape(i, (i.numel,)) if i.type.is_block() else splat(i, (1,)) for i in inputs]
        axis = 0
        flat_keep = keep_dims
        keep_dims = False
    else:
        flat_keep = None
    shape = inputs[0].shape
    for i in inputs:
        if i.shape != shape:
            raise ValueError(f"reduce() inputs must have the same shape, got {[x.shape for x in inputs]}")
    if not shape:
        inputs = [splat(i, (1,)) for i in inputs]
        shape = [1]
    axis = _norm_axis(axis, len(shape), "reduce")
    res = _b().reduce(inputs, axis, combine_fn, kind)
    out_shape = shape[:axis] + shape[axis + 1:]
    outs = []
    for h, elt in res:
        ty = block_type(elt, out_shape) if out_shape else elt
        t = tensor(h, ty)
        if keep_dims:
            t = expand_dims(t, axis) if out_shape else splat(t, (1,))
        outs.append(t)
    if flat_keep:
        ndim = len(outs[0].shape) if outs[0].type.is_block() else 0
        outs = [reshape(o, (1,) * builtins.max(1, in_ndim)) for o in outs] if ndim == 0 else outs
    return outs[0] if single else tuple(outs)


def scan(inputs, axis, combine_fn, reverse=False, kind=None):
    single = isinstance(inputs, tensor) or not isinstance(inputs, (tuple, list))
    inputs = [to_tensor(inputs)] if single else [to_tensor(i) for i in inputs]
    shape = inputs[0].shape
    if not shape:
        raise ValueError("associative_scan() needs a tile, got a scalar")
    for i in inputs:
        if i.shape != shape:
            raise ValueError(f"associative_scan() inputs must have the same shape, got {[x.shape for x in inputs]}")
    axis = _norm_axis(axis, len(shape), "associative_scan")
    res = _b().scan(inputs, axis, combine_fn, kind, bool(_unwrap(reverse)))
    outs = [tensor(h, block_type(elt, shape)) for h, elt in res]
    return outs[0] if single else tuple(outs)


# ---------------------------------------------------------------------------------------------
# Sorting, flips, gathers, histograms
# ---------------------------------------------------------------------------------------------


def _minor_dim(x: tensor, dim, what) -> None:
    """Sorting networks work along the last dimension only (as in Triton)."""
    if not x.type.is_block():
        raise TypeError(f"{what}() needs a tile, got a scalar")
    dim = _unwrap(dim)
    n = len(x.shape)
    if dim is not None and _norm_axis(dim, n, what) != n - 1:
        raise ValueError(f"{what}() sorts along the last dimension only (dim={n - 1} or None), got dim={dim}")
    if x.dtype.is_ptr():
        raise TypeError(f"{what}() needs a numeric tile, got {x.dtype}")


def sort(x, dim=None, descending=False, k=None) -> tensor:
    x = to_tensor(x)
    what = "topk" if k is not None else "sort"
    _minor_dim(x, dim, what)
    n = x.shape[-1]
    attrs = {"descending": bool(_unwrap(descending))}
    shape = list(x.shape)
    k = _unwrap(k)
    if k is not None:
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= n:
            raise ValueError(f"topk() k must be a constant integer in [1, {n}], got {k!r}")
        attrs["k"] = k
        shape[-1] = k
    return _make("sort", [x], block_type(x.dtype, shape), **attrs)


def bitonic_merge(x, dim=None, descending=False) -> tensor:
    x = to_tensor(x)
    _minor_dim(x, dim, "bitonic_merge")
    n = x.shape[-1]
    if n & (n - 1):
        raise ValueError(f"bitonic_merge() needs a power-of-two last dimension, got {n}")
    return _make("bitonic_merge", [x], x.type, descending=bool(_unwrap(descending)))


def flip(x, dim=None) -> tensor:
    x = to_tensor(x)
    if not x.type.is_block():
        raise TypeError("flip() needs a tile, got a scalar")
    dim = _unwrap(dim)
    axis = len(x.shape) - 1 if dim is None else _norm_axis(dim, len(x.shape), "flip")
    if x.shape[axis] == 1:
        return x
    return _make("flip", [x], x.type, axis=axis)


def gather(src, index, axis) -> tensor:
    src, index = to_tensor(src), to_tensor(index)
    if not src.type.is_block() or not index.type.is_block():
        raise TypeError("gather() needs a source tile and an index tile")
    if not index.dtype.is_int():
        raise TypeError(f"gather() index must be an integer tile, got {index.dtype}")
    if len(src.shape) != len(index.shape):
        raise ValueError(f"gather() source and index must have the same rank, got shapes {src.shape} and "
                         f"{index.shape}")
    axis = _norm_axis(axis, len(src.shape), "gather")
    for d, (s, i) in enumerate(zip(src.shape, index.shape)):
        if d != axis and s != i:
            raise ValueError(f"gather() index shape {index.shape} must equal the source shape {src.shape} "
                             f"except along axis {axis}")
    return _make("gather", [src, index], block_type(src.dtype, index.shape), axis=axis)


def histogram(x, num_bins, mask=None) -> tensor:
    x = to_tensor(x)
    num_bins = _unwrap(num_bins)
    if not isinstance(num_bins, int) or isinstance(num_bins, bool) or num_bins < 1:
        raise ValueError(f"histogram() num_bins must be a positive constant integer, got {num_bins!r}")
    if len(x.shape) != 1 or not x.dtype.is_int() or x.dtype.is_int1():
        raise TypeError(f"histogram() needs a 1-D integer tile, got {x.type}")
    operands = [x]
    mask = _unwrap(mask)
    if mask is not None:
        operands.append(broadcast_to(_to_bool(mask), x.shape))
    return _make("histogram", operands, block_type(T.int32, (num_bins,)), num_bins=num_bins)


# ---------------------------------------------------------------------------------------------
# Device libraries and inline assembly
# ---------------------------------------------------------------------------------------------


def _broadcast_all(args):
    args = [to_tensor(a) for a in args]
    shape = ()
    for a in args:
        if a.type.is_block():
            shape = broadcast_shapes(shape, a.shape) if shape else tuple(a.shape)
    if shape:
        args = [broadcast_to(a, shape) for a in args]
    return args, shape


def extern_elementwise(name, args, table, lib="libdevice") -> tensor:
    """One call of a device-library function per element.

    ``table`` maps a tuple of argument type names (``("fp32",)``) to ``(symbol, result type name)``;
    the arguments must match one row exactly (after Python numbers become int32/fp32), as in Triton.
    """
    literal = [_is_literal(a) and not isinstance(_unwrap(a), bool) for a in args]
    args, shape = _broadcast_all(args)
    key = tuple(a.dtype.name if isinstance(a.dtype, dtype) else str(a.dtype) for a in args)
    row = table.get(key)
    if row is None and any(literal):
        # Python numbers take the type a signature needs (pow(x_fp64, 2.0)); Triton requires exact types
        for sig in table:
            if all(k == t or (lit and (T.dtype(t).is_floating() or key_t.startswith("int")))
                   for k, t, lit, key_t in zip(key, sig, literal, key)):
                args = [cast(a, t) if lit else a for a, t, lit in zip(args, sig, literal)]
                key, row = sig, table[sig]
                break
    if row is None:
        want = " or ".join("(" + ", ".join(k) + ")" for k in table)
        raise TypeError(f"{name}() has no version for argument types ({', '.join(key)}); it takes {want}: "
                        f"cast the arguments first, e.g. x.to(kl.float32)")
    symbol, ret = row
    rt = T.dtype(ret)
    return _make("extern_elementwise", args, block_type(rt, shape) if shape else rt, symbol=symbol, lib=lib)


def inline_asm(asm, constraints, args, dt, is_pure, pack) -> tensor:
    asm, constraints = _unwrap(asm), _unwrap(constraints)
    pack, dt = _unwrap(pack), _unwrap(dt)
    if isinstance(dt, (tuple, list)):
        if len(dt) != 1:
            raise TypeError("inline_asm_elementwise() with several result dtypes is not supported by kernelc: "
                            "write one call per result")
        dt = _unwrap(dt[0])
    if pack != 1:
        raise ValueError(f"inline_asm_elementwise() pack={pack} is not supported by kernelc: use pack=1 "
                         f"(one element per asm statement)")
    if not isinstance(asm, str) or not isinstance(constraints, str):
        raise TypeError("inline_asm_elementwise() asm and constraints must be constant strings")
    rt = _as_dtype(dt)
    args, shape = _broadcast_all(args)
    return _make("inline_asm", args, block_type(rt, shape) if shape else rt, asm=asm, constraints=constraints,
                 pure=bool(_unwrap(is_pure)))
