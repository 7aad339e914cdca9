"""The kernel ABI: how a kernel parameter becomes machine parameters (the one place that flattens).

A plain parameter (pointer, integer, float) is one machine parameter. A host tensor descriptor
parameter ``d`` of type ``tensordesc<fp16[64, 64]>`` (``kernelc.TensorDescriptor``, rank n) is
flattened, in this order, into::

    d.base                      *fp16  the tensor's base pointer (TensorDescriptor.base.data_ptr())
    d.shape0 .. d.shape{n-1}    i32    its shape
    d.stride0 .. d.stride{n-2}  i64    its strides in elements; the last stride is the constant 1

Who uses it:

- the frontend (``generate_ir``) makes one IR function argument per field, named as above, then a
  ``make_tensor_descriptor {host_arg="d"}`` op that turns them back into the descriptor value the
  kernel body sees;
- ``kernelc.compile`` and the runtime specialisation give each field its own divisibility
  (``divisibility={"d.stride0": 16}``; an entry for ``"d"`` itself applies to every field);
- the CUDA launch packs the fields from the TensorDescriptor (``pack_expressions``, in the
  generated launch function the fast path calls too), for the machine parameters of the compiled
  kernel's signature and target (``machine_params``; also ``CompiledKernel.arg_names``);
- the interpreter reads each field's value (``Field.host_value``).

Hopper TMA plugs in here: on sm_90a, for a descriptor type TMA can copy (``codegen/tma.tma_type_ok``;
``KERNELC_TMA=0`` says no), one more field follows the strides::

    d.tensormap                 tensormap  the 128-byte CUtensorMap, by value (runtime/tensor_map.py)

The host encodes it whenever the field exists (all zeros for a tensor TMA cannot address, e.g. an
unaligned one: the specialisation on alignment then keeps its ops on the generic lowering).

Example::

    >>> ty = parse_type("tensordesc<fp16[64, 64]>")
    >>> [f.name("a_desc") for f in descriptor_fields(ty)]
    ['a_desc.base', 'a_desc.shape0', 'a_desc.shape1', 'a_desc.stride0']
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from ..language import dtypes as T
from ..language.dtypes import base_type, pointer_type, tensor_descriptor_type


@dataclass(frozen=True)
class Field:
    """One machine parameter of a flattened descriptor parameter."""

    role: str  # "base" | "shape" | "stride"
    dim: int  # the dimension of a shape/stride; -1 for the base
    type: base_type  # its machine type

    @property
    def suffix(self) -> str:
        return self.role if self.dim < 0 else f"{self.role}{self.dim}"

    def name(self, param: str) -> str:
        return f"{param}.{self.suffix}"

    def host_value(self, desc):
        """This field's value for a host ``TensorDescriptor`` (the base as the tensor itself)."""
        return _ROLES[self.role][0](desc, self.dim)

    def host_expr(self, var: str) -> str:
        """Python source that computes this field's launch value from the descriptor in ``var``."""
        return _ROLES[self.role][1].format(v=var, d=self.dim)


class tensor_map_type(base_type):
    """Machine type of a host descriptor's ``CUtensorMap`` (Hopper TMA): 128 opaque bytes passed by
    value (``.param .align 64 .b8 [128]``); encoded on the host by ``kernelc/runtime/tensor_map.py``."""

    short = "tensormap"

    def __repr__(self) -> str:
        return "tensormap"

    __str__ = __repr__


TENSOR_MAP = tensor_map_type()


def _host_tensor_map(desc, d):
    # The CUtensorMap needs the CUDA driver: the runtime encodes it (runtime/tensor_map.py) and binds
    # _kc_tensor_map in the launch namespace; the compiler only names the field.
    raise NotImplementedError("a descriptor's tensormap field is encoded by the CUDA runtime, not read here")


# role -> (host value, launch-value expression): one row per kind of field.
_ROLES = {
    "base": (lambda desc, d: desc.base, "{v}.base.data_ptr()"),
    "shape": (lambda desc, d: int(desc.shape[d]), "{v}.shape[{d}]"),
    "stride": (lambda desc, d: int(desc.strides[d]), "{v}.strides[{d}]"),
    # the launch namespace provides _kc_tensor_map (runtime/fastpath.make_launch): a cached encoded map
    "tensormap": (_host_tensor_map, "_kc_tensor_map({v})"),
}
_SUFFIX = re.compile(r"^(base|shape|stride|tensormap)(\d*)$")


