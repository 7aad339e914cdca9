"""Global memory: vectorised, predicated loads and stores; atomics.

The vector width comes from three facts that must all hold: the layout gives a thread consecutive
registers along the contiguous dimension, the axis analysis proves the addresses are consecutive and
aligned, and the mask is constant over the vector. Masked accesses are inline PTX (``@p ld.global``)
so masked-off lanes never touch memory and take ``other``.
"""
from __future__ import annotations

from math import gcd
from typing import List, Optional

from ...language.dtypes import pointer_type, scalar_of, shape_of
from .elementwise import constant
from .emitter import llty
from .lowering import Lowering, Tile, rule

CACHE_PTX = {"": "", ".ca": ".ca", ".cg": ".cg", ".cv": ".cv", ".cs": ".cs", ".wb": ".wb", ".wt": ".wt", ".lu": ".lu"}
EVICT_PTX = {"": "", "evict_normal": "", "evict_first": ".L1::evict_first", "evict_last": ".L1::evict_last"}
# The 64-bit L2 policy ``createpolicy.fractional.L2::<kind>.b64 p, 1.0`` makes (sm_90 and sm_100: CUTLASS's
# CacheHintSm90 values), passed to the hinted load as a constant: ptxas builds the memory descriptor with two moves
# it can schedule anywhere, where createpolicy became five dependent uniform ops ahead of the first hinted load
L2_POLICY = {"evict_last": 0x14F0000000000000, "evict_first": 0x12F0000000000000}


