"""Small Triton names that kernel code mentions: type markers, limits and value wrappers.

They keep Triton's spelling; in kernelc most are plain Python values (a kernel's tuples are Python
tuples, ``condition`` returns its argument).
"""
from __future__ import annotations

import builtins

from . import dtypes as T
from .core import _unwrap

#: The largest number of elements a tile may have (``kl.arange`` enforces it).
TRITON_MAX_TENSOR_NUMEL = 1 << 20

#: ``*i32``, Triton's name for a pointer-to-int32 type.
pi32_t = T.pointer_type(T.int32)


def str_to_ty(name, c=None):
    """The kernelc type written ``name`` (``"fp32"``, ``"*fp16"``, ``"i32"``, ...)."""
    return T.parse_type(_unwrap(name))


class const:
    """Annotation marking a pointer parameter read-only (accepted; kernelc does not use it)."""


class constexpr_type:
    """The type of a compile-time constant ``value``."""

    def __init__(self, value):
        self.value = _unwrap(value)

    def __repr__(self):
        return f"constexpr_type[{self.value!r}]"

    def __eq__(self, other):
        return isinstance(other, constexpr_type) and other.value == self.value

    def __hash__(self):
        return hash(("constexpr_type", self.value))


class tuple_type:
    """The type of a tuple of kernel values (``types``, with optional field names)."""

    def __init__(self, types, fields=None):
        self.types = list(types)
        self.fields = list(fields) if fields is not None else [""] * len(self.types)

    def __repr__(self):
        return f"tuple_type[{', '.join(map(str, self.types))}]"

    def __eq__(self, other):
        return isinstance(other, tuple_type) and other.types == self.types and other.fields == self.fields

    def __hash__(self):
        return hash(builtins.tuple(map(str, self.types)))


class tuple(builtins.tuple):
    """A tuple of kernel values (``kl.tuple([a, b])``); it behaves as a Python tuple."""

    def __new__(cls, args, type=None):
        return super().__new__(cls, args)

    def __init__(self, args, type=None):
        self.type = type


class slice:
    """Triton's slice descriptor (``start``, ``stop``, ``step``); tiles index only with ``:`` and ``None``."""

    def __init__(self, start, stop, step):
        self.start, self.stop, self.step = _unwrap(start), _unwrap(stop), _unwrap(step)

    def __repr__(self):
        return f"slice({self.start}, {self.stop}, {self.step})"


def condition(arg1, disable_licm=False):
    """Marks a ``while`` loop's condition (``while kl.condition(i < n):``); returns it unchanged."""
    return arg1
