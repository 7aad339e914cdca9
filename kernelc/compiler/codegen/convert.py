"""Layout conversion through shared memory (when registers alone cannot do it).

Every thread writes the elements it holds at their row-major position (padded by one element every
32 to spread banks), one barrier, and every thread reads the elements its new layout gives it.
"""
from __future__ import annotations

from typing import List, Optional

from ...language.dtypes import scalar_of
from .emitter import llty
from ..layouts import Layout, register_map
from ..shared_layouts import (SharedLayout, conversion_cost, ldmatrix_address_layout, plan_fits,
                             plan_shared_layout, stmatrix_address_layout)
from .lowering import Lowering, Tile, rule
from ..conversion_pieces import piece_bases, split_layout
from ...errors import CompilationError

_EBYTES = {"i1": 1, "i8": 1, "i16": 2, "half": 2, "bfloat": 2, "i32": 4, "float": 4, "i64": 8, "double": 8,
           "ptr addrspace(1)": 8}


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
    ebytes = _EBYTES[ty]
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


@rule("convert_layout")
def lower_convert_layout(lw: Lowering, op):
    src, res = op.operands[0], op.results[0]
    dst = op.attrs["layout"]
    t = lw.get(src)
    m = register_map(t.layout, dst, lambda c: c)
    if m is not None:
        lw.tiles[res.id] = Tile(dst, [t.regs[i] for i in m])
        return
    ty = llty(scalar_of(src.type))
    ebytes = _EBYTES[ty]
    sl = op.attrs.get("smem")
    if op.attrs.get("pieces"):
        lw.tiles[res.id] = _convert_in_pieces(lw, op, t, dst, ty, sl)
        return
    if not isinstance(sl, SharedLayout) or not plan_fits(t.layout, dst, sl, ebytes):
        # the source layout is not the one the pass saw
        sl = plan_shared_layout(t.layout, dst, ebytes, 8 if ty.startswith("ptr") else 16)
    # passes/smem_offsets.py may have placed it in a finished ring's bytes (a GEMM's epilogue)
    at = op.attrs.get("smem_buffer")
    base = lw.placed(op, sl.nbytes(ebytes)) if at is not None and sl.nbytes(ebytes) <= at["bytes"] else None
    lw.tiles[res.id] = convert_through_shared_layout(lw, t, dst, ty, sl, base)
    writes, reads = conversion_cost(t.layout, dst, sl, ebytes)
    lw.reports.setdefault("conversions", []).append({  # facts for tools (analyzer, docs)
        "file": op.loc.file, "line": op.loc.line, "shape": list(dst.shape), "elem_bytes": ebytes,
        "src": str(t.layout), "dst": str(dst), "smem": str(sl), "smem_bytes": sl.nbytes(ebytes),
        "warp_write_wavefronts": writes, "warp_read_wavefronts": reads})


def _convert_in_pieces(lw: Lowering, op, t: Tile, dst: Layout, ty: str, sl: SharedLayout) -> Tile:
    """The conversion one piece at a time (``op.attrs["pieces"]``: the coordinate bits the pieces fix,
    ``kernelc/compiler/conversion_pieces.py``), each through the same buffer of one piece (``sl``): a barrier
    between one piece's reads and the next piece's writes (the scratch's access record, or explicit in a
    placed buffer)."""
    bases = op.attrs["pieces"]
    ebytes = _EBYTES[ty]
    if set(bases) - set(piece_bases(t.layout, dst, ebytes, 8 if ty.startswith("ptr") else 16)):
        raise CompilationError(f"internal: convert_layout in pieces {list(bases)}: the layouts {t.layout} and "
                               f"{dst} do not both hold those coordinate bits in registers alone",
                               op.loc.file, op.loc.line, op.loc.col)
    src_piece, src_regs = split_layout(t.layout, bases)
    dst_piece, dst_regs = split_layout(dst, bases)
    if not isinstance(sl, SharedLayout) or not plan_fits(src_piece, dst_piece, sl, ebytes):
        sl = plan_shared_layout(src_piece, dst_piece, ebytes, 8 if ty.startswith("ptr") else 16)
    at = op.attrs.get("smem_buffer")
    base = lw.placed(op, sl.nbytes(ebytes)) if at is not None and sl.nbytes(ebytes) <= at["bytes"] else None
    out: List[Optional[str]] = [None] * dst.num_regs
    for p in range(len(src_regs)):
        if p and base is not None:
            lw.barrier()
        piece = convert_through_shared_layout(lw, Tile(src_piece, [t.regs[i] for i in src_regs[p]]), dst_piece,
                                              ty, sl, base)
        for i, v in zip(dst_regs[p], piece.regs):
            out[i] = v
    writes, reads = conversion_cost(src_piece, dst_piece, sl, ebytes)
    lw.reports.setdefault("conversions", []).append({  # facts for tools (analyzer, docs)
        "file": op.loc.file, "line": op.loc.line, "shape": list(dst.shape), "elem_bytes": ebytes,
        "src": str(t.layout), "dst": str(dst), "smem": str(sl), "smem_bytes": sl.nbytes(ebytes),
        "pieces": len(src_regs), "warp_write_wavefronts": writes * len(src_regs),
        "warp_read_wavefronts": reads * len(src_regs)})
    return Tile(dst, out)


