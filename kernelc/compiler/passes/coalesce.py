"""Coalescing: give each global store the register layout that makes its own addresses contiguous.

Layout assignment gives a load the coalesced layout of its addresses, and a stored value keeps the
layout it was produced in. When a store's addresses run along another dimension than the value's
layout (a transpose: ``y[j, i] = x[i, j]``), every lane writes its own 32-byte sector. This pass
finds such stores and, where the cost model says it pays, inserts a ``convert_layout`` to the
store's coalesced layout (128-bit vectors where alignment allows), with the shared-memory layout
the conversion goes through (``shared_layouts.plan_shared_layout``). Codegen then lowers the op as
written.

Cost model (per warp, in bytes): a store in layout L costs 32 bytes per global sector its
instructions touch; a conversion costs its tile's bytes twice (written to and read from shared
memory), divided by ``KERNELC_STORE_SMEM_DISCOUNT`` (default 4: an SM moves 128 bytes of shared memory a clock,
several times what it gets of L2 for its stores). ``KERNELC_STORE_DISCOUNT_SCOPE`` says for which stores: every
store (``all``, the default since session 20) or an MMA accumulator's only (``mma``). Priced byte for byte, the
RMS/layer-norm backward rows' final fp32 dW/dB stores (8 registers a thread from the bf16/fp16 loads' layout: two
16-byte stores half a sector apart: twice the sector touches of 16 bytes a lane) stayed unconverted, and were
measured faster converted through shared memory (docs/performance.md, issue 21, twentieth session). A
conversion is inserted when the sectors it
saves outweigh that, so a store that is already sector-efficient (an MMA accumulator stored as fp32
pairs) never gains one, while a 16-bit accumulator (4-byte pieces, half a sector a row) converts to
16-byte stores as Triton's epilogue does. ``passes/smem_offsets.py`` places the conversion's buffer, splits
it into pieces beside a ring that stays live, or takes it out where no piece would fit the shared memory
left by the kernel's rings. Values whose
producers are cheap to recompute (index math, constants, elementwise chains of them) have no fixed
layout and are materialised directly in the store's layout: they never need a conversion.
"""
from __future__ import annotations

from typing import Optional

from ...language.dtypes import pointer_type, scalar_of, shape_of
from ..ir.core import Function, Op
from ..layouts import Layout, blocked, register_map
from ..shared_layouts import conversion_cost, contiguous_dim, plan_shared_layout, vector_elems
from ..ir.ops import OPS
from .axis_info import analyze
from .layout_assign import LayoutAssigner, LayoutPlan
from .sector_cost import SECTOR_BYTES, access_vector, global_sectors  # noqa: F401  (re-exported)

def coalesce(fn: Function, num_warps: int, arch_major: int, arch: str = "", notes: Optional[list] = None) -> Function:
    """Coalesce the stores, then write down every conversion the lowering would otherwise make on
    its own (``make_conversions_explicit``)."""
    coalesce_stores(fn, num_warps, arch_major, arch, notes)
    return make_conversions_explicit(fn, num_warps, arch_major, arch)


def coalesce_stores(fn: Function, num_warps: int, arch_major: int, arch: str = "",
                    notes: Optional[list] = None, smem_discount: Optional[int] = None) -> Function:
    from ...options import get
    if smem_discount is None:
        smem_discount = int(get("KERNELC_STORE_SMEM_DISCOUNT"))
    scope = get("KERNELC_STORE_DISCOUNT_SCOPE")
    axis = analyze(fn)
    assigner = LayoutAssigner(fn, axis, num_warps, arch_major, arch)
    plan = assigner.run()
    for op in list(fn.walk()):
        if op.name != "store" or not shape_of(op.operands[0].type) or not shape_of(op.operands[1].type):
            continue
        ptr, val = op.operands[0], op.operands[1]
        cur = plan.get(val)
        if cur is None:
            continue  # materialised in the store's own layout
        want = assigner.memory_layout(ptr)
        if want == cur:
            continue
        ebytes = _ebytes(val)
        info = axis.get(ptr)
        mask = op.operands[2] if len(op.operands) > 2 else None
        mc = axis.get(mask).constancy if mask is not None and shape_of(mask.type) else None
        saved = (global_sectors(cur, info, ebytes, mc) - global_sectors(want, info, ebytes, mc)) * SECTOR_BYTES
        # shared-memory bytes at a discount (the module docstring)
        cost = 2 * cur.num_regs * 32 * ebytes // (smem_discount if cur.kind == "mma" or scope == "all" else 1)
        if saved <= cost:
            continue
        # only a store of 16-byte vectors (one thread's 8 registers along the store's addresses) trades lanes
        if ldmatrix_reads(arch_major) and ebytes == 2 and access_vector(want, info, ebytes, mc) == 8:
            alt = ldmatrix_store_layout(cur, want, ebytes)
            if alt is not None and global_sectors(alt, info, ebytes, mc) <= global_sectors(want, info, ebytes, mc):
                want = alt
        _insert_conversion(op, 1, cur, want, arch_major)
        if notes is not None:
            notes.append(f"{op.loc.file}:{op.loc.line}: store converted to its coalesced layout through shared "
                         f"memory ({saved // SECTOR_BYTES} fewer sectors per warp)")
    return fn


