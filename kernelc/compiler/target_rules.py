"""Target legality in one place: what the hardware (and the knobs that switch a mechanism off) allow --
TMA, wgmma, fp8 conversions, tensor-map boxes. Pure functions of IR facts (types, shapes) and the
target; imported by the passes that decide (they tag the IR) and by code generation (which trusts the
tags). Imports neither: only dtypes and the options table."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Optional, Sequence, Tuple

from ..language.dtypes import scalar_of, shape_of
from ..options import get

# -- architectures ----------------------------------------------------------------------------------


def arch_has_wgmma(arch: str) -> bool:
    """Hopper's warpgroup MMA (and the async proxy it reads through) needs the arch-specific sm_90a."""
    return bool(arch) and arch.startswith("sm_90") and arch.endswith("a")


def arch_has_tma(arch: str) -> bool:
    # TMA itself exists on plain sm_90, but its consumers here (wgmma, the swizzled operand ring) are
    # sm_90a-only; plain sm_90 and older keep the generic lowering.
    return arch.startswith("sm_9") and arch.endswith("a")


def tma_enabled() -> bool:
    """``KERNELC_TMA=0`` turns the TMA lowering off (descriptor ops then take the generic lowering)."""
    return get("KERNELC_TMA")


# first compute capability with the fp8 cvt forms (PTX ISA 7.8, sm_89)
FP8_HW_CVT_CAPABILITY = (8, 9)


def has_fp8_cvt(capability) -> bool:
    """Whether the target converts fp8 <-> f16 in hardware (else codegen/fp8.py's bit-level emulation)."""
    return tuple(capability) >= FP8_HW_CVT_CAPABILITY


# -- wgmma --------------------------------------------------------------------------------------------

# operand type -> (PTX type, k per instruction, has the transpose bit)
WGMMA_TYPES = {
    "fp16": ("f16", 16, True),
    "bf16": ("bf16", 16, True),
    "fp8e4nv": ("e4m3", 32, False),
    "fp8e5": ("e5m2", 32, False),
}


def wgmma_eligible(a_ty, b_ty, c_ty, num_warps: int, arch: str) -> bool:
    """Whether a dot of these operand/result types runs on wgmma (sm_90a, fp32 accumulator, whole
    warpgroups, M a multiple of 16 rows per warp, 8 <= N <= 256)."""
    if not arch_has_wgmma(arch):
        return False
    at, bt, ct = scalar_of(a_ty), scalar_of(b_ty), scalar_of(c_ty)
    sa, sb = shape_of(a_ty), shape_of(b_ty)
    same_family = at == bt or (at.is_fp8() and bt.is_fp8())
    if len(sa) != 2 or not same_family or at.name not in WGMMA_TYPES or ct.name != "fp32":
        return False
    M, K = sa
    N = sb[1]
    kstep = WGMMA_TYPES[at.name][1]
    return num_warps % 4 == 0 and M % (16 * num_warps) == 0 and N % 8 == 0 and 8 <= N <= 256 and K % kstep == 0


# -- TMA boxes -------------------------------------------------------------------------------------

SWIZZLE_SPAN = 128  # bytes: the widest swizzle; a box's inner extent never exceeds it (one panel)
MAX_BOX_DIM = 256  # elements per box dimension (TMA limit)
MAX_RANK = 5
TMA_ELEMENT_BYTES = (1, 2, 4, 8)
# OOB fill with NaN needs a floating-point map type
NAN_FILL_TYPES = ("fp16", "bf16", "fp32", "fp64")


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