def descriptor_fields(ty: tensor_descriptor_type, arch: Optional[str] = None) -> List[Field]:
    """The machine parameters of a host descriptor parameter of type ``ty``, in order."""
    n = ty.ndim
    fields = ([Field("base", -1, pointer_type(ty.element_ty))]
              + [Field("shape", d, T.int32) for d in range(n)]
              + [Field("stride", d, T.int64) for d in range(n - 1)])
    if arch is not None:
        from .target_rules import tma_type_ok
        if tma_type_ok(ty, arch):  # the TMA lowering may take its ops: the host encodes a CUtensorMap
            fields.append(Field("tensormap", -1, TENSOR_MAP))
    return fields


def flat_params(name: str, ty: base_type, arch: Optional[str] = None) -> List[Tuple[str, base_type, Optional[Field]]]:
    """``[(machine name, machine type, field or None)]`` for kernel parameter ``name`` of type ``ty``."""
    if isinstance(ty, tensor_descriptor_type):
        return [(f.name(name), f.type, f) for f in descriptor_fields(ty, arch)]
    return [(name, ty, None)]


def machine_params(signature: Dict[str, object], arch: Optional[str] = None) -> List[Tuple[str, base_type, Optional[Field]]]:
    """All machine parameters of a kernel signature ``{parameter: type}`` (parameter order), e.g. of
    ``CompiledKernel.signature``: what the launch packs and the interpreter provides."""
    out = []
    for name, ty in signature.items():
        out += flat_params(name, T.parse_type(ty), arch)
    return out


def field_of(machine_name: str) -> Optional[Tuple[str, Field]]:
    """``"a_desc.shape1"`` -> ("a_desc", the shape-1 field); None for a plain parameter name."""
    param, dot, suffix = machine_name.partition(".")
    if not dot:
        return None
    m = _SUFFIX.match(suffix)
    if m is None:
        raise ValueError(f"unknown descriptor field {machine_name!r}")
    role, dim = m.group(1), int(m.group(2)) if m.group(2) else -1
    ty = T.int32 if role == "shape" else T.int64 if role == "stride" else TENSOR_MAP if role == "tensormap" else None
    return param, Field(role, dim, ty)


def flat_divisibility(signature: Dict[str, base_type], divisibility: Dict[str, int],
                      base_default: Optional[int] = None) -> Dict[str, int]:
    """Divisibility per machine parameter: field entries as given, an entry for a descriptor
    parameter itself for each of its fields, and ``base_default`` for a descriptor base given
    neither way (``kernelc.compile`` assumes 16 bytes, as for pointer arguments)."""
    out = dict(divisibility)
    for name, ty in signature.items():
        if isinstance(ty, tensor_descriptor_type):
            whole = out.pop(name, None)
            for f in descriptor_fields(ty):
                fname = f.name(name)
                if whole is not None:
                    out.setdefault(fname, whole)
                elif f.role == "base" and base_default is not None:
                    out.setdefault(fname, base_default)
    return out


def machine_kind(type_str: str) -> str:
    """The argument-buffer kind (``kernelc.runtime.driver.CTYPE``) of a machine parameter type."""
    if type_str == TENSOR_MAP.short:
        return "tmap"
    return "ptr" if type_str.startswith("*") else T.parse_type(type_str).short


def pack_expressions(runtime_names: Sequence[str], machine_names: Sequence[str]) -> List[str]:
    """For each machine parameter, the Python expression of its launch value, where the runtime
    arguments are ``v0, v1, ...`` (``runtime_names`` in order; tensors already as data pointers).

    Example: runtime ``["x", "d"]``, machine ``["x", "d.base", "d.shape0", "d.shape1", "d.stride0"]``
    -> ``["v0", "v1.base.data_ptr()", "v1.shape[0]", "v1.shape[1]", "v1.strides[0]"]``.
    """
    index = {n: i for i, n in enumerate(runtime_names)}
    out = []
    for m in machine_names:
        if m in index:
            out.append(f"v{index[m]}")
            continue
        param, field = field_of(m)
        out.append(field.host_expr(f"v{index[param]}"))
    return out