def ldmatrix_reads(arch_major: int) -> bool:
    """Whether conversions may read 16-bit tiles with ``ldmatrix`` (sm_75+; ``KERNELC_CVT_LDMATRIX``)."""
    from ...options import get
    return arch_major >= 8 and bool(get("KERNELC_CVT_LDMATRIX"))


def ldmatrix_store_layout(have: Layout, want: Layout, ebytes: int) -> Optional[Layout]:
    """``want`` (a store's coalesced layout) with its lane bits 2-4 stepping 1, 2, 4 along ``have``'s contiguous
    dimension, so that the conversion reads it with ``ldmatrix.trans`` from a buffer stored along that dimension
    (``shared_layouts.ldmatrix_ok``), or None when that is not a cheaper conversion. Only bases trade places
    (lanes with lanes, warps or the registers past the store's 16-byte vector), so each thread keeps its
    vectors and the warp's stores cover the same rows in shorter runs: a permute(0, 2, 1) fp16 tile of 64x64
    then reads with 4 ``ldmatrix.x4.trans`` per thread instead of 32 scalar loads, as Triton's lowering does."""
    inner = contiguous_dim(have)
    vec = vector_elems(want, contiguous_dim(want), 16 // ebytes)
    if contiguous_dim(want) == inner or vec < 8 or len(want.lane) != 5:
        return None
    rank = want.rank
    slots = [("lane", i) for i in range(5)] + [("warp", i) for i in range(len(want.warp))] + \
        [("reg", i) for i in range(3, len(want.reg))]
    bases = {"reg": list(want.reg), "lane": list(want.lane), "warp": list(want.warp)}
    for t, step in zip((2, 3, 4), (1, 2, 4)):
        u = tuple(step if d == inner else 0 for d in range(rank))
        at = next((s for s in slots if bases[s[0]][s[1]] == u), None)
        if at is None:
            return None
        bases["lane"][t], bases[at[0]][at[1]] = bases[at[0]][at[1]], bases["lane"][t]
    alt = _as_blocked(Layout(want.shape, tuple(bases["reg"]), tuple(bases["lane"]), tuple(bases["warp"]), "derived"),
                      want)
    if alt == want:
        return None
    plain = plan_shared_layout(have, want, ebytes, 16)
    lm = plan_shared_layout(have, alt, ebytes, 16, ldmatrix=True)
    if not lm.read_op or sum(conversion_cost(have, alt, lm, ebytes)) > sum(conversion_cost(have, want, plain, ebytes)):
        return None
    return alt


def _splits(total: int, rank: int):
    """Every way to write the power of two ``total`` as a product of ``rank`` powers of two."""
    if rank == 1:
        yield (total,)
        return
    k = 1
    while k <= total:
        for rest in _splits(total // k, rank - 1):
            yield (k,) + rest
        k *= 2


def _as_blocked(L: Layout, like: Layout) -> Layout:
    """``L`` as a blocked layout with ``like``'s elements per thread and order (printed as such), if one is."""
    if like.params is None:
        return L
    spt, _, _, order = like.params
    for tpw in _splits(32, L.rank):
        for wpc in _splits(L.num_warps, L.rank):
            B = blocked(L.shape, spt, tpw, wpc, order)
            if B == L:
                return B
    return L


def _ebytes(v) -> int:
    elt = scalar_of(v.type)
    return 8 if isinstance(elt, pointer_type) else 1 if elt.is_int1() else elt.itemsize


def _insert_conversion(op: Op, i: int, have: Layout, want: Layout, arch_major: int = 0) -> Op:
    """Read operand ``i`` of ``op`` through a new ``convert_layout`` (placed right before ``op``)."""
    v = op.operands[i]
    # pointer tiles move one element per shared access (no vectors of pointers)
    vec_bytes = 8 if isinstance(scalar_of(v.type), pointer_type) else 16
    # sm_90's stmatrix writes 16-bit MMA accumulators eight 8x8 blocks per instruction; ldmatrix reads 16-bit
    # tiles four 8x8 blocks per instruction (transposed where the tile's registers run across the buffer's rows)
    smem = plan_shared_layout(have, want, _ebytes(v), vec_bytes, stmatrix=arch_major >= 9,
                              ldmatrix=ldmatrix_reads(arch_major))
    cvt = Op("convert_layout", [v], [v.type], {"layout": want, "smem": smem}, loc=op.loc)
    blk = op.block
    cvt.block = blk
    blk.ops.insert(blk.ops.index(op), cvt)
    op.operands[i] = cvt.result
    return cvt


def operand_layouts(op: Op, plan: LayoutPlan, fn: Function):
    """(operand index, layout its lowering reads it in) for the tile operands of ``op`` whose layout
    the lowering rules dictate; the same rules as codegen's ``Lowering.get`` calls."""
    name = op.name
    res = op.results[0] if len(op.results) == 1 else None
    R = plan.get(res) if res is not None else None
    tiles = [i for i, o in enumerate(op.operands) if shape_of(o.type)]
    if name in ("load",) and R is not None:
        return [(i, R) for i in tiles]
    if name == "broadcast" and R is not None:
        src = shape_of(op.operands[0].type)
        axes = [d for d, (a, b) in enumerate(zip(src, shape_of(res.type))) if a != b]
        return [(0, R.broadcast_from(axes))] if tiles else []
    if name == "expand_dims" and R is not None:
        return [(0, R.sliced(op.attrs["axis"]))] if tiles else []
    if name == "trans" and R is not None:
        perm = op.attrs["perm"]
        return [(0, R.transposed([perm.index(d) for d in range(len(perm))]))]
    if name == "reshape" and R is not None:
        return [(0, R.reshaped(shape_of(op.operands[0].type)))]
    if name in ("reduce", "scan"):
        L = plan.op_layouts.get(id(op))
        return [(i, L) for i in tiles] if L is not None else []
    if name == "scf.for":
        args = op.regions[0].args[1:]
        return [(3 + j, plan.get(a)) for j, a in enumerate(args) if shape_of(a.type) and plan.get(a) is not None]
    if name == "scf.yield" and op.block is not None and op.block.parent is not None:
        parent = op.block.parent
        if parent.name == "scf.for":
            targets = op.block.args[1:]
        elif parent.name == "scf.if":
            targets = parent.results
        else:
            return []
        return [(j, plan.get(t)) for j, t in enumerate(targets) if j < len(op.operands)
                and shape_of(t.type) and plan.get(t) is not None]
    if OPS.get(name) is not None and OPS[name].elementwise and R is not None:
        return [(i, R) for i in tiles]
    return []


def make_conversions_explicit(fn: Function, num_warps: int, arch_major: int, arch: str = "") -> Function:
    """Insert a ``convert_layout`` wherever an op reads a tile whose layout it cannot take in
    registers alone (codegen would otherwise move it through shared memory on its own)."""
    plan = LayoutAssigner(fn, analyze(fn), num_warps, arch_major, arch).run()
    for op in list(fn.walk()):
        for i, want in operand_layouts(op, plan, fn):
            v = op.operands[i]
            have = plan.get(v)
            if have is None or want is None or have == want or register_map(have, want, lambda c: c) is not None:
                continue
            _insert_conversion(op, i, have, want, arch_major)
    return fn


def count_conversions(fn: Function) -> int:
    return sum(1 for op in fn.walk() if op.name == "convert_layout")
