"""kernelc.language: the tile language (``import kernelc.language as kl``).

Names and semantics follow ``triton.language``: a Triton kernel runs after
``import kernelc as triton; import kernelc.language as tl``.

Example::

    import kernelc
    import kernelc.language as kl

    @kernelc.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: kl.constexpr):
        offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
        mask = offs < n
        x = kl.load(x_ptr + offs, mask=mask)
        y = kl.load(y_ptr + offs, mask=mask)
        kl.store(out_ptr + offs, x + y, mask=mask)
"""
from . import extra, math, random, target_info  # noqa: F401
from .core import DeviceFunction, constexpr, range, static_range, tensor  # noqa: F401
from .blocks import block_pointer, tensor_descriptor  # noqa: F401
from .bulk import bulk_add, staging_offsets  # noqa: F401
from .cache import prefetch  # noqa: F401
from .dtypes import (bfloat16, block_type, dtype, float8e4b8, float8e4b15, float8e4nv, float8e5,  # noqa: F401
                     float8e5b16, float16, float32, float64, int1, int8, int16, int32, int64, pointer_type,
                     tensor_descriptor_type, uint8, uint16, uint32, uint64)
from .random import (pair_uniform_to_normal, philox, philox_impl, rand, rand4x, randint, randint4x,  # noqa: F401
                     randn, randn4x, uint_to_uniform_float)
from .compat import (TRITON_MAX_TENSOR_NUMEL, condition, const, constexpr_type, pi32_t, slice,  # noqa: F401
                     str_to_ty, tuple, tuple_type)
from .standard import (PropagateNan, abs, add, advance, arange, argmax, argmin, assume, associative_scan, atomic_add,  # noqa: F401
                       atomic_and, atomic_cas, atomic_max, atomic_min, atomic_or, atomic_xchg, atomic_xor,
                       bitonic_merge, broadcast, broadcast_to, cast, cat, cdiv, ceil, clamp, cos, cumprod,
                       cumsum, debug_barrier, device_assert, device_print, div_rn, dot, dot_scaled, erf, exp,
                       exp2, expand_dims, fdiv, flip, floor, fma, full, full_like, gather, histogram,
                       inline_asm_elementwise, interleave, join, load, load_tensor_descriptor, log, log2,
                       make_block_ptr, make_tensor_descriptor, map_elementwise, max, max_constancy,
                       max_contiguous, maximum, min, minimum, mul, multiple_of, num_programs, permute,
                       program_id, ravel, reduce, reduce_or, reshape, rsqrt, sigmoid, sin, softmax, sort,
                       split, sqrt, sqrt_rn, static_assert, static_print, store, store_tensor_descriptor, sub,
                       sum, swizzle2d, to_tensor, topk, trans, umulhi, view, where, xor_sum, zeros, zeros_like)

# Triton spellings of a few aliases.
float8e4m3fn = float8e4nv
float8e5m2 = float8e5
bool_ = int1
void = None
