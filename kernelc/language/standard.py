"""The public language functions (``kl.load``, ``kl.sum``, ...), with Triton's names and signatures.

They unwrap constexprs and delegate to ``semantic``; reductions are defined by their combine
functions (device functions), which the compiler inlines and the interpreter calls.
"""
from __future__ import annotations

import builtins
import enum

from . import dtypes as T
from . import blocks, semantic
from .core import _member, _unwrap, _unwrap_shape, device_function, tensor


class PropagateNan(enum.Enum):
    NONE = "none"
    ALL = "all"


# -- creation ---------------------------------------------------------------------------------


def arange(start, end):
    """``[start, start+1, ..., end-1]`` as an int32 tile (bounds are constexprs)."""
    return semantic.arange(start, end)


def zeros(shape, dtype):
    return semantic.full(shape, 0, dtype)


def full(shape, value, dtype):
    return semantic.full(shape, value, dtype)


def zeros_like(input):
    input = semantic.to_tensor(input)
    return semantic.full(input.shape, 0, input.dtype)


def full_like(input, value, dtype=None):
    input = semantic.to_tensor(input)
    return semantic.full(input.shape, value, input.dtype if _unwrap(dtype) is None else dtype)


def to_tensor(x):
    return semantic.to_tensor(x)


@_member
def cast(input, dtype, fp_downcast_rounding=None, bitcast=False):
    if _unwrap(bitcast):
        return semantic.bitcast(input, dtype)
    return semantic.cast(input, dtype, _unwrap(fp_downcast_rounding))


def program_id(axis):
    """Index of this program along grid ``axis`` (0, 1 or 2)."""
    return semantic.program_id(axis)


def num_programs(axis):
    """Number of programs along grid ``axis``."""
    return semantic.num_programs(axis)


# -- shapes -----------------------------------------------------------------------------------


def _shape_args(shape):
    shape = _unwrap(shape)
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


@_member
def reshape(input, *shape, can_reorder=False):
    return semantic.reshape(input, _shape_args(shape), can_reorder)


@_member
def view(input, *shape):
    return semantic.reshape(input, _shape_args(shape), True)


@_member
def trans(input, *dims):
    return semantic.trans(input, dims)


@_member
def permute(input, *dims):
    return semantic.trans(input, dims)


@_member
def broadcast_to(input, *shape):
    return semantic.broadcast_to(input, _shape_args(shape))


def broadcast(input, other):
    return semantic.broadcast_pair(semantic.to_tensor(input), semantic.to_tensor(other))


@_member
def expand_dims(input, axis):
    return semantic.expand_dims(input, axis)


@_member
def ravel(x, can_reorder=False):
    x = semantic.to_tensor(x)
    return semantic.reshape(x, (x.numel,))


def join(a, b):
    return semantic.join(a, b)


@_member
def split(a):
    return semantic.split(a)


def cat(input, other, can_reorder=False):
    return semantic.cat(input, other, can_reorder)


# -- memory -----------------------------------------------------------------------------------


def load(pointer, mask=None, other=None, boundary_check=(), padding_option="", cache_modifier="",
         eviction_policy="", volatile=False):
    """Load a tile from ``pointer`` (a tile of pointers); masked-off lanes take ``other`` (or 0).

    ``pointer`` may also be a block pointer (``make_block_ptr``): then ``boundary_check`` lists the
    dims whose out-of-bounds elements read as ``padding_option`` ("zero" or "nan") instead of
    ``mask``/``other``.
    """
    if isinstance(_unwrap(pointer), blocks.block_pointer):
        return blocks.load_block(_unwrap(pointer), mask, other, boundary_check, padding_option, cache_modifier,
                                 eviction_policy, volatile)
    if _unwrap(boundary_check) or _unwrap(padding_option):
        raise ValueError("boundary_check and padding_option apply to block pointers (kl.make_block_ptr); "
                         "with a tile of pointers use mask= and other=")
    return semantic.load(pointer, mask, other, cache_modifier, eviction_policy, volatile)


