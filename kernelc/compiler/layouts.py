"""Distributed layouts: how a tile's elements are spread over registers, lanes and warps.

Every layout is *linear* over GF(2): the tile coordinate of (register r, lane l, warp w) is the XOR
of one basis vector per set bit of r, l and w. Blocked layouts (coalesced memory access), MMA
accumulator layouts and their slices are all of this form, so one set of routines handles
reductions (combine along bases that move the reduced axis), broadcasts (zero bases) and the
question "can this conversion stay in registers?" for all of them. Shapes are powers of two.

Example: a 1-D blocked layout of 1024 fp32 with 4 elements per thread and 4 warps has register
bases (1,), (2,) [plus (512,) for the second repetition], lane bases (4,), (8,), ..., (64,) and
warp bases (128,), (256,).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

Coord = Tuple[int, ...]


def _log2(n: int) -> int:
    if n <= 0 or n & (n - 1):
        raise ValueError(f"{n} is not a power of two")
    return n.bit_length() - 1


def is_pow2(n: int) -> bool:
    return n > 0 and (n & (n - 1)) == 0


def _xor(a: Coord, b: Coord) -> Coord:
    return tuple(x ^ y for x, y in zip(a, b))


@dataclass(frozen=True)
class Layout:
    shape: Tuple[int, ...]
    reg: Tuple[Coord, ...]
    lane: Tuple[Coord, ...]  # 5 bases (32 lanes)
    warp: Tuple[Coord, ...]  # log2(num_warps) bases
    kind: str = field(default="blocked", compare=False)  # blocked | mma | slice | derived (informational)
    # For layouts derived by slicing: the parent and axis, so a broadcast can return to the parent.
    parent: Optional["Layout"] = field(default=None, compare=False)
    sliced_axis: Optional[int] = field(default=None, compare=False)
    mma_meta: Optional[tuple] = field(default=None, compare=False)
    # blocked(): (size_per_thread, threads_per_warp, warps_per_cta, order), for a short printed form
    params: Optional[tuple] = field(default=None, compare=False)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def num_regs(self) -> int:
        return 1 << len(self.reg)

    @property
    def num_warps(self) -> int:
        return 1 << len(self.warp)

    def reg_coord(self, r: int) -> Coord:
        c = (0,) * self.rank
        for i, b in enumerate(self.reg):
            if r >> i & 1:
                c = _xor(c, b)
        return c

    def reg_coords(self) -> List[Coord]:
        return [self.reg_coord(r) for r in range(self.num_regs)]

    def thread_coord(self, lane: int, warp: int) -> Coord:
        c = (0,) * self.rank
        for i, b in enumerate(self.lane):
            if lane >> i & 1:
                c = _xor(c, b)
        for i, b in enumerate(self.warp):
            if warp >> i & 1:
                c = _xor(c, b)
        return c

    def __str__(self):
        if self.kind == "mma" and self.mma_meta:
            return f"#mma<warps={list(self.mma_meta[0])}, shape={list(self.shape)}>"
        if self.kind == "blocked" and self.params:
            spt, tpw, wpc, order = (list(x) for x in self.params)
            return f"#blocked<spt={spt}, tpw={tpw}, wpc={wpc}, order={order}>"
        return f"#{self.kind}<shape={list(self.shape)}, regs={self.num_regs}, reg={list(self.reg)}, lane={list(self.lane)}, warp={list(self.warp)}>"

    # -- derived layouts ---------------------------------------------------------------------
    def sliced(self, axis: int) -> "Layout":
        """Layout of reduce(axis): drop the axis; registers that moved it disappear, lanes/warps broadcast."""
        def drop(c):
            return c[:axis] + c[axis + 1:]
        reg = tuple(drop(b) for b in self.reg if b[axis] == 0)
        return Layout(self.shape[:axis] + self.shape[axis + 1:], reg, tuple(drop(b) for b in self.lane),
                      tuple(drop(b) for b in self.warp), "slice", parent=self, sliced_axis=axis)

    def expanded(self, axis: int) -> "Layout":
        """Layout of expand_dims(axis): a new dimension of size 1."""
        def ins(c):
            return c[:axis] + (0,) + c[axis:]
        parent = self.parent if (self.parent is not None and self.sliced_axis == axis) else None
        return Layout(self.shape[:axis] + (1,) + self.shape[axis:], tuple(ins(b) for b in self.reg),
                      tuple(ins(b) for b in self.lane), tuple(ins(b) for b in self.warp), "derived",
                      parent=parent, sliced_axis=axis if parent is not None else None)

    def transposed(self, perm: Sequence[int]) -> "Layout":
        def p(c):
            return tuple(c[i] for i in perm)
        return Layout(tuple(self.shape[i] for i in perm), tuple(p(b) for b in self.reg),
                      tuple(p(b) for b in self.lane), tuple(p(b) for b in self.warp), "derived")

    def reshaped(self, shape: Sequence[int]) -> "Layout":
        """Row-major reshape: flatten each basis to a linear index and split it again."""
        shape = tuple(shape)

        def lin(c):
            idx = 0
            for x, s in zip(c, self.shape):
                idx = idx * s + x
            return idx

        def split(i):
            out = []
            for s in reversed(shape):
                out.append(i % s)
                i //= s
            return tuple(reversed(out))

        def f(c):
            return split(lin(c))
        return Layout(shape, tuple(f(b) for b in self.reg), tuple(f(b) for b in self.lane),
                      tuple(f(b) for b in self.warp), "derived")

    def joined(self) -> "Layout":
        """join(a, b): a new last dimension of size 2 held in a new (last) register bit."""
        def ext(c):
            return c + (0,)
        reg = tuple(ext(b) for b in self.reg) + ((0,) * self.rank + (1,),)
        return Layout(self.shape + (2,), reg, tuple(ext(b) for b in self.lane), tuple(ext(b) for b in self.warp),
                      "derived")

    def pair_bit(self) -> Optional[int]:
        """The register bit that alone selects the last dimension (of size 2), if each pair lives in one
        thread's registers: then join/split only rename registers."""
        last = (0,) * (self.rank - 1) + (1,)
        bits = [i for i, b in enumerate(self.reg) if b == last]
        if not self.rank or self.shape[-1] != 2 or len(bits) != 1:
            return None
        others = [b for i, b in enumerate(self.reg) if i != bits[0]] + list(self.lane) + list(self.warp)
        return bits[0] if all(b[-1] == 0 for b in others) else None

    def unpaired(self, bit: int) -> "Layout":
        """This layout without its pair bit and its last dimension (the layout of each half of a split)."""
        def drop(c):
            return c[:-1]
        return Layout(self.shape[:-1], tuple(drop(b) for i, b in enumerate(self.reg) if i != bit),
                      tuple(drop(b) for b in self.lane), tuple(drop(b) for b in self.warp), "derived")

    def broadcast_from(self, axes: Sequence[int]) -> "Layout":
        """The layout a source of shape (1 at ``axes``) must have to broadcast into ``self`` in registers."""
        def z(c):
            return tuple(0 if i in axes else x for i, x in enumerate(c))
        shape = tuple(1 if i in axes else s for i, s in enumerate(self.shape))
        reg = tuple(z(b) for b in self.reg if any(b[i] for i in range(self.rank) if i not in axes))
        return Layout(shape, reg, tuple(z(b) for b in self.lane), tuple(z(b) for b in self.warp), "derived")

    def contig_regs(self, dim: int) -> int:
        """How many leading registers are consecutive elements along ``dim`` (the vector width)."""
        n = 0
        for i, b in enumerate(self.reg):
            want = tuple((1 << i) if d == dim else 0 for d in range(self.rank))
            if b != want:
                break
            n += 1
        return 1 << n

    def is_replicated(self) -> bool:
        zero = (0,) * self.rank
        return any(b == zero for b in self.lane + self.warp)