def _shared_offset(lw: Lowering, coord: List[str], sl: SharedLayout) -> str:
    """Element offset of a (runtime) tile coordinate in ``sl`` (i32); constants fold."""
    e = lw.e if lw is not None else None

    def const(x):
        return x.lstrip("-").isdigit()

    def binop(opname, a, b, fold):
        if const(a) and const(b):
            return str(fold(int(a), int(b)))
        return e.val(f"{opname} i32 {a}, {b}")

    row = "0"
    for d, stride in sl.outer_strides():
        term = coord[d] if stride == 1 else binop("mul", coord[d], str(stride), lambda a, b: a * b)
        row = term if row == "0" else binop("add", row, term, lambda a, b: a + b)
    col = coord[sl.inner]
    if sl.max_phase > 1:
        ph = binop("lshr", row, str(sl.per_phase.bit_length() - 1), lambda a, b: a >> b) if sl.per_phase > 1 else row
        ph = binop("and", ph, str(sl.max_phase - 1), lambda a, b: a & b)
        ph = binop("mul", ph, str(sl.vec), lambda a, b: a * b) if sl.vec > 1 else ph
        col = binop("xor", col, ph, lambda a, b: a ^ b)
    if row == "0":
        return col
    base = binop("mul", row, str(sl.row_len + sl.pad), lambda a, b: a * b)
    return binop("add", base, col, lambda a, b: a + b)


def convert_through_shared_layout(lw: Lowering, t: Tile, dst: Layout, ty: str, sl: SharedLayout,
                                  placed: Optional[str] = None) -> Tile:
    """Write ``t`` to shared memory in ``sl`` (vectors of ``sl.write_vec``), barrier, read it back in
    ``dst`` (vectors of ``sl.read_vec``). Replicated source registers are written by one owner.
    ``placed``: the offset token of a buffer ``passes/smem_offsets.py`` gave the op (it wrote the sync
    before the op); else the per-op scratch."""
    e = lw.e
    ebytes = _EBYTES[ty]
    sty = "i8" if ty == "i1" else ty
    nbytes = sl.nbytes(ebytes)
    base = placed if placed is not None else lw.scratch(nbytes)
    smem = lw.smem_base()

    def addr(coord):
        off = _shared_offset(lw, coord, sl)
        off = e.val(f"mul i32 {off}, {ebytes}") if ebytes > 1 else off
        off = e.val(f"add i32 {off}, {base}") if base else off
        return e.val(f"getelementptr i8, ptr addrspace(3) {smem}, i32 {off}")

    if placed is None:
        lw.smem_access(base, base + nbytes, True)
    # coordinates before the owner branch: they are memoised and reused after it
    src_coords = lw.coords(t.layout)
    own = lw.owner_predicate(t.layout)
    if own is not None:
        w, cont = e.label("cvt_w"), e.label("cvt_c")
        e.cond_br(own, w, cont)
        e.start_block(w)
    wv = sl.write_vec
    if sl.write_op:
        _stmatrix_writes(lw, t, sl, ty, addr)
    for g in range(0, len(t.regs) if not sl.write_op else 0, wv):
        p = addr(src_coords[g])
        vals = [e.val(f"zext i1 {v} to i8") if ty == "i1" else v for v in t.regs[g:g + wv]]
        if wv == 1:
            e.emit(f"store {sty} {vals[0]}, ptr addrspace(3) {p}, align {ebytes}")
            continue
        vecty = f"<{wv} x {sty}>"
        acc = "undef"
        for i, v in enumerate(vals):
            acc = e.val(f"insertelement {vecty} {acc}, {sty} {v}, i32 {i}")
        e.emit(f"store {vecty} {acc}, ptr addrspace(3) {p}, align {wv * ebytes}")
    if own is not None:
        e.br(cont)
        e.start_block(cont)
    if placed is None:
        lw.smem_access(base, base + nbytes, False)
    else:
        lw.barrier()  # the writes before the reads (the scratch's access record does not cover these bytes)
    if sl.read_op:
        return Tile(dst, _ldmatrix_reads(lw, dst, sl, ty, addr))
    dst_coords = lw.coords(dst)
    rv = sl.read_vec
    out: List[str] = []
    for g in range(0, dst.num_regs, rv):
        p = addr(dst_coords[g])
        if rv == 1:
            vals = [e.val(f"load {sty}, ptr addrspace(3) {p}, align {ebytes}")]
        else:
            vecty = f"<{rv} x {sty}>"
            v = e.val(f"load {vecty}, ptr addrspace(3) {p}, align {rv * ebytes}")
            vals = [e.val(f"extractelement {vecty} {v}, i32 {i}") for i in range(rv)]
        out += [e.val(f"trunc i8 {v} to i1") if ty == "i1" else v for v in vals]
    return Tile(dst, out)


