"""Data-movement ops through shared memory: join, split, cat, flip, gather, sort/topk, bitonic_merge
and histogram.

Each stores its source tile(s) row-major in the per-op scratch (the owner of each element writes it),
and every thread then reads the elements its result layout gives it from the position the op names:
``out[c] = buf[index(c)]``. Sorting runs a bitonic compare-exchange network on the buffer, one
barrier-separated step per stage; histograms count with shared-memory atomics.
"""
from __future__ import annotations

from typing import Callable, List, Optional

from ...language.dtypes import scalar_of, shape_of
from ..layouts import Layout, default_blocked
from .convert import linear_index
from .emitter import llty
from .lowering import Lowering, Tile, rule
from .reduce import _bytes


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _result_layout(lw: Lowering, v) -> Layout:
    return lw.plan.get(v) or default_blocked(shape_of(v.type), lw.nw)


def _addr(lw: Lowering, idx: str, ebytes: int) -> str:
    e = lw.e
    if idx.lstrip("-").isdigit():
        off = str(int(idx) * ebytes)
    else:
        off = e.val(f"mul i32 {idx}, {ebytes}") if ebytes > 1 else idx
    return e.val(f"getelementptr i8, ptr addrspace(3) {lw.smem_base()}, i32 {off}")


def _store(lw: Lowering, ty: str, idx: str, val: str) -> None:
    sty = "i8" if ty == "i1" else ty
    v = lw.e.val(f"zext i1 {val} to i8") if ty == "i1" else val
    lw.e.emit(f"store {sty} {v}, ptr addrspace(3) {_addr(lw, idx, _bytes(ty))}, align {_bytes(ty)}")


def _load(lw: Lowering, ty: str, idx: str) -> str:
    sty = "i8" if ty == "i1" else ty
    v = lw.e.val(f"load {sty}, ptr addrspace(3) {_addr(lw, idx, _bytes(ty))}, align {_bytes(ty)}")
    return lw.e.val(f"trunc i8 {v} to i1") if ty == "i1" else v


def _add(lw: Lowering, a: str, k: int) -> str:
    if k == 0:
        return a
    if a.lstrip("-").isdigit():
        return str(int(a) + k)
    return lw.e.val(f"add i32 {a}, {k}")


def _owned(lw: Lowering, layout: Layout, body: Callable[[], None], pred: Optional[str] = None) -> None:
    """Run ``body`` only in the thread that owns each element of a replicated layout."""
    e = lw.e
    own = lw.owner_predicate(layout)
    if pred is not None:
        own = pred if own is None else e.val(f"and i1 {own}, {pred}")
    if own is None:
        body()
        return
    w, cont = e.label("perm_w"), e.label("perm_c")
    e.cond_br(own, w, cont)
    e.start_block(w)
    body()
    e.br(cont)
    e.start_block(cont)


def stage(lw: Lowering, values, ty: str, total: int) -> None:
    """Write each value's tile row-major into scratch, one after the other (``total`` elements)."""
    nbytes = total * _bytes(ty)
    lw.scratch(nbytes)
    lw.smem_access(0, nbytes, True)
    base = 0
    tiles = [lw.get(v) for v in values]  # before any write: getting a tile may convert it through scratch
    for v, t in zip(values, tiles):
        coords = lw.coords(t.layout)
        shape = t.layout.shape

        def write(t=t, coords=coords, shape=shape, base=base):
            for r, val in enumerate(t.regs):
                _store(lw, ty, _add(lw, linear_index(lw, coords[r], shape), base), val)
        _owned(lw, t.layout, write)
        base += _numel(shape_of(v.type))


def gather_regs(lw: Lowering, dst: Layout, ty: str, total: int, index: Callable[[List[str], int], str]) -> Tile:
    """Every thread reads ``buf[index(coords, reg)]`` for each register of ``dst``."""
    lw.smem_access(0, total * _bytes(ty), False)
    coords = lw.coords(dst)
    return Tile(dst, [_load(lw, ty, index(coords[r], r)) for r in range(dst.num_regs)])


def _pair_bit(L: Layout) -> Optional[int]:
    return L.pair_bit()


