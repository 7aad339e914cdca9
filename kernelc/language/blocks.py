"""Block pointers and tensor descriptors: tiles of a strided n-D tensor at runtime offsets.

Two Triton features, one address rule. A *block pointer* (``kl.make_block_ptr``) and a *tensor
descriptor* (``kl.make_tensor_descriptor``, or a host ``kernelc.TensorDescriptor`` argument) both
describe a tensor in global memory by a base pointer, a shape and strides (in elements), and
access a ``block_shape`` tile of it at element ``offsets``::

    address[i_0, ..., i_n-1] = base + sum_d (offsets[d] + i_d) * strides[d]
    in bounds                = 0 <= offsets[d] + i_d < shape[d]   for every checked dim d

Out-of-bounds elements read as the padding (zero, or NaN) and are not written. ``tile_addresses``
is that rule, written once against the active builder:

- block pointers use it directly, so they are plain masked loads/stores in the tile IR and in the
  interpreter (no IR type of their own; the frontend threads their parts through loops);
- tensor descriptors are IR values of ``tensordesc<...>`` type with their own ops
  (``make_tensor_descriptor``, ``descriptor_load``, ``descriptor_store``), so a backend can give
  them a dedicated lowering (Hopper TMA); ``generic_descriptor_load``/``_store`` are their lowering
  through ``tile_addresses``, used by the compiler pass ``passes/lower_descriptors.py`` and by the
  interpreter.

Example::

    a_bp = kl.make_block_ptr(a_ptr, shape=(M, K), strides=(stride_am, stride_ak),
                             offsets=(pid_m * BM, 0), block_shape=(BM, BK), order=(1, 0))
    for k in range(0, kl.cdiv(K, BK)):
        a = kl.load(a_bp, boundary_check=(0, 1), padding_option="zero")
        a_bp = kl.advance(a_bp, (0, BK))

    desc = kl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    x = desc.load([pid_m * BM, pid_n * BN])
"""
from __future__ import annotations

import builtins
from typing import List, Optional, Sequence

from . import dtypes as T
from . import semantic
from .core import _unwrap, aggregate, current_builder, tensor
from .dtypes import block_type, pointer_type, tensor_descriptor_type

MAX_DESCRIPTOR_RANK = 5  # TMA's limit; Triton's too
PADDING_OPTIONS = ("", "zero", "nan")  # "" (Triton's default) reads out-of-bounds elements as zero here


# ---------------------------------------------------------------------------------------------
# Checks shared by both features (messages name the function the user called)
# ---------------------------------------------------------------------------------------------


def _as_list(x, what) -> list:
    x = _unwrap(x)
    if isinstance(x, tensor):
        raise TypeError(f"{what} must be a tuple or list, got a tensor")
    if isinstance(x, (tuple, list)):
        return [_unwrap(v) for v in x]
    return [x]


def _block_shape(block_shape, what) -> tuple:
    dims = _as_list(block_shape, f"{what} block_shape")
    for d in dims:
        if isinstance(d, tensor):
            raise TypeError(f"{what} block_shape must be compile-time constants (kl.constexpr), got a runtime tensor")
        if not isinstance(d, int) or isinstance(d, bool):
            raise TypeError(f"{what} block_shape must be integers, got {d!r}")
    if not dims:
        raise ValueError(f"{what} needs at least one dimension")
    bad = [d for d in dims if d < 1 or d & (d - 1)]
    if bad:
        raise ValueError(f"{what} block_shape must be powers of two, got {dims} ({bad[0]} is not)")
    numel = 1
    for d in dims:
        numel *= d
    if numel > 1 << 20:
        raise ValueError(f"{what} block_shape {dims} has {numel} elements; tiles are limited to 2**20 elements")
    return tuple(dims)


def _same_length(what, ndim, **lists):
    for name, xs in lists.items():
        if len(xs) != ndim:
            got = ", ".join(f"{n}={len(v)}" for n, v in lists.items())
            raise ValueError(f"{what} got {len(xs)} {name} for a {ndim}-D block_shape; shape, strides, "
                             f"offsets and order need one entry per dimension ({got})")


