"""Element types of kernelc tiles, with Triton's names and promotion rules.

A ``dtype`` is a scalar element type. ``pointer_type`` is a pointer to one, and ``block_type`` is a
tile (shape + element type). Everything is immutable and hashable so types can be IR attributes and
cache-key parts.
"""
from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Tuple


class Kind(enum.IntEnum):
    # Triton's scalar-promotion rule compares kinds by `promotion_rank` (bool < integer < float: signed and
    # unsigned integers are one kind there, so `u32_tile % 64` stays u32).
    BOOL = 0
    UINT = 1
    INT = 2
    FLOAT = 3

    @property
    def promotion_rank(self) -> int:
        return {Kind.BOOL: 0, Kind.UINT: 1, Kind.INT: 1, Kind.FLOAT: 2}[self]


@dataclass(frozen=True)
class _Info:
    kind: Kind
    bits: int
    numpy: str  # numpy / ml_dtypes name used by the interpreter
    mantissa: int = 0  # fp mantissa width (without the implicit bit)
    exponent: int = 0


# One row per scalar type: (kind, bits, numpy name, mantissa, exponent).
_TABLE = {
    "int1": _Info(Kind.BOOL, 1, "bool"),
    "int8": _Info(Kind.INT, 8, "int8"),
    "int16": _Info(Kind.INT, 16, "int16"),
    "int32": _Info(Kind.INT, 32, "int32"),
    "int64": _Info(Kind.INT, 64, "int64"),
    "uint8": _Info(Kind.UINT, 8, "uint8"),
    "uint16": _Info(Kind.UINT, 16, "uint16"),
    "uint32": _Info(Kind.UINT, 32, "uint32"),
    "uint64": _Info(Kind.UINT, 64, "uint64"),
    "fp8e4nv": _Info(Kind.FLOAT, 8, "float8_e4m3fn", 3, 4),
    "fp8e5": _Info(Kind.FLOAT, 8, "float8_e5m2", 2, 5),
    "fp16": _Info(Kind.FLOAT, 16, "float16", 10, 5),
    "bf16": _Info(Kind.FLOAT, 16, "bfloat16", 7, 8),
    "fp32": _Info(Kind.FLOAT, 32, "float32", 23, 8),
    "fp64": _Info(Kind.FLOAT, 64, "float64", 52, 11),
}



@dataclass(frozen=True)
class FP8Format:
    """Encoding facts of an 8-bit float, shared by the interpreter, the code generator and tests.

    ``overflow_at``: the smallest magnitude that no longer rounds to a finite value (the value the
    NaN/Inf encoding would have); ``overflow`` says what a finite overflow and an infinity become:
    ``"saturate"`` (largest finite, as torch >= 2.12 and PTX ``cvt.rn.satfinite`` do for e4m3fn, which
    has no infinity) or ``"inf"`` (e5m2 keeps its infinities, as torch does). NaN becomes ``nan | sign``.
    """
    exponent: int
    mantissa: int
    bias: int
    max_finite: float
    overflow_at: float
    overflow: str  # "saturate" | "inf"
    max_code: int  # largest finite magnitude's bits
    inf_code: int  # -1: no infinity
    nan_code: int  # the NaN every conversion produces (sign added)


# fp8 formats: e4m3fn (OCP "fn": finite + NaN, no Inf) and e5m2 (IEEE-like, with Inf).
FP8_FORMATS = {
    "fp8e4nv": FP8Format(exponent=4, mantissa=3, bias=7, max_finite=448.0, overflow_at=480.0,
                         overflow="saturate", max_code=0x7E, inf_code=-1, nan_code=0x7F),
    "fp8e5": FP8Format(exponent=5, mantissa=2, bias=15, max_finite=57344.0, overflow_at=65536.0,
                       overflow="inf", max_code=0x7B, inf_code=0x7C, nan_code=0x7F),
}

