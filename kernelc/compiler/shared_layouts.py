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

import functools
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
    # how the source side writes: "" (st.shared of write_vec elements), "stmatrix" or "stmatrix.trans"
    # (16-bit MMA-fragment registers, eight 8x8 blocks per warp instruction; ``stmatrix_fit``)
    write_op: str = ""
    # how the destination side reads: "" (ld.shared of read_vec elements), "ldmatrix" or "ldmatrix.trans"
    # (16-bit elements, four 8x8 blocks of 16-byte rows per warp instruction; ``ldmatrix_ok``)
    read_op: str = ""

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
        if self.write_op:
            parts.append(f"write={self.write_op}")
        if self.read_op:
            parts.append(f"read={self.read_op}")
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


def _unit(rank: int, d: int, x: int) -> Tuple[int, ...]:
    return tuple(x if k == d else 0 for k in range(rank))


def stmatrix_fit(layout: Layout, ebytes: int) -> Optional[Tuple[int, int]]:
    """(row dim R, column dim C) if ``layout`` holds 16-bit elements as ``stmatrix`` fragments: register
    bit 0 and lane bits 0-1 step 1, 2, 4 along C, lane bits 2-4 step 1, 2, 4 along R (one 8x8 block per
    register pair and warp: the MMA accumulator layouts), and at least 8 registers (an x4 instruction
    takes four blocks: register bits 1-2 pick the block, the higher bits the instruction). Every basis
    must be one power of two along one dimension (or zero for a warp), so coordinates combine by OR."""
    if ebytes != 2 or layout.rank < 2 or len(layout.reg) < 3 or len(layout.lane) != 5:
        return None
    for b in layout.reg + layout.lane + layout.warp:
        nz = [x for x in b if x]
        if len(nz) > 1 or (nz and nz[0] & (nz[0] - 1)) or (not nz and b not in layout.warp):
            return None
    c = next((d for d, x in enumerate(layout.reg[0]) if x), None)
    r = next((d for d, x in enumerate(layout.lane[2]) if x), None)
    if c is None or r is None or r == c:
        return None
    rank = layout.rank
    if (layout.reg[0], layout.lane[0], layout.lane[1]) != (_unit(rank, c, 1), _unit(rank, c, 2), _unit(rank, c, 4)) \
            or tuple(layout.lane[2:]) != (_unit(rank, r, 1), _unit(rank, r, 2), _unit(rank, r, 4)):
        return None
    return r, c


def stmatrix_address_layout(layout: Layout, trans: bool) -> Layout:
    """The layout whose register g, lane l coordinate is the start of the 16-byte row that lane l
    addresses in ``stmatrix`` instruction g (l = 8 * block + row of the block): a row of the fragment
    (along C; ``trans=False``) or, transposed, a column (along R). Blocks are register bits 1-2."""
    row = tuple(layout.lane[2:5]) if not trans else (layout.reg[0],) + tuple(layout.lane[0:2])
    return Layout(layout.shape, tuple(layout.reg[3:]), row + tuple(layout.reg[1:3]), layout.warp, "derived")


def stmatrix_rows_fit(layout: Layout, ebytes: int) -> bool:
    """Whether ``layout`` can be written with ``stmatrix`` (no transpose) into a buffer whose rows run
    along the last dimension in aligned 16-byte chunks (a TMA box): its fragments' columns are the last
    dimension and every block starts on a multiple of 8 columns."""
    fit = stmatrix_fit(layout, ebytes)
    if fit is None or fit[1] != layout.rank - 1 or (layout.shape[-1] * ebytes) % 16:
        return False
    return not any(b[-1] % 8 for b in layout.reg[1:] + layout.warp)


def _stmatrix_ok(src: Layout, sl: SharedLayout, ebytes: int) -> str:
    """The ``write_op`` with which ``src`` can be written into ``sl`` by ``stmatrix`` ("" if none): the
    8 elements of each row of a block must be one aligned 16-byte run of ``sl``."""
    fit = stmatrix_fit(src, ebytes)
    if fit is None or (sl.max_phase > 1 and sl.vec * ebytes < 16) or (sl.pad * ebytes) % 16 or \
            (sl.row_len * ebytes) % 16:
        return ""
    r, c = fit
    if sl.inner not in (r, c):
        return ""
    trans = sl.inner == r
    # the blocks' origins must start runs of 8 along ``inner`` (the other lane bases and register bit 0
    # run along the other dimension)
    if any(b[sl.inner] % 8 for b in src.reg[1:] + src.warp):
        return ""
    return "stmatrix.trans" if trans else "stmatrix"


def ldmatrix_ok(dst: Layout, sl: SharedLayout, ebytes: int) -> str:
    """The ``read_op`` with which ``dst`` can be read from ``sl`` by ``ldmatrix.x4`` ("" if none).

    ``ldmatrix`` gives lane l, of block b (register bits 1-2; the higher bits pick the instruction), the 16-bit
    elements at column 2 * (l % 4) + h (h: register bit 0) of row l / 4, each of the block's 8 rows being a 16-byte
    run of ``sl`` at an address its own lane names; ``.trans`` gives it row 2 * (l % 4) + h, column l / 4. So
    ``dst`` fits when the bases that pick the column step 1, 2, 4 along ``sl.inner`` (plain: register bit 0 and
    lane bits 0-1; trans: lane bits 2-4) and every other basis is a whole number of 16-byte runs along ``inner``
    (rows are addressed one by one, so they may lie anywhere: a blocked store layout whose 8 registers run along
    another dimension than ``inner`` reads its transpose with ``.trans``)."""
    if ebytes != 2 or len(dst.reg) < 3 or len(dst.lane) != 5 or (sl.max_phase > 1 and sl.vec * ebytes < 16) \
            or (sl.pad * ebytes) % 16 or (sl.row_len * ebytes) % 16:
        return ""
    rank, d = dst.rank, sl.inner
    for op, cols, rest in (("ldmatrix", (dst.reg[0],) + dst.lane[0:2], dst.reg[1:] + dst.lane[2:] + dst.warp),
                           ("ldmatrix.trans", dst.lane[2:5], (dst.reg[0],) + dst.lane[0:2] + dst.reg[1:] + dst.warp)):
        if tuple(cols) == (_unit(rank, d, 1), _unit(rank, d, 2), _unit(rank, d, 4)) and not any(b[d] % 8 for b in rest):
            return op
    return ""