def _unpaired(L: Layout, bit: int) -> Layout:
    return L.unpaired(bit)


def _half_index(k: int, bit: int) -> int:
    """Register ``k`` of the paired layout -> its register in the half layout (``bit`` removed)."""
    return (k & ((1 << bit) - 1)) | ((k >> (bit + 1)) << bit)


@rule("join")
def lower_join(lw: Lowering, op):
    a, b = op.operands
    v = op.results[0]
    R = lw.plan.get(v) or default_blocked(shape_of(a.type), lw.nw).joined()
    bit = _pair_bit(R)
    if bit is not None:
        H = _unpaired(R, bit)
        ra, rb = lw.get(a, H).regs, lw.get(b, H).regs
        lw.tiles[v.id] = Tile(R, [(rb if k >> bit & 1 else ra)[_half_index(k, bit)] for k in range(R.num_regs)])
        return
    ty = llty(scalar_of(v.type))
    n = _numel(shape_of(a.type))
    stage(lw, [a, b], ty, 2 * n)
    src_shape = shape_of(a.type)
    lw.tiles[v.id] = gather_regs(lw, R, ty, 2 * n, lambda c, r: _join_index(lw, c, src_shape, n))


def _join_index(lw, c, src_shape, n):
    e = lw.e
    lin = linear_index(lw, c[:-1], src_shape)
    k = c[-1]
    if k == "0":
        return lin
    off = e.val(f"mul i32 {k}, {n}") if not k.isdigit() else str(int(k) * n)
    return e.val(f"add i32 {lin}, {off}") if lin != "0" else off


@rule("split")
def lower_split(lw: Lowering, op):
    x = op.operands[0]
    shape = shape_of(x.type)
    if len(shape) > 1:
        t = lw.get(x)
        bit = _pair_bit(t.layout)
        if bit is None:  # move the pairs into registers first (a layout conversion)
            t = lw.get(x, default_blocked(shape[:-1], lw.nw).joined())
            bit = _pair_bit(t.layout)
        H = _unpaired(t.layout, bit)
        for i, v in enumerate(op.results):
            lw.tiles[v.id] = Tile(H, [t.regs[k] for k in range(t.layout.num_regs) if (k >> bit & 1) == i])
        return
    # a [2] tile: two scalars, through shared memory
    ty = llty(scalar_of(x.type))
    stage(lw, [x], ty, 2)
    lw.smem_access(0, 2 * _bytes(ty), False)
    for i, v in enumerate(op.results):
        lw.scalars[v.id] = _load(lw, ty, str(i))


@rule("cat")
def lower_cat(lw: Lowering, op):
    a, b = op.operands
    v = op.results[0]
    ty = llty(scalar_of(v.type))
    total = _numel(shape_of(v.type))
    stage(lw, [a, b], ty, total)  # cat along dim 0 is the concatenation of the row-major buffers
    lw.tiles[v.id] = gather_regs(lw, _result_layout(lw, v), ty, total,
                                 lambda c, r: linear_index(lw, c, shape_of(v.type)))


@rule("flip")
def lower_flip(lw: Lowering, op):
    x = op.operands[0]
    v = op.results[0]
    ty = llty(scalar_of(v.type))
    shape = shape_of(v.type)
    axis = op.attrs["axis"]
    total = _numel(shape)
    stage(lw, [x], ty, total)
    e = lw.e

    def idx(c, r):
        c = list(c)
        c[axis] = str(shape[axis] - 1 - int(c[axis])) if c[axis].isdigit() else \
            e.val(f"sub i32 {shape[axis] - 1}, {c[axis]}")
        return _general_index(lw, c, shape)
    lw.tiles[v.id] = gather_regs(lw, _result_layout(lw, v), ty, total, idx)


def _general_index(lw: Lowering, c: List[str], shape) -> str:
    """Row-major index for any shape (linear_index assumes power-of-two strides)."""
    e = lw.e
    idx, stride = None, 1
    for d in reversed(range(len(shape))):
        term = c[d] if stride == 1 else (str(int(c[d]) * stride) if c[d].isdigit() else
                                          e.val(f"mul i32 {c[d]}, {stride}"))
        if term != "0":
            idx = term if idx is None else e.val(f"add i32 {idx}, {term}")
        stride *= shape[d]
    return idx or "0"