def _ldmatrix_reads(lw: Lowering, dst: Layout, sl: SharedLayout, ty: str, addr) -> List[str]:
    """``dst``'s registers (16-bit, ``shared_layouts.ldmatrix_ok``) read from ``sl``: one ``ldmatrix.x4`` per 8
    registers; lane l names the 16-byte row l % 8 of block l / 8 (``ldmatrix_address_layout``)."""
    e = lw.e
    trans = sl.read_op.endswith(".trans")
    rows = lw.coords(ldmatrix_address_layout(dst, trans))
    code = f"ldmatrix.sync.aligned.m8n8.x4{'.trans' if trans else ''}.shared.b16 {{$0, $1, $2, $3}}, [$4];"
    out: List[str] = []
    for g in range(dst.num_regs // 8):
        a = e.val(f"ptrtoint ptr addrspace(3) {addr(rows[g])} to i32")
        res = e.asm("{ i32, i32, i32, i32 }", code, "=r,=r,=r,=r,r", [("i32", a)])
        for i in range(4):  # word i: block i's pair, registers 8g + 2i and 8g + 2i + 1
            w = e.val(f"extractvalue {{ i32, i32, i32, i32 }} {res}, {i}")
            pair = e.val(f"bitcast i32 {w} to <2 x {ty}>")
            out += [e.val(f"extractelement <2 x {ty}> {pair}, i32 {k}") for k in range(2)]
    return out


def _stmatrix_writes(lw: Lowering, t: Tile, sl: SharedLayout, ty: str, addr) -> None:
    """``t`` (16-bit MMA fragments, ``shared_layouts.stmatrix_fit``) into ``sl``: one ``stmatrix.x4``
    per 8 registers (``stmatrix_x4``)."""
    trans = sl.write_op.endswith(".trans")
    rows = lw.coords(stmatrix_address_layout(t.layout, trans))
    for g in range(len(t.regs) // 8):
        a = lw.e.val(f"ptrtoint ptr addrspace(3) {addr(rows[g])} to i32")
        stmatrix_x4(lw, a, t.regs[8 * g:8 * g + 8], ty, trans)


def stmatrix_x4(lw: Lowering, addr: str, regs: List[str], ty: str, trans: bool) -> None:
    """One ``stmatrix.sync.aligned.m8n8.x4[.trans].shared.b16``: ``regs[2i], regs[2i + 1]`` are this
    thread's pair of block i; ``addr`` (i32 shared address) is the row of the blocks this lane names
    (lane 8i + j: row j of block i; ``shared_layouts.stmatrix_address_layout``)."""
    e = lw.e
    words = []
    for i in range(4):
        pair = "undef"
        for k in range(2):
            pair = e.val(f"insertelement <2 x {ty}> {pair}, {ty} {regs[2 * i + k]}, i32 {k}")
        words.append(e.val(f"bitcast <2 x {ty}> {pair} to i32"))
    code = f"stmatrix.sync.aligned.m8n8.x4{'.trans' if trans else ''}.shared.b16 [$0], {{$1, $2, $3, $4}};"
    e.asm("void", code, "r,r,r,r,r", [("i32", addr)] + [("i32", w) for w in words])
