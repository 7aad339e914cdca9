"""``dot`` on tensor cores (mma.sync m16n8k{16,8,32}) with an FMA fallback.

Operands are staged in shared memory with a 16-byte-chunk XOR swizzle so that the 8 rows one
``ldmatrix`` phase reads land in distinct banks; fragments come back with ``ldmatrix`` (``.trans``
when the operand's contiguous dimension is not K) and feed ``mma.sync``. The accumulator lives in
the MMA layout (see layouts.mma_v2). Hopper's wgmma path plugs in here later as another strategy.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

from ...errors import CompilationError
from ...language.dtypes import scalar_of, shape_of
from .convert import linear_index
from .emitter import llty
from .fp8_words import a8_fragment_order, a8_operand_order, word_of_pairs
from ..layouts import Layout
from .lowering import Lowering, Tile, rule
from .wgmma import PingPong, fence_proxy_async, run_wgmma

# element type -> (mma k, PTX type of A/B, A regs, B regs). The 8-bit types share m16n8k32 and its
# fragment layout (K-major in shared memory: ldmatrix cannot transpose bytes); fp8 needs sm_89, and
# A and B may be different fp8 types (passes/fp8_dot.py upcasts fp8 to fp16 on older targets).
MMA_SHAPES = {
    "fp16": (16, "f16", 4, 2),
    "bf16": (16, "bf16", 4, 2),
    "fp32": (8, "tf32", 4, 2),
    "int8": (32, "s8", 4, 2),
    "fp8e4nv": (32, "e4m3", 4, 2),
    "fp8e5": (32, "e5m2", 4, 2),
}


class SmemOperand:
    """A 2-D operand in shared memory as [rows, cols] with cols contiguous, in panels of at most 128
    bytes of columns ([panel][row][<=128 B]), each row's 16-byte chunks XOR-swizzled by the row.

    The swizzle is exactly wgmma's 128B/64B/32B swizzle (chunk ^= address bits 7..9) when the buffer is
    1024-byte aligned, so the same buffer serves ldmatrix and wgmma descriptors; it also keeps the 8
    rows one ldmatrix phase reads in distinct banks.
    """

    def __init__(self, base, rows: int, cols: int, ebytes: int):
        self.base, self.rows, self.cols, self.eb = base, rows, cols, ebytes
        self.chunk = max(1, 16 // ebytes)
        self.panel_cols = min(cols, max(1, 128 // ebytes))  # columns per panel
        row_bytes = self.panel_cols * ebytes
        self.row_bytes = row_bytes
        self.panel_bytes = rows * row_bytes
        self.chunks_per_row = max(1, row_bytes // 16)
        self.per_phase = max(1, 128 // max(row_bytes, 1))
        self.max_phase = min(self.chunks_per_row, 8)

    @property
    def nbytes(self) -> int:
        return self.rows * self.cols * self.eb

    @property
    def swizzle_bytes(self) -> int:
        """The wgmma swizzle mode this geometry matches (128, 64 or 32 bytes; 0 = none)."""
        return self.row_bytes if self.row_bytes in (32, 64, 128) and self.max_phase > 1 else 0

    def offset(self, lw: Lowering, row: str, col: str) -> str:
        """Byte offset (i32) of element (row, col); ``col`` must be chunk-aligned for vector access."""
        e = lw.e
        pc = self.panel_cols
        if self.cols > pc:
            panel = e.val(f"lshr i32 {col}, {pc.bit_length() - 1}")
            col = e.val(f"and i32 {col}, {pc - 1}")
        else:
            panel = None
        if self.max_phase <= 1:
            lin = e.val(f"add i32 {e.val(f'mul i32 {row}, {pc}')}, {col}")
        else:
            chunk = e.val(f"lshr i32 {col}, {self.chunk.bit_length() - 1}")
            within = e.val(f"and i32 {col}, {self.chunk - 1}")
            ph = e.val(f"lshr i32 {row}, {self.per_phase.bit_length() - 1}") if self.per_phase > 1 else row
            ph = e.val(f"and i32 {ph}, {self.max_phase - 1}")
            sw = e.val(f"xor i32 {chunk}, {ph}")
            colp = e.val(f"or i32 {e.val(f'shl i32 {sw}, {self.chunk.bit_length() - 1}')}, {within}")
            lin = e.val(f"add i32 {e.val(f'mul i32 {row}, {pc}')}, {colp}")
        off = e.val(f"mul i32 {lin}, {self.eb}") if self.eb > 1 else lin
        if panel is not None:
            off = e.val(f"add i32 {off}, {e.val(f'mul i32 {panel}, {self.panel_bytes}')}")
        return e.val(f"add i32 {off}, {self.base}") if self.base not in (0, "0") else off

    def at(self, base) -> "SmemOperand":
        """The same geometry at another base (a pipeline stage)."""
        return SmemOperand(base, self.rows, self.cols, self.eb)


def store_operand(lw: Lowering, tile: Tile, ty: str, ebytes: int, sm: SmemOperand, row_dim: int, col_dim: int):
    """Write a register tile into the swizzled buffer: element (i, j) of the tile goes to
    (row = coord[row_dim], col = coord[col_dim]). Vectorised when registers run along col_dim."""
    L = tile.layout
    vec = L.contig_regs(col_dim) if L.rank == 2 else 1
    store_tile(lw, tile, "i8" if ty == "i1" else ty, ebytes, sm, max(1, min(vec, sm.chunk)),
               lambda c: (c[row_dim], c[col_dim]))


def store_tile(lw: Lowering, tile: Tile, ty: str, ebytes: int, sm: SmemOperand, vec: int, row_col) -> None:
    """Store ``tile``'s registers into ``sm``, ``vec`` consecutive registers per (vector) store, each
    element once (replicas skip); ``row_col(coords)`` places a register's element as (row, col)."""
    e = lw.e
    L = tile.layout
    coords = lw.coords(L)
    own = lw.owner_predicate(L)
    if own is not None:
        w, cont = e.label("st_smem"), e.label("st_smem_end")
        e.cond_br(own, w, cont)
        e.start_block(w)
    for g in range(0, L.num_regs, vec):
        row, col = row_col(coords[g])
        p = e.val(f"getelementptr i8, ptr addrspace(3) @global_smem, i32 {sm.offset(lw, row, col)}")
        if vec == 1:
            e.emit(f"store {ty} {tile.regs[g]}, ptr addrspace(3) {p}, align {ebytes}")
        else:
            vt = f"<{vec} x {ty}>"
            acc = "undef"
            for i in range(vec):
                acc = e.val(f"insertelement {vt} {acc}, {ty} {tile.regs[g + i]}, i32 {i}")
            e.emit(f"store {vt} {acc}, ptr addrspace(3) {p}, align {vec * ebytes}")
    if own is not None:
        e.br(cont)
        e.start_block(cont)


