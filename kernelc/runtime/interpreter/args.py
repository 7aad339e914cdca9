"""Kernel arguments: the host dtype -> kernelc dtype table and the interpreter's argument wrapping.

``TORCH_TO_KL`` / ``NUMPY_TO_KL`` are the single source of truth for which host element types a kernel
accepts (the CUDA runtime uses the same table). ``kl_dtype_of`` maps a torch dtype, numpy dtype or an
array/tensor to its kernelc element type.

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
from . import numerics

# torch dtype name (``str(torch.float16)`` without ``torch.``) -> kernelc dtype name.
TORCH_TO_KL = {
    "bool": "int1",
    "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
    "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
    "float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64",
    "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5",
}
# numpy / ml_dtypes dtype name -> kernelc dtype name.
NUMPY_TO_KL = dict(TORCH_TO_KL)

FP32_MAX = float(np.finfo(np.float32).max)
_INT_RANGES = ((-2**31, 2**31, T.int32), (-2**63, 2**63, T.int64), (2**63, 2**64, T.uint64))


class ArgumentError(TypeError):
    """An argument the kernel cannot take (``launch`` turns it into a CompilationError)."""


def _is_torch(obj) -> bool:
    return type(obj).__module__.startswith("torch")


def kl_dtype_of(x) -> T.dtype:
    """kernelc element type of a torch/numpy dtype, or of an array/tensor (by its ``.dtype``)."""
    dt = getattr(x, "dtype", x) if not isinstance(x, (np.dtype, type)) else x
    if _is_torch(dt) or str(dt).startswith("torch."):
        name = str(dt).replace("torch.", "")
        kl = TORCH_TO_KL.get(name)
    else:
        try:
            name = np.dtype(dt).name
        except TypeError:
            name = str(dt)
        kl = NUMPY_TO_KL.get(name)
    if kl is None:
        raise ArgumentError(f"element type {name} is not supported by kernelc; use one of "
                            f"{', '.join(sorted(set(TORCH_TO_KL)))}")
    return T.dtype(kl)


def is_array_like(obj) -> bool:
    """Arguments passed as pointers: numpy arrays and torch tensors (0-d ones too, as in Triton)."""
    return isinstance(obj, np.ndarray) or (_is_torch(obj) and hasattr(obj, "untyped_storage"))


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