@dataclass(frozen=True)
class TmaBox:
    """How a ``block_shape`` tile (outermost dim first) of ``ebytes``-byte elements is copied by TMA
    into the SmemOperand layout of ``rows = prod(block_shape[:-1])`` x ``cols = block_shape[-1]``.

    Boxes are ``box_shape`` (outermost first): the inner extent is one panel (``inner_box`` elements,
    at most 128 bytes), dim 0 is cut into pieces of at most 256; the other dims are whole.
    ``swizzle`` is the TMA swizzle (bytes; 0 = none) equal to the SmemOperand XOR of this geometry.
    """

    block_shape: Tuple[int, ...]
    ebytes: int
    inner_box: int
    outer_box: int  # elements of dim 0 per box (rank >= 2)
    swizzle: int

    @property
    def rank(self) -> int:
        return len(self.block_shape)

    @property
    def rows(self) -> int:
        return _prod(self.block_shape[:-1])

    @property
    def cols(self) -> int:
        return self.block_shape[-1]

    @property
    def row_bytes(self) -> int:
        return self.inner_box * self.ebytes

    @property
    def panel_bytes(self) -> int:
        return self.rows * self.row_bytes

    @property
    def nbytes(self) -> int:
        return self.rows * self.cols * self.ebytes

    @property
    def box_shape(self) -> Tuple[int, ...]:
        if self.rank == 1:
            return (self.inner_box,)
        return (self.outer_box,) + tuple(self.block_shape[1:-1]) + (self.inner_box,)

    @property
    def box_bytes(self) -> int:
        return _prod(self.box_shape) * self.ebytes

    def boxes(self) -> Iterator[Tuple[Tuple[int, ...], int]]:
        """(coordinate delta per dim, outermost first; byte offset in the tile) of every box."""
        n_panels = self.cols // self.inner_box
        n_pieces = 1 if self.rank == 1 else self.block_shape[0] // self.outer_box
        piece_bytes = (self.outer_box * _prod(self.block_shape[1:-1]) * self.row_bytes) if self.rank > 1 else 0
        for p in range(n_panels):
            for r in range(n_pieces):
                delta = [0] * self.rank
                delta[-1] = p * self.inner_box
                if self.rank > 1:
                    delta[0] = r * self.outer_box
                yield tuple(delta), p * self.panel_bytes + r * piece_bytes


def tma_box(block_shape: Sequence[int], ebytes: int) -> Optional[TmaBox]:
    """The TMA geometry of a block, or None if TMA cannot copy it (the generic lowering then does)."""
    shape = tuple(int(d) for d in block_shape)
    if not 1 <= len(shape) <= MAX_RANK or ebytes not in TMA_ELEMENT_BYTES:
        return None
    if any(d < 1 or d & (d - 1) for d in shape):
        return None  # SmemOperand panels index with shifts
    inner = shape[-1]
    inner_box = min(inner, SWIZZLE_SPAN // ebytes)
    row_bytes = inner_box * ebytes
    if row_bytes < 16:
        return None  # a box's inner extent must be a multiple of 16 bytes
    if any(d > MAX_BOX_DIM for d in shape[1:-1]):
        return None  # only dim 0 is cut into pieces
    outer_box = min(shape[0], MAX_BOX_DIM) if len(shape) > 1 else 1
    box_rows = outer_box * _prod(shape[1:-1]) if len(shape) > 1 else 1
    # the swizzle pattern follows address bits 4..9: every box must start on its repeat (8 rows)
    swizzle = row_bytes if row_bytes in (32, 64, 128) and box_rows % 8 == 0 else 0
    box = TmaBox(shape, ebytes, inner_box, outer_box, swizzle)
    if any(off % 128 for _, off in box.boxes()):
        return None  # a bulk tensor copy's shared-memory side must be 128-byte aligned
    return box


def tma_type_ok(ty, arch: str) -> bool:
    """Whether TMA can serve descriptors of type ``ty`` (a ``tensordesc``) on ``arch``: the type-level
    half of ``passes/lower_descriptors.tma_eligible``, which decides whether the ABI carries a CUtensorMap
    (compiler/abi.py)."""
    if not tma_enabled() or not arch or not arch_has_tma(arch):
        return False
    elt = ty.element_ty
    if elt.is_int1() or tma_box(ty.block_shape, elt.itemsize) is None:
        return False
    return ty.padding != "nan" or elt.name in NAN_FILL_TYPES


def store_extent_ok(inner_divisibility, eb: int) -> bool:
    """A TMA store into a tensor whose rows end inside a 16-byte chunk writes that whole chunk (seen on the
    GPU: columns past the end written; docs/performance.md, "TMA").  Stores use TMA only
    when the innermost extent is known to be a multiple of 16 bytes (``inner_divisibility``: an
    ``Argument``, or its divisibility in elements)."""
    d = getattr(inner_divisibility, "divisibility", inner_divisibility)
    return d is not None and (d * eb) % 16 == 0


# kernelc element type -> ``tensormap.replace ... .elemtype`` value. This is the PTX ISA's encoding,
# not the driver's CUtensorMapDataType (the PTX table puts f32.ftz at 8, so f64 is 9 and bf16 10).
# TMA moves bytes: fp8 travels as u8, signed 8/16-bit ints as their unsigned twins.
TMA_PTX_ELEMTYPE = {
    "int8": 0, "uint8": 0, "fp8e4nv": 0, "fp8e5": 0,
    "int16": 1, "uint16": 1,
    "uint32": 2, "int32": 3,
    "uint64": 4, "int64": 5,
    "fp16": 6, "fp32": 7, "fp64": 9, "bf16": 10,
}