# Aliases accepted in signatures ("*fp32", "i32", "u8", "bf16", ...).
_ALIASES = {
    "i1": "int1", "bool": "int1", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "u1": "int1", "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
    "float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32", "float": "fp32",
    "float64": "fp64", "double": "fp64", "float8e4nv": "fp8e4nv", "float8e5": "fp8e5",
    "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5", "fp8e4m3": "fp8e4nv", "fp8e5m2": "fp8e5",
}


class base_type:
    """Common base of scalar, pointer and block types."""

    def is_block(self) -> bool:
        return False

    def is_ptr(self) -> bool:
        return False

    @property
    def scalar(self):
        return self


class dtype(base_type):
    """A scalar element type (``kl.float32``, ``kl.int8``, ...)."""

    __slots__ = ("name",)
    _cache: dict = {}

    def __new__(cls, name: str):
        name = _ALIASES.get(name, name)
        if name not in _TABLE:
            raise ValueError(f"unknown dtype {name!r}; expected one of {', '.join(_TABLE)}")
        obj = cls._cache.get(name)
        if obj is None:
            obj = super().__new__(cls)
            object.__setattr__(obj, "name", name)
            cls._cache[name] = obj
        return obj

    def __setattr__(self, k, v):
        raise AttributeError("dtype is immutable")

    def __reduce__(self):
        return (dtype, (self.name,))

    # -- classification ---------------------------------------------------------------------
    @property
    def _info(self) -> _Info:
        return _TABLE[self.name]

    @property
    def kind(self) -> Kind:
        return self._info.kind

    @property
    def primitive_bitwidth(self) -> int:
        return self._info.bits

    @property
    def int_bitwidth(self) -> int:
        return self._info.bits

    @property
    def fp_mantissa_width(self) -> int:
        return self._info.mantissa

    @property
    def itemsize(self) -> int:
        return max(1, self._info.bits // 8)

    @property
    def numpy_name(self) -> str:
        return self._info.numpy

    def is_floating(self) -> bool:
        return self.kind == Kind.FLOAT

    def is_int(self) -> bool:
        return self.kind in (Kind.INT, Kind.UINT, Kind.BOOL)

    def is_int_signed(self) -> bool:
        return self.kind == Kind.INT

    def is_int_unsigned(self) -> bool:
        # Triton counts int1 as unsigned: it zero-extends and compares unsigned.
        return self.kind in (Kind.UINT, Kind.BOOL)

    def is_bool(self) -> bool:
        return self.kind == Kind.BOOL

    def is_int1(self) -> bool:
        return self.name == "int1"

    def is_fp8(self) -> bool:
        return self.name in ("fp8e4nv", "fp8e5")

    def is_fp16(self) -> bool:
        return self.name == "fp16"

    def is_bf16(self) -> bool:
        return self.name == "bf16"

    def is_fp32(self) -> bool:
        return self.name == "fp32"

    def is_fp64(self) -> bool:
        return self.name == "fp64"

    def is_standard_floating(self) -> bool:
        return self.name in ("fp16", "bf16", "fp32", "fp64")

    @property
    def int_signedness(self) -> str:
        return "unsigned" if self.is_int_unsigned() else "signed"

    # -- Triton's per-type predicates and helpers ------------------------------------------------
    def is_fp8e4nv(self) -> bool:
        return self.name == "fp8e4nv"

    def is_fp8e5(self) -> bool:
        return self.name == "fp8e5"

    def is_fp8e4b15(self) -> bool:  # formats kernelc does not have (kl.float8e4b15 & co.)
        return False

    is_fp8e4b8 = is_fp8e5b16 = is_fp8e4b15

    def is_void(self) -> bool:
        return False

    def is_const(self) -> bool:
        return False

    @staticmethod
    def is_dtype(type_str) -> bool:
        try:
            dtype(type_str)
            return True
        except ValueError:
            return False

    def get_int_max_value(self) -> int:
        if not self.is_int():
            raise TypeError(f"get_int_max_value() needs an integer dtype, got {self}")
        return 1 if self.is_int1() else (1 << (self.int_bitwidth - (0 if self.is_int_unsigned() else 1))) - 1

    def get_int_min_value(self) -> int:
        if not self.is_int():
            raise TypeError(f"get_int_min_value() needs an integer dtype, got {self}")
        return 0 if self.is_int_unsigned() else -(1 << (self.int_bitwidth - 1))

    @property
    def codegen_name(self) -> str:
        return self.name

    def cache_key_part(self) -> str:
        return self.name

    def mangle(self) -> str:
        return self.short

    def with_element_ty(self, element_ty) -> "dtype":
        return element_ty

    def to_ir(self):  # Triton compatibility; kernelc types are their own IR types
        return self

    # Short name as in signatures ("fp32", "i32", "u8").
    @property
    def short(self) -> str:
        n = self.name
        if n.startswith("int"):
            return "i" + n[3:]
        if n.startswith("uint"):
            return "u" + n[4:]
        return n

    def __repr__(self) -> str:
        return self.short

    def __str__(self) -> str:
        return self.short

    def __eq__(self, other):
        if isinstance(other, str):
            try:
                other = dtype(other)
            except ValueError:
                return False
        return self is other

    def __hash__(self):
        return hash(("dtype", self.name))


@dataclass(frozen=True)
class pointer_type(base_type):
    """Pointer to a scalar element type, ``*fp32`` in signatures."""

    element_ty: dtype
    address_space: int = 1
    const: bool = False

    def is_ptr(self) -> bool:
        return True

    def is_floating(self) -> bool:
        return False

    def is_int(self) -> bool:
        return False

    def is_bool(self) -> bool:
        return False

    def is_int_signed(self) -> bool:
        return False

    def is_int_unsigned(self) -> bool:
        return False

    def is_int1(self) -> bool:
        return False

    def is_fp8(self) -> bool:
        return False

    @property
    def kind(self):
        return None

    @property
    def primitive_bitwidth(self) -> int:
        return 64

    @property
    def itemsize(self) -> int:
        return 8

    @property
    def short(self) -> str:
        return "*" + self.element_ty.short

    def __repr__(self) -> str:
        return self.short

    __str__ = __repr__


@dataclass(frozen=True)
class block_type(base_type):
    """A tile type: ``element_ty`` (scalar or pointer) laid over ``shape``."""

    element_ty: base_type
    shape: Tuple[int, ...]

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))

    def is_block(self) -> bool:
        return True

    def is_ptr(self) -> bool:
        return False

    @property
    def scalar(self):
        return self.element_ty

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def __repr__(self) -> str:
        return f"<{'x'.join(map(str, self.shape))}x{self.element_ty!r}>"

    __str__ = __repr__