def report_access(lw: Lowering, op, kind: str, ptr, mask, layout, ebytes: int, vec: int) -> None:
    """Record what the access compiled to and, when narrower than 16 bytes, which fact limited it."""
    shape = shape_of(ptr.type)
    info = lw.axis.get(ptr) if shape else None
    dim = next((d for d in range(layout.rank) if layout.reg and layout.reg[0][d]), None) if layout is not None else None
    limits = {}
    if info is not None and dim is not None:
        limits = {"layout_regs": layout.contig_regs(dim), "contiguity": info.contiguity[dim],
                  "alignment_elems": max(1, info.divisibility[dim] // ebytes), "max_vector": max(1, 16 // ebytes)}
        if mask is not None and lw.is_tile(mask):
            limits["mask_constancy"] = lw.axis.get(mask).constancy[dim]
    limiting = sorted(k for k, v in limits.items() if v == vec and k != "max_vector") if vec * ebytes < 16 else []
    lw.reports["memory_accesses"].append({
        "kind": kind, "file": op.loc.file, "line": op.loc.line, "shape": list(shape), "elem_bytes": ebytes,
        "vector_elems": vec, "vector_bytes": vec * ebytes, "contiguous_dim": dim,
        "contiguity": list(info.contiguity) if info else [], "divisibility_bytes": list(info.divisibility) if info else [],
        "limits": limits, "limited_by": limiting,
        "layout": layout_bases(layout), "address": address_form(lw, ptr),
    })


def layout_bases(layout) -> Optional[dict]:
    """The register layout of an access as its GF(2) bases (``compiler/layouts.py``): with the
    address form below, a tool can list the addresses each lane of a warp touches."""
    if layout is None:
        return None
    return {"shape": list(layout.shape), "reg": [list(b) for b in layout.reg],
            "lane": [list(b) for b in layout.lane], "warp": [list(b) for b in layout.warp]}


def address_form(lw: Lowering, ptr) -> dict:
    """The pointer tile as ``base + sum_d stride_d * x_d + rest`` (elements), strides as polynomials
    over argument names (``[[coef, [names]], ...]``); ``{"affine": False}`` for a gather, a modulo or
    a product of two tile axes (the addresses depend on values, not only on the position)."""
    from ..passes.tile_exprs import TileExprs, is_axis
    shape = shape_of(ptr.type)
    if not shape:
        return {"affine": False}
    tx = lw.__dict__.get("_tile_exprs")
    if tx is None:
        tx = lw.__dict__["_tile_exprs"] = TileExprs(lw.fn)
    try:
        got = tx.pointer(ptr, tuple(range(len(shape))))
    except Exception:  # an IR form the normaliser does not know: no address facts, never a failed compile
        got = None
    if got is None:
        return {"affine": False}
    base, poly = got
    names = {a.id: arg.name for a, arg in zip(lw.fn.body.args, lw.fn.arguments)}

    def leaf_name(k):
        if k[0] == "v" and k[1] in names:
            return names[k[1]]
        return "?"   # a program id, a loop trip, a computed scalar: uniform over the warp
    strides = [[] for _ in shape]
    for mono, coef in poly.terms.items():
        axes = [k for k in mono if is_axis(k)]
        if len(axes) > 1:
            return {"affine": False}
        if axes:
            strides[axes[0][1]].append([int(coef), sorted(leaf_name(k) for k in mono if not is_axis(k))])
    return {"affine": True, "base": names.get(base.id, "?"), "strides": strides}


def vector_width(lw: Lowering, ptr, mask, layout, ebytes: int) -> int:
    """Largest power-of-two vector (<= 16 bytes) that the layout, addresses and mask all allow."""
    shape = shape_of(ptr.type)
    if not shape:
        return 1
    info = lw.axis.get(ptr)
    # the dim along which the leading registers run
    dim = next((d for d in range(layout.rank) if layout.reg and layout.reg[0][d]), None)
    if dim is None:
        return 1
    vec = layout.contig_regs(dim)
    vec = min(vec, info.contiguity[dim], max(1, info.divisibility[dim] // ebytes), max(1, 16 // ebytes))
    if mask is not None and lw.is_tile(mask):
        vec = min(vec, lw.axis.get(mask).constancy[dim])
    v = 1
    while v * 2 <= vec:
        v *= 2
    return v


def _word_plan(vec: int, ebytes: int):
    """(word LLVM type, PTX width suffix, constraint, words) for a vector of ``vec`` elements."""
    total = vec * ebytes
    if total >= 4:
        n = total // 4
        return "i32", "b32", "r", n
    if total == 2:
        return "i16", "b16", "h", 1
    return "i16", "u8", "h", 1  # a single byte travels in a 16-bit register


def _pack(lw: Lowering, elt, vals: List[str]) -> List[str]:
    """Element values -> words for a vector store."""
    e = lw.e
    ty = "i8" if elt.is_int1() else llty(elt)
    ebytes = 1 if elt.is_int1() else elt.itemsize
    wty, _, _, nwords = _word_plan(len(vals), ebytes)
    if len(vals) * ebytes == 1:
        return [e.val(f"zext i8 {vals[0]} to i16")]
    vecty = f"<{len(vals)} x {ty}>"
    acc = "undef"
    for i, v in enumerate(vals):
        acc = e.val(f"insertelement {vecty} {acc}, {ty} {v}, i32 {i}")
    if wty == "i16" and nwords == 1:
        return [e.val(f"bitcast {vecty} {acc} to i16")]
    words = e.val(f"bitcast {vecty} {acc} to <{nwords} x i32>")
    return [e.val(f"extractelement <{nwords} x i32> {words}, i32 {i}") for i in range(nwords)]


def _unpack(lw: Lowering, elt, words: List[str], vec: int) -> List[str]:
    e = lw.e
    ty = "i8" if elt.is_int1() else llty(elt)
    ebytes = 1 if elt.is_int1() else elt.itemsize
    if vec * ebytes == 1:
        return [e.val(f"trunc i16 {words[0]} to i8")]
    vecty = f"<{vec} x {ty}>"
    if len(words) == 1 and vec * ebytes == 2:
        v = e.val(f"bitcast i16 {words[0]} to {vecty}")
    else:
        acc = "undef"
        for i, w in enumerate(words):
            acc = e.val(f"insertelement <{len(words)} x i32> {acc}, i32 {w}, i32 {i}")
        v = e.val(f"bitcast <{len(words)} x i32> {acc} to {vecty}")
    return [e.val(f"extractelement {vecty} {v}, i32 {i}") for i in range(vec)]


@rule("load")
def lower_load(lw: Lowering, op):
    e = lw.e
    res = op.results[0]
    elt = scalar_of(res.type)
    ptr = op.operands[0]
    mask = op.operands[1] if len(op.operands) > 1 else None
    other = op.operands[2] if len(op.operands) > 2 else None
    cache = CACHE_PTX[op.attrs.get("cache", "")]
    evict = EVICT_PTX[op.attrs.get("eviction", "")]
    volatile = op.attrs.get("volatile", False)
    l2 = op.attrs.get("l2")   # an L2 cache policy (passes/l2_reuse.py)
    if not lw.is_tile(res):
        p = lw.scalar(ptr)
        m = lw.scalar(mask) if mask is not None else None
        o = lw.scalar(other) if other is not None else None
        lw.scalars[res.id] = _load_vector(lw, elt, [p], m, [o] if o else None, 1, cache, evict, volatile, l2)[0]
        return
    L = lw.plan.get(res)
    ebytes = elt.itemsize
    vec = vector_width(lw, ptr, mask, L, ebytes)
    report_access(lw, op, "load", ptr, mask, L, ebytes, vec)
    ptrs = lw.get(ptr, L).regs
    masks = lw.operand(mask, L) if mask is not None else None
    others = lw.operand(other, L) if other is not None else None
    out: List[str] = []
    for g in range(0, L.num_regs, vec):
        m = masks[g] if masks is not None else None
        o = others[g:g + vec] if others is not None else None
        out += _load_vector(lw, elt, [ptrs[g]], m, o, vec, cache, evict, volatile, l2)
    lw.tiles[res.id] = Tile(L, out)


def _load_vector(lw: Lowering, elt, ptr: List[str], mask: Optional[str], other, vec: int, cache, evict,
                 volatile, l2=None) -> List[str]:
    e = lw.e
    ebytes = elt.itemsize
    ty = llty(elt)
    if mask is None and not cache and not evict and not volatile and not l2:
        # plain LLVM load: lets LLVM and ptxas schedule freely
        if vec == 1:
            return [e.val(f"load {ty}, ptr addrspace(1) {ptr[0]}, align {ebytes}")]
        vecty = f"<{vec} x {ty}>"
        v = e.val(f"load {vecty}, ptr addrspace(1) {ptr[0]}, align {vec * ebytes}")
        return [e.val(f"extractelement {vecty} {v}, i32 {i}") for i in range(vec)]
    wty, suffix, cons, nwords = _word_plan(vec, ebytes)
    other_words = _pack(lw, elt, other) if other is not None else [("0" if wty == "i32" else "0")] * nwords
    outs = ", ".join(f"${i}" for i in range(nwords))
    vsuf = f".v{nwords}" if nwords > 1 else ""
    pidx = nwords + 1
    lines = []
    for i in range(nwords):
        lines.append(f"mov.{'b32' if cons == 'r' else 'b16'} ${i}, ${pidx + 1 + i};")
    qual = ".volatile" if volatile else ""
    pred = f"@${pidx} " if mask is not None else ""
    # an L2 policy operand after the other values: made by its own asm without side effects or memory access,
    # so that LLVM keeps one per kernel for every load with the same policy (as a policy made once at entry)
    hint, pol = (".L2::cache_hint", f", ${pidx + 1 + nwords}") if l2 else ("", "")
    lines.append(f"{pred}ld{qual}.global{cache}{evict}{hint}{vsuf}.{suffix} {{{outs}}}, [ ${nwords} + 0 ]{pol};"
                 if nwords > 1 else f"{pred}ld{qual}.global{cache}{evict}{hint}.{suffix} $0, [ $1 + 0 ]{pol};")
    constraints = ",".join([f"={cons}"] * nwords + ["l", "b"] + [cons] * nwords + (["l"] if l2 else []))
    ret = f"{{ {', '.join([wty] * nwords)} }}" if nwords > 1 else wty
    args = [("ptr addrspace(1)", ptr[0]), ("i1", mask if mask is not None else "true")] + \
        [(wty, w) for w in other_words]
    if l2:
        args.append(("i64", str(L2_POLICY[l2])))
    r = e.asm(ret, "\n".join(lines), constraints, args)
    words = [e.val(f"extractvalue {ret} {r}, {i}") for i in range(nwords)] if nwords > 1 else [r]
    return _unpack(lw, elt, words, vec)


@rule("store")
def lower_store(lw: Lowering, op):
    e = lw.e
    ptr, val = op.operands[0], op.operands[1]
    mask = op.operands[2] if len(op.operands) > 2 else None
    elt = scalar_of(val.type)
    cache = CACHE_PTX[op.attrs.get("cache", "")]
    evict = EVICT_PTX[op.attrs.get("eviction", "")]
    if not lw.is_tile(ptr):
        p = lw.scalar(ptr)
        m = lw.scalar(mask) if mask is not None else None
        # every thread stores the same scalar; one store suffices
        first = e.val(f"icmp eq i32 {lw.tid}, 0")
        m = first if m is None else e.val(f"and i1 {m}, {first}")
        _store_vector(lw, elt, p, [lw.scalar(val)], m, 1, cache, evict)
        return
    # store in the value's layout when it has one (no conversion); else the coalesced layout
    L = lw.layout_of(val) if lw.is_tile(val) and lw.layout_of(val) is not None else None
    if L is None:
        from ..passes.layout_assign import LayoutAssigner
        L = lw.plan.get(ptr) or _store_layout(lw, ptr)
    ebytes = elt.itemsize
    vec = vector_width(lw, ptr, mask, L, ebytes)
    report_access(lw, op, "store", ptr, mask, L, ebytes, vec)
    ptrs = lw.get(ptr, L).regs
    vals = lw.operand(val, L)
    masks = lw.operand(mask, L) if mask is not None else None
    own = lw.owner_predicate(L)
    for g in range(0, L.num_regs, vec):
        m = masks[g] if masks is not None else None
        if own is not None:
            m = own if m is None else e.val(f"and i1 {m}, {own}")
        _store_vector(lw, elt, ptrs[g], vals[g:g + vec], m, vec, cache, evict)


@rule("prefetch")
def lower_prefetch(lw: Lowering, op):
    """``prefetch.global.L1/L2`` per element the thread owns (one thread of a replicated element's copies)."""
    e = lw.e
    ptr = op.operands[0]
    mask = op.operands[1] if len(op.operands) > 1 else None
    level = op.attrs.get("level", "L1")
    code = f"@$0 prefetch.global.{level} [ $1 + 0 ];"
    if not lw.is_tile(ptr):
        m = lw.scalar(mask) if mask is not None else None
        first = e.val(f"icmp eq i32 {lw.tid}, 0")
        m = first if m is None else e.val(f"and i1 {m}, {first}")
        e.asm("void", code, "b,l", [("i1", m), ("ptr addrspace(1)", lw.scalar(ptr))])
        return
    L = lw.plan.get(ptr) or _store_layout(lw, ptr)
    ptrs = lw.get(ptr, L).regs
    masks = lw.operand(mask, L) if mask is not None else None
    own = lw.owner_predicate(L)
    for g in range(L.num_regs):
        m = masks[g] if masks is not None else None
        if own is not None:
            m = own if m is None else e.val(f"and i1 {m}, {own}")
        e.asm("void", code, "b,l", [("i1", m if m is not None else "true"), ("ptr addrspace(1)", ptrs[g])])


def _store_layout(lw: Lowering, ptr):
    from ..passes.layout_assign import LayoutAssigner
    a = LayoutAssigner.__new__(LayoutAssigner)
    a.axis, a.nw = lw.axis, lw.nw
    return LayoutAssigner.memory_layout(a, ptr)


def _store_vector(lw: Lowering, elt, ptr: str, vals: List[str], mask: Optional[str], vec: int, cache, evict):
    e = lw.e
    ebytes = elt.itemsize
    ty = llty(elt)
    if mask is None and not cache and not evict:
        if vec == 1:
            e.emit(f"store {ty} {vals[0]}, ptr addrspace(1) {ptr}, align {ebytes}")
            return
        vecty = f"<{vec} x {ty}>"
        acc = "undef"
        for i, v in enumerate(vals):
            acc = e.val(f"insertelement {vecty} {acc}, {ty} {v}, i32 {i}")
        e.emit(f"store {vecty} {acc}, ptr addrspace(1) {ptr}, align {vec * ebytes}")
        return
    wty, suffix, cons, nwords = _word_plan(vec, ebytes)
    words = _pack(lw, elt, vals)
    pred = "@$0 " if mask is not None else ""
    ins = ", ".join(f"${i + 2}" for i in range(nwords))
    vsuf = f".v{nwords}" if nwords > 1 else ""
    code = f"{pred}st.global{cache}{evict}{vsuf}.{suffix} [ $1 + 0 ], {{{ins}}};" if nwords > 1 else \
        f"{pred}st.global{cache}{evict}.{suffix} [ $1 + 0 ], $2;"
    constraints = ",".join(["b", "l"] + [cons] * nwords)
    args = [("i1", mask if mask is not None else "true"), ("ptr addrspace(1)", ptr)] + [(wty, w) for w in words]
    e.asm("void", code, constraints, args)


# -- atomics -------------------------------------------------------------------------------------

_ATOM_OP = {"add": "add", "fadd": "add", "max": "max", "umax": "max", "fmax": "max", "min": "min", "umin": "min",
            "fmin": "min", "xchg": "exch", "and": "and", "or": "or", "xor": "xor"}


def _atom_type(kind: str, elt) -> str:
    bits = elt.primitive_bitwidth
    if elt.is_floating():
        return {16: "f16" if elt.name == "fp16" else "bf16", 32: "f32", 64: "f64"}[bits]
    if kind in ("xchg", "and", "or", "xor"):
        return f"b{bits}"
    if kind in ("max", "min"):
        return f"s{bits}"
    return f"u{bits}"


def _atomic_one(lw: Lowering, code_fn, elt, ptr: str, vals: List[str], mask: Optional[str]) -> str:
    e = lw.e
    ty = llty(elt)
    cons = {8: "h", 16: "h", 32: "r", 64: "l"}[elt.primitive_bitwidth]
    fcons = {"float": "f", "double": "d"}.get(ty, cons)
    vals_i = []
    for v in vals:
        vals_i.append(v)
    code = code_fn(len(vals))
    constraints = ",".join([f"={fcons}", "l", "b"] + [fcons] * len(vals))
    args = [("ptr addrspace(1)", ptr), ("i1", mask if mask is not None else "true")] + [(ty if fcons in "fd" else ty, v) for v in vals_i]
    if ty in ("half", "bfloat"):
        args = [("ptr addrspace(1)", ptr), ("i1", mask if mask is not None else "true")] + \
            [("i16", e.val(f"bitcast {ty} {v} to i16")) for v in vals]
        r = e.asm("i16", code, constraints, args)
        return e.val(f"bitcast i16 {r} to {ty}")
    return e.asm(ty, code, constraints, args)


def _fp_minmax_cas(lw: Lowering, kind, elt, sem, scope, ptr, val, mask):
    """Float atomic max/min: a compare-and-swap loop (PTX has no float atom.max)."""
    e = lw.e
    ty = llty(elt)
    ity = f"i{elt.primitive_bitwidth}"
    intr = "maxnum" if kind == "fmax" else "minnum"
    sfx = {"float": "f32", "double": "f64"}[ty]
    sync = "block" if scope == "cta" else "device"
    pre = e.cur_label
    start, loop, done, skip = e.label("cas_start"), e.label("cas_loop"), e.label("cas_done"), e.label("cas_skip")
    e.cond_br(mask if mask is not None else "true", start, skip)
    e.start_block(start)
    init = e.val(f"load volatile {ity}, ptr addrspace(1) {ptr}, align {elt.itemsize}")
    e.br(loop)
    e.start_block(loop)
    cur = e.fresh("cas_cur")
    e.body.append(f"  {cur} = phi {ity} [ {init}, %{start} ], [ __NEXT__, %{loop} ]")
    line = len(e.body) - 1
    curf = e.val(f"bitcast {ity} {cur} to {ty}")
    newf = e.call(ty, f"llvm.{intr}.{sfx}", [(ty, curf), (ty, val)])
    newi = e.val(f"bitcast {ty} {newf} to {ity}")
    pair = e.val(f'cmpxchg ptr addrspace(1) {ptr}, {ity} {cur}, {ity} {newi} syncscope("{sync}") seq_cst seq_cst, '
                 f'align {elt.itemsize}')
    old = e.val(f"extractvalue {{ {ity}, i1 }} {pair}, 0")
    ok = e.val(f"extractvalue {{ {ity}, i1 }} {pair}, 1")
    e.body[line] = e.body[line].replace("__NEXT__", old)
    e.cond_br(ok, done, loop)
    e.start_block(done)
    res = e.val(f"bitcast {ity} {old} to {ty}")
    e.br(skip)
    e.start_block(skip)
    return e.val(f"phi {ty} [ {res}, %{done} ], [ {constant(0, elt)}, %{pre} ]")


@rule("atomic_rmw", "atomic_cas")
def lower_atomic(lw: Lowering, op):
    e = lw.e
    res = op.results[0]
    elt = scalar_of(res.type)
    sem = op.attrs.get("sem", "acq_rel")
    scope = op.attrs.get("scope", "gpu")
    sem_ptx = {"acq_rel": ".acq_rel", "acquire": ".acquire", "release": ".release", "relaxed": ".relaxed"}[sem]
    scope_ptx = {"gpu": ".gpu", "cta": ".cta", "sys": ".sys"}[scope]
    is_cas = op.name == "atomic_cas"
    kind = "cas" if is_cas else op.attrs["kind"]
    ptr = op.operands[0]
    if is_cas:
        data = [op.operands[1], op.operands[2]]
        mask = None
    else:
        data = [op.operands[1]]
        mask = op.operands[2] if len(op.operands) > 2 else None
    ptype = _atom_type("xchg" if is_cas else kind, elt) if not is_cas else f"b{elt.primitive_bitwidth}"

    def code(n):
        opname = "cas" if is_cas else _ATOM_OP[kind]
        if not is_cas and kind == "fadd" and elt.name in ("fp16", "bf16"):
            ty = f"noftz.{ptype}"
        else:
            ty = ptype
        args = ", ".join(f"${3 + i}" for i in range(n))
        return f"@$2 atom{sem_ptx}{scope_ptx}.global.{opname}.{ty} $0, [ $1 + 0 ], {args};"

    scalar = not lw.is_tile(res)
    if scalar:
        # one thread performs it; all threads get the old value through shared memory
        p = lw.scalar(ptr)
        vals = [lw.scalar(d) for d in data]
        m = lw.scalar(mask) if mask is not None else None
        first = e.val(f"icmp eq i32 {lw.tid}, 0")
        m = first if m is None else e.val(f"and i1 {m}, {first}")
        if kind in ("fmax", "fmin"):
            old = _fp_minmax_cas(lw, kind, elt, sem, scope, p, vals[0], m)
        else:
            old = _atomic_one(lw, code, elt, p, vals, m)
        # nothing reads the old value (a lock release): no shared-memory broadcast, no barriers
        lw.scalars[res.id] = old if op.attrs.get("result_unused") else _broadcast_from_thread0(lw, elt, old)
        return
    L = lw.plan.get(res)
    ptrs = lw.get(ptr, L).regs
    vals = [lw.operand(d, L) for d in data]
    masks = lw.operand(mask, L) if mask is not None else None
    own = lw.owner_predicate(L)
    vec = min(op.attrs.get("vec", 1), vector_width(lw, ptr, mask, L, elt.itemsize))
    if vec > 1:  # passes/atomic_results.py: an fp32 add nobody reads -> sm_90 vector reductions
        report_access(lw, op, "atomic", ptr, mask, L, elt.itemsize, vec)
        for g in range(0, L.num_regs, vec):
            m = masks[g] if masks is not None else None
            if own is not None:
                m = own if m is None else e.val(f"and i1 {m}, {own}")
            _red_vector(lw, sem_ptx, scope_ptx, ptrs[g], vals[0][g:g + vec], m)
        lw.tiles[res.id] = Tile(L, [constant(0, elt)] * L.num_regs)  # unread (result_unused)
        return
    out = []
    for r in range(L.num_regs):
        m = masks[r] if masks is not None else None
        if own is not None:
            m = own if m is None else e.val(f"and i1 {m}, {own}")
        if kind in ("fmax", "fmin"):
            old = _fp_minmax_cas(lw, kind, elt, sem, scope, ptrs[r], vals[0][r], m)
        else:
            old = _atomic_one(lw, code, elt, ptrs[r], [v[r] for v in vals], m)
        out.append(old)
    if own is not None and not op.attrs.get("result_unused"):
        # replicas did not execute: take the owner's old value
        from .convert import replicate_from_owner
        out = replicate_from_owner(lw, L, out, elt)
    lw.tiles[res.id] = Tile(L, out)


def _red_vector(lw: Lowering, sem_ptx: str, scope_ptx: str, ptr: str, vals: List[str], mask: Optional[str]):
    """One ``red.global.add.v{2,4}.f32`` of contiguous fp32 elements (sm_90+, PTX 8.1)."""
    n = len(vals)
    ins = ", ".join(f"${i + 2}" for i in range(n))
    code = f"@$0 red{sem_ptx}{scope_ptx}.global.add.v{n}.f32 [ $1 + 0 ], {{{ins}}};"
    args = [("i1", mask if mask is not None else "true"), ("ptr addrspace(1)", ptr)] + [("float", v) for v in vals]
    lw.e.asm("void", code, ",".join(["b", "l"] + ["f"] * n), args)


def _broadcast_from_thread0(lw: Lowering, elt, val: str) -> str:
    e = lw.e
    base = lw.scratch(8)
    ty = llty(elt)
    lw.smem_access(base, base + 8, True)
    addr = e.val(f"getelementptr i8, ptr addrspace(3) @global_smem, i32 {base}")
    first = e.val(f"icmp eq i32 {lw.tid}, 0")
    st, cont = e.label("bc_store"), e.label("bc_cont")
    e.cond_br(first, st, cont)
    e.start_block(st)
    e.emit(f"store {ty} {val}, ptr addrspace(3) {addr}, align 8")
    e.br(cont)
    e.start_block(cont)
    lw.smem_access(base, base + 8, False)
    return e.val(f"load {ty}, ptr addrspace(3) {addr}, align 8")