def _ldmatrix(lw: Lowering, addr: str, n: int, trans: bool) -> List[str]:
    e = lw.e
    outs = ", ".join(f"${i}" for i in range(n))
    code = f"ldmatrix.sync.aligned.m8n8.x{n}{'.trans' if trans else ''}.shared.b16 {{{outs}}}, [$%d];" % n
    ret = "{ " + ", ".join(["i32"] * n) + " }"
    r = e.asm(ret, code, ",".join(["=r"] * n + ["r"]), [("i32", addr)])
    return [e.val(f"extractvalue {ret} {r}, {i}") for i in range(n)]


def _smem_addr(lw: Lowering, off: str) -> str:
    e = lw.e
    p = e.val(f"getelementptr i8, ptr addrspace(3) @global_smem, i32 {off}")
    return e.val(f"ptrtoint ptr addrspace(3) {p} to i32")


def choose_trans(layout: Layout, eb: int, is_a: bool) -> bool:
    """Store the operand with its outer dim (M for A, N for B) contiguous (read back with
    ldmatrix.trans) when its registers run along that dim; only 16-bit types can be transposed."""
    outer_dim = 0 if is_a else 1
    k_dim = 1 - outer_dim
    return eb == 2 and layout.contig_regs(outer_dim) > 1 and layout.contig_regs(k_dim) == 1


def operand_geometry(is_a: bool, trans: bool, outer: int, K: int, eb: int, base=0) -> SmemOperand:
    """Rows/cols of an operand in shared memory: [outer, K] (K contiguous) or, transposed, [K, outer]."""
    return SmemOperand(base, K, outer, eb) if trans else SmemOperand(base, outer, K, eb)


def _dims(is_a: bool, trans: bool) -> Tuple[int, int]:
    """(row_dim, col_dim) of the loaded tile in the operand's shared-memory rows/columns."""
    if is_a:
        return (1, 0) if trans else (0, 1)
    return (0, 1) if trans else (1, 0)


