"""Tensor descriptors in the interpreter: the value of a descriptor and its four ops.

A descriptor's handle is a :class:`DescriptorHandle` (base address, shape, strides); loads and
stores run the same masked-access rule the compiler uses (``generic_descriptor_load``/``_store``
of ``kernelc/language/blocks.py``) on this builder, so out-of-bounds elements read as the padding
and are not written, while an access outside the underlying allocation still raises with the
kernel line. Host ``TensorDescriptor`` arguments are wrapped here too (``wrap_descriptor``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

import numpy as np

from ...compiler.abi import descriptor_fields
from ...language import blocks
from ...language import dtypes as T
from ...language.core import tensor
from . import numerics as N


@dataclass(frozen=True)
class DescriptorHandle:
    base: int  # address in the launch's Memory
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]  # all but the last (which is 1)


def _parts(h: DescriptorHandle, ty: T.tensor_descriptor_type):
    base = tensor(np.array(h.base, np.int64), T.pointer_type(ty.element_ty))
    shapes = [tensor(np.array(s, np.int32), T.int32) for s in h.shape]
    strides = [tensor(np.array(s, np.int64), T.int64) for s in h.strides]
    return base, shapes, strides


def make_descriptor(b, o, ty, **attrs) -> DescriptorHandle:
    n = ty.ndim
    return DescriptorHandle(int(o[0]), tuple(int(x) for x in o[1:1 + n]), tuple(int(x) for x in o[1 + n:]))


def load(b, o, ty, **attrs):
    h = o[0]
    dty = T.tensor_descriptor_type(ty, attrs.get("padding", "zero"))
    offs = [tensor(np.asarray(x, np.int32), T.int32) for x in o[1:]]
    return blocks.generic_descriptor_load(dty, *_parts(h, dty), offs).handle


def store(b, o, ty, block_shape=(), **attrs):
    h, value = o[0], o[1]
    elt = b._kl_of(value)
    dty = T.tensor_descriptor_type(T.block_type(elt, tuple(block_shape)))
    offs = [tensor(np.asarray(x, np.int32), T.int32) for x in o[2:]]
    blocks.generic_descriptor_store(dty, *_parts(h, dty), offs, tensor(value, dty.block_type))
    return None


def reduce(b, o, ty, block_shape=(), kind="add", **attrs):
    h, value = o[0], o[1]
    elt = b._kl_of(value)
    dty = T.tensor_descriptor_type(T.block_type(elt, tuple(block_shape)))
    offs = [tensor(np.asarray(x, np.int32), T.int32) for x in o[2:]]
    blocks.generic_descriptor_reduce(dty, *_parts(h, dty), offs, tensor(value, dty.block_type), kind)
    return None


IMPLS = {"make_tensor_descriptor": make_descriptor, "descriptor_load": load, "descriptor_store": store,
         "descriptor_reduce": reduce}


def wrap_descriptor(desc, name: str, memory, error):
    """The kernel-side ``kl.tensor_descriptor`` of host descriptor argument ``name``."""
    ty = desc.kl_type
    base, shapes, strides = None, [], []
    for f in descriptor_fields(ty):
        v = f.host_value(desc)
        if f.role == "base":
            base = memory.map(v, name, ty.element_ty)
        elif f.role == "shape":
            shapes.append(tensor(N.constant(v, T.int32), T.int32))
        elif f.role == "stride":
            if not -2**63 <= v < 2**63:
                raise error(f"argument '{name}': stride {v} does not fit in int64")
            strides.append(tensor(N.constant(v, T.int64), T.int64))
    handle = DescriptorHandle(base, tuple(int(s.handle) for s in shapes), tuple(int(s.handle) for s in strides))
    return blocks.tensor_descriptor(handle, shapes, strides + [1], ty)
