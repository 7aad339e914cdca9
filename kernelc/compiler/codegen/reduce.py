"""Reductions and scans: within a thread's registers, across lanes with warp shuffles, across warps
through shared memory. The combine function is the op's region, lowered on scalars."""
from __future__ import annotations

from typing import List

from ...language.dtypes import scalar_of, shape_of
from .convert import linear_index
from .emitter import llty
from ..layouts import Layout, default_blocked
from .lowering import Lowering, Tile, rule


def _deposit(j: int, bits: List[int]) -> int:
    r = 0
    for k, b in enumerate(bits):
        if j >> k & 1:
            r |= 1 << b
    return r


def shuffle(lw: Lowering, ty: str, val: str, mode: str, arg: str, clamp: int) -> str:
    """One warp shuffle of a value of LLVM type ``ty`` (split/extended to 32-bit words)."""
    e = lw.e

    def sh32(x):
        return e.call("i32", f"llvm.nvvm.shfl.sync.{mode}.i32",
                      [("i32", "-1"), ("i32", x), ("i32", arg), ("i32", str(clamp))])

    if ty in ("i32", "float"):
        x = val if ty == "i32" else e.val(f"bitcast float {val} to i32")
        r = sh32(x)
        return r if ty == "i32" else e.val(f"bitcast i32 {r} to float")
    if ty in ("i64", "double", "ptr addrspace(1)"):
        if ty == "ptr addrspace(1)":
            x = e.val(f"ptrtoint ptr addrspace(1) {val} to i64")
        elif ty == "double":
            x = e.val(f"bitcast double {val} to i64")
        else:
            x = val
        lo = sh32(e.val(f"trunc i64 {x} to i32"))
        hi = sh32(e.val(f"trunc i64 {e.val(f'lshr i64 {x}, 32')} to i32"))
        lo64 = e.val(f"zext i32 {lo} to i64")
        hi64 = e.val(f"shl i64 {e.val(f'zext i32 {hi} to i64')}, 32")
        r = e.val(f"or i64 {lo64}, {hi64}")
        if ty == "double":
            return e.val(f"bitcast i64 {r} to double")
        if ty == "ptr addrspace(1)":
            return e.val(f"inttoptr i64 {r} to ptr addrspace(1)")
        return r
    if ty in ("half", "bfloat"):
        x = e.val(f"zext i16 {e.val(f'bitcast {ty} {val} to i16')} to i32")
        r = sh32(x)
        return e.val(f"bitcast i16 {e.val(f'trunc i32 {r} to i16')} to {ty}")
    # i1, i8, i16
    x = e.val(f"zext {ty} {val} to i32")
    r = sh32(x)
    return e.val(f"trunc i32 {r} to {ty}")


def _smem_store(lw, ty, base_off: str, val):
    e = lw.e
    sty = "i8" if ty == "i1" else ty
    p = e.val(f"getelementptr i8, ptr addrspace(3) @global_smem, i32 {base_off}")
    v = e.val(f"zext i1 {val} to i8") if ty == "i1" else val
    e.emit(f"store {sty} {v}, ptr addrspace(3) {p}, align {_bytes(ty)}")


def _smem_load(lw, ty, base_off: str):
    e = lw.e
    sty = "i8" if ty == "i1" else ty
    p = e.val(f"getelementptr i8, ptr addrspace(3) @global_smem, i32 {base_off}")
    v = e.val(f"load {sty}, ptr addrspace(3) {p}, align {_bytes(ty)}")
    return e.val(f"trunc i8 {v} to i1") if ty == "i1" else v


_B32 = {"float": "f", "i32": "r"}   # the types whose cross-warp step can take the broadcast form: inline asm constraint


def _smem_store_if(lw, ty, base_off: str, val, pred):
    """``@pred st.shared.b32`` (a 32-bit ``ty``): a store only some threads make, as one predicated instruction."""
    addr = lw.e.val(f"ptrtoint ptr addrspace(3) {lw.e.val(f'getelementptr i8, ptr addrspace(3) @global_smem, i32 {base_off}')} to i32")
    lw.e.asm("void", "@$0 st.shared.b32 [$1], $2;", f"b,r,{_B32[ty]}", [("i1", pred), ("i32", addr), (ty, val)])