def store(pointer, value, mask=None, boundary_check=(), cache_modifier="", eviction_policy=""):
    """Store ``value`` at ``pointer`` where ``mask`` is true (or, for a block pointer, inside the
    tensor along the ``boundary_check`` dims)."""
    if isinstance(_unwrap(pointer), blocks.block_pointer):
        return blocks.store_block(_unwrap(pointer), value, mask, boundary_check, cache_modifier, eviction_policy)
    if _unwrap(boundary_check):
        raise ValueError("boundary_check applies to block pointers (kl.make_block_ptr); with a tile of "
                         "pointers use mask=")
    return semantic.store(pointer, value, mask, cache_modifier, eviction_policy)


def make_block_ptr(base, shape, strides, offsets, block_shape, order):
    """A pointer to the ``block_shape`` tile at ``offsets`` of an n-D tensor (Triton's ``tl.make_block_ptr``).

    Example::

        a_bp = kl.make_block_ptr(a_ptr, shape=(M, K), strides=(stride_am, stride_ak),
                                 offsets=(pid_m * BLOCK_M, 0), block_shape=(BLOCK_M, BLOCK_K), order=(1, 0))
        a = kl.load(a_bp, boundary_check=(0, 1))      # out-of-bounds elements read as 0
        a_bp = kl.advance(a_bp, (0, BLOCK_K))
    """
    return blocks.make_block_ptr(base, shape, strides, offsets, block_shape, order)


def advance(base, offsets):
    """The block pointer ``base`` moved by ``offsets`` elements, one per dimension (Triton's ``tl.advance``)."""
    return blocks.advance(base, offsets)


def make_tensor_descriptor(base, shape, strides, block_shape, padding_option="zero"):
    """A tensor descriptor made in the kernel (Triton's ``tl.make_tensor_descriptor``); the last
    stride must be 1.

    Example::

        desc = kl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[64, 64])
        tile = desc.load([pid_m * 64, pid_n * 64])          # out-of-bounds elements read as 0
        desc.store([pid_m * 64, pid_n * 64], tile * 2)      # out-of-bounds elements are not written
    """
    return blocks.make_tensor_descriptor(base, shape, strides, block_shape, padding_option)


def atomic_add(pointer, val, mask=None, sem=None, scope=None):
    return semantic.atomic_rmw("add", pointer, val, mask, sem, scope)


def atomic_max(pointer, val, mask=None, sem=None, scope=None):
    return semantic.atomic_rmw("max", pointer, val, mask, sem, scope)


def atomic_min(pointer, val, mask=None, sem=None, scope=None):
    return semantic.atomic_rmw("min", pointer, val, mask, sem, scope)


def atomic_xchg(pointer, val, mask=None, sem=None, scope=None):
    return semantic.atomic_rmw("xchg", pointer, val, mask, sem, scope)


def atomic_and(pointer, val, mask=None, sem=None, scope=None):
    return semantic.atomic_rmw("and", pointer, val, mask, sem, scope)


def atomic_or(pointer, val, mask=None, sem=None, scope=None):
    return semantic.atomic_rmw("or", pointer, val, mask, sem, scope)


def atomic_xor(pointer, val, mask=None, sem=None, scope=None):
    return semantic.atomic_rmw("xor", pointer, val, mask, sem, scope)


def atomic_cas(pointer, cmp, val, sem=None, scope=None):
    return semantic.atomic_cas(pointer, cmp, val, sem, scope)


def multiple_of(input, values):
    """Promise the compiler that each element of ``input`` is a multiple of ``values``."""
    return semantic.hint(input, "multiple_of", values)


def max_contiguous(input, values):
    """Promise the compiler that ``input`` has runs of ``values`` consecutive elements."""
    return semantic.hint(input, "max_contiguous", values)


def max_constancy(input, values):
    return semantic.hint(input, "max_constancy", values)


# -- arithmetic -------------------------------------------------------------------------------


def where(condition, x, y):
    """Elementwise ``x if condition else y``."""
    return semantic.where(condition, x, y)


def maximum(x, y, propagate_nan=PropagateNan.NONE):
    return semantic.maximum(x, y, propagate_nan)