def _a_from_registers(lw: Lowering, a_v, L: Layout, M: int, K: int, wgmma: bool = True, a8_words: bool = False):
    """A-operand fragments straight from registers when A lives in the accumulator layout of a
    previous dot with the same warps along M (attention's P): no shared-memory round trip. 16-bit A
    fragments are the accumulator's registers as they are; 8-bit ones (wgmma only) are not
    (:func:`_a8_from_registers`)."""
    t = lw.tiles.get(a_v.id)
    elt = scalar_of(a_v.type)
    if t is None or elt.itemsize not in (1, 2) or L.mma_meta is None or (elt.itemsize == 1 and not wgmma):
        return None
    wm, wn = L.mma_meta[0]
    if wn != 1 or K % (32 // elt.itemsize):
        return None
    if elt.itemsize == 1:
        own = a8_operand_order(t.layout, M, K, wm)
        if own is not None:  # the tile is the fragments' own bytes (fp8_words.py: a8_operand_layout)
            return _a8_own(lw, [t.regs[r] for r in own], M, K, wm)
    from ..layouts import mma_v2
    if t.layout != mma_v2((M, K), (wm, 1)):
        return None
    if elt.itemsize == 1:
        return _a8_from_registers(lw, t, M, K, wm, a8_words)
    e = lw.e
    ty = llty(elt)
    nbits_n = (max(1, K // 8) - 1).bit_length()
    reps_m = max(1, M // (16 * wm))

    def pack(x, y):
        v = e.val(f"insertelement <2 x {ty}> undef, {ty} {x}, i32 0")
        v = e.val(f"insertelement <2 x {ty}> {v}, {ty} {y}, i32 1")
        return e.val(f"bitcast <2 x {ty}> {v} to i32")

    frags = {}
    for i in range(reps_m):
        for kk in range(K // 16):
            r = lambda n, c: t.regs[c | (n << 2) | (i << (2 + nbits_n))]  # noqa: E731
            n0, n1 = 2 * kk, 2 * kk + 1
            frags[(i, kk)] = [pack(r(n0, 0), r(n0, 1)), pack(r(n0, 2), r(n0, 3)),
                              pack(r(n1, 0), r(n1, 1)), pack(r(n1, 2), r(n1, 3))]
    return frags


def _a8_own(lw: Lowering, regs: List[str], M: int, K: int, wm: int):
    """fp8 A fragments from a tile whose registers (``regs``, in fragment order) are already the bytes each lane
    reads: four bytes a word (as pairs, which fold into the cvt pairs that made them), no shuffle."""
    frags = {}
    n = 0
    for i in range(max(1, M // (16 * wm))):
        for kk in range(K // 32):
            frags[(i, kk)] = [word_of_pairs(lw.e, regs[n + 4 * w:n + 4 * w + 4]) for w in range(4)]
            n += 16
    return frags


def _a8_from_registers(lw: Lowering, t, M: int, K: int, wm: int, a8_words: bool = False):
    """fp8 A fragments (k32 per step) from a tile in the fp32 accumulator layout, by a shuffle within each
    quad of lanes. A thread q of a quad holds, per row and 8-column block n, columns 2q and 2q+1 (bytes
    ``B_n``); the A fragment wants columns 4q..4q+3 (register 0) and 16+4q..16+4q+3 (register 2) of each
    32-column step. Those are ``B_{q//2}`` and ``B_{2+q//2}`` of lanes 2(q%2) and 2(q%2)+1. Each lane
    packs ``(B_0, B_2)`` and ``(B_1, B_3)``, offers the one its reader wants in each of two shuffles (lane
    q reads lane 2(q%2) + q//2, then that lane ^ 1), and one byte permute per register puts the halves in
    column order: 2 SHFL, 2 SEL and 2 PRMT per row and step, as Triton does (docs/attention.md, fp8)."""
    e = lw.e
    reps_m = max(1, M // (16 * wm))
    q = e.val(f"and i32 {lw.lane}, 3")
    bit0 = e.val(f"and i32 {lw.lane}, 1")
    odd = e.val(f"icmp ne i32 {bit0}, 0")
    upper = e.val(f"icmp ugt i32 {q}, 1")  # q // 2
    quad = e.val(f"and i32 {lw.lane}, -4")
    two_odd = e.val(f"shl i32 {e.val(f'and i32 {q}, 1')}, 1")
    half = e.val(f"lshr i32 {q}, 1")
    src_x = e.val(f"or i32 {quad}, {e.val(f'or i32 {two_odd}, {half}')}")  # lane 2(q%2) + q//2 of the quad
    src_y = e.val(f"xor i32 {src_x}, 1")
    sel_lo = e.val(f"select i1 {upper}, i32 {0x1054}, i32 {0x5410}")
    sel_hi = e.val(f"select i1 {upper}, i32 {0x3276}, i32 {0x7632}")

    def word(bs):  # four i8 -> i32, the first in the low byte
        if a8_words:  # as the carried words are built (codegen/fp8_words.py: word_of_pairs), so they fold
            return word_of_pairs(e, bs)
        w = None
        for j, b in enumerate(bs):
            x = e.val(f"zext i8 {b} to i32")
            x = e.val(f"shl i32 {x}, {8 * j}") if j else x
            w = x if w is None else e.val(f"or i32 {w}, {x}")
        return w

    def shfl(x, src):
        return e.call("i32", "llvm.nvvm.shfl.sync.idx.i32", [("i32", "-1"), ("i32", x), ("i32", src), ("i32", "31")])

    def prmt(a, b, sel):
        return e.asm("i32", "prmt.b32 $0, $1, $2, $3;", "=r,r,r,r", [("i32", a), ("i32", b), ("i32", sel)],
                     side_effects=False)

    order = a8_fragment_order(M, K, wm) if a8_words else None  # fp8_words.py
    nbits_n = (max(1, K // 8) - 1).bit_length()
    frags = {}
    for i in range(reps_m):
        r = lambda n, c: t.regs[c | (n << 2) | (i << (2 + nbits_n))]  # noqa: E731
        for kk in range(K // 32):
            regs = {}
            if a8_words:
                # (blocks 0, 2) and (blocks 1, 3) of each row as words straight from the bytes: a loop-carried
                # P already is these words (passes/narrow_carries.py: mark_fp8_carry_words), so they fold away
                base = 16 * (i * (K // 32) + kk)
                words = [word([t.regs[j] for j in order[base + 4 * w:base + 4 * w + 4]]) for w in range(4)]
            else:
                # the four bytes of each 8-column block as one word (a P carried in register order already is
                # one, so these fold away), each pair of halves one byte permute
                w = [word([r(4 * kk + j, c) for c in range(4)]) for j in range(4)]
            for h in (0, 1):  # row g (registers 0, 2), row g + 8 (registers 1, 3)
                if a8_words:
                    p02, p13 = words[2 * h], words[2 * h + 1]
                else:
                    sel = 0x5410 if h == 0 else 0x7632  # the low / high halves of two words
                    p02, p13 = prmt(w[0], w[2], str(sel)), prmt(w[1], w[3], str(sel))
                x = shfl(e.val(f"select i1 {odd}, i32 {p13}, i32 {p02}"), src_x)
                y = shfl(e.val(f"select i1 {odd}, i32 {p02}, i32 {p13}"), src_y)
                regs[h], regs[2 + h] = prmt(x, y, sel_lo), prmt(x, y, sel_hi)
            frags[(i, kk)] = [regs[0], regs[1], regs[2], regs[3]]
    return frags


def transposing_store(layout: Layout, row_dim: int, col_dim: int) -> bool:
    """Whether staging a register tile as (row_dim, col_dim) writes across its registers' contiguous dim (one
    element per st.shared): an operand whose type cannot be stored transposed (8-bit: K-major only) given
    with its outer dim contiguous, e.g. a row-major fp8 B."""
    return layout.contig_regs(col_dim) == 1 and layout.contig_regs(row_dim) > 1


def _use_acc(lw: Lowering, op) -> Optional[str]:
    """The i1 of a dot's ``use_acc`` operand (None: the accumulator is always added)."""
    extra = op.operands[3:]
    return lw.scalar(extra[0]) if extra and scalar_of(extra[0].type).name == "int1" else None


def _const_false(op) -> bool:
    """Whether a dot's ``use_acc`` operand is a constant false (passes/zero_acc.py)."""
    extra = op.operands[3:]
    d = extra[0].op if extra and scalar_of(extra[0].type).name == "int1" else None
    return d is not None and d.name == "constant" and not d.attrs.get("value")


def _warpgroup(lw: Lowering, op) -> Optional[str]:
    """The i32 of a dot's warpgroup index operand (passes/uniform_warpgroups.py; None: there is none)."""
    extra = op.operands[3:]
    return lw.scalar(extra[-1]) if extra and scalar_of(extra[-1].type).name == "int32" else None


def _acc_or_zero(lw: Lowering, acc: List[str], use: Optional[str], ty: str) -> List[str]:
    if use is None:
        return acc
    zero = "0.0" if ty in ("float", "double", "half") else "0"
    return [lw.e.val(f"select i1 {use}, {ty} {x}, {ty} {zero}") for x in acc]


def mma_dot(lw: Lowering, op, L: Layout, report: Optional[dict] = None):
    a_v, b_v, c_v = op.operands[:3]
    elt = scalar_of(a_v.type)
    kind = elt.name
    b_kind = scalar_of(b_v.type).name  # differs from kind only for e4m3 x e5m2
    K = shape_of(a_v.type)[1]
    M, N = shape_of(c_v.type)
    eb = elt.itemsize
    ty = llty(elt)
    a_regs = None
    staged = {}
    for idx, v in ((0, a_v), (1, b_v)):
        ent = lw.smem_operands.get(v.id)
        if ent is None:
            continue
        sm, trans, role = ent if len(ent) == 3 else (*ent, None)
        if role is not None and role != (idx == 0):
            # staged for the other operand role: its `trans` and geometry describe that role, so this dot
            # stages its own copy from the registers
            if v.id not in lw.tiles:
                raise CompilationError("internal: a tile two dots read in different roles is only in shared memory "
                                       "(passes/schedule.py keeps such a TMA tile in registers)",
                                       op.loc.file, op.loc.line, op.loc.col)
            continue
        staged[idx] = (sm, trans)
    use_wgmma = op.attrs.get("engine") == "wgmma"
    if 0 not in staged:
        a_regs = _a_from_registers(lw, a_v, L, M, K, use_wgmma, op.attrs.get("a_words") == "a8")
        if a_regs is None and op.attrs.get("a_regs"):
            raise CompilationError("internal: a dot marked a_regs (passes/stage_operands.py) has no register A "
                                   "fragments", op.loc.file, op.loc.line, op.loc.col)
    c_t = lw.tiles.get(c_v.id)
    if c_t is not None and c_t.layout != L:
        # convert the accumulator before staging: the conversion goes through the same scratch
        lw.get(c_v, L)
    todo = [(idx, v) for idx, v in ((0, a_v), (1, b_v)) if idx not in staged and not (idx == 0 and a_regs)]
    if todo:
        geoms = []
        total = 0
        for idx, v in todo:
            t = lw.get(v, lw.layout_of(v) or _pref_operand_layout(lw, v, 1))
            trans = choose_trans(t.layout, eb, idx == 0)
            g = operand_geometry(idx == 0, trans, M if idx == 0 else N, K, eb, base=total)
            geoms.append((idx, t, trans, g))
            total += (g.nbytes + 1023) // 1024 * 1024  # wgmma swizzle atoms need 1024-byte alignment
        base = lw.scratch(total)
        lw.smem_access(base, base + total, True)
        for idx, t, trans, g in geoms:
            dims = _dims(idx == 0, trans)
            store_operand(lw, t, ty, eb, g, *dims)
            staged[idx] = (g, trans)
            if report is not None and transposing_store(t.layout, *dims):
                report["smem_transpose"].append("ab"[idx])
        if use_wgmma:
            fence_proxy_async(lw)
        lw.smem_access(base, base + total, False)
    acc = list(lw.get(c_v, L).regs)
    A, a_trans = staged.get(0, (None, False))
    B, b_trans = staged[1]
    use = _use_acc(lw, op)
    acc_ty = "float" if kind != "int8" else "i32"
    if use_wgmma:
        if _const_false(op):
            # a zero accumulator (passes/zero_acc.py): scale-d false on the first K step reads nothing, so its tied
            # inputs are undef, not registers set to 0
            acc = ["undef"] * len(acc)
        # issue and commit only: passes/wgmma_waits.py placed the wgmma_wait ops
        run_wgmma(lw, kind, A, a_trans, B, b_trans, acc, L, M, N, K, a_regs=a_regs, b_kind=b_kind,
                  promote_every=op.attrs.get("max_num_imprecise_acc"),
                  turn=PingPong(lw, op.attrs["wgmma_turns"]) if op.attrs.get("wgmma_turns") else None,
                  use_acc=use, stepped=op.attrs.get("wgmma_desc") == "stepped", warpgroup=_warpgroup(lw, op))
    else:
        acc = _acc_or_zero(lw, acc, use, acc_ty)
        run_mma(lw, kind, A, B, a_trans, b_trans, acc, L, M, N, K, a_regs=a_regs, b_kind=b_kind,
                fp8_via_f16=op.attrs.get("fp8_mma") == "f16")
    lw.tiles[op.results[0].id] = Tile(L, acc)


def run_mma(lw: Lowering, kind: str, A: Optional[SmemOperand], B: SmemOperand, a_trans: bool, b_trans: bool,
            acc: List[str], L: Layout, M: int, N: int, K: int, a_regs=None, b_kind: Optional[str] = None,
            fp8_via_f16: bool = False):
    """Issue ldmatrix + mma.sync for every k-step and every (m, n) repetition of this warp. ``fp8_via_f16``
    (the dot's ``fp8_mma="f16"``): each fp8 m16n8k32 as two fp16 m16n8k16 on converted fragments."""
    e = lw.e
    kstep, ptx_ab, _, _ = MMA_SHAPES[kind]
    ptx_b = MMA_SHAPES[b_kind or kind][1]
    wm, wn = L.mma_meta[0]
    reps_m = max(1, M // (16 * wm))
    reps_n = max(1, N // (8 * wn))
    nbits_n = (reps_n - 1).bit_length()
    lane, warp = lw.lane, lw.warp
    wm_idx = e.val(f"and i32 {warp}, {wm - 1}") if wm > 1 else "0"
    wn_idx = e.val(f"lshr i32 {warp}, {(wm - 1).bit_length()}") if wn > 1 else "0"
    if wn > 1:
        wn_idx = e.val(f"and i32 {wn_idx}, {wn - 1}")
    lr = e.val(f"and i32 {lane}, 7")
    lm = e.val(f"lshr i32 {lane}, 3")  # which of the 4 matrices this lane addresses
    lm_lo = e.val(f"and i32 {lm}, 1")
    lm_hi = e.val(f"lshr i32 {lm}, 1")
    half_k = kstep // 2  # K elements per 16-byte chunk
    # per-lane row offsets inside the 16-row / 16-k fragments (hoisted out of the k loop)
    row_lo = e.val(f"add i32 {lr}, {e.val(f'shl i32 {lm_lo}, 3')}")
    row_hi = e.val(f"add i32 {lr}, {e.val(f'shl i32 {lm_hi}, 3')}")
    row_n = e.val(f"add i32 {lr}, {e.val(f'mul i32 {lm_hi}, {8 * wn}')}")
    acc_ty = "float" if kind != "int8" else "i32"
    cty = "f32" if kind != "int8" else "s32"
    mrow0 = e.val(f"mul i32 {wm_idx}, 16") if wm > 1 else "0"
    ncol0 = e.val(f"mul i32 {wn_idx}, 8") if wn > 1 else "0"
    for k0 in range(0, K, kstep):
        afr = []
        for i in range(reps_m):
            if a_regs is not None:
                afr.append(a_regs[(i, k0 // kstep)])
                continue
            m_base = e.val(f"add i32 {mrow0}, {i * 16 * wm}") if i else mrow0
            if not a_trans:
                # matrices: (rows 0-7, k lo), (rows 8-15, k lo), (rows 0-7, k hi), (rows 8-15, k hi)
                row = e.val(f"add i32 {m_base}, {row_lo}")
                col = e.val(f"add i32 {k0}, {e.val(f'mul i32 {lm_hi}, {half_k}')}")
                afr.append(_ldmatrix(lw, _smem_addr(lw, A.offset(lw, row, col)), 4, False))
            else:
                # stored [K, M]: rows are k; .trans hands each lane (m, k pair)
                krow = e.val(f"add i32 {k0}, {row_hi}")
                col = e.val(f"add i32 {m_base}, {e.val(f'shl i32 {lm_lo}, 3')}")
                afr.append(_ldmatrix(lw, _smem_addr(lw, A.offset(lw, krow, col)), 4, True))
        bfr = []
        for j in range(0, reps_n, 2):
            pair = 2 if j + 1 < reps_n else 1
            n_base = e.val(f"add i32 {ncol0}, {j * 8 * wn}") if j else ncol0
            if b_trans:
                # stored [K, N]: matrices (k lo, n j), (k hi, n j), (k lo, n j+1), (k hi, n j+1)
                krow = e.val(f"add i32 {k0}, {row_lo}")
                col = e.val(f"add i32 {n_base}, {e.val(f'mul i32 {lm_hi}, {8 * wn}')}")
                regs = _ldmatrix(lw, _smem_addr(lw, B.offset(lw, krow, col)), 4 if pair == 2 else 2, True)
            else:
                # stored [N, K]: matrices (n j, k lo), (n j, k hi), (n j+1, k lo), (n j+1, k hi)
                nrow = e.val(f"add i32 {n_base}, {row_n}")
                col = e.val(f"add i32 {k0}, {e.val(f'mul i32 {lm_lo}, {half_k}')}")
                regs = _ldmatrix(lw, _smem_addr(lw, B.offset(lw, nrow, col)), 4 if pair == 2 else 2, False)
            bfr.append(regs[0:2])
            if pair == 2:
                bfr.append(regs[2:4])
        for i in range(reps_m):
            for j in range(reps_n):
                base_r = (j << 2) | (i << (2 + nbits_n))
                idx = [base_r, base_r + 1, base_r + 2, base_r + 3]
                c = [acc[x] for x in idx]
                if fp8_via_f16:
                    d = _mma_fp8_via_f16(lw, ptx_ab, ptx_b, afr[i], bfr[j], c)
                else:
                    d = _mma(lw, kind, ptx_ab, cty, acc_ty, afr[i], bfr[j], c, ptx_b)
                for x, v in zip(idx, d):
                    acc[x] = v


def _fp8x4_to_f16x2(lw, fmt: str, r: str):
    """One 32-bit register of 4 fp8 values (e4m3 / e5m2) -> two f16x2 registers: bytes 0-1, bytes 2-3 (each low
    byte to the low half). Exact: every fp8 value is an fp16 value."""
    e = lw.e
    code = (f"{{ .reg .b16 l, h; mov.b32 {{l, h}}, $2; cvt.rn.f16x2.{fmt}x2 $0, l; cvt.rn.f16x2.{fmt}x2 $1, h; }}")
    ret = "{ i32, i32 }"
    v = e.asm(ret, code, "=r,=r,r", [("i32", r)], side_effects=False)
    return e.val(f"extractvalue {ret} {v}, 0"), e.val(f"extractvalue {ret} {v}, 1")


def _mma_fp8_via_f16(lw, fmt_a: str, fmt_b: str, a, b, c):
    """An fp8 m16n8k32 (fp32 accumulator) as two fp16 m16n8k16 that accumulate in place.

    fp8 fragments: a0/a1 rows g/g+8 at k 4t..4t+3, a2/a3 the same at k 16+4t..; b0 k 4t..4t+3, b1 k 16+4t..
    (g = lane / 4, t = lane % 4). The first fp16 MMA takes k 0-15: A = (lo a0, lo a1, hi a0, hi a1), B = (lo b0,
    hi b0), where lo/hi are the f16x2 of bytes 0-1/2-3. Its k' = 2t + j holds k = 4t + j and k' = 8 + 2t + j
    holds k = 4t + 2 + j in both operands alike, so the sum over k is the same; the second takes k 16-31 from
    a2, a3, b1."""
    e = lw.e
    (a0l, a0h), (a1l, a1h), (a2l, a2h), (a3l, a3h) = (_fp8x4_to_f16x2(lw, fmt_a, r) for r in a)
    (b0l, b0h), (b1l, b1h) = (_fp8x4_to_f16x2(lw, fmt_b, r) for r in b)
    code = ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
            "{$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};")
    ret = "{ float, float, float, float }"
    cons = ",".join(["=f"] * 4 + ["r"] * 6 + ["f"] * 4)
    d = c
    for fa, fb in (((a0l, a1l, a0h, a1h), (b0l, b0h)), ((a2l, a3l, a2h, a3h), (b1l, b1h))):
        args = [("i32", x) for x in fa] + [("i32", x) for x in fb] + [("float", x) for x in d]
        r = e.asm(ret, code, cons, args, side_effects=False)
        d = [e.val(f"extractvalue {ret} {r}, {i}") for i in range(4)]
    return d


def _mma(lw, kind, ptx_ab, cty, acc_ty, a, b, c, ptx_b=None):
    e = lw.e
    k = MMA_SHAPES[kind][0]
    cons = "f" if acc_ty == "float" else "r"
    code = (f"mma.sync.aligned.m16n8k{k}.row.col.{cty}.{ptx_ab}.{ptx_b or ptx_ab}.{cty} "
            "{$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};")
    ret = "{ " + ", ".join([acc_ty] * 4) + " }"
    args = [("i32", x) for x in a] + [("i32", x) for x in b] + [(acc_ty, x) for x in c]
    r = e.asm(ret, code, ",".join([f"={cons}"] * 4 + ["r"] * 6 + [cons] * 4), args, side_effects=False)
    return [e.val(f"extractvalue {ret} {r}, {i}") for i in range(4)]


def _pref_operand_layout(lw: Lowering, v, contig_dim: int) -> Layout:
    from ..layouts import default_blocked
    shape = shape_of(v.type)
    eb = scalar_of(v.type).itemsize
    return default_blocked(shape, lw.nw, [contig_dim, 1 - contig_dim], vec=max(1, 16 // eb))


def fma_dot(lw: Lowering, op, L: Layout):
    """Fallback: every thread computes its accumulator elements from shared-memory copies of A and B."""
    e = lw.e
    a_v, b_v, c_v = op.operands[:3]
    sa, sb = shape_of(a_v.type), shape_of(b_v.type)
    rank = len(sa)
    K = sa[-1]
    elt = scalar_of(a_v.type)
    out_elt = scalar_of(c_v.type)
    ty, oty = llty(elt), llty(out_elt)
    eb = elt.itemsize
    a_t, b_t = lw.get(a_v), lw.get(b_v)
    acc = list(lw.get(c_v, L).regs)  # before staging: a conversion would go through the same scratch
    acc = _acc_or_zero(lw, acc, _use_acc(lw, op), llty(scalar_of(c_v.type)))
    from .convert import linear_index as lin_idx
    na = 1
    for s in sa:
        na *= s
    nb = 1
    for s in sb:
        nb *= s
    base = lw.scratch((na + nb) * eb)
    lw.smem_access(base, base + (na + nb) * eb, True)
    for t, off0, shape in ((a_t, base, sa), (b_t, base + na * eb, sb)):
        coords = lw.coords(t.layout)
        for r, val in enumerate(t.regs):
            idx = lin_idx(lw, coords[r], shape)
            o = e.val(f"add i32 {e.val(f'mul i32 {idx}, {eb}')}, {off0}")
            p = e.val(f"getelementptr i8, ptr addrspace(3) @global_smem, i32 {o}")
            e.emit(f"store {ty} {val}, ptr addrspace(3) {p}, align {eb}")
    lw.smem_access(base, base + (na + nb) * eb, False)
    coords = lw.coords(L)
    is_int = out_elt.is_int()
    for r in range(L.num_regs):
        c = coords[r]
        m, n = c[-2], c[-1]
        bidx = c[0] if rank == 3 else None
        for k in range(K):
            ai = [bidx, m, str(k)] if rank == 3 else [m, str(k)]
            bi = [bidx, str(k), n] if rank == 3 else [str(k), n]
            av = _lds(lw, ty, base, lin_idx(lw, ai, sa), eb)
            bv = _lds(lw, ty, base + na * eb, lin_idx(lw, bi, sb), eb)
            if ty != oty:
                from .elementwise import cast
                av = cast(e, elt, out_elt, av)
                bv = cast(e, elt, out_elt, bv)
            if is_int:
                acc[r] = e.val(f"add {oty} {acc[r]}, {e.val(f'mul {oty} {av}, {bv}')}")
            else:
                acc[r] = e.call(oty, f"llvm.fma.{ {'float': 'f32', 'double': 'f64', 'half': 'f16'}[oty] }",
                                [(oty, av), (oty, bv), (oty, acc[r])])
    lw.tiles[op.results[0].id] = Tile(L, acc)


def _lds(lw, ty, base, idx, eb):
    e = lw.e
    o = e.val(f"add i32 {e.val(f'mul i32 {idx}, {eb}')}, {base}")
    p = e.val(f"getelementptr i8, ptr addrspace(3) @global_smem, i32 {o}")
    return e.val(f"load {ty}, ptr addrspace(3) {p}, align {eb}")


@rule("dot")
def lower_dot(lw: Lowering, op):
    L = lw.plan.get(op.results[0])
    engine = op.attrs.get("engine")   # passes/layout_assign.py wrote it
    if engine not in ("wgmma", "mma", "fma") or (engine != "fma" and (L is None or L.mma_meta is None)):
        raise CompilationError(f"internal: a dot reached code generation with engine {engine!r} and layout {L} "
                               "(passes/layout_assign.py writes a tensor-core dot's engine with its MMA layout)",
                               op.loc.file, op.loc.line, op.loc.col)
    fma = engine == "fma"
    engine = "mma.sync" if engine == "mma" else engine
    a, b = op.operands[0], op.operands[1]
    report = {
        "file": op.loc.file, "line": op.loc.line, "engine": engine, "a_shape": list(shape_of(a.type)),
        "b_shape": list(shape_of(b.type)), "a_dtype": str(scalar_of(a.type)), "b_dtype": str(scalar_of(b.type)),
        "acc_dtype": str(scalar_of(op.results[0].type)), "input_precision": op.attrs.get("input_precision"),
        "fma_reason": lw.plan.dot_fma.get(id(op)), "warps": list(L.mma_meta[0]) if L.mma_meta else None,
        "fp8_upcast": op.attrs.get("fp8_upcast"),  # fp8 operands converted to fp16 first (and why)
        "fp8_mma": op.attrs.get("fp8_mma"),  # "f16": sm_90 fp8 mma.sync as fp16 MMAs on converted fragments
        "smem_transpose": [],  # operands ("a"/"b") staged to shared memory across their contiguous dim (slow)
    }
    lw.reports["dots"].append(report)
    if fma:
        fma_dot(lw, op, L)
    else:
        mma_dot(lw, op, L, report)
