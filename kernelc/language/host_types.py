"""Host values -> kernelc element types: which torch/numpy dtype a kernel argument of each type takes.

Shared by the interpreter (argument wrapping), the launcher (signatures) and ``TensorDescriptor``; it
imports numpy only, so it sits below all of them.
"""
from __future__ import annotations

import numpy as np

from . import dtypes as T

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


class ArgumentError(TypeError):
    """An argument the kernel cannot take (``launch`` turns it into a CompilationError)."""


def is_torch_object(obj) -> bool:
    return type(obj).__module__.startswith("torch")


# dtype object -> kernelc element type, for the dtypes seen (a launch asks once per descriptor argument)
_MEMO: dict = {}


def kl_dtype_of(x) -> T.dtype:
    """kernelc element type of a torch/numpy dtype, or of an array/tensor (by its ``.dtype``)."""
    dt = getattr(x, "dtype", x) if not isinstance(x, (np.dtype, type)) else x
    try:
        return _MEMO[dt]
    except (KeyError, TypeError):  # not seen yet, or an unhashable dtype-like
        pass
    kl = _kl_dtype_of(dt)
    try:
        _MEMO[dt] = kl
    except TypeError:
        pass
    return kl


def _kl_dtype_of(dt) -> T.dtype:
    if is_torch_object(dt) or str(dt).startswith("torch."):
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
