"""A layout conversion through shared memory done in pieces, through a buffer of one piece.

A conversion writes the whole tile to shared memory and reads it back: a 128x256 fp16 epilogue takes 64 KB.
Beside a ring that stays live (a flattened persistent loop's, 192 KB at 128x256x64 with 4 stages) that does
not fit an H100. Triton converts such a tile through a scratch buffer of a fraction of it, one repetition at a
time. Here the same: a *piece basis* is a tile coordinate bit (a unit vector, ``(8, 0)``: row bit 3) that
both layouts hold in a register bit alone, no lane or warp basis of either touching it. Fixing the values of
``k`` such bits picks ``2**k`` pieces; every thread holds ``1/2**k`` of its registers of each piece on both
sides, so each piece is a conversion of its own between two smaller layouts (the piece bits squeezed out of
the coordinates), through a buffer of ``1/2**k`` of the bytes, and all threads take part in every piece.

``passes/smem_offsets.py`` decides the pieces and writes them on the op (``pieces=[[8, 0]]`` with ``smem``
planned for one piece); ``codegen/convert.py`` lowers them one after the other.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

from .layouts import Coord, Layout
from .shared_layouts import contiguous_dim, vector_elems


def _bit(c: Coord) -> Tuple[int, int]:
    """(dim, value) of a unit basis: one nonzero entry, a power of two (else ValueError)."""
    nz = [(d, x) for d, x in enumerate(c) if x]
    if len(nz) != 1 or nz[0][1] & (nz[0][1] - 1):
        raise ValueError(f"{list(c)} is not a single coordinate bit")
    return nz[0]


def piece_bases(src: Layout, dst: Layout, ebytes: int, max_vec_bytes: int = 16) -> Tuple[Coord, ...]:
    """The coordinate bits both layouts hold in one register bit each and nowhere else (in neither layout
    does any other register, lane or warp basis touch them), in the order of ``src``'s registers; not the bits
    inside either side's shared-memory vectors (a fp16 pair of an MMA fragment, 8 columns of a 16-byte store)."""
    if tuple(src.shape) != tuple(dst.shape):
        return ()
    vec = set()
    for L in (src, dst):
        d = contiguous_dim(L)
        n = vector_elems(L, d, max(1, max_vec_bytes // ebytes))
        vec |= {tuple((1 << i) if k == d else 0 for k in range(L.rank)) for i in range(n.bit_length() - 1)}
    out = []
    for b in src.reg:
        try:
            d, x = _bit(b)
        except ValueError:
            continue
        if b in out or b in vec or b not in dst.reg:
            continue
        ok = True
        for L in (src, dst):
            if [r for r in L.reg if r == b] != [b] or any(o[d] & x for o in L.reg + L.lane + L.warp if o != b):
                ok = False
        if ok:
            out.append(b)
    return tuple(out)


def _squeeze(c: Coord, bases: Sequence[Coord]) -> Coord:
    """``c`` with the piece bits taken out of its coordinates (the higher bits of that dimension move down)."""
    out = list(c)
    for d, x in sorted((_bit(b) for b in bases), key=lambda t: -t[1]):
        v = out[d]
        out[d] = (v & (x - 1)) | ((v >> 1) & ~(x - 1))
    return tuple(out)


def piece_shape(shape: Sequence[int], bases: Sequence[Coord]) -> Tuple[int, ...]:
    out = list(shape)
    for b in bases:
        d, _ = _bit(b)
        out[d] //= 2
    return tuple(out)


def split_layout(L: Layout, bases: Sequence[Coord]) -> Tuple[Layout, List[List[int]]]:
    """The layout of one piece (``L``'s other bases, piece bits squeezed out of every coordinate) and, for
    each piece ``p`` (bit ``j`` of ``p``: the value of ``bases[j]``), the registers of ``L`` that hold it, in
    the piece layout's register order. ``bases`` must be register bases of ``L`` (``piece_bases``)."""
    sel = [L.reg.index(b) for b in bases]
    keep = [i for i in range(len(L.reg)) if i not in sel]
    sub = Layout(piece_shape(L.shape, bases), tuple(_squeeze(L.reg[i], bases) for i in keep),
                 tuple(_squeeze(b, bases) for b in L.lane), tuple(_squeeze(b, bases) for b in L.warp), "derived")
    regs = []
    for p in range(1 << len(bases)):
        hi = sum(1 << sel[j] for j in range(len(bases)) if p >> j & 1)
        regs.append([hi + sum(1 << keep[i] for i in range(len(keep)) if s >> i & 1) for s in range(sub.num_regs)])
    return sub, regs