def _scalar_int(x, dt, what) -> "tensor | int":
    """A shape/stride/offset entry: a Python int stays an int, a scalar integer tensor is cast to ``dt``."""
    x = _unwrap(x)
    if isinstance(x, bool) or not isinstance(x, (int, tensor)):
        raise TypeError(f"{what} must be an integer, got {x!r}")
    if isinstance(x, int):
        return x
    if x.type.is_block():
        raise TypeError(f"{what} must be a scalar, got a tile of shape {x.shape}")
    if not x.dtype.is_int() or x.dtype.is_ptr():
        raise TypeError(f"{what} must be an integer, got {x.dtype}")
    return semantic.cast(x, dt)


def _offset(x, what) -> tensor:
    """An element offset of a block: a 32-bit integer tensor (Triton's rule)."""
    x = _unwrap(x)
    if isinstance(x, tensor) and x.dtype.is_int() and x.dtype.int_bitwidth == 64:
        raise TypeError(f"{what} must be a 32-bit integer, got {x.dtype}; add .to(kl.int32)")
    v = _scalar_int(x, T.int32, what)
    if isinstance(v, int):
        if not -2**31 <= v < 2**31:
            raise ValueError(f"{what} {v} does not fit in 32 bits")
        return semantic.to_tensor(v)
    return v


def _offsets(offsets, ndim, what) -> List[tensor]:
    offs = _as_list(offsets, f"{what} offsets")
    if len(offs) != ndim:
        raise ValueError(f"{what} got {_count(len(offs), 'offset')} for a {ndim}-D block; pass one offset per dimension")
    return [_offset(o, f"{what} offset {d}") for d, o in enumerate(offs)]


def _padding(padding_option, elt, what) -> str:
    p = _unwrap(padding_option)
    p = "" if p is None else p
    if p not in PADDING_OPTIONS:
        raise ValueError(f"{what} padding_option must be one of {list(PADDING_OPTIONS)}, got {p!r}")
    if p == "nan" and not elt.is_floating():
        raise ValueError(f"{what} padding_option='nan' needs floating-point elements, got {elt}")
    return p