def minimum(x, y, propagate_nan=PropagateNan.NONE):
    return semantic.minimum(x, y, propagate_nan)


def clamp(x, min, max, propagate_nan=PropagateNan.NONE):
    return semantic.clamp(x, min, max, propagate_nan)


def fma(x, y, z):
    return semantic.fma(x, y, z)


def umulhi(x, y):
    return semantic.umulhi(x, y)


def fdiv(x, y, ieee_rounding=False):
    return semantic.fdiv(x, y, ieee_rounding)


def div_rn(x, y):
    return semantic.div_rn(x, y)


def cdiv(x, div):
    """Ceiling division; works on constexprs (folds) and on tiles."""
    x, div = _unwrap(x), _unwrap(div)
    if isinstance(x, int) and isinstance(div, int):
        return (x + div - 1) // div
    return (x + div - 1) // div


def _mk_math(name):
    def f(x):
        return semantic.float_math(name, x)

    f.__name__ = name
    f.__doc__ = f"Elementwise {name} (fp16/bf16 are computed in fp32)."
    return _member(f)


exp = _mk_math("exp")
exp2 = _mk_math("exp2")
log = _mk_math("log")
log2 = _mk_math("log2")
sqrt = _mk_math("sqrt")
sqrt_rn = _mk_math("sqrt_rn")
rsqrt = _mk_math("rsqrt")
sin = _mk_math("sin")
cos = _mk_math("cos")
erf = _mk_math("erf")
floor = _mk_math("floor")
ceil = _mk_math("ceil")


@_member
def abs(x):
    return semantic.abs_(x)


@_member
def sigmoid(x):
    x = semantic.to_tensor(x)
    return 1 / (1 + exp(-x))


@_member
def softmax(x, dim=None, keep_dims=False, ieee_rounding=False):
    """Softmax along ``dim`` (axis 0 by default), as Triton's ``tl.softmax``."""
    dim = 0 if _unwrap(dim) is None else _unwrap(dim)
    z = x - max(x, dim, keep_dims=keep_dims)
    num = exp(z)
    den = sum(num, dim, keep_dims=keep_dims)
    return fdiv(num, den, ieee_rounding)


# -- reductions -------------------------------------------------------------------------------


@device_function
def _sum_combine(a, b):
    return a + b


@device_function
def _prod_combine(a, b):
    return a * b


@device_function
def _max_combine(a, b):
    return maximum(a, b)


@device_function
def _min_combine(a, b):
    return minimum(a, b)


@device_function
def _argmax_combine_left(value1, index1, value2, index2):
    gt = value1 > value2
    eq = value1 == value2
    tie = eq & (index1 < index2)
    take1 = gt | tie
    return where(take1, value1, value2), where(take1, index1, index2)


@device_function
def _argmin_combine_left(value1, index1, value2, index2):
    lt = value1 < value2
    eq = value1 == value2
    tie = eq & (index1 < index2)
    take1 = lt | tie
    return where(take1, value1, value2), where(take1, index1, index2)


@device_function
def _argmax_combine_fast(value1, index1, value2, index2):
    take1 = value1 >= value2
    return where(take1, value1, value2), where(take1, index1, index2)


@device_function
def _argmin_combine_fast(value1, index1, value2, index2):
    take1 = value1 <= value2
    return where(take1, value1, value2), where(take1, index1, index2)


@device_function
def _xor_combine(a, b):
    return a ^ b


def _pick_sum_dtype(in_dtype, dtype):
    dtype = _unwrap(dtype)
    if dtype is not None:
        return semantic._as_dtype(dtype)
    # Narrow integers accumulate in 32 bits to avoid overflow (Triton's rule).
    if in_dtype.is_int_signed() and in_dtype.int_bitwidth < 32:
        return T.int32
    if in_dtype.is_int_unsigned() and in_dtype.int_bitwidth < 32:
        return T.uint32
    return None


def _promote_bf16(x):
    return x.to(T.float32) if x.dtype == T.bfloat16 else x


