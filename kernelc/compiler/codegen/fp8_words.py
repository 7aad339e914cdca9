"""fp8 tiles as 32-bit words: which bytes of a thread's registers go into one word where a loop carries an fp8
tile and an fp8 wgmma reads it as its A operand (FA3-order fp8 attention's P; ``control.py`` packs the carried
words, ``dot.py`` builds the A fragments from them; passes/narrow_carries.py: mark_fp8_carry_words)."""
from __future__ import annotations

from typing import List, Optional


def a8_fragment_order(M: int, K: int, wm: int) -> List[int]:
    """A thread's registers of an 8-bit ``[M, K]`` tile in the accumulator layout ``mma_v2((M, K), (wm, 1))``,
    grouped four by four into the words ``dot.py: _a8_from_registers`` shuffles: per row block, 32-column step and
    row (g, g + 8), the bytes of 8-column blocks 0 and 2, then of blocks 1 and 3 (two columns each). A
    loop-carried fp8 tile crosses the back edge in these words (``codegen/control.py``), so the words the
    shuffle needs are the phis themselves."""
    nbits_n = (max(1, K // 8) - 1).bit_length()
    order = []
    for i in range(max(1, M // (16 * wm))):
        for kk in range(K // 32):
            for h in (0, 1):
                for a, b in ((0, 2), (1, 3)):
                    order += [c | ((4 * kk + n) << 2) | (i << (2 + nbits_n)) for n in (a, b) for c in (2 * h, 2 * h + 1)]
    return order


def a8_operand_layout(M: int, K: int, wm: int):
    """The register layout of an fp8 wgmma A fragment over an ``[M, K]`` tile, every warp along M: lane ``l`` holds
    rows ``l//4`` and ``l//4 + 8`` and, per 32-column step, columns ``4(l%4)..+3`` and ``16 + 4(l%4)..+3``; its
    registers in fragment order (four bytes a word, words a0 a1 a2 a3 of a step, then steps, then 16*wm-row
    blocks). A tile already in it needs no shuffle (``dot.py: _a_from_registers``); the MMA accumulator layout
    is it with column bits 1, 2, 3 moved to 3, 1, 2, so a kernel gets there by a reshape and permute of its
    key dim (``examples/kernels/attention.py``: fp8's key order)."""
    from ..layouts import Layout
    reg = [(0, 1), (0, 2), (8, 0), (0, 16)]
    v = 32
    while v < K:
        reg.append((0, v))
        v <<= 1
    v = 16 * wm
    while v < M:
        reg.append((v, 0))
        v <<= 1
    lane = ((0, 4), (0, 8), (1, 0), (2, 0), (4, 0))
    warp = tuple((16 << i, 0) for i in range(wm.bit_length() - 1))
    return Layout((M, K), tuple(reg), lane, warp, "derived")


def a8_operand_order(L, M: int, K: int, wm: int) -> Optional[List[int]]:
    """For each register of :func:`a8_operand_layout` the register of ``L`` holding the same element in the same
    thread (``L``'s registers in fragment order), or None where ``L`` spreads the tile over threads otherwise."""
    from ..layouts import register_map
    if L is None or len(L.shape) != 2 or K % 32 or M % (16 * wm):
        return None
    return register_map(L, a8_operand_layout(M, K, wm), lambda c: c)


def word_order(L) -> Optional[List[int]]:
    """How an 8-bit tile of layout ``L`` is grouped into words for an fp8 wgmma A operand: in an MMA accumulator
    layout of one warp column, :func:`a8_fragment_order` (a loop carry crosses the back edge in these words,
    ``control.py``; a bounded fp8 cast joins its branches in them, ``fp8.py: cast_many_bounded``); else None."""
    from ..layouts import mma_v2
    if L is not None and len(L.shape) == 2 and L.num_warps >= 4 and len(L.lane) == 5:
        wm = L.num_warps  # every warp along M (what a register A operand needs)
        own = a8_operand_order(L, *L.shape, wm) if L.shape[0] % (16 * wm) == 0 and L.shape[1] % 32 == 0 else None
        if own is not None and sorted(own) == list(range(L.num_regs)):
            return own  # already the fragment's own bytes (a8_operand_layout): no shuffle, words as read
    if L is None or L.kind != "mma" or not L.mma_meta or len(L.shape) != 2:
        return None
    (wm, wn), (M, K) = L.mma_meta[0], L.shape
    if wn != 1 or K % 32 or L != mma_v2((M, K), (wm, 1)):
        return None
    order = a8_fragment_order(M, K, wm)
    return order if sorted(order) == list(range(L.num_regs)) else None


def word_of_pairs(e, bs: List[str]) -> str:
    """Four i8 as one i32 (the first in the low byte), built as two i16 halves of a ``<2 x i16>``: LLVM keeps an
    fp8 cvt pair's i16 whole and NVPTX joins two with ``mov.b32 {lo, hi}``, which ptxas folds into the second
    F2FP (``MERGE_C``) -- where i32 shifts and ors cost a PRMT per word. ``control.py: _unpacked`` with ``pairs`` and
    ``dot.py``'s A-fragment words take words apart and put them together the same way, so they fold."""
    v = "undef"
    for h in range(2):
        lo = e.val(f"zext i8 {bs[2 * h]} to i16")
        hi = e.val(f"shl i16 {e.val(f'zext i8 {bs[2 * h + 1]} to i16')}, 8")
        v = e.val(f"insertelement <2 x i16> {v}, i16 {e.val(f'or i16 {lo}, {hi}')}, i32 {h}")
    return e.val(f"bitcast <2 x i16> {v} to i32")