def _smem_load_if(lw, ty, base_off: str, pred):
    """``@pred ld.shared.b32`` (a 32-bit ``ty``): undefined where ``pred`` is false. Side effects keep it after the
    barrier before it."""
    addr = lw.e.val(f"ptrtoint ptr addrspace(3) {lw.e.val(f'getelementptr i8, ptr addrspace(3) @global_smem, i32 {base_off}')} to i32")
    return lw.e.asm(ty, "@$1 ld.shared.b32 $0, [$2];", f"={_B32[ty]},b,r", [("i1", pred), ("i32", addr)])


def _bytes(ty):
    return {"i1": 1, "i8": 1, "i16": 2, "half": 2, "bfloat": 2, "i32": 4, "float": 4, "i64": 8, "double": 8,
            "ptr addrspace(1)": 8}[ty]


@rule("reduce")
def lower_reduce(lw: Lowering, op):
    e = lw.e
    axis = op.attrs["axis"]
    region = op.regions[0]
    L = lw.plan.op_layouts.get(id(op)) or default_blocked(shape_of(op.operands[0].type), lw.nw)
    tys = [llty(scalar_of(v.type)) for v in op.operands]
    vals = [lw.get(v, L).regs for v in op.operands]
    k = len(vals)
    Ls = L.sliced(axis)
    axis_bits = [i for i, b in enumerate(L.reg) if b[axis] != 0]
    other_bits = [i for i, b in enumerate(L.reg) if b[axis] == 0]

    def comb(a, b):
        return lw.combine(region, a, b)

    # 1. within the thread: in register order, or (tree=W, passes/reduce_trees.py) in W chains and a tree
    acc = []
    for j in range(1 << len(other_bits)):
        r0 = _deposit(j, other_bits)
        items = [[v[r0 | _deposit(sub, axis_bits)] for v in vals] for sub in range(1 << len(axis_bits))]
        width = op.attrs.get("tree")
        if width:
            # `width` interleaved chains (register r into chain r % width), then a tree of their partials: about
            # n / width + log2(width) deep, `width` partials live at a time (a full tree keeps n / 2 live)
            width = min(int(width), len(items))
            parts = items[:width]
            for r in range(width, len(items)):
                parts[r % width] = comb(parts[r % width], items[r])
            while len(parts) > 1:
                parts = [comb(parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2)] + parts[len(parts) & ~1:]
            acc.append(parts[0])
            continue
        cur = items[0]
        for x in items[1:]:
            cur = comb(cur, x)
        acc.append(cur)
    # 2. across lanes (bfly=down, passes/reduce_xwarp.py: the farthest lanes first, as Triton)
    lane_bits = [(i, b) for i, b in enumerate(L.lane)]
    for i, b in reversed(lane_bits) if op.attrs.get("bfly") == "down" else lane_bits:
        if b[axis] == 0:
            continue
        for j in range(len(acc)):
            other = [shuffle(lw, ty, x, "bfly", str(1 << i), 0x1F) for ty, x in zip(tys, acc[j])]
            acc[j] = comb(acc[j], other)
    # 3. across warps
    wbits = [i for i, b in enumerate(L.warp) if b[axis] != 0]
    if wbits:
        nw_ax = 1 << len(wbits)
        out_numel = 1
        for s in Ls.shape:
            out_numel *= s
        sizes = [out_numel * nw_ax * _bytes(ty) for ty in tys]
        offs, total = [], 0
        for s in sizes:
            offs.append(total)
            total += (s + 15) // 16 * 16
        # scratch_at (passes/reduce_xwarp.py, KERNELC_REDUCE_SCRATCH=apart): this reduction's own area
        base = lw.scratch(total) if "scratch_at" not in op.attrs else lw.scratch_at(op.attrs["scratch_at"], total)
        lw.smem_base()
        # this warp's index along the axis
        widx = "0"
        for k2, bit in enumerate(wbits):
            t = e.val(f"lshr i32 {lw.warp}, {bit}")
            t = e.val(f"and i32 {t}, 1")
            if k2:
                t = e.val(f"shl i32 {t}, {k2}")
            widx = t if widx == "0" else e.val(f"or i32 {widx}, {t}")
        coords = lw.coords(Ls)
        # xwarp=broadcast (passes/reduce_xwarp.py): lane 0 of each warp stores, the first nw_ax lanes of warp 0
        # combine, thread 0 stores the result and everyone reads it after a second barrier
        bcast = (out_numel == 1 and op.attrs.get("xwarp") == "broadcast" and all(t in _B32 for t in tys)
                 and not lw.consumer_threads)   # a warp-specialised kernel's consumers need not start at warp 0
        lane0 = e.val(f"icmp eq i32 {lw.lane}, 0") if bcast else None
        lw.smem_access(base, base + total, True)
        slots = []
        for j in range(len(acc)):
            lin = linear_index(lw, coords[j], Ls.shape) if Ls.rank else "0"
            slot = e.val(f"mul i32 {lin}, {nw_ax}") if lin != "0" else "0"
            slots.append(slot)
            s = e.val(f"add i32 {slot}, {widx}") if slot != "0" else widx
            for q, ty in enumerate(tys):
                off = e.val(f"mul i32 {s}, {_bytes(ty)}")
                off = e.val(f"add i32 {off}, {base + offs[q]}")
                if bcast:
                    _smem_store_if(lw, ty, off, acc[j][q], lane0)
                else:
                    _smem_store(lw, ty, off, acc[j][q])
        lw.smem_access(base, base + total, False)
        if bcast:
            first = e.val(f"icmp ult i32 {lw.tid}, {nw_ax}")
            got = [_smem_load_if(lw, ty, e.val(f"add i32 {e.val(f'shl i32 {lw.tid}, 2')}, {base + offs[q]}"), first)
                   for q, ty in enumerate(tys)]
            for i in reversed(range(len(wbits))) if op.attrs.get("bfly") == "down" else range(len(wbits)):
                got = comb(got, [shuffle(lw, ty, x, "bfly", str(1 << i), 0x1F) for ty, x in zip(tys, got)])
            # thread 0 alone overwrites slot 0, which only it read: no barrier between its read and this store
            t0 = e.val(f"icmp eq i32 {lw.tid}, 0")
            for q, ty in enumerate(tys):
                _smem_store_if(lw, ty, str(base + offs[q]), got[q], t0)
            lw.barrier()
            acc[0] = [_smem_load(lw, ty, str(base + offs[q])) for q, ty in enumerate(tys)]
            lw.smem_access(base, base + total, False)
        elif out_numel == 1 and op.attrs.get("xwarp") == "lds":
            # xwarp=lds (passes/reduce_xwarp.py): every thread reads all nw_ax partials (16-byte loads of one address
            # a warp: no bank conflict) and combines them as a tree -- no shuffles after the barrier. One vector
            # width for all operands (argmax's value and index): their partials pair up register by register
            vec = min([16 // _bytes(ty) if _bytes(ty) in (4, 8) and (base + offs[q]) % 16 == 0 else 1
                       for q, ty in enumerate(tys)] + [nw_ax])
            parts_q = []
            for q, ty in enumerate(tys):
                b = base + offs[q]
                parts = []
                for w0 in range(0, nw_ax, vec):
                    if vec == 1:
                        parts.append(_smem_load(lw, ty, str(b + w0 * _bytes(ty))))
                        continue
                    p = e.val(f"getelementptr i8, ptr addrspace(3) @global_smem, i32 {b + w0 * _bytes(ty)}")
                    v = e.val(f"load <{vec} x {ty}>, ptr addrspace(3) {p}, align 16")
                    parts += [e.val(f"extractelement <{vec} x {ty}> {v}, i32 {i}") for i in range(vec)]
                parts_q.append(parts)
            items = [[parts_q[q][w] for q in range(len(tys))] for w in range(nw_ax)]
            while len(items) > 1:
                items = [comb(items[i], items[i + 1]) for i in range(0, len(items) - 1, 2)] + items[len(items) & ~1:]
            acc[0] = items[0]
        elif out_numel == 1:
            # one result for the whole block: lane l reads warp (l mod nw_ax)'s partial and a butterfly
            # over log2(nw_ax) lanes combines them -- one live register per value, not nw_ax
            sel = e.val(f"and i32 {lw.lane}, {nw_ax - 1}")
            got = []
            for q, ty in enumerate(tys):
                off = e.val(f"mul i32 {sel}, {_bytes(ty)}")
                got.append(_smem_load(lw, ty, e.val(f"add i32 {off}, {base + offs[q]}")))
            for i in reversed(range(len(wbits))) if op.attrs.get("bfly") == "down" else range(len(wbits)):
                got = comb(got, [shuffle(lw, ty, x, "bfly", str(1 << i), 0x1F) for ty, x in zip(tys, got)])
            acc[0] = got
        for j in range(len(acc) if out_numel != 1 else 0):
            cur = None
            for w in range(nw_ax):
                s = e.val(f"add i32 {slots[j]}, {w}") if slots[j] != "0" else str(w)
                got = []
                for q, ty in enumerate(tys):
                    off = e.val(f"mul i32 {s}, {_bytes(ty)}") if not s.isdigit() else str(int(s) * _bytes(ty))
                    off = e.val(f"add i32 {off}, {base + offs[q]}")
                    got.append(_smem_load(lw, ty, off))
                cur = got if cur is None else comb(cur, got)
            acc[j] = cur
    for q, r in enumerate(op.results):
        regs = [a[q] for a in acc]
        if lw.is_tile(r):
            lw.tiles[r.id] = Tile(Ls, regs)
        else:
            lw.scalars[r.id] = regs[0]