@rule("gather")
def lower_gather(lw: Lowering, op):
    src, index = op.operands
    v = op.results[0]
    ty = llty(scalar_of(v.type))
    sshape = shape_of(src.type)
    axis = op.attrs["axis"]
    total = _numel(sshape)
    dst = _result_layout(lw, v)
    it = scalar_of(index.type)
    # the index first: its conversion to the result layout may go through the same scratch buffer,
    # which would overwrite the staged source
    ids = lw.get(index, dst).regs
    stage(lw, [src], ty, total)
    e = lw.e

    def idx(c, r):
        i = ids[r]
        bits = it.int_bitwidth
        if bits > 32:
            i = e.val(f"trunc i{bits} {i} to i32")
        elif bits < 32:
            i = e.val(f"{'zext' if it.is_int_unsigned() else 'sext'} i{bits} {i} to i32")
        c = list(c)
        c[axis] = i
        return _general_index(lw, c, sshape)
    lw.tiles[v.id] = gather_regs(lw, dst, ty, total, idx)


# -- sorting networks ------------------------------------------------------------------------------


def _greater(lw: Lowering, elt, ty: str, a: str, b: str, total: bool = True) -> str:
    """a > b: in the total order the interpreter sorts by (NaN above every number), or with ``total``
    False IEEE's ordered comparison (false when either is NaN), which Triton's bitonic_merge uses."""
    e = lw.e
    if elt.is_floating():
        gt = e.val(f"fcmp ogt {ty} {a}, {b}")
        if not total:
            return gt
        a_nan = e.val(f"fcmp uno {ty} {a}, {a}")
        b_num = e.val(f"fcmp ord {ty} {b}, {b}")
        return e.val(f"or i1 {gt}, {e.val(f'and i1 {a_nan}, {b_num}')}")
    return e.val(f"icmp {'ugt' if (elt.is_int_unsigned() or elt.is_int1()) else 'sgt'} {ty} {a}, {b}")


def _network(lw: Lowering, x, steps, descending: bool, total_order: bool = True) -> None:
    """Run compare-exchange ``steps`` ((distance j, block k or None)) on the staged rows of ``x``:
    within each pair (p, p ^ j), the lower position keeps the smaller value when the pair sorts
    ascending; with a block size k, pairs in odd k-blocks sort the other way (bitonic sort).

    Each position decides alone: it takes its partner's value when ``(mine > other) != (flip ^ high)``
    (flip: the pair sorts descending; high: it is the upper position). With the total order that is an
    exchange; with IEEE ``>`` (``total_order`` False, Triton's rule) a pair holding a NaN compares
    false both ways, and both positions end up with one of the two values."""
    e = lw.e
    elt = scalar_of(x.type)
    ty = llty(elt)
    shape = shape_of(x.type)
    n = shape[-1]
    total = _numel(shape)
    L = default_blocked(shape, lw.nw)
    coords = lw.coords(L)
    for j, k in steps:
        lw.smem_access(0, total * _bytes(ty), False)
        news = []
        for r in range(L.num_regs):
            p = coords[r][-1]
            lin = linear_index(lw, coords[r], shape)
            q_lin = e.val(f"xor i32 {lin}, {j}")  # the partner is j apart in the last (contiguous) dim
            mine = _load(lw, ty, lin)
            other = _load(lw, ty, q_lin)
            p_bit = e.val(f"and i32 {p}, {j}")
            high = e.val(f"icmp ne i32 {p_bit}, 0")
            flip = "false"
            if k is not None and k < n:
                kb = e.val(f"and i32 {p}, {k}")
                flip = e.val(f"icmp ne i32 {kb}, 0")
            if descending:
                flip = "true" if flip == "false" else e.val(f"xor i1 {flip}, true")
            gt = _greater(lw, elt, ty, mine, other, total_order)
            side = high if flip == "false" else e.val(f"xor i1 {flip}, {high}")
            take = e.val(f"xor i1 {gt}, {side}")
            news.append((lin, e.val(f"select i1 {take}, {ty} {other}, {ty} {mine}")))
        lw.smem_access(0, total * _bytes(ty), True)

        def write(news=news):
            for lin, val in news:
                _store(lw, ty, lin, val)
        _owned(lw, L, write)