def _count(n, word) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _is_zero(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x == 0


def _is_one(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x == 1


# ---------------------------------------------------------------------------------------------
# The address rule
# ---------------------------------------------------------------------------------------------


def _along(x: tensor, d: int, ndim: int) -> tensor:
    """A 1-D tile placed along dim ``d`` of an ``ndim``-D tile (unit size elsewhere)."""
    axes = [a for a in builtins.range(ndim) if a != d]
    return semantic.expand_dims(x, axes) if axes else x


def tile_addresses(base: tensor, shape: Sequence, strides: Sequence, offsets: Sequence,
                   block_shape: Sequence[int], check: Sequence[int]):
    """Pointers of a ``block_shape`` tile at ``offsets`` and the in-bounds mask over the dims in
    ``check`` (None when no dim is checked).

    ``shape``/``strides`` entries are scalar integer tensors or Python ints (a stride of 1 adds the
    index without a multiply, so the contiguity of the last dim is plain to see); ``offsets`` are
    scalar int32 tensors or 0. Indices stay 32-bit; products with strides are 64-bit, so a tile of a
    tensor with more than 2**31 elements addresses correctly.
    """
    ndim = len(block_shape)
    ptr, mask = base, None
    for d in builtins.range(ndim):
        idx = semantic.arange(0, block_shape[d])
        if not _is_zero(offsets[d]):
            idx = semantic.add(offsets[d], idx)
        stride = strides[d]
        step = idx if _is_one(stride) else semantic.mul(semantic.cast(idx, T.int64), stride)
        ptr = semantic.add(ptr, _along(step, d, ndim))
        if d in check:
            inside = semantic.and_(semantic.greater_equal(idx, 0), semantic.less(idx, shape[d]))
            inside = _along(inside, d, ndim)
            mask = inside if mask is None else semantic.and_(mask, inside)
    return ptr, mask


# ---------------------------------------------------------------------------------------------
# Block pointers
# ---------------------------------------------------------------------------------------------


class block_pointer(aggregate):
    """A pointer to a ``block_shape`` tile of an n-D tensor (``kl.make_block_ptr``).

    Its runtime parts are the base pointer, the shape and strides given as tensors and the
    offsets; Python ints among shape/strides stay compile-time constants.
    """

    _kc_what = "block pointer"

    def __init__(self, base: tensor, shape, strides, offsets, block_shape, order):
        self.base = base
        self.shape = tuple(shape)
        self.strides = tuple(strides)
        self.offsets = tuple(offsets)
        self.block_shape = tuple(block_shape)
        self.order = tuple(order)

    @property
    def element_ty(self):
        return self.base.dtype.element_ty

    @property
    def type(self):
        return pointer_type(block_type(self.element_ty, self.block_shape))

    dtype = type  # Triton: a block pointer's dtype is pointer<block<...>>

    def __repr__(self):
        return f"block_pointer<{self.element_ty}{list(self.block_shape)}>"

    # -- the aggregate protocol -------------------------------------------------------------
    def _fields(self):
        return [self.base, *self.shape, *self.strides, *self.offsets]

    def _kc_parts(self) -> list:
        return [x for x in self._fields() if isinstance(x, tensor)]

    def _kc_structure(self):
        static = tuple(None if isinstance(x, tensor) else x for x in self._fields())
        return (block_pointer, self.base.type, self.block_shape, self.order, static)

    def _kc_rebuild(self, parts) -> "block_pointer":
        it = iter(parts)
        f = [next(it) if isinstance(x, tensor) else x for x in self._fields()]
        n = len(self.block_shape)
        return block_pointer(f[0], f[1:1 + n], f[1 + n:1 + 2 * n], f[1 + 2 * n:], self.block_shape, self.order)


def make_block_ptr(base, shape, strides, offsets, block_shape, order) -> block_pointer:
    """Triton's ``tl.make_block_ptr``: a pointer to the ``block_shape`` tile at ``offsets`` of the
    tensor (``shape``, ``strides`` in elements) starting at ``base``. ``order`` (the dims from fastest
    to slowest varying) is checked for Triton compatibility; access layouts come from the compiler's
    analysis of the strides."""
    what = "make_block_ptr()"
    base = _unwrap(base)
    if not isinstance(base, tensor) or not base.dtype.is_ptr() or base.type.is_block():
        got = base.type if isinstance(base, tensor) else type(base).__name__
        raise TypeError(f"{what} base must be a scalar pointer (e.g. a pointer argument), got {got}")
    bs = _block_shape(block_shape, what)
    ndim = len(bs)
    shape, strides = _as_list(shape, f"{what} shape"), _as_list(strides, f"{what} strides")
    offsets, order = _as_list(offsets, f"{what} offsets"), _as_list(order, f"{what} order")
    _same_length(what, ndim, shape=shape, strides=strides, offsets=offsets, order=order)
    if sorted(order) != list(builtins.range(ndim)):
        raise ValueError(f"{what} order must be a permutation of {list(builtins.range(ndim))}, got {order}")
    shape = [_scalar_int(s, T.int64, f"{what} shape[{d}]") for d, s in enumerate(shape)]
    strides = [_scalar_int(s, T.int64, f"{what} strides[{d}]") for d, s in enumerate(strides)]
    offs = [_offset(o, f"{what} offsets[{d}]") for d, o in enumerate(offsets)]
    return block_pointer(base, shape, strides, offs, bs, tuple(order))


def advance(base, offsets) -> block_pointer:
    """Triton's ``tl.advance``: ``base`` moved by ``offsets`` elements (one per dimension)."""
    bp = _unwrap(base)
    if not isinstance(bp, block_pointer):
        raise TypeError(f"advance() needs a block pointer (from kl.make_block_ptr), got {_kind(bp)}")
    deltas = _as_list(offsets, "advance() offsets")
    ndim = len(bp.block_shape)
    if len(deltas) != ndim:
        raise ValueError(f"advance() got {_count(len(deltas), 'offset')} for a {ndim}-D block pointer; "
                         f"pass one offset per dimension")
    new = []
    for d, (cur, delta) in enumerate(zip(bp.offsets, deltas)):
        # a constant 0 keeps the very same value: the compiler then sees this dim does not move
        new.append(cur if _is_zero(delta) else semantic.add(cur, _offset(delta, f"advance() offset {d}")))
    return block_pointer(bp.base, bp.shape, bp.strides, new, bp.block_shape, bp.order)


def _kind(x) -> str:
    if isinstance(x, tensor):
        return str(x.type)
    return type(x).__name__


def _boundary_dims(boundary_check, ndim, what) -> tuple:
    dims = _unwrap(boundary_check)
    if dims is None:
        return ()
    dims = _as_list(dims, f"{what} boundary_check")
    for d in dims:
        if not isinstance(d, int) or isinstance(d, bool):
            raise TypeError(f"{what} boundary_check must list dimension numbers, got {d!r}")
        if not 0 <= d < ndim:
            raise ValueError(f"{what} boundary_check dimension {d} is out of range for a {ndim}-D block "
                             f"pointer (dimensions are 0..{ndim - 1})")
    if len(set(dims)) != len(dims):
        raise ValueError(f"{what} boundary_check lists a dimension twice: {dims}")
    return tuple(sorted(dims))


def load_block(ptr: block_pointer, mask=None, other=None, boundary_check=(), padding_option="",
               cache_modifier="", eviction_policy="", volatile=False) -> tensor:
    """``kl.load`` of a block pointer: the tile, with out-of-bounds elements of the checked dims
    reading as the padding (zero unless ``padding_option="nan"``)."""
    if _unwrap(mask) is not None or _unwrap(other) is not None:
        raise ValueError("load() of a block pointer takes boundary_check= and padding_option=, not mask= or other=")
    check = _boundary_dims(boundary_check, len(ptr.block_shape), "load()")
    pad = _padding(padding_option, ptr.element_ty, "load()")
    desc = _as_descriptor(ptr, check, pad)
    if desc is not None:
        return descriptor_load(desc, list(ptr.offsets))
    addrs, m = tile_addresses(ptr.base, ptr.shape, ptr.strides, ptr.offsets, ptr.block_shape, check)
    other = None if m is None else (float("nan") if pad == "nan" else 0)
    return semantic.load(addrs, m, other, cache_modifier, eviction_policy, volatile)


def store_block(ptr: block_pointer, value, mask=None, boundary_check=(), cache_modifier="",
                eviction_policy="") -> None:
    """``kl.store`` to a block pointer: elements outside the checked dims are not written."""
    if _unwrap(mask) is not None:
        raise ValueError("store() to a block pointer takes boundary_check=, not mask=")
    check = _boundary_dims(boundary_check, len(ptr.block_shape), "store()")
    value = _block_value(value, ptr.block_shape, ptr.element_ty, "store()")
    desc = _as_descriptor(ptr, check, "")
    if desc is not None:
        return descriptor_store(desc, list(ptr.offsets), value)
    addrs, m = tile_addresses(ptr.base, ptr.shape, ptr.strides, ptr.offsets, ptr.block_shape, check)
    return semantic.store(addrs, value, m, cache_modifier, eviction_policy)


def _as_descriptor(ptr: block_pointer, check, pad: str) -> Optional["tensor_descriptor"]:
    """The block pointer as a tensor descriptor, where the builder asks for that (a target with TMA:
    ``IRBuilder.block_pointers_as_descriptors``) and it means the same access: every dim bounds-checked
    (a descriptor checks them all), the last stride the constant 1, a shape that fits the descriptor's
    32 bits, a type a descriptor can hold. The compiler then copies it by TMA where it can and lowers
    it back to the same masked access where it cannot; None keeps the block pointer's own lowering."""
    nd = len(ptr.block_shape)
    if not getattr(current_builder(), "block_pointers_as_descriptors", False) or tuple(check) != tuple(builtins.range(nd)):
        return None
    if not _is_one(ptr.strides[-1]) or nd > MAX_DESCRIPTOR_RANK or ptr.element_ty.is_int1():
        return None
    shapes = [_int32_shape(s) for s in ptr.shape]
    if any(s is None for s in shapes):
        return None
    ty = tensor_descriptor_type(block_type(ptr.element_ty, ptr.block_shape), "nan" if pad == "nan" else "zero")
    strides = [_as_scalar(s, T.int64) for s in ptr.strides[:-1]]
    return _make_descriptor(ptr.base, shapes, strides, ty)


def _int32_shape(s) -> Optional[tensor]:
    """A block pointer's (64-bit) extent as the 32-bit value a descriptor keeps, if it provably fits:
    a small constant, or the widening of a 32-bit value (an ``i32`` argument)."""
    if isinstance(s, int):
        return semantic.to_tensor(s) if 0 <= s < 2**31 else None
    if s.dtype == T.int32:
        return s
    src = s.handle.op
    if src is not None and src.name == "cast" and src.operands[0].type == T.int32:
        return tensor(src.operands[0], T.int32)
    return None


def _block_value(value, block_shape, elt, what) -> tensor:
    value = semantic.to_tensor(value)
    if value.type.is_block() and len(value.shape) > len(block_shape):
        raise ValueError(f"{what} value has shape {value.shape} but the block is {list(block_shape)}")
    try:
        value = semantic.broadcast_to(value, block_shape)
    except ValueError:
        raise ValueError(f"{what} value has shape {value.shape} but the block is {list(block_shape)}") from None
    return semantic.cast(value, elt)


# ---------------------------------------------------------------------------------------------
# Tensor descriptors
# ---------------------------------------------------------------------------------------------


class tensor_descriptor(aggregate):
    """A tensor in global memory read and written a block at a time (Triton's ``tl.tensor_descriptor``).

    Made by ``kl.make_tensor_descriptor`` or passed in as a host ``kernelc.TensorDescriptor``.
    ``desc.load(offsets)`` returns the ``block_shape`` tile at element ``offsets``; elements outside
    the tensor read as zero (NaN with padding "nan"). ``desc.store(offsets, value)`` writes only the
    elements inside. ``shape`` are int32 scalars, ``strides`` int64 scalars (the last is 1).
    """

    _kc_carriable = False
    _kc_what = "tensor descriptor"

    def __init__(self, handle, shape, strides, type: tensor_descriptor_type):
        self.handle = handle
        self.shape = tuple(shape)
        self.strides = tuple(strides)
        self.type = type
        self._value = tensor(handle, type)  # one object, so the frontend sees it unchanged

    @property
    def block_type(self) -> block_type:
        return self.type.block_type

    @property
    def block_shape(self) -> list:
        return list(self.type.block_shape)

    @property
    def dtype(self):
        return self.type.element_ty

    @property
    def ndim(self) -> int:
        return self.type.ndim

    def load(self, offsets) -> tensor:
        """The ``block_shape`` tile at element ``offsets`` (one int32 per dimension)."""
        return descriptor_load(self, offsets)

    def store(self, offsets, value) -> None:
        """Write ``value`` (cast to the descriptor's dtype) to the tile at ``offsets``."""
        return descriptor_store(self, offsets, value)

    def __repr__(self):
        return f"tensor_descriptor<{self.dtype}{self.block_shape}>"

    def _unsupported(self, what):
        raise TypeError(f"tensor_descriptor.{what} is not supported by kernelc: use desc.load/desc.store/"
                        f"desc.atomic_add, or pointer tiles with kl.load/kl.store/kl.atomic_* for gathers, "
                        f"scatters and other atomics")

    def gather(self, *args, **kwargs):
        self._unsupported("gather")

    def scatter(self, *args, **kwargs):
        self._unsupported("scatter")

    def atomic_add(self, offsets, value) -> None:
        """Add ``value`` (cast to the descriptor's dtype) into the tile at ``offsets``, element by element
        and atomically; elements outside the tensor are not touched. On sm_90a a bulk tensor reduction
        from shared memory (``cp.reduce.async.bulk.tensor``), elsewhere relaxed atomics. The adds of one
        program are unordered against its later reads of the same memory: read the sums after the kernel."""
        return descriptor_atomic_add(self, offsets, value)

    def _unsupported_atomic(self, *args, **kwargs):
        self._unsupported("atomic_min/max/and/or/xor")

    atomic_min = atomic_max = atomic_and = atomic_or = atomic_xor = _unsupported_atomic

    # -- the aggregate protocol -------------------------------------------------------------
    def _kc_parts(self) -> list:
        return [self._value, *(x for x in self.shape + self.strides if isinstance(x, tensor))]

    def _kc_structure(self):
        return (tensor_descriptor, self.type)

    def _kc_rebuild(self, parts) -> "tensor_descriptor":
        n = self.ndim
        return tensor_descriptor(parts[0].handle, parts[1:1 + n], list(parts[1 + n:]) + [1], self.type)


def _descriptor_type(elt, block_shape, padding, what) -> tensor_descriptor_type:
    if elt.is_int1():
        raise TypeError(f"{what} does not support bool tensors; view them as kl.int8/uint8")
    if padding == "nan" and not elt.is_floating():
        raise ValueError(f"{what} padding_option='nan' needs floating-point elements, got {elt}")
    return tensor_descriptor_type(block_type(elt, block_shape), padding)


def make_tensor_descriptor(base, shape, strides, block_shape, padding_option="zero") -> tensor_descriptor:
    """Triton's ``tl.make_tensor_descriptor``: a descriptor of the tensor at ``base`` with ``shape``
    and ``strides`` (in elements; the last stride must be 1) accessed in ``block_shape`` tiles."""
    what = "make_tensor_descriptor()"
    base = _unwrap(base)
    if not isinstance(base, tensor) or not base.dtype.is_ptr() or base.type.is_block():
        got = base.type if isinstance(base, tensor) else type(base).__name__
        raise TypeError(f"{what} base must be a scalar pointer (e.g. a pointer argument), got {got}")
    shape, strides = _as_list(shape, f"{what} shape"), _as_list(strides, f"{what} strides")
    ndim = len(shape)
    if not 1 <= ndim <= MAX_DESCRIPTOR_RANK:
        raise ValueError(f"{what} supports 1 to {MAX_DESCRIPTOR_RANK} dimensions, got {ndim}")
    bs = _block_shape(block_shape, what)
    if len(strides) != ndim or len(bs) != ndim:
        raise ValueError(f"{what} got {ndim} shape entries, {len(strides)} strides and a {len(bs)}-D "
                         f"block_shape; they need one entry per dimension")
    last = strides[-1]
    if isinstance(last, tensor) or not _is_one(last):
        shown = f"a runtime {last.dtype}" if isinstance(last, tensor) else repr(last)
        raise ValueError(f"{what} needs the last stride to be the constant 1 (the last dimension must be "
                         f"contiguous), got {shown}")
    padding = _unwrap(padding_option) or "zero"
    if padding not in T.PADDING_OPTIONS:
        raise ValueError(f"{what} padding_option must be one of {list(T.PADDING_OPTIONS)}, got {padding!r}")
    ty = _descriptor_type(base.dtype.element_ty, bs, padding, what)
    shapes = [_as_scalar(_scalar_int(s, T.int32, f"{what} shape[{d}]"), T.int32) for d, s in enumerate(shape)]
    strd = [_as_scalar(_scalar_int(s, T.int64, f"{what} strides[{d}]"), T.int64)
            for d, s in enumerate(strides[:-1])]
    return _make_descriptor(base, shapes, strd, ty)


def _as_scalar(x, dt) -> tensor:
    return x if isinstance(x, tensor) else semantic.cast(semantic.to_tensor(x), dt)


def _make_descriptor(base, shapes, strides, ty, host_arg: Optional[str] = None) -> tensor_descriptor:
    attrs = {"padding": ty.padding}
    if host_arg is not None:
        attrs["host_arg"] = host_arg
    operands = [base.handle] + [s.handle for s in shapes] + [s.handle for s in strides]
    handle = current_builder().create("make_tensor_descriptor", operands, ty, **attrs)
    return tensor_descriptor(handle, shapes, list(strides) + [1], ty)


def host_descriptor(ty: tensor_descriptor_type, base: tensor, shapes, strides, name: str) -> tensor_descriptor:
    """The kernel-side value of host descriptor parameter ``name`` from its flattened parts (see
    ``kernelc/compiler/abi.py``): base pointer, int32 shapes, int64 strides but the last."""
    return _make_descriptor(base, list(shapes), list(strides), ty, host_arg=name)


def _descriptor(desc, what) -> tensor_descriptor:
    desc = _unwrap(desc)
    if not isinstance(desc, tensor_descriptor):
        raise TypeError(f"{what} needs a tensor descriptor, got {_kind(desc)}")
    return desc


def descriptor_load(desc, offsets) -> tensor:
    desc = _descriptor(desc, "load()")
    offs = _offsets(offsets, desc.ndim, "tensor descriptor load()")
    ty = desc.block_type
    h = current_builder().create("descriptor_load", [desc.handle] + [o.handle for o in offs], ty,
                                 block_shape=tuple(desc.type.block_shape), padding=desc.type.padding)
    return tensor(h, ty)


def descriptor_store(desc, offsets, value) -> None:
    desc = _descriptor(desc, "store()")
    offs = _offsets(offsets, desc.ndim, "tensor descriptor store()")
    value = _block_value(value, desc.type.block_shape, desc.dtype, "tensor descriptor store()")
    current_builder().create("descriptor_store", [desc.handle, value.handle] + [o.handle for o in offs], None,
                             block_shape=tuple(desc.type.block_shape))
    return None


# element types desc.atomic_add takes: those a bulk tensor reduction adds (PTX: .f32 .f16 .bf16 .u32 .s32)
REDUCE_ADD_TYPES = ("fp32", "fp16", "bf16", "int32", "uint32")


def descriptor_atomic_add(desc, offsets, value) -> None:
    desc = _descriptor(desc, "atomic_add()")
    if desc.dtype.name not in REDUCE_ADD_TYPES:
        raise TypeError(f"tensor descriptor atomic_add() adds into fp32, fp16, bf16, i32 and u32 tensors, "
                        f"got a {desc.dtype} descriptor")
    offs = _offsets(offsets, desc.ndim, "tensor descriptor atomic_add()")
    value = _block_value(value, desc.type.block_shape, desc.dtype, "tensor descriptor atomic_add()")
    current_builder().create("descriptor_reduce", [desc.handle, value.handle] + [o.handle for o in offs], None,
                             block_shape=tuple(desc.type.block_shape), kind="add")
    return None


# -- the generic lowering of descriptor ops (compiler pass and interpreter) ---------------------


def generic_descriptor_load(ty: tensor_descriptor_type, base: tensor, shapes, strides, offsets) -> tensor:
    """``descriptor_load`` as a masked load: out-of-bounds elements take the padding (TMA semantics).
    ``strides`` are the descriptor's strides but the last (which is 1)."""
    nd = ty.ndim
    addrs, m = tile_addresses(base, list(shapes), list(strides) + [1], list(offsets), ty.block_shape,
                              builtins.range(nd))
    return semantic.load(addrs, m, float("nan") if ty.padding == "nan" else 0)


def generic_descriptor_store(ty: tensor_descriptor_type, base: tensor, shapes, strides, offsets, value: tensor) -> None:
    """``descriptor_store`` as a masked store: out-of-bounds elements are not written."""
    nd = ty.ndim
    addrs, m = tile_addresses(base, list(shapes), list(strides) + [1], list(offsets), ty.block_shape,
                              builtins.range(nd))
    semantic.store(addrs, value, m)


def generic_descriptor_reduce(ty: tensor_descriptor_type, base: tensor, shapes, strides, offsets, value: tensor,
                              kind: str = "add") -> None:
    """``descriptor_reduce`` as masked relaxed atomics: out-of-bounds elements are not touched (only
    atomicity is promised, like the bulk reduction's)."""
    nd = ty.ndim
    addrs, m = tile_addresses(base, list(shapes), list(strides) + [1], list(offsets), ty.block_shape,
                              builtins.range(nd))
    semantic.atomic_rmw(kind, addrs, value, m, sem="relaxed")
