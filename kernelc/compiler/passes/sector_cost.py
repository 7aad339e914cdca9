"""What a global access costs in 32-byte sectors for a given register layout: the cost model that
``coalesce`` (stores) and ``layout_assign`` (atomics) share. A leaf: it imports neither pass."""
from __future__ import annotations

import numpy as np

from ..layouts import Layout
from ..shared_layouts import vector_elems, warp_coords
from .axis_info import AxisInfo

SECTOR_BYTES = 32


def global_sectors(layout: Layout, info: AxisInfo, ebytes: int, mask_constancy=None) -> int:
    """32-byte sectors warp 0 touches accessing a pointer tile (``info``: its axis info) in ``layout``.

    Addresses are only known relative to each other along the pointer's contiguous dimension d
    (runs of ``contiguity[d]`` consecutive elements); elements that differ in another coordinate are
    taken to lie in different sectors."""
    rank = layout.rank
    d = max(range(rank), key=lambda i: (info.contiguity[i], i))
    vec = access_vector(layout, info, ebytes, mask_constancy)
    seg = max(1, min(SECTOR_BYTES // ebytes, info.contiguity[d]))
    coords = warp_coords(layout)[::vec]  # [instr, lane, dim]: each instruction's first elements
    run = coords[..., d][..., None] + np.arange(vec)  # the vector's elements run along d
    other = np.zeros(coords.shape[:-1], dtype=np.int64)
    for i in range(rank):
        if i != d:
            other = other * layout.shape[i] + coords[..., i]
    span = layout.shape[d] // seg + vec + 1
    keys = (other[..., None] * span + run // seg).reshape(coords.shape[0], -1)
    keys = np.sort(keys, axis=1)
    return int(coords.shape[0] + (keys[:, 1:] != keys[:, :-1]).sum())


def access_vector(layout: Layout, info: AxisInfo, ebytes: int, mask_constancy=None) -> int:
    """Elements per global access in ``layout``: the same limits codegen applies (layout registers,
    address contiguity, alignment, 16 bytes, mask constancy)."""
    if not layout.reg:
        return 1
    dim = next((i for i in range(layout.rank) if layout.reg[0][i]), None)
    if dim is None:
        return 1
    lim = min(info.contiguity[dim], max(1, info.divisibility[dim] // ebytes), max(1, 16 // ebytes))
    if mask_constancy is not None:
        lim = min(lim, mask_constancy[dim])
    return vector_elems(layout, dim, max(1, lim))