# -- constructors ------------------------------------------------------------------------------


def blocked(shape: Sequence[int], size_per_thread: Sequence[int], threads_per_warp: Sequence[int],
            warps_per_cta: Sequence[int], order: Sequence[int]) -> Layout:
    """Triton-style blocked layout. ``order`` lists dims from fastest-varying to slowest."""
    shape = tuple(shape)
    rank = len(shape)

    def unit(d, v):
        c = [0] * rank
        c[d] = v if v < shape[d] else 0  # coverage beyond the tile wraps: replication
        return tuple(c)

    reg, lane, warp = [], [], []
    for d in order:
        for i in range(_log2(size_per_thread[d])):
            reg.append(unit(d, 1 << i))
    for d in order:
        for i in range(_log2(threads_per_warp[d])):
            lane.append(unit(d, size_per_thread[d] << i))
    for d in order:
        for i in range(_log2(warps_per_cta[d])):
            warp.append(unit(d, size_per_thread[d] * threads_per_warp[d] << i))
    for d in order:
        cov = size_per_thread[d] * threads_per_warp[d] * warps_per_cta[d]
        v = cov
        while v < shape[d]:
            reg.append(unit(d, v))
            v <<= 1
    # A register basis of zero would hold a duplicate element: drop it (spt larger than the tile).
    zero = (0,) * rank
    reg = [b for b in reg if b != zero]
    return Layout(shape, tuple(reg), tuple(lane), tuple(warp), "blocked",
                  params=(tuple(size_per_thread), tuple(threads_per_warp), tuple(warps_per_cta), tuple(order)))


