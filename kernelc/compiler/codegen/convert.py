"""Layout conversion through shared memory (when registers alone cannot do it).

Every thread writes the elements it holds at their row-major position (padded by one element every
32 to spread banks), one barrier, and every thread reads the elements its new layout gives it.
"""
from __future__ import annotations

from typing import List, Optional

from .emitter import llty
from ..layouts import Layout
from .lowering import Lowering, Tile


def linear_index(lw: Lowering, coords: List[str], shape) -> str:
    e = lw.e
    idx = None
    stride = 1
    for d in reversed(range(len(shape))):
        c = coords[d]
        term = c if stride == 1 else (e.val(f"shl i32 {c}, {stride.bit_length() - 1}") if c not in ("0",) else "0")
        if term != "0":
            idx = term if idx is None else e.val(f"add i32 {idx}, {term}")
        stride *= shape[d]
    return idx or "0"


def padded(lw: Lowering, idx: str) -> str:
    e = lw.e
    if idx.lstrip("-").isdigit():
        i = int(idx)
        return str(i + i // 32)
    q = e.val(f"lshr i32 {idx}, 5")
    return e.val(f"add i32 {idx}, {q}")


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def convert_through_smem(lw: Lowering, t: Tile, dst: Layout, ty: str, write_pred: Optional[str] = None) -> Tile:
    e = lw.e
    ebytes = {"i1": 1, "i8": 1, "i16": 2, "half": 2, "bfloat": 2, "i32": 4, "float": 4, "i64": 8, "double": 8,
              "ptr addrspace(1)": 8}[ty]
    sty = "i8" if ty == "i1" else ty
    numel = _numel(dst.shape)
    nbytes = (numel + numel // 32 + 1) * ebytes
    base = lw.scratch(nbytes)
    lw.smem_access(base, base + nbytes, True)
    smem = lw.smem_base()
    src_coords = lw.coords(t.layout)
    own = lw.owner_predicate(t.layout) if write_pred is None else write_pred
    if own is not None:
        w, cont = e.label("cvt_w"), e.label("cvt_c")
        e.cond_br(own, w, cont)
        e.start_block(w)
    for r, val in enumerate(t.regs):
        idx = padded(lw, linear_index(lw, src_coords[r], t.layout.shape))
        off = e.val(f"mul i32 {idx}, {ebytes}") if ebytes > 1 else idx
        off = e.val(f"add i32 {off}, {base}") if base else off
        p = e.val(f"getelementptr i8, ptr addrspace(3) {smem}, i32 {off}")
        v = e.val(f"zext i1 {val} to i8") if ty == "i1" else val
        e.emit(f"store {sty} {v}, ptr addrspace(3) {p}, align {ebytes}")
    if own is not None:
        e.br(cont)
        e.start_block(cont)
    lw.smem_access(base, base + nbytes, False)
    dst_coords = lw.coords(dst)
    out = []
    for r in range(dst.num_regs):
        idx = padded(lw, linear_index(lw, dst_coords[r], dst.shape))
        off = e.val(f"mul i32 {idx}, {ebytes}") if ebytes > 1 else idx
        off = e.val(f"add i32 {off}, {base}") if base else off
        p = e.val(f"getelementptr i8, ptr addrspace(3) {smem}, i32 {off}")
        v = e.val(f"load {sty}, ptr addrspace(3) {p}, align {ebytes}")
        if ty == "i1":
            v = e.val(f"trunc i8 {v} to i1")
        out.append(v)
    return Tile(dst, out)


def replicate_from_owner(lw: Lowering, L: Layout, vals: List[str], elt) -> List[str]:
    """Threads that hold replicas of an element take the owner's value (e.g. an atomic's result)."""
    own = lw.owner_predicate(L)
    t = convert_through_smem(lw, Tile(L, vals), L, llty(elt), write_pred=own)
    return t.regs
