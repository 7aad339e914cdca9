"""``TensorDescriptor``: a host tensor described for tile access, passed to a kernel as one argument
(Triton's ``triton.tools.tensor_descriptor.TensorDescriptor``; also ``kernelc.TensorDescriptor``).

In the kernel the argument is a ``kl.tensor_descriptor``: ``desc.load([i, j])`` reads the
``block_shape`` tile at element offsets ``(i, j)`` (out-of-bounds elements read as zero, or NaN
with ``padding="nan"``) and ``desc.store([i, j], tile)`` writes the elements inside the tensor.
How the argument reaches the kernel (base pointer, shapes, strides) is ``kernelc/compiler/abi.py``.

Unlike Triton, the base and strides need not be 16-byte aligned: the runtime specialises on their
alignment, and only aligned descriptors can use Hopper TMA.

Example::

    import torch, kernelc
    from kernelc.tools.tensor_descriptor import TensorDescriptor

    x = torch.randn(1000, 300, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    copy_kernel[(kernelc.cdiv(1000, 64), kernelc.cdiv(300, 64))](
        TensorDescriptor.from_tensor(x, [64, 64]), TensorDescriptor.from_tensor(y, [64, 64]))
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List

from ..language.host_types import kl_dtype_of

MAX_RANK = 5
PADDINGS = ("zero", "nan")


@dataclass(eq=False)
class TensorDescriptor:
    """``base`` (a torch tensor or numpy array holding the data), the described ``shape`` and
    ``strides`` (in elements; the last stride must be 1), the ``block_shape`` tile the kernel
    loads and stores (powers of two), and the out-of-bounds ``padding`` ("zero" or "nan")."""

    base: Any
    shape: List[int]
    strides: List[int]
    block_shape: List[int]
    padding: str = "zero"

    def __post_init__(self):
        # Triton's tutorial 06 makes four of these on every call: the checks below cost a few Python operations
        # each (C-level map/min/max, one dict lookup for the dtype); the messages are built only on failure
        self.shape = shape = list(map(int, self.shape))
        self.strides = strides = list(map(int, self.strides))
        self.block_shape = block = list(map(int, self.block_shape))
        rank = len(shape)
        if not 1 <= rank <= MAX_RANK:
            raise ValueError(f"TensorDescriptor supports 1 to {MAX_RANK} dimensions, got {rank}")
        if len(strides) != rank or len(block) != rank:
            raise ValueError(f"TensorDescriptor got {rank} shape entries, {len(strides)} strides and a "
                             f"{len(block)}-D block_shape; they need one entry per dimension")
        if min(shape) < 0:
            raise ValueError(f"TensorDescriptor shape must be non-negative, got {shape}")
        if max(shape) >= 2**31:
            raise ValueError(f"TensorDescriptor shape entries must fit in int32, got {shape}")
        for b in block:
            if b < 1 or b & (b - 1):
                raise ValueError(f"TensorDescriptor block_shape must be powers of two, got {block}")
        if strides[-1] != 1:
            raise ValueError(f"TensorDescriptor's last stride must be 1 (the last dimension must be contiguous), "
                             f"got strides {strides}")
        padding = self.padding
        if padding != "zero" and padding not in PADDINGS:
            raise ValueError(f"TensorDescriptor padding must be one of {list(PADDINGS)}, got {padding!r}")
        try:
            float_ok = _CHECKED_DTYPES[self.base.dtype]
        except (KeyError, AttributeError, TypeError):  # a dtype not seen yet, no dtype, an unhashable one
            float_ok = _check_dtype(self.element_type)  # raises for a dtype kernelc cannot take
            try:
                _CHECKED_DTYPES[self.base.dtype] = float_ok
            except (AttributeError, TypeError):
                pass
        if padding == "nan" and not float_ok:
            raise ValueError(f"TensorDescriptor padding 'nan' needs a floating-point tensor, got {self.element_type}")

    @staticmethod
    def from_tensor(tensor: Any, block_shape: List[int], padding: str = "zero") -> "TensorDescriptor":
        """Describe all of ``tensor`` (torch tensor or numpy array) with its own shape and strides."""
        return TensorDescriptor(tensor, list(tensor.shape), _element_strides(tensor), block_shape, padding)

    def __repr__(self):
        dt = str(getattr(self.base, "dtype", "?")).replace("torch.", "")
        return (f"TensorDescriptor({dt} {type(self.base).__name__}, shape={self.shape}, strides={self.strides}, "
                f"block_shape={self.block_shape}" + (f", padding={self.padding!r})" if self.padding != "zero" else ")"))

    # -- what the runtime and launch hooks read ------------------------------------------------
    @property
    def dtype(self):
        return self.base.dtype

    @property
    def device(self):
        return getattr(self.base, "device", None)

    @property
    def element_type(self):
        """The kernelc element type (``kl.float16``, ...)."""
        return kl_dtype_of(self.base)

    @property
    def kl_type(self):
        """The kernel-side type, ``tensordesc<fp16[64, 64]>``."""
        from ..language.dtypes import block_type, tensor_descriptor_type
        return tensor_descriptor_type(block_type(self.element_type, tuple(self.block_shape)), self.padding)


# base dtype -> whether it is a floating-point type, for the dtypes a descriptor accepted before
_CHECKED_DTYPES: dict = {}


def _check_dtype(elt) -> bool:
    """Whether ``elt`` (a kernelc element type a descriptor may hold) is floating point; raises for bool."""
    if elt.is_int1():
        raise TypeError("TensorDescriptor does not support bool tensors; view them as uint8/int8")
    return elt.is_floating()


def _element_strides(t) -> List[int]:
    st = t.stride() if callable(getattr(t, "stride", None)) else None
    if st is not None:
        return list(st)
    return [s // t.itemsize for s in t.strides]  # numpy: strides in bytes