def default_blocked(shape: Sequence[int], num_warps: int, order: Optional[Sequence[int]] = None,
                    vec: int = 1) -> Layout:
    """A blocked layout covering ``shape`` with ``vec`` contiguous elements per thread along order[0]."""
    shape = tuple(shape)
    rank = len(shape)
    order = tuple(order) if order is not None else tuple(reversed(range(rank)))
    numel = 1
    for s in shape:
        numel *= s
    spt = [1] * rank
    vec = max(1, min(vec, shape[order[0]], max(1, numel // (32 * num_warps))))
    spt[order[0]] = vec
    tpw = [1] * rank
    left = 32
    for d in order:
        t = min(left, max(1, shape[d] // spt[d]))
        tpw[d] = t
        left //= t
    tpw[order[-1]] *= left  # leftover lanes replicate along the slowest dim
    wpc = [1] * rank
    left = num_warps
    for d in order:
        w = min(left, max(1, shape[d] // (spt[d] * tpw[d])))
        wpc[d] = w
        left //= w
    wpc[order[-1]] *= left
    return blocked(shape, spt, tpw, wpc, order)


def mma_v2(shape: Sequence[int], warps: Tuple[int, int]) -> Layout:
    """Accumulator layout of mma.sync m16n8k* (2-D, or 3-D batched with a leading dim of 1-reps).

    Per warp and 16x8 tile: lane l holds rows l//4 and l//4+8, columns 2*(l%4) and +1.
    """
    shape = tuple(shape)
    m, n = shape[-2], shape[-1]
    wm, wn = warps
    rank = len(shape)

    def c(row, col):
        return (0,) * (rank - 2) + (row if row < m else 0, col if col < n else 0)

    reg = [c(0, 1), c(8, 0)]
    lane = [c(0, 2), c(0, 4), c(1, 0), c(2, 0), c(4, 0)]
    warp = [c(16 << i, 0) for i in range(_log2(wm))] + [c(0, 8 << i) for i in range(_log2(wn))]
    v = 8 * wn
    while v < n:
        reg.append(c(0, v))
        v <<= 1
    v = 16 * wm
    while v < m:
        reg.append(c(v, 0))
        v <<= 1
    for b in range(rank - 2):  # batch dims: registers
        v = 1
        while v < shape[b]:
            cc = [0] * rank
            cc[b] = v
            reg.append(tuple(cc))
            v <<= 1
    zero = (0,) * rank
    reg = [b for b in reg if b != zero]
    return Layout(shape, tuple(reg), tuple(lane), tuple(warp), "mma", mma_meta=((wm, wn),))


def mma_warps(m: int, n: int, num_warps: int, chained: bool = False) -> Tuple[int, int]:
    """Split warps over an M x N accumulator (Triton's rule: grow along M while M has at least as many
    16-row tiles per warp as N has 16-column tiles). A dot chained into another dot (attention's
    QK^T -> PV) puts every warp along M, so row reductions between them stay inside a warp."""
    if chained:
        wm = max(1, min(num_warps, m // 16))
        return wm, num_warps // wm
    wm, wn = 1, 1
    while wm * wn < num_warps:
        if m // 16 // wm >= n // 16 // wn:
            if wm < m // 16:
                wm *= 2
            else:
                wn *= 2
        else:
            wn *= 2
    return wm, wn


def register_map(src: Layout, dst: Layout, project) -> Optional[List[int]]:
    """If every thread already holds, in ``src``, the element each ``dst`` register needs, return
    for each dst register the src register index; else None (the data must move between threads).

    ``project`` maps a dst coordinate to the src coordinate it reads (identity for a plain
    conversion, zeroing broadcast dims for a broadcast).
    """
    if len(src.lane) != len(dst.lane) or len(src.warp) != len(dst.warp):
        return None
    for a, b in zip(dst.lane, src.lane):
        if project(a) != b:
            return None
    for a, b in zip(dst.warp, src.warp):
        if project(a) != b:
            return None
    index: Dict[Coord, int] = {}
    for r, coord in enumerate(src.reg_coords()):
        index.setdefault(coord, r)
    out = []
    for coord in dst.reg_coords():
        r = index.get(project(coord))
        if r is None:
            return None
        out.append(r)
    return out