def reduce(input, axis, combine_fn, keep_dims=False):
    """Reduce ``input`` (a tile or tuple of tiles) along ``axis`` with a ``@jit`` ``combine_fn``."""
    return semantic.reduce(input, axis, combine_fn, keep_dims)


@_member
def sum(input, axis=None, keep_dims=False, dtype=None):
    input = semantic.to_tensor(input)
    out = _pick_sum_dtype(input.dtype, dtype)
    if out is not None:
        input = input.to(out)
    return semantic.reduce(input, axis, _sum_combine, keep_dims, kind="add")


def _widen_for_minmax(x):
    x = _promote_bf16(x)
    if x.dtype.primitive_bitwidth < 32:
        x = x.to(T.float32 if x.dtype.is_floating() else T.int32)
    return x


def _reduce_with_indices(input, axis, combine_fn, keep_dims, kind):
    axis = _unwrap(axis)
    if axis is None:
        input = semantic.reshape(input, (input.numel,))
        axis = 0
    n = input.shape[axis]
    idx = semantic.arange(0, n)
    if len(input.shape) > 1:
        shape = [1] * len(input.shape)
        shape[axis] = n
        idx = semantic.reshape(idx, shape)
        idx = semantic.broadcast_to(idx, input.shape)
    return semantic.reduce((input, idx), axis, combine_fn, keep_dims, kind=kind)


@_member
def max(input, axis=None, return_indices=False, return_indices_tie_break_left=True, keep_dims=False):
    input = semantic.to_tensor(input)
    if _unwrap(return_indices):
        input = _promote_bf16(input)
        fn = _argmax_combine_left if _unwrap(return_indices_tie_break_left) else _argmax_combine_fast
        return _reduce_with_indices(input, axis, fn, keep_dims, "argmax")
    input = _widen_for_minmax(input)
    return semantic.reduce(input, axis, _max_combine, keep_dims, kind="max")


@_member
def min(input, axis=None, return_indices=False, return_indices_tie_break_left=True, keep_dims=False):
    input = semantic.to_tensor(input)
    if _unwrap(return_indices):
        input = _promote_bf16(input)
        fn = _argmin_combine_left if _unwrap(return_indices_tie_break_left) else _argmin_combine_fast
        return _reduce_with_indices(input, axis, fn, keep_dims, "argmin")
    input = _widen_for_minmax(input)
    return semantic.reduce(input, axis, _min_combine, keep_dims, kind="min")


@_member
def argmax(input, axis, tie_break_left=True, keep_dims=False):
    _, idx = max(input, axis, return_indices=True, return_indices_tie_break_left=tie_break_left,
                 keep_dims=keep_dims)
    return idx


@_member
def argmin(input, axis, tie_break_left=True, keep_dims=False):
    _, idx = min(input, axis, return_indices=True, return_indices_tie_break_left=tie_break_left,
                 keep_dims=keep_dims)
    return idx


@_member
def xor_sum(input, axis=None, keep_dims=False):
    input = semantic.to_tensor(input)
    if not input.dtype.is_int():
        raise TypeError(f"xor_sum() needs an integer tile, got {input.dtype}")
    return semantic.reduce(input, axis, _xor_combine, keep_dims, kind="xor")


def associative_scan(input, axis, combine_fn, reverse=False):
    """Inclusive scan of ``input`` along ``axis`` with an associative ``@jit`` ``combine_fn``."""
    return semantic.scan(input, axis, combine_fn, reverse)


@_member
def cumsum(input, axis=0, reverse=False, dtype=None):
    input = _promote_bf16(semantic.to_tensor(input))
    out = _pick_sum_dtype(input.dtype, dtype)
    if out is not None:
        input = input.to(out)
    return semantic.scan(input, axis, _sum_combine, reverse, kind="add")


@_member
def cumprod(input, axis=0, reverse=False):
    input = _promote_bf16(semantic.to_tensor(input))
    return semantic.scan(input, axis, _prod_combine, reverse, kind="mul")


# -- linear algebra ---------------------------------------------------------------------------


