"""Kernel arguments: the interpreter's argument wrapping.

Which host element types a kernel accepts (``kl_dtype_of``) is :mod:`kernelc.language.host_types`, shared with
the CUDA runtime and ``TensorDescriptor``.

Wrapping (interpreter only): array-likes become pointer scalars into the launch's
:class:`~kernelc.runtime.interpreter.memory.Memory`; Python ``int`` becomes ``int32`` when it fits,
else ``int64`` (``uint64`` from ``2**63``), ``float`` -> ``fp32``, ``bool`` -> ``int1``, ``None`` stays
``None``, numpy scalars keep their dtype; a host ``TensorDescriptor`` becomes a ``kl.tensor_descriptor``
(``descriptors.py``).
"""
from __future__ import annotations

import numpy as np

from ...language import dtypes as T
from ...language.core import tensor
from ...language.host_types import ArgumentError, is_torch_object, kl_dtype_of  # noqa: F401 (re-exported)
from . import numerics

FP32_MAX = float(np.finfo(np.float32).max)
_INT_RANGES = ((-2**31, 2**31, T.int32), (-2**63, 2**63, T.int64), (2**63, 2**64, T.uint64))


def is_array_like(obj) -> bool:
    """Arguments passed as pointers: numpy arrays and torch tensors (0-d ones too, as in Triton)."""
    return isinstance(obj, np.ndarray) or (is_torch_object(obj) and hasattr(obj, "untyped_storage"))


def int_type(v: int) -> T.dtype:
    for lo, hi, ty in _INT_RANGES:
        if lo <= v < hi:
            return ty
    raise ArgumentError(f"integer argument {v} does not fit in 64 bits")


def scalar_tensor(value, ty) -> tensor:
    return tensor(numerics.constant(value, ty), ty)


def _is_descriptor(value) -> bool:
    from ...tools.tensor_descriptor import TensorDescriptor
    return isinstance(value, TensorDescriptor)


def wrap_arg(value, name: str, memory):
    """The kernel-side value of one non-constexpr argument."""
    if value is None or isinstance(value, tensor):
        return value
    if _is_descriptor(value):
        from .descriptors import wrap_descriptor
        return wrap_descriptor(value, name, memory, ArgumentError)
    if is_array_like(value):
        elt = kl_dtype_of(value)
        ptr = memory.map(value, name, elt)
        return tensor(np.array(ptr, np.int64), T.pointer_type(elt))
    if isinstance(value, (bool, np.bool_)):
        return scalar_tensor(bool(value), T.int1)
    if isinstance(value, int):
        return scalar_tensor(value, int_type(value))
    if isinstance(value, float):
        if value != value or abs(value) <= FP32_MAX or value in (float("inf"), float("-inf")):
            return scalar_tensor(value, T.float32)
        raise ArgumentError(f"argument '{name}' = {value!r} does not fit in fp32 (Python floats are passed as "
                            "fp32); pass a numpy.float64 scalar or a tensor for a wider value")
    if isinstance(value, np.generic):
        ty = kl_dtype_of(value.dtype)
        return tensor(np.asarray(value).astype(numerics.np_dtype(ty)), ty)
    raise ArgumentError(f"argument '{name}' must be a tensor, an array, a number or None, "
                        f"got {type(value).__name__}")