@rule("scan")
def lower_scan(lw: Lowering, op):
    """Inclusive scan along an axis made the fastest dimension of a blocked layout:
    registers in a thread, then lanes (shfl.up/down), then warps (shared memory), chunk by chunk."""
    e = lw.e
    axis = op.attrs["axis"]
    reverse = op.attrs.get("reverse", False)
    region = op.regions[0]
    shape = shape_of(op.operands[0].type)
    order = [axis] + [d for d in reversed(range(len(shape))) if d != axis]
    L = default_blocked(shape, lw.nw, order, vec=min(4, shape[axis]))
    tys = [llty(scalar_of(v.type)) for v in op.operands]
    vals = [list(lw.get(v, L).regs) for v in op.operands]

    def comb(a, b):  # a precedes b in scan order
        return lw.combine(region, b, a) if reverse else lw.combine(region, a, b)

    def sel(c, a, b):
        return [e.val(f"select i1 {c}, {ty} {x}, {ty} {y}") for ty, x, y in zip(tys, a, b)]

    spt_bits = [i for i, b in enumerate(L.reg) if b[axis] != 0 and b[axis] < _lane_cov(L, axis)]
    rep_bits = [i for i, b in enumerate(L.reg) if b[axis] != 0 and b[axis] >= _lane_cov(L, axis)]
    other_bits = [i for i, b in enumerate(L.reg) if b[axis] == 0]
    lane_bits = [i for i, b in enumerate(L.lane) if b[axis] != 0]
    warp_bits = [i for i, b in enumerate(L.warp) if b[axis] != 0]
    nl = 1 << len(lane_bits)  # lanes along the axis (the low lane bits)
    nwa = 1 << len(warp_bits)
    out = [list(v) for v in vals]
    lane_t = e.val(f"and i32 {lw.lane}, {nl - 1}") if nl > 1 else "0"
    widx = "0"
    if warp_bits:
        for k2, bit in enumerate(warp_bits):
            t = e.val(f"and i32 {e.val(f'lshr i32 {lw.warp}, {bit}')}, 1")
            if k2:
                t = e.val(f"shl i32 {t}, {k2}")
            widx = t if widx == "0" else e.val(f"or i32 {widx}, {t}")
    n_other = 1 << len(other_bits)
    n_spt = 1 << len(spt_bits)
    chunks = list(range(1 << len(rep_bits)))
    if reverse:
        chunks.reverse()
    carry = [None] * n_other
    coords_other = None
    for c in chunks:
        for j in range(n_other):
            base_r = _deposit(j, other_bits) | _deposit(c, rep_bits)
            idxs = [base_r | _deposit(s, spt_bits) for s in range(n_spt)]
            if reverse:
                idxs.reverse()
            # a. in-thread inclusive scan
            run = [v[idxs[0]] for v in vals]
            for q, ty in enumerate(tys):
                out[q][idxs[0]] = run[q]
            for r in idxs[1:]:
                run = comb(run, [v[r] for v in vals])
                for q in range(len(tys)):
                    out[q][r] = run[q]
            total = run
            # b. inclusive scan of thread totals across lanes along the axis
            incl = total
            step = 1
            while step < nl:
                mode = "down" if reverse else "up"
                clamp = ((32 - nl) << 8) | (nl - 1 if reverse else 0)
                got = [shuffle(lw, ty, x, mode, str(step), clamp) for ty, x in zip(tys, incl)]
                cond = e.val(f"icmp ult i32 {lane_t}, {nl - step}") if reverse else e.val(f"icmp uge i32 {lane_t}, {step}")
                incl = sel(cond, comb(got, incl), incl)
                step *= 2
            # exclusive prefix of this thread = inclusive of the previous lane
            prefix, has_prefix = None, None
            if nl > 1:
                mode = "down" if reverse else "up"
                clamp = ((32 - nl) << 8) | (nl - 1 if reverse else 0)
                prefix = [shuffle(lw, ty, x, mode, "1", clamp) for ty, x in zip(tys, incl)]
                has_prefix = e.val(f"icmp ult i32 {lane_t}, {nl - 1}") if reverse else e.val(f"icmp ugt i32 {lane_t}, 0")
            # warp totals: the last lane along the axis holds the warp's inclusive total
            last = "0" if reverse else str(nl - 1)
            warp_total = [shuffle(lw, ty, x, "idx", last if nl > 1 else "0", 0x1F) for ty, x in zip(tys, incl)] \
                if nl > 1 else incl
            wprefix, has_w = None, None
            chunk_total = warp_total
            if warp_bits:
                if coords_other is None:
                    coords_other = lw.coords(L.sliced(axis))
                sizes = [(1 << len(other_bits)) * 0 + _numel_sliced(L, axis) * nwa * _bytes(ty) for ty in tys]
                offs, tot = [], 0
                for s in sizes:
                    offs.append(tot)
                    tot += (s + 15) // 16 * 16
                base = lw.scratch(tot)
                lin = linear_index(lw, coords_other[j], L.sliced(axis).shape) if L.rank > 1 else "0"
                slot = e.val(f"mul i32 {lin}, {nwa}") if lin != "0" else "0"
                lw.smem_access(base, base + tot, True)
                s = e.val(f"add i32 {slot}, {widx}") if slot != "0" else widx
                for q, ty in enumerate(tys):
                    off = e.val(f"add i32 {e.val(f'mul i32 {s}, {_bytes(ty)}')}, {base + offs[q]}")
                    _smem_store(lw, ty, off, warp_total[q])
                lw.smem_access(base, base + tot, False)
                totals = []
                for w in range(nwa):
                    sw = e.val(f"add i32 {slot}, {w}") if slot != "0" else str(w)
                    got = []
                    for q, ty in enumerate(tys):
                        off = e.val(f"add i32 {e.val(f'mul i32 {sw}, {_bytes(ty)}')}, {base + offs[q]}")
                        got.append(_smem_load(lw, ty, off))
                    totals.append(got)
                order_w = list(range(nwa))
                if reverse:
                    order_w.reverse()
                # prefix over warps before this one, and the chunk total over all warps
                for w in order_w:
                    before = e.val(f"icmp ugt i32 {widx}, {w}") if not reverse else e.val(f"icmp ult i32 {widx}, {w}")
                    if wprefix is None:
                        wprefix, has_w = totals[w], before
                    else:
                        cand = comb(wprefix, totals[w])
                        # if w is before this warp, extend the prefix
                        new = sel(before, sel(has_w, cand, totals[w]), wprefix)
                        has_w = e.val(f"or i1 {has_w}, {before}")
                        wprefix = new
                ct = totals[order_w[0]]
                for w in order_w[1:]:
                    ct = comb(ct, totals[w])
                chunk_total = ct
            # combine: carry (earlier chunks) -> warp prefix -> lane prefix -> element
            for r in idxs:
                x = [out[q][r] for q in range(len(tys))]
                if prefix is not None:
                    x = sel(has_prefix, comb(prefix, x), x)
                if wprefix is not None:
                    x = sel(has_w, comb(wprefix, x), x)
                if carry[j] is not None:
                    x = comb(carry[j], x)
                for q in range(len(tys)):
                    out[q][r] = x[q]
            carry[j] = chunk_total if carry[j] is None else comb(carry[j], chunk_total)
    for q, r in enumerate(op.results):
        lw.tiles[r.id] = Tile(L, out[q])


def _lane_cov(L: Layout, axis: int) -> int:
    """Smallest axis coordinate reached by lanes or warps (registers below it are per-thread chunks)."""
    vals = [b[axis] for b in L.lane + L.warp if b[axis]]
    return min(vals) if vals else 1 << 30


def _numel_sliced(L: Layout, axis: int) -> int:
    n = 1
    for i, s in enumerate(L.shape):
        if i != axis:
            n *= s
    return n