def ldmatrix_address_layout(dst: Layout, trans: bool) -> Layout:
    """The layout whose register g, lane l coordinate is the start of the 16-byte row that lane l addresses in
    ``ldmatrix`` instruction g (l = 8 * block + row of the block): the bases that pick the row (plain: lane bits
    2-4; trans: register bit 0 and lane bits 0-1), then the block's (register bits 1-2)."""
    row = tuple(dst.lane[2:5]) if not trans else (dst.reg[0],) + tuple(dst.lane[0:2])
    return Layout(dst.shape, tuple(dst.reg[3:]), row + tuple(dst.reg[1:3]), dst.warp, "derived")


def ldmatrix_cost(dst: Layout, sl: SharedLayout, ebytes: int) -> int:
    """Wavefronts of warp 0's ``ldmatrix`` reads: each instruction loads 32 rows of 16 bytes, served eight rows
    (one block) per phase."""
    coords = warp_coords(ldmatrix_address_layout(dst, sl.read_op.endswith(".trans")))
    return wavefronts(sl.offsets(coords) * ebytes, 16)


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


def plan_shared_layout(src: Layout, dst: Layout, ebytes: int, max_vec_bytes: int = 16,
                       stmatrix: bool = False, ldmatrix: bool = False) -> SharedLayout:
    """The candidate with the fewest write + read wavefronts (then the fewest instructions, then the
    smallest, then the simplest). ``max_vec_bytes``: the widest shared access to use. ``stmatrix``
    (sm_90+): also consider writing 16-bit MMA fragments with ``stmatrix`` (``write_op``); ``ldmatrix``: also
    consider reading 16-bit elements with ``ldmatrix`` (``read_op``; ``ldmatrix_ok``).

    Remembered per process: the answer is a function of the arguments alone (of a Layout, only its bases and
    shape, the fields it compares and hashes on), and the passes and codegen ask for the same conversions again
    (coalesce, smem_offsets and the lowering of one kernel; an autotuner's configs): ~10 ms each."""
    return _plan_shared_layout(src, dst, int(ebytes), int(max_vec_bytes), bool(stmatrix), bool(ldmatrix))


@functools.lru_cache(maxsize=4096)
def _plan_shared_layout(src: Layout, dst: Layout, ebytes: int, max_vec_bytes: int, stmatrix: bool,
                        ldmatrix: bool = False) -> SharedLayout:
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
            op = _stmatrix_ok(src, sl, ebytes) if stmatrix else ""
            if op:
                sm = SharedLayout(shape, write_vec=8, read_vec=rv, write_op=op, **c)
                cost = stmatrix_cost(src, sm, ebytes) + access_cost(dst, sm, ebytes, rv, dst_c)
                key = (cost, src.num_regs // 8 + dst.num_regs // rv, sm.nbytes(ebytes), i)
                if key < best_key:
                    best, best_key = sm, key
            rop = ldmatrix_ok(dst, sl, ebytes) if ldmatrix else ""
            if rop:
                lm = SharedLayout(shape, write_vec=wv, read_vec=8, read_op=rop, **c)
                cost = access_cost(src, lm, ebytes, wv, src_c) + ldmatrix_cost(dst, lm, ebytes)
                key = (cost, src.num_regs // wv + dst.num_regs // 8, lm.nbytes(ebytes), i)
                if key < best_key:
                    best, best_key = lm, key
    return best


def stmatrix_cost(src: Layout, sl: SharedLayout, ebytes: int) -> int:
    """Wavefronts of warp 0's ``stmatrix`` writes: each instruction stores 32 rows of 16 bytes, served
    eight rows (one block) per phase."""
    coords = warp_coords(stmatrix_address_layout(src, sl.write_op.endswith(".trans")))
    return wavefronts(sl.offsets(coords) * ebytes, 16)


def conversion_cost(src: Layout, dst: Layout, sl: SharedLayout, ebytes: int) -> Tuple[int, int]:
    """(write, read) wavefronts of warp 0 for converting ``src`` -> ``dst`` through ``sl``."""
    w = stmatrix_cost(src, sl, ebytes) if sl.write_op else access_cost(src, sl, ebytes, sl.write_vec)
    return (w, ldmatrix_cost(dst, sl, ebytes) if sl.read_op else access_cost(dst, sl, ebytes, sl.read_vec))


def plan_fits(src: Layout, dst: Layout, sl: SharedLayout, ebytes: int) -> bool:
    """Whether ``sl`` (planned by a pass) can convert ``src`` to ``dst`` as written."""
    if sl.shape != tuple(dst.shape):
        return False
    if sl.read_op:
        if ldmatrix_ok(dst, sl, ebytes) != sl.read_op:
            return False
    elif vector_elems(dst, sl.inner, sl.read_vec) < sl.read_vec:
        return False
    if sl.write_op:
        return _stmatrix_ok(src, sl, ebytes) == sl.write_op
    return vector_elems(src, sl.inner, sl.write_vec) >= sl.write_vec
