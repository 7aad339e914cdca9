"""Host side of Hopper TMA: the ``CUtensorMap`` of a ``TensorDescriptor`` argument.

A kernel compiled for sm_90a gets, per host descriptor whose type TMA can copy, one more machine
parameter ``d.tensormap`` (compiler/abi.py): 128 opaque bytes, passed by value, that the copy engine
reads. They are encoded here with the driver's ``cuTensorMapEncodeTiled`` from the descriptor's
base pointer, shape and strides and from the *same* box geometry the compiler laid shared memory
out for (``codegen/tma.tma_box``: inner box = one swizzle panel of at most 128 bytes, the matching
128B/64B/32B swizzle, dim 0 in pieces of at most 256), so the map and the code always agree.

Split in two so the layout is testable without a GPU: ``tensor_map_params`` computes every
argument of the driver call (pure Python); ``encode`` makes the call. Launches look the encoded
map up in a cache keyed by (pointer, dtype, shape, strides, block, padding), so a repeated launch
costs one tuple and one dict lookup; the launch copies the 128 bytes into its argument buffer.

A tensor TMA cannot address (base or a stride not 16-byte aligned, an empty dimension) gets an
all-zero map: the runtime specialises on alignment, so the kernel compiled for it does not use TMA
for that argument (its ops took the generic lowering), and the field is only a placeholder.
"""
from __future__ import annotations

import ctypes
import weakref
from dataclasses import dataclass
from typing import Dict, Sequence, Tuple

from .driver import TENSOR_MAP_BYTES, TensorMapBuffer, check

# kernelc element type -> CUtensorMapDataType (values of the CUDA driver enum). TMA moves bytes: fp8
# travels as UINT8, signed ints as their unsigned twins where the enum has no signed type.
DATA_TYPE = {
    "int8": 0, "uint8": 0, "fp8e4nv": 0, "fp8e5": 0,  # CU_TENSOR_MAP_DATA_TYPE_UINT8
    "int16": 1, "uint16": 1,  # UINT16
    "uint32": 2,  # UINT32
    "int32": 3,  # INT32
    "uint64": 4,  # UINT64
    "int64": 5,  # INT64
    "fp16": 6,  # FLOAT16
    "fp32": 7,  # FLOAT32
    "fp64": 8,  # FLOAT64
    "bf16": 9,  # BFLOAT16
}
ELEMENT_BYTES = {"int8": 1, "uint8": 1, "fp8e4nv": 1, "fp8e5": 1, "int16": 2, "uint16": 2, "fp16": 2, "bf16": 2,
                 "int32": 4, "uint32": 4, "fp32": 4, "int64": 8, "uint64": 8, "fp64": 8}
SWIZZLE = {0: 0, 32: 1, 64: 2, 128: 3}  # swizzle bytes -> CUtensorMapSwizzle
INTERLEAVE_NONE = 0
# L2 fetch granularity (CUtensorMapL2promotion by KERNELC_TMA_L2_PROMOTION's value, read when a map is encoded).
# 128 B as Triton 3.6: 256 B made tutorial 06's fp8 d64 forward wait on its ring (docs/triton-tutorials.md,
# "06's fp8 d64: the L2 promotion")
L2_PROMOTION = {"none": 0, "64": 1, "128": 2, "256": 3}


def l2_promotion() -> int:
    from ..options import get
    return L2_PROMOTION[get("KERNELC_TMA_L2_PROMOTION")]
OOB_FILL = {"zero": 0, "nan": 1}  # padding -> CUtensorMapFloatOOBfill (NONE = zeros, NAN_REQUEST_ZERO_FMA)

MAX_GLOBAL_DIM = 1 << 32
MAX_GLOBAL_STRIDE = 1 << 40


class TensorMapError(ValueError):
    """The tensor cannot be described to the copy engine (alignment, sizes)."""


@dataclass(frozen=True)
class TensorMapParams:
    """The arguments of ``cuTensorMapEncodeTiled``, every array innermost dimension first (the
    driver's order), strides in bytes for dims 1..rank-1."""

    data_type: int
    rank: int
    global_address: int
    global_dim: Tuple[int, ...]
    global_strides: Tuple[int, ...]
    box_dim: Tuple[int, ...]
    element_strides: Tuple[int, ...]
    interleave: int
    swizzle: int
    l2_promotion: int
    oob_fill: int


def tensor_map_params(dtype: str, address: int, shape: Sequence[int], strides: Sequence[int],
                      block_shape: Sequence[int], padding: str = "zero") -> TensorMapParams:
    """Everything the driver needs for a descriptor of ``dtype`` (a kernelc type name) at ``address``
    with ``shape``/``strides`` in elements (outermost first, last stride 1), read in ``block_shape``
    tiles. Raises ``TensorMapError`` when TMA cannot address the tensor."""
    from ..compiler.codegen.tma import tma_box
    if dtype not in DATA_TYPE:
        raise TensorMapError(f"TMA has no data type for {dtype}")
    eb = ELEMENT_BYTES[dtype]
    rank = len(shape)
    if not (len(strides) == len(block_shape) == rank) or not 1 <= rank <= 5:
        raise TensorMapError(f"shape {list(shape)}, strides {list(strides)} and block {list(block_shape)} "
                             f"need one entry per dimension (1 to 5)")
    box = tma_box(block_shape, eb)
    if box is None:
        raise TensorMapError(f"TMA cannot copy a {list(block_shape)} block of {dtype}")
    if strides[-1] != 1:
        raise TensorMapError(f"the last dimension must be contiguous (stride 1), got strides {list(strides)}")
    if address % 16:
        raise TensorMapError(f"TMA needs a 16-byte aligned base address, got {address:#x}")
    if any(not 1 <= s <= MAX_GLOBAL_DIM for s in shape):
        raise TensorMapError(f"TMA needs every dimension in [1, 2**32], got shape {list(shape)}")
    byte_strides = [s * eb for s in strides[:-1]]
    if any(b % 16 or not 0 < b < MAX_GLOBAL_STRIDE for b in byte_strides):
        raise TensorMapError(f"TMA needs strides that are positive multiples of 16 bytes, got {byte_strides} bytes")
    if padding not in OOB_FILL:
        raise TensorMapError(f"unknown padding {padding!r}")
    return TensorMapParams(
        data_type=DATA_TYPE[dtype], rank=rank, global_address=int(address),
        global_dim=tuple(int(s) for s in reversed(shape)), global_strides=tuple(reversed(byte_strides)),
        box_dim=tuple(reversed(box.box_shape)), element_strides=(1,) * rank, interleave=INTERLEAVE_NONE,
        swizzle=SWIZZLE[box.swizzle], l2_promotion=l2_promotion(), oob_fill=OOB_FILL[padding])