def dot(input, other, acc=None, input_precision=None, allow_tf32=None, max_num_imprecise_acc=None,
        out_dtype=T.float32):
    """Matrix product of 2-D tiles (or batched 3-D tiles), accumulated into ``acc``.

    fp32 inputs use TF32 tensor cores unless ``input_precision="ieee"``.
    """
    return semantic.dot(input, other, acc, input_precision, allow_tf32, max_num_imprecise_acc, out_dtype)


# -- debugging --------------------------------------------------------------------------------


def static_print(*values, sep=" ", end="\n", file=None, flush=False):
    """Print at compile time (once per compilation; once per launch in the interpreter)."""
    builtins.print(*[_unwrap(v) for v in values], sep=sep, end=end, file=file, flush=flush)


def static_assert(cond, msg=""):
    """Fail compilation when the constant ``cond`` is false."""
    cond = _unwrap(cond)
    if isinstance(cond, tensor):
        from .core import current_builder
        if not getattr(current_builder(), "is_interpreter", False):
            raise TypeError("static_assert() needs a compile-time constant condition; use device_assert for runtime values")
        cond = bool(cond)
    if not cond:
        raise AssertionError(f"static_assert failed: {_unwrap(msg)}" if _unwrap(msg) else "static_assert failed")


def device_print(prefix, *args, hex=False):
    """Print ``prefix`` and the values of ``args`` from every program at run time."""
    return semantic.device_print(_unwrap(prefix), args, _unwrap(hex))


def device_assert(cond, msg="", mask=None):
    """Abort the kernel with ``msg`` where ``cond`` is false (checked in the interpreter and on GPU)."""
    return semantic.device_assert(cond, _unwrap(msg), mask)


def debug_barrier():
    """Synchronize all threads of the program (``__syncthreads``)."""
    return semantic.debug_barrier()


def assume(cond):
    """Accepted for Triton compatibility; kernelc ignores it."""
    return None


# -- sorting, permutations, gathers, histograms -----------------------------------------------


@_member
def sort(x, dim=None, descending=False):
    """Sort ``x`` along its last dimension (ascending unless ``descending``)."""
    return semantic.sort(x, dim, descending)


@_member
def topk(x, k, dim=None):
    """The ``k`` largest elements along the last dimension, largest first (shape ``[..., k]``)."""
    return semantic.sort(x, dim, True, k)


def bitonic_merge(x, dim=None, descending=False):
    """The merge stage of a bitonic sort along the last dimension: sorts ``x`` if it is bitonic."""
    return semantic.bitonic_merge(x, dim, descending)


@_member
def flip(x, dim=None):
    """Reverse ``x`` along ``dim`` (the last dimension by default)."""
    return semantic.flip(x, dim)


@_member
def gather(src, index, axis):
    """``out[..., i, ...] = src[..., index[..., i, ...], ...]`` along ``axis``; ``out`` has ``index``'s shape."""
    return semantic.gather(src, index, axis)


@_member
def histogram(input, num_bins, mask=None):
    """int32 counts of the values ``0 .. num_bins - 1`` in the 1-D integer tile ``input`` (masked-off lanes
    and values outside that range are not counted)."""
    return semantic.histogram(input, num_bins, mask)


def interleave(a, b):
    """Interleave ``a`` and ``b`` along their last dimension: ``[a0, b0, a1, b1, ...]``."""
    j = semantic.join(a, b)
    shape = j.shape
    return semantic.reshape(j, tuple(shape[:-2]) + (shape[-2] * 2,))


def swizzle2d(i, j, size_i, size_j, size_g):
    """Map the row-major index ``(i, j)`` of a ``size_i x size_j`` grid to grouped order: groups of
    ``size_g`` rows are walked column by column (the grouped tile order of matmul kernels)."""
    ij = i * size_j + j
    size_gj = size_g * size_j
    group_id = ij // size_gj
    off_i = group_id * size_g
    rows = minimum(size_i - off_i, size_g)
    ij = ij % size_gj
    return off_i + ij % rows, ij // rows


@device_function
def _or_combine(a, b):
    return a | b