def _log2(n: int) -> int:
    return n.bit_length() - 1


@rule("sort", "bitonic_merge")
def lower_sort(lw: Lowering, op):
    x = op.operands[0]
    v = op.results[0]
    shape = shape_of(x.type)
    n = shape[-1]
    if n & (n - 1) or any(s & (s - 1) for s in shape):
        from ...errors import CompilationError
        raise CompilationError(f"kl.{'sort' if op.name == 'sort' else op.name} on the GPU needs power-of-two tile "
                               f"dimensions, got {list(shape)}", op.loc.file, op.loc.line, op.loc.col)
    ty = llty(scalar_of(x.type))
    total = _numel(shape)
    stage(lw, [x], ty, total)
    desc = bool(op.attrs.get("descending"))
    if op.name == "bitonic_merge":
        steps = [(n >> s, None) for s in range(1, _log2(n) + 1)]
    else:
        steps = [(j, k) for kk in range(1, _log2(n) + 1) for k in [1 << kk]
                 for j in [k >> s for s in range(1, kk + 1)]]
    # sort/topk order NaN above every number; bitonic_merge compares as Triton 3.6's does (IEEE >)
    _network(lw, x, steps, desc, total_order=op.name == "sort")
    def idx(c, r):  # topk keeps the first k of each sorted row
        row = linear_index(lw, c[:-1], shape[:-1]) if len(shape) > 1 else "0"
        base = row if row == "0" else lw.e.val(f"shl i32 {row}, {_log2(n)}")
        return c[-1] if base == "0" else lw.e.val(f"add i32 {base}, {c[-1]}")
    lw.tiles[v.id] = gather_regs(lw, _result_layout(lw, v), ty, total, idx)


@rule("histogram")
def lower_histogram(lw: Lowering, op):
    x = op.operands[0]
    mask = op.operands[1] if len(op.operands) > 1 else None
    v = op.results[0]
    bins = op.attrs["num_bins"]
    e = lw.e
    # the operands before the counters are zeroed: a conversion would go through the same scratch
    t = lw.get(x)
    L = t.layout
    ms = lw.get(mask, L).regs if mask is not None else None
    nbytes = bins * 4
    lw.scratch(nbytes)
    lw.smem_access(0, nbytes, True)
    zl = default_blocked((bins,), lw.nw)
    zc = lw.coords(zl)

    def zero():
        for r in range(zl.num_regs):
            _store(lw, "i32", zc[r][0], "0")
    _owned(lw, zl, zero)
    lw.barrier()
    xt = scalar_of(x.type)
    xty = "i32" if xt.int_bitwidth < 32 else llty(xt)

    def count():
        for r, val in enumerate(t.regs):
            # values outside [0, bins) (and masked-off lanes) are not counted, as in the interpreter;
            # narrow values are widened first so that num_bins fits the comparison's type
            if xt.int_bitwidth < 32:
                val = e.val(f"{'zext' if xt.is_int_unsigned() else 'sext'} {llty(xt)} {val} to i32")
            if xt.is_int_unsigned():
                ok = e.val(f"icmp ult {xty} {val}, {bins}")
            else:
                ok = e.val(f"and i1 {e.val(f'icmp sge {xty} {val}, 0')}, {e.val(f'icmp slt {xty} {val}, {bins}')}")
            if ms is not None:
                ok = e.val(f"and i1 {ok}, {ms[r]}")
            y, cont = e.label("hist_y"), e.label("hist_c")
            e.cond_br(ok, y, cont)
            e.start_block(y)
            i = val if xty == "i32" else e.val(f"trunc {xty} {val} to i32")
            e.emit(f"atomicrmw add ptr addrspace(3) {_addr(lw, i, 4)}, i32 1 monotonic, align 4")
            e.br(cont)
            e.start_block(cont)
    _owned(lw, L, count)
    lw.barrier()
    lw.tiles[v.id] = gather_regs(lw, _result_layout(lw, v), "i32", bins, lambda c, r: c[0])
