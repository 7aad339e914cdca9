"""Shared-memory layouts for layout conversions, chosen with a bank-conflict model.

A conversion writes a tile to shared memory in its source register layout and reads it back in the
destination layout. Where the two layouts run along different dimensions (a transpose), a plain
row-major buffer makes one side hit the same bank from many lanes. A ``SharedLayout`` stores one
dimension (``inner``) contiguously and breaks the conflicts either by XOR-swizzling the inner
coordinate with the row index (in units of ``vec`` elements, so vectors stay contiguous) or by
padding each row; ``plan_shared_layout`` simulates the shared-memory wavefronts of warp 0's writes
and reads for each candidate and keeps the cheapest (docs/layouts.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

from .layouts import Layout

BANKS = 32
BANK_BYTES = 4


@dataclass(frozen=True)
class SharedLayout:
    shape: Tuple[int, ...]
    inner: int  # the dimension stored contiguously
    vec: int = 1  # swizzle unit in elements
    per_phase: int = 1  # rows that share one swizzle phase
    max_phase: int = 1  # number of phases (1: no swizzle)
    pad: int = 0  # elements of padding after each row
    write_vec: int = 1  # elements per shared store (source side)
    read_vec: int = 1  # elements per shared load (destination side)

    @property
    def row_len(self) -> int:
        return self.shape[self.inner]

    @property
    def rows(self) -> int:
        n = 1
        for d, s in enumerate(self.shape):
            if d != self.inner:
                n *= s
        return n

    def nbytes(self, ebytes: int) -> int:
        return self.rows * (self.row_len + self.pad) * ebytes

    def outer_strides(self) -> List[Tuple[int, int]]:
        """(dim, stride in rows) of each dimension other than ``inner`` (row-major over them)."""
        out, stride = [], 1
        for d in reversed(range(len(self.shape))):
            if d == self.inner:
                continue
            out.append((d, stride))
            stride *= self.shape[d]
        return out

    def offsets(self, coords: np.ndarray) -> np.ndarray:
        """Element offsets of tile coordinates ``coords[..., rank]``."""
        row = np.zeros(coords.shape[:-1], dtype=np.int64)
        for d, stride in self.outer_strides():
            row += coords[..., d] * stride
        col = coords[..., self.inner].astype(np.int64)
        if self.max_phase > 1:
            col = col ^ (((row // self.per_phase) % self.max_phase) * self.vec)
        return row * (self.row_len + self.pad) + col

    def __str__(self):
        parts = [f"inner={self.inner}"]
        if self.max_phase > 1:
            parts.append(f"swizzle=[{self.vec}, {self.per_phase}, {self.max_phase}]")
        if self.pad:
            parts.append(f"pad={self.pad}")
        parts.append(f"vec=[{self.write_vec}, {self.read_vec}]")
        return "#shared<" + ", ".join(parts) + ">"


def contiguous_dim(layout: Layout) -> int:
    """The dimension a thread's leading registers run along (the last one if it holds one element)."""
    if layout.reg:
        for d, x in enumerate(layout.reg[0]):
            if x:
                return d
    return layout.rank - 1


def vector_elems(layout: Layout, dim: int, limit: int) -> int:
    """Largest power of two <= ``limit`` such that each group of that many registers is a run of
    consecutive elements along ``dim`` starting at a multiple of the group size."""
    v = 1
    while v * 2 <= limit:
        k = (v * 2).bit_length() - 1  # register bits the group spans
        if len(layout.reg) < k:
            break
        unit = all(layout.reg[i] == tuple((1 << i) if d == dim else 0 for d in range(layout.rank)) for i in range(k))
        rest = layout.reg[k:] + layout.lane + layout.warp
        if not unit or any(b[dim] % (v * 2) for b in rest):
            break
        v *= 2
    return v


def warp_coords(layout: Layout) -> np.ndarray:
    """coords[r, lane, d] of warp 0 (bases combine by XOR: layouts are linear)."""
    regs = np.array(layout.reg_coords(), dtype=np.int64).reshape(layout.num_regs, layout.rank)
    lanes = np.array([layout.thread_coord(l, 0) for l in range(32)], dtype=np.int64).reshape(32, layout.rank)
    return regs[:, None, :] ^ lanes[None, :, :]