def encode(p: TensorMapParams) -> bytes:
    """The 128-byte CUtensorMap (needs the CUDA driver: a GPU machine)."""
    from cuda.bindings import driver as drv
    u32, u64 = drv.cuuint32_t, drv.cuuint64_t  # cuda-python wants its own integer wrappers here
    tm = check(drv.cuTensorMapEncodeTiled(
        drv.CUtensorMapDataType(p.data_type), u32(p.rank), p.global_address, [u64(x) for x in p.global_dim],
        [u64(x) for x in p.global_strides], [u32(x) for x in p.box_dim], [u32(x) for x in p.element_strides],
        drv.CUtensorMapInterleave(p.interleave),
        drv.CUtensorMapSwizzle(p.swizzle), drv.CUtensorMapL2promotion(p.l2_promotion),
        drv.CUtensorMapFloatOOBfill(p.oob_fill)), "cuTensorMapEncodeTiled")
    return ctypes.string_at(tm.getPtr(), TENSOR_MAP_BYTES)


ZERO_MAP = TensorMapBuffer()
_cache: Dict[tuple, TensorMapBuffer] = {}
MAX_CACHED = 4096


def _dtype_name(base) -> str:
    from ..language.host_types import kl_dtype_of
    return kl_dtype_of(base).name


def cached_tensor_map(dtype: str, address: int, shape: Sequence[int], strides: Sequence[int],
                      block_shape: Sequence[int], padding: str = "zero", encoder=None) -> TensorMapBuffer:
    """The encoded map as a launch-buffer value, from the cache (``encoder``: ``encode`` unless given)."""
    key = (address, dtype, tuple(shape), tuple(strides), tuple(block_shape), padding)
    buf = _cache.get(key)
    if buf is None:
        try:
            raw = (encoder or encode)(tensor_map_params(dtype, address, shape, strides, block_shape, padding))
            buf = TensorMapBuffer.from_buffer_copy(raw)
        except TensorMapError:
            buf = ZERO_MAP  # a specialisation that does not use TMA for it (see the module doc)
        if len(_cache) >= MAX_CACHED:
            _cache.clear()
        _cache[key] = buf
    return buf


def descriptor_tensor_map(desc, encoder=None) -> TensorMapBuffer:
    """The ``d.tensormap`` launch value of a host ``TensorDescriptor`` (the ``_kc_tensor_map`` of the
    generated launch function)."""
    base = desc.base
    key = (base.data_ptr(), base.dtype, tuple(desc.shape), tuple(desc.strides), tuple(desc.block_shape),
           desc.padding)
    buf = _by_object.get(key)
    if buf is None:
        buf = cached_tensor_map(_dtype_name(base), key[0], key[2], key[3], key[4], key[5], encoder)
        if len(_by_object) >= MAX_CACHED:
            _by_object.clear()
        _by_object[key] = buf
    return buf


# the same maps keyed by what a launch reads off the descriptor directly (torch dtype, no name lookup)
_by_object: Dict[tuple, TensorMapBuffer] = {}
_bytes_by_object: Dict[tuple, bytes] = {}


def descriptor_tensor_map_bytes(desc, encoder=None) -> bytes:
    """``descriptor_tensor_map`` as the 128 bytes, for a launch that packs its arguments with ``struct``."""
    base = desc.base
    # one flat tuple (3 x rank entries and two more: equal lengths mean equal ranks), cheaper than nested ones
    key = (base.data_ptr(), base.dtype, *desc.shape, *desc.strides, *desc.block_shape, desc.padding)
    raw = _bytes_by_object.get(key)
    if raw is None:
        raw = bytes(descriptor_tensor_map(desc, encoder))
        if len(_bytes_by_object) >= MAX_CACHED:
            _bytes_by_object.clear()
        _bytes_by_object[key] = raw
    return raw


class _SlotCache(dict):
    """address -> the 128 bytes, for one descriptor slot of a prepared launch (runtime/prepared.py): every other
    input of the map is fixed there. Bounded as the caches above; cleared with them."""
    __slots__ = ("__weakref__",)
    __hash__, __eq__ = object.__hash__, object.__eq__  # by identity (a WeakSet member)

    def __setitem__(self, key, value):
        if len(self) >= MAX_CACHED:
            self.clear()
        dict.__setitem__(self, key, value)


_slot_caches: "weakref.WeakSet" = weakref.WeakSet()


def slot_cache() -> dict:
    c = _SlotCache()
    _slot_caches.add(c)
    return c


def clear_cache() -> None:
    _cache.clear()
    _by_object.clear()
    _bytes_by_object.clear()
    for c in list(_slot_caches):
        c.clear()