def scalar_of(ty: base_type) -> base_type:
    return ty.element_ty if isinstance(ty, block_type) else ty


def shape_of(ty: base_type) -> Tuple[int, ...]:
    return ty.shape if isinstance(ty, block_type) else ()


def with_scalar(ty: base_type, scalar: base_type) -> base_type:
    """Same shape as ``ty`` with a different element type."""
    return block_type(scalar, ty.shape) if isinstance(ty, block_type) else scalar


PADDING_OPTIONS = ("zero", "nan")


@dataclass(frozen=True)
class tensor_descriptor_type(base_type):
    """The type of a tensor descriptor: tiles of ``block_type`` read and written at runtime offsets.

    Spelled ``tensordesc<fp16[64, 64]>`` in signatures (Triton's spelling); a trailing
    ``, padding=nan`` makes out-of-bounds elements read as NaN instead of zero.
    """

    block_type: block_type
    padding: str = "zero"

    @property
    def element_ty(self) -> dtype:
        return self.block_type.element_ty

    @property
    def block_shape(self) -> Tuple[int, ...]:
        return self.block_type.shape

    @property
    def ndim(self) -> int:
        return len(self.block_type.shape)

    def is_floating(self) -> bool:
        return False

    def is_int(self) -> bool:
        return False

    @property
    def short(self) -> str:
        pad = "" if self.padding == "zero" else f", padding={self.padding}"
        return f"tensordesc<{self.element_ty.short}{list(self.block_shape)}{pad}>"

    def __repr__(self) -> str:
        return self.short

    __str__ = __repr__


