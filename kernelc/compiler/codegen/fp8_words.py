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


def word_order(L) -> Optional[List[int]]:
    """How an 8-bit tile of layout ``L`` is grouped into words for an fp8 wgmma A operand: in an MMA accumulator
    layout of one warp column, :func:`a8_fragment_order` (a loop carry crosses the back edge in these words,
    ``control.py``; a bounded fp8 cast joins its branches in them, ``fp8.py: cast_many_bounded``); else None."""
    from ..layouts import mma_v2
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