@_member
def reduce_or(input, axis, keep_dims=False):
    input = semantic.to_tensor(input)
    if not input.dtype.is_int():
        raise TypeError(f"reduce_or() needs an integer tile, got {input.dtype}")
    return semantic.reduce(input, axis, _or_combine, keep_dims)


# -- arithmetic with Triton's function names --------------------------------------------------


def add(x, y, sanitize_overflow=True):
    """``x + y`` (``sanitize_overflow`` is accepted; kernelc never inserts overflow checks)."""
    return semantic.add(x, y)


def sub(x, y, sanitize_overflow=True):
    """``x - y`` (``sanitize_overflow`` is accepted; kernelc never inserts overflow checks)."""
    return semantic.sub(x, y)


def mul(x, y, sanitize_overflow=True):
    """``x * y`` (``sanitize_overflow`` is accepted; kernelc never inserts overflow checks)."""
    return semantic.mul(x, y)


# -- user functions per element, inline assembly ----------------------------------------------


def map_elementwise(scalar_fn, *args, pack=1):
    """Apply the ``@jit`` function ``scalar_fn`` to each element of the (broadcast) ``args``.

    ``scalar_fn`` sees scalars, so it may branch on their values (``if x > 0: ...``). The interpreter
    calls it once per element; compiled kernels trace it once into a region that each thread runs on
    each of its elements.
    """
    if _unwrap(pack) != 1:
        raise ValueError(f"map_elementwise() pack={_unwrap(pack)} is not supported by kernelc: use pack=1")
    from .core import current_builder
    args, shape = semantic._broadcast_all([_unwrap(a) for a in args])
    if not args:
        raise TypeError("map_elementwise() needs at least one tensor argument")
    return current_builder().map_elementwise(scalar_fn, args, shape)


def inline_asm_elementwise(asm, constraints, args, dtype, is_pure, pack):
    """Run the PTX ``asm`` once per element (``$0`` is the result, ``$1``.. the ``args``); GPU only, and
    with ``pack=1`` and one result dtype in kernelc."""
    return semantic.inline_asm(asm, constraints, list(_unwrap(args)), dtype, is_pure, pack)


# -- tensor descriptors and scaled dots ------------------------------------------------------


def load_tensor_descriptor(desc, offsets):
    """``desc.load(offsets)``."""
    return _unwrap(desc).load(offsets)


def store_tensor_descriptor(desc, offsets, value):
    """``desc.store(offsets, value)``."""
    return _unwrap(desc).store(offsets, value)


_SCALED_FORMATS = ("e2m1", "e4m3", "e5m2", "bf16", "fp16")