_TENSORDESC = re.compile(r"tensordesc<\s*(\w+)\s*\[([\d,\s]*)\]\s*(?:,\s*(?:padding\s*=\s*)?(\w+)\s*)?>$")


def _parse_tensordesc(spec: str) -> tensor_descriptor_type:
    m = _TENSORDESC.match(spec)
    if m is None:
        raise ValueError(f"cannot parse the type {spec!r}; expected e.g. 'tensordesc<fp16[64, 64]>'")
    shape = tuple(int(x) for x in m.group(2).replace(" ", "").split(",") if x)
    padding = m.group(3) or "zero"
    if padding not in PADDING_OPTIONS:
        raise ValueError(f"tensor descriptor padding must be one of {list(PADDING_OPTIONS)}, got {padding!r}")
    return tensor_descriptor_type(block_type(dtype(m.group(1)), shape), padding)


def parse_type(spec) -> base_type:
    """``"*fp32"`` -> pointer_type(fp32); ``"i32"`` -> int32; ``"tensordesc<fp16[64, 64]>"`` ->
    tensor_descriptor_type; dtype/pointer objects pass through."""
    if isinstance(spec, base_type):
        return spec
    spec = str(spec).strip()
    if spec.startswith("tensordesc<"):
        return _parse_tensordesc(spec)
    if spec.startswith("*k"):  # Triton's "*k" (const pointer) spelling
        return pointer_type(parse_type(spec[2:]), const=True)
    if spec.startswith("*"):
        return pointer_type(parse_type(spec[1:]))
    return dtype(spec)


# Public dtype objects with Triton's names.
int1 = dtype("int1")
int8 = dtype("int8")
int16 = dtype("int16")
int32 = dtype("int32")
int64 = dtype("int64")
uint8 = dtype("uint8")
uint16 = dtype("uint16")
uint32 = dtype("uint32")
uint64 = dtype("uint64")
float8e4nv = dtype("fp8e4nv")
float8e5 = dtype("fp8e5")
float16 = dtype("fp16")
bfloat16 = dtype("bf16")
float32 = dtype("fp32")
float64 = dtype("fp64")

ALL_DTYPES = tuple(dtype(n) for n in _TABLE)


class _Signedness(enum.Enum):
    SIGNED = 0
    UNSIGNED = 1


# Triton's class-level type lists (the fp8 variants kernelc lacks are listed: they name Triton's types)
dtype.SINT_TYPES = ["int8", "int16", "int32", "int64"]
dtype.UINT_TYPES = ["int1", "uint8", "uint16", "uint32", "uint64"]
dtype.FP_TYPES = ["fp8e4b15", "fp8e4nv", "fp8e4b8", "fp8e5", "fp8e5b16", "fp16", "bf16", "fp32", "fp64"]
dtype.STANDARD_FP_TYPES = ["fp16", "bf16", "fp32", "fp64"]
dtype.OTHER_TYPES = ["void"]
dtype.KIND = Kind
dtype.SIGNEDNESS = _Signedness

for _n in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"):
    setattr(dtype, f"is_{_n}", (lambda name: lambda self: self.name == name)(_n))
del _n


class unsupported_dtype:
    """A Triton dtype that kernelc does not implement: it exists so that code mentioning it imports,
    and any use of it in a kernel fails with an error naming it."""

    def __init__(self, triton_name: str, why: str):
        self.name = triton_name
        self.why = why

    def __repr__(self):
        return f"triton.language.{self.name} (not supported by kernelc)"

    def error(self) -> TypeError:
        return TypeError(f"tl.{self.name} is not supported by kernelc: {self.why}")


_FNUZ = "kernelc's fp8 types are float8e4nv (e4m3fn) and float8e5 (e5m2)"
float8e4b15 = unsupported_dtype("float8e4b15", "it is a pre-Hopper software fp8 format; " + _FNUZ)
float8e4b8 = unsupported_dtype("float8e4b8", "it is an AMD (fnuz) fp8 format; " + _FNUZ)
float8e5b16 = unsupported_dtype("float8e5b16", "it is an AMD (fnuz) fp8 format; " + _FNUZ)