def wavefronts(byte_addrs: np.ndarray, access_bytes: int) -> int:
    """Shared-memory wavefronts for warp instructions (``byte_addrs[instr, lane]``): lanes are served
    in phases of 128 bytes (32 lanes for <= 4-byte accesses, 16 for 8, 8 for 16); in each phase a
    bank costs one wavefront per distinct 4-byte word it must deliver."""
    addrs = np.asarray(byte_addrs, dtype=np.int64).reshape(-1, 32)
    per_phase = max(1, min(32, BANKS * BANK_BYTES // max(access_bytes, BANK_BYTES)))
    k = max(1, access_bytes // BANK_BYTES)
    words = (addrs // BANK_BYTES)[:, :, None] + np.arange(k)[None, None, :]
    words = np.sort(words.reshape(-1, per_phase * k), axis=1)  # one row per phase
    fresh = np.ones(words.shape, dtype=bool)
    fresh[:, 1:] = words[:, 1:] != words[:, :-1]  # the same word to several lanes is one broadcast
    rows = np.broadcast_to(np.arange(words.shape[0])[:, None], words.shape)
    counts = np.zeros((words.shape[0], BANKS), dtype=np.int64)
    np.add.at(counts, (rows[fresh], words[fresh] % BANKS), 1)
    return int(counts.max(axis=1).sum())


def access_cost(layout: Layout, sl: SharedLayout, ebytes: int, vec: int, coords: Optional[np.ndarray] = None) -> int:
    """Wavefronts warp 0 spends writing (or reading) its registers of ``layout`` in ``sl``."""
    coords = warp_coords(layout) if coords is None else coords
    offs = sl.offsets(coords[::vec]) * ebytes
    return wavefronts(offs, vec * ebytes)


def _candidates(shape: Sequence[int], inner: int, ebytes: int):
    w = shape[inner]
    max_vec = max(1, 16 // ebytes)
    yield dict(inner=inner)
    if len(shape) > 1:
        pad = 1
        while pad * ebytes <= 16:
            yield dict(inner=inner, pad=pad)
            pad *= 2
        vec = 1
        while vec <= max_vec:
            mp = 2
            while mp * vec <= w and mp <= 32:
                for pp in (1, 2, 4, 8):
                    yield dict(inner=inner, vec=vec, per_phase=pp, max_phase=mp)
                mp *= 2
            vec *= 2


def _vec_limit(c: dict, ebytes: int, max_vec_bytes: int) -> int:
    lim = max(1, max_vec_bytes // ebytes)
    if c.get("max_phase", 1) > 1:
        lim = min(lim, c["vec"])
    if c.get("pad"):
        lim = min(lim, c["pad"] & -c["pad"])
    return lim


def plan_shared_layout(src: Layout, dst: Layout, ebytes: int, max_vec_bytes: int = 16) -> SharedLayout:
    """The candidate with the fewest write + read wavefronts (then the fewest instructions, then the
    smallest, then the simplest). ``max_vec_bytes``: the widest shared access to use."""
    shape = tuple(dst.shape)
    src_c, dst_c = warp_coords(src), warp_coords(dst)
    inners = []
    for d in (contiguous_dim(src), contiguous_dim(dst), len(shape) - 1):
        if d not in inners:
            inners.append(d)
    best, best_key = None, None
    for inner in inners:
        for i, c in enumerate(_candidates(shape, inner, ebytes)):
            lim = _vec_limit(c, ebytes, max_vec_bytes)
            wv = vector_elems(src, inner, lim)
            rv = vector_elems(dst, inner, lim)
            sl = SharedLayout(shape, write_vec=wv, read_vec=rv, **c)
            cost = access_cost(src, sl, ebytes, wv, src_c) + access_cost(dst, sl, ebytes, rv, dst_c)
            key = (cost, src.num_regs // wv + dst.num_regs // rv, sl.nbytes(ebytes), i)
            if best_key is None or key < best_key:
                best, best_key = sl, key
    return best


def conversion_cost(src: Layout, dst: Layout, sl: SharedLayout, ebytes: int) -> Tuple[int, int]:
    """(write, read) wavefronts of warp 0 for converting ``src`` -> ``dst`` through ``sl``."""
    return (access_cost(src, sl, ebytes, sl.write_vec), access_cost(dst, sl, ebytes, sl.read_vec))