def _scaled_operand(x, scale, fmt, k_pack, side):
    """An operand of ``dot_scaled`` as fp32 values times its e8m0 scales, K along its contraction dim."""
    fmt = _unwrap(fmt)
    if fmt not in _SCALED_FORMATS:
        raise ValueError(f"dot_scaled() {side}_format must be one of {list(_SCALED_FORMATS)}, got {fmt!r}")
    if not _unwrap(k_pack):
        raise ValueError(f"dot_scaled() {side}_k_pack=False (fp4 packed along the non-K dimension) is not "
                         f"supported by kernelc")
    x = semantic.to_tensor(x)
    if len(x.shape) != 2:
        raise ValueError(f"dot_scaled() needs 2-D operands, got {side} of shape {x.shape}")
    kdim = 1 if side == "lhs" else 0
    if fmt == "e2m1":
        if x.dtype not in (T.uint8, T.int8):
            raise TypeError(f"dot_scaled() e2m1 operands are packed two per uint8, got {side} of {x.dtype}")
        x = x.to(T.uint8, bitcast=True)
        vals = []
        for nib in (x & 0xF, x >> 4):  # the element at even K is the low nibble
            n = nib.to(T.int32)
            e, m = (n >> 1) & 3, n & 1
            mag = where(e == 0, m, (2 + m) << maximum(e - 1, 0)).to(T.float32) * 0.5
            vals.append(where((n & 8) != 0, -mag, mag))
        j = semantic.join(vals[0], vals[1])  # [r, c, 2]: the pair sits next to each other along K
        if kdim == 1:
            v = semantic.reshape(j, (x.shape[0], 2 * x.shape[1]))
        else:
            v = semantic.reshape(semantic.trans(j, (0, 2, 1)), (2 * x.shape[0], x.shape[1]))
    elif fmt in ("e4m3", "e5m2"):
        want = T.float8e4nv if fmt == "e4m3" else T.float8e5
        if x.dtype in (T.uint8, T.int8):
            x = x.to(want, bitcast=True)
        if x.dtype != want:
            raise TypeError(f"dot_scaled() {fmt} operands must be {want} (or their uint8 bits), got {x.dtype}")
        v = x.to(T.float32)
    else:
        want = T.bfloat16 if fmt == "bf16" else T.float16
        if x.dtype != want:
            raise TypeError(f"dot_scaled() {fmt} operands must be {want}, got {side} of {x.dtype}")
        v = x.to(T.float32)
    scale = _unwrap(scale)
    if scale is None:
        return v
    scale = semantic.to_tensor(scale)
    rows, k = (v.shape[0], v.shape[1]) if kdim == 1 else (v.shape[1], v.shape[0])
    if list(scale.shape) != [rows, k // 32] or scale.dtype not in (T.uint8, T.int8):
        raise ValueError(f"dot_scaled() {side}_scale must be uint8 of shape [{rows}, {k // 32}] (one e8m0 "
                         f"exponent per 32 elements of K), got {scale.type}")
    s = scale.to(T.uint8, bitcast=True).to(T.int32)
    f = (s << 23).to(T.float32, bitcast=True)  # 2 ** (s - 127) for s in 1..254
    f = where(s == 0, 2.0 ** -127, where(s == 255, float("nan"), f))
    f = semantic.reshape(semantic.broadcast_to(semantic.expand_dims(f, 2), (rows, k // 32, 32)), (rows, k))
    return v * (f if kdim == 1 else semantic.trans(f, None))


def dot_scaled(lhs, lhs_scale, lhs_format, rhs, rhs_scale, rhs_format, acc=None, fast_math=False,
               lhs_k_pack=True, rhs_k_pack=True, out_dtype=T.float32):
    """``(lhs * 2**(lhs_scale - 127)) @ (rhs * 2**(rhs_scale - 127)) + acc`` for microscaled operands.

    Formats: "e2m1" (fp4, two per uint8 along K, low nibble first), "e4m3", "e5m2", "bf16", "fp16";
    scales are uint8 e8m0 exponents, one per 32 elements of K (``[M, K // 32]`` and ``[N, K // 32]``),
    or None. kernelc upcasts both operands to fp32 (exact: every format fits TF32's mantissa) and runs
    a TF32 ``kl.dot``, as Triton does on GPUs without native microscaling.
    """
    a = _scaled_operand(lhs, lhs_scale, lhs_format, lhs_k_pack, "lhs")
    b = _scaled_operand(rhs, rhs_scale, rhs_format, rhs_k_pack, "rhs")
    out = semantic.dot(a, b, acc, "tf32", None, None, T.float32)
    out_dtype = semantic._as_dtype(out_dtype)
    return out if out_dtype == T.float32 else out.to(out_dtype)


# -- tensor methods with Triton's names (``ptr.store(v)``, ``x.cdiv(4)``, ...) ----------------------

for _fn in (associative_scan, reduce, cdiv, atomic_add, atomic_and, atomic_cas, atomic_max, atomic_min,
            atomic_or, atomic_xchg, atomic_xor, store, advance):
    _member(_fn)
_member(lambda x, y: semantic.logical_and(x, y), "logical_and")
_member(lambda x, y: semantic.logical_or(x, y), "logical_or")


@_member
def item(x):
    """The single element of a one-element tile, as a scalar."""
    x = semantic.to_tensor(x)
    if not x.type.is_block():
        return x
    if x.numel != 1:
        raise ValueError(f"item() needs a tile with one element, got shape {x.shape}")
    return semantic.reduce(x, None, _sum_combine)


del _fn
