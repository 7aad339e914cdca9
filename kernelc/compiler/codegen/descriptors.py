"""Tensor-descriptor ops on Hopper TMA (sm_90a): ``descriptor_load`` / ``descriptor_store`` of host
``kernelc.TensorDescriptor`` arguments and of descriptors made in the kernel (``kl.make_tensor_descriptor``).

The frontend flattens a host descriptor into base pointer, shapes, strides and -- on sm_90a, for a
block TMA can copy -- its 128-byte CUtensorMap (compiler/abi.py), and rebuilds it in the kernel with
``make_tensor_descriptor(..., host_arg=name)``. Ops that ``passes/lower_descriptors.tma_eligible`` claims
stay in the IR, tagged ``tma=True`` (the pass rewrites the others into masked loads/stores), and address the tensor
through the map, a by-value parameter (``.param .align 64 .b8 [128]``, a ``__grid_constant__``).
``reports["tensor_maps"]`` records the box and swizzle the code assumes (the host derives the same).

A descriptor made in the kernel gets its CUtensorMap built on the device (codegen/device_tensor_map.py),
in a per-program slot of a global scratch buffer the launcher passes as a last, hidden parameter: at
the entry, or where ``make_tensor_descriptor`` is (its ``tensor_map`` attribute says which).

- ``descriptor_load``: thread 0 copies the tile into shared memory (SmemOperand layout, swizzled)
  and every thread waits on an mbarrier. A tile whose only consumers are tensor-core dot operands
  (directly or through a 2-D ``trans``) stays there: the dot (wgmma/ldmatrix) reads it in place. Any
  other tile is read back into its register layout. Inside ``kl.range(num_stages>=2)`` loops, dot
  operands are instead pipelined (passes/schedule.py tags them, codegen/pipeline.py emits the ring).
- ``descriptor_store``: registers -> swizzled shared memory -> ``fence.proxy.async`` -> barrier ->
  thread 0 issues the bulk tensor store and waits until the copy has read shared memory.
- ``desc.atomic_add`` (``descriptor_reduce``) reaches codegen as the ops ``passes/bulk_reductions.py``
  writes: ``bulk_buffer_alloc`` (the staging stages), ``bulk_stage_store`` (registers -> a stage),
  ``bulk_reduce`` (``cp.reduce.async.bulk.tensor`` by the elected thread), ``bulk_commit_group``,
  ``bulk_wait_group``; each rule below emits its op and nothing else.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ...errors import CompilationError
from ...language.dtypes import shape_of, tensor_descriptor_type
from ..ir.core import Op, Value
from . import tma as T
from ..passes.schedule_ir import function_uses, in_place_readers, inside_loop
from .device_tensor_map import DeviceTensorMap, build_device_tensor_map_here
from ..shared_layouts import stmatrix_address_layout, stmatrix_rows_fit
from .convert import stmatrix_x4
from .dot import MMA_SHAPES, SmemOperand, store_tile
from .emitter import llty
from .lowering import Lowering, Tile, rule

# by-value CUtensorMap: 128 bytes, 64-byte aligned, a grid constant (its address is taken: cvta.param)
TENSOR_MAP_PARAM_ATTRS = 'byval([128 x i8]) align 64 "nvvm.grid_constant"'


# -- eligibility -----------------------------------------------------------------------------------


def host_descriptor_op(desc: Value) -> Optional[Op]:
    """The ``make_tensor_descriptor`` of a host descriptor argument behind ``desc`` (None otherwise)."""
    mk = desc.op
    if mk is None or mk.name != "make_tensor_descriptor" or not mk.attrs.get("host_arg"):
        return None
    return mk


def is_tensor_map(ty) -> bool:
    from ..abi import tensor_map_type
    return isinstance(ty, tensor_map_type)


def tensor_map_param(name: str) -> Tuple[str, str, str]:
    """The LLVM parameter (type, name, attributes) of a CUtensorMap machine argument."""
    return ("ptr", name, TENSOR_MAP_PARAM_ATTRS)


# -- tensor-map parameters -------------------------------------------------------------------------


class TensorMapParam:
    """A host descriptor's CUtensorMap: a by-value kernel parameter."""

    def __init__(self, host_arg: str, param: str, ty: tensor_descriptor_type, box: T.TmaBox):
        self.host_arg, self.param, self.ty, self.box = host_arg, param, ty, box

    def address(self, lw: Lowering) -> str:
        return T.tensormap_address(lw, self.param)

    def report(self) -> dict:
        return {"arg": self.host_arg, "param": f"{self.host_arg}.tensormap", "dtype": self.ty.element_ty.name,
                "block_shape": list(self.ty.block_shape), "box_shape": list(self.box.box_shape),
                "swizzle": self.box.swizzle, "padding": self.ty.padding}


def declare_tensor_maps(lw: Lowering) -> None:
    """After the parameters are declared: find the CUtensorMap of every descriptor a descriptor op
    uses (the ops left in the IR are TMA's) -- a host descriptor's parameter, or a map the kernel builds
    (its creation is emitted at the entry, codegen/device_tensor_map.py) -- and report what is encoded."""
    lw.tensor_maps = {}
    arch = lw.target.arch if lw.target is not None else ""
    params = {a.name: lw.scalars[v.id] for a, v in zip(lw.fn.arguments, lw.fn.body.args) if is_tensor_map(a.type)}
    for op in lw.fn.walk():
        if op.name not in ("descriptor_load", "descriptor_store", "tma_ring_alloc", "bulk_buffer_alloc"):
            continue
        # passes/lower_descriptors.py tags the ops TMA takes
        if op.name in ("descriptor_load", "descriptor_store") and op.attrs.get("tma") is not True:
            raise CompilationError(
                f"`{op.name}` reached code generation for {arch or 'this target'} without a TMA lowering for it; "
                "it should have been rewritten into masked loads/stores (passes/lower_descriptors.py)",
                op.loc.file, op.loc.line, op.loc.col)
        key = _map_key(op.operands[0])
        if key in lw.tensor_maps:
            continue
        ty = op.operands[0].type
        box = T.tma_box(ty.block_shape, ty.element_ty.itemsize)
        mk = host_descriptor_op(op.operands[0])
        if mk is not None:
            name = mk.attrs["host_arg"]
            lw.tensor_maps[key] = TensorMapParam(name, params[f"{name}.tensormap"].lstrip("%"), ty, box)
        else:
            mk = op.operands[0].op
            if "tensor_map" not in mk.attrs:  # passes/lower_descriptors.py gives every used one a slot
                raise CompilationError("internal: a made tensor descriptor without a `tensor_map` slot reached "
                                       "code generation", mk.loc.file, mk.loc.line, mk.loc.col)
            lw.tensor_maps[key] = DeviceTensorMap(mk, ty, box)
    if lw.tensor_maps:
        lw.reports["tensor_maps"] = [m.report() for m in lw.tensor_maps.values()]
        # TMA's swizzle follows absolute shared addresses: the tiles' 1024-byte offsets must be absolute
        if not any("@global_smem" in g for g in lw.e.globals):
            lw.e.add_global("@global_smem = external addrspace(3) global [0 x i8], align 1024")


def _map_key(desc: Value):
    mk = host_descriptor_op(desc)
    return ("host", mk.attrs["host_arg"]) if mk is not None else ("device", desc.id)


def tensor_map_of(lw: Lowering, desc: Value):
    """The ``TensorMapParam`` or ``DeviceTensorMap`` a descriptor op copies through."""
    return lw.tensor_maps[_map_key(desc)]


# -- consumers that read the tile in place -----------------------------------------------------------


def _uses(lw: Lowering) -> Dict[int, List[Tuple[Op, int]]]:
    u = getattr(lw, "_value_uses", None)
    if u is None:
        u = lw._value_uses = function_uses(lw.fn)
    return u


def smem_servable(lw: Lowering, dot: Op, idx: int, trans: bool, elt) -> bool:
    """Whether this dot reads operand ``idx`` from a shared buffer in SmemOperand layout (``trans``:
    stored with the outer dim M/N contiguous) instead of staging registers itself."""
    if idx not in (0, 1) or dot.attrs.get("engine") not in ("wgmma", "mma"):
        return False
    if elt.name not in MMA_SHAPES or len(shape_of(dot.operands[0].type)) != 2:
        return False
    # only 16-bit types transpose (ldmatrix.trans, wgmma's transpose bit): 8/32-bit ones must be K-major
    return not trans or elt.itemsize == 2


def operand_orientation(is_a: bool, through_trans: bool, row_dim: int = 0) -> bool:
    """The SmemOperand ``trans`` flag of a tile in shared memory used as operand A ([M, K]) or B ([K, N]),
    directly or ``through_trans`` (a 2-D ``trans`` view). ``row_dim``: the tile dim laid along the buffer's
    rows (the other is contiguous): 0 for a TMA box, so A is K-major unless transposed, B is N-major unless
    transposed; a cp.async ring stage stores the dim its first reader chose (codegen/pipeline.py ``Ring``)."""
    rows_of_view = row_dim ^ int(bool(through_trans))   # the view's dim along the rows
    return rows_of_view == 1 if is_a else rows_of_view == 0


# -- tiles between registers and shared memory -----------------------------------------------------


def _row_col(lw: Lowering, c: List[str], block_shape) -> Tuple[str, str]:
    """SmemOperand (row, col) of tile coordinate ``c``: the outer dims flattened row-major."""
    e = lw.e
    row = "0"
    for d in range(len(block_shape) - 1):
        if row == "0":
            row = c[d]
        else:
            row = e.val(f"add i32 {e.val(f'mul i32 {row}, {block_shape[d]}')}, {c[d]}")
    return row, c[-1]


def read_tile(lw: Lowering, sm, L, elt, block_shape) -> List[str]:
    """Registers of layout ``L`` from the tile in shared memory (16-byte vectors where ``L`` allows)."""
    e = lw.e
    ty = llty(elt)
    eb = elt.itemsize
    coords = lw.coords(L)
    vec = max(1, min(L.contig_regs(L.rank - 1), sm.chunk))
    out: List[str] = []
    for g in range(0, L.num_regs, vec):
        row, col = _row_col(lw, coords[g], block_shape)
        p = e.val(f"getelementptr i8, ptr addrspace(3) @global_smem, i32 {sm.offset(lw, row, col)}")
        if vec == 1:
            out.append(e.val(f"load {ty}, ptr addrspace(3) {p}, align {eb}"))
        else:
            vt = f"<{vec} x {ty}>"
            v = e.val(f"load {vt}, ptr addrspace(3) {p}, align {vec * eb}")
            out += [e.val(f"extractelement {vt} {v}, i32 {i}") for i in range(vec)]
    return out


def write_tile(lw: Lowering, tile: Tile, sm, elt, block_shape, stmatrix: bool = False) -> None:
    """Store a register tile into the shared tile (each element once: replicas skip). ``stmatrix``: the
    pass's choice (``smem_write='stmatrix'``, passes/tma_stores.py) to write 16-bit MMA fragments eight
    8x8 blocks per instruction; kept only while the tile's layout still fits it."""
    if stmatrix and stmatrix_rows_fit(tile.layout, elt.itemsize):
        _stmatrix_rows(lw, tile, sm, llty(elt), block_shape)
        return
    vec = max(1, min(tile.layout.contig_regs(tile.layout.rank - 1), sm.chunk))
    store_tile(lw, tile, llty(elt), elt.itemsize, sm, vec, lambda c: _row_col(lw, c, block_shape))


def _stmatrix_rows(lw: Lowering, tile: Tile, sm, ty: str, block_shape) -> None:
    """``stmatrix.x4`` (no transpose: the box's rows are the fragments' rows) of every 8 registers; each
    lane's address is a 16-byte chunk of a box row, which the swizzle moves whole."""
    e = lw.e
    rows = lw.coords(stmatrix_address_layout(tile.layout, False))
    own = lw.owner_predicate(tile.layout)  # replicas across warps only (stmatrix_rows_fit): warp-uniform
    if own is not None:
        w, cont = e.label("stsm"), e.label("stsm_end")
        e.cond_br(own, w, cont)
        e.start_block(w)
    for g in range(len(tile.regs) // 8):
        row, col = _row_col(lw, rows[g], block_shape)
        p = e.val(f"getelementptr i8, ptr addrspace(3) @global_smem, i32 {sm.offset(lw, row, col)}")
        stmatrix_x4(lw, e.val(f"ptrtoint ptr addrspace(3) {p} to i32"), tile.regs[8 * g:8 * g + 8], ty, False)
    if own is not None:
        e.br(cont)
        e.start_block(cont)


def report_tma(lw: Lowering, op: Op, kind: str, ty: tensor_descriptor_type, tmap=None) -> None:
    """The access report entry of a bulk copy (16-byte granules, no per-thread vector to limit). ``tmap`` (its
    ``TensorMapParam`` / ``DeviceTensorMap``) names the kernel argument the copy reads or writes, as ``address``'s
    ``base`` (the analyzer counts a tensor's DRAM bytes by it; without a name it charges every unnamed tensor)."""
    eb = ty.element_ty.itemsize
    entry = {
        "kind": kind, "file": op.loc.file, "line": op.loc.line, "shape": list(ty.block_shape), "elem_bytes": eb,
        "vector_elems": max(1, 16 // eb), "vector_bytes": 16, "contiguous_dim": len(ty.block_shape) - 1,
        "contiguity": [], "divisibility_bytes": [], "limits": {}, "limited_by": [], "engine": "tma",
    }
    base = tensor_map_base(lw, tmap) if tmap is not None else None
    if base is not None:
        entry["address"] = {"affine": False, "base": base}
    lw.reports["memory_accesses"].append(entry)


def tensor_map_base(lw: Lowering, tmap) -> Optional[str]:
    """The kernel argument a tensor map copies from or to: a host descriptor's argument, or the pointer argument a
    descriptor made in the kernel starts from (through pointer arithmetic); None where neither is found."""
    host = getattr(tmap, "host_arg", None)
    if host is not None:
        return host
    make = getattr(tmap, "make", None)
    if make is None or not make.operands:
        return None
    names = {a.id: arg.name for a, arg in zip(lw.fn.body.args, lw.fn.arguments)}
    v = make.operands[0]
    for _ in range(64):
        if v.id in names:
            return names[v.id]
        if v.op is None:
            return None
        ptrs = [o for o in v.op.operands if getattr(o.type, "is_ptr", lambda: False)()]
        if len(ptrs) != 1:
            return None
        v = ptrs[0]
    return None


def free_regions(lw: Lowering) -> List[Tuple[str, int]]:
    """(persistent offset token, bytes) of shared buffers no later op reads (finished pipeline rings)."""
    return lw.__dict__.setdefault("free_smem", [])


def reuse_or_allocate(lw: Lowering, nbytes: int) -> str:
    """A persistent buffer of ``nbytes``: the ring of a loop that already finished if one is big enough
    (a causal attention's diagonal loop takes the main loop's), else a new one. Reuse is safe: every copy
    into the old ring was waited for, and the new ring's setup starts with a barrier past its readers."""
    free = free_regions(lw)
    for i, (tok, size) in enumerate(free):
        if size >= nbytes:
            del free[i]
            return tok
    return lw.persistent(nbytes)


def free_span(lw: Lowering, nbytes: int) -> List[str]:
    """[token] of finished rings that hold ``nbytes`` -- one ring, or several lying next to each other
    (a matmul's A and B rings together take an fp32 C tile neither holds alone); [] if none do."""
    def at(tok):  # (region, offset): placed buffers (passes/smem_offsets.py) and the others lie apart
        return (0, lw.placed_tokens[tok]) if tok in lw.placed_tokens else (1, lw.persistent_tokens[tok])
    spans: List[List] = []  # [first token, end (region, offset), bytes]
    for tok, size in sorted(free_regions(lw), key=lambda r: at(r[0])):
        if spans and spans[-1][1] == at(tok):
            spans[-1][1] = (at(tok)[0], at(tok)[1] + size)
            spans[-1][2] += size
        else:
            spans.append([tok, (at(tok)[0], at(tok)[1] + size), size])
    return [tok for tok, _, size in spans if size >= nbytes][:1]


def offsets_of(lw: Lowering, vals) -> List[str]:
    return [lw.scalar(v) for v in vals]


# -- rules -----------------------------------------------------------------------------------------


@rule("make_tensor_descriptor")
def lower_make_descriptor(lw: Lowering, op):
    # host: its parts are kernel parameters; in-kernel: its map is built at the entry, or here
    m = lw.tensor_maps.get(("device", op.results[0].id))
    if isinstance(m, DeviceTensorMap) and m.build == "here":
        build_device_tensor_map_here(lw, m, inside_loop(op))


@rule("descriptor_load")
def lower_descriptor_load(lw: Lowering, op):
    desc = op.operands[0]
    ty: tensor_descriptor_type = desc.type
    tm = tensor_map_of(lw, desc)
    box = tm.box
    res = op.results[0]
    elt = ty.element_ty
    offsets = offsets_of(lw, op.operands[1:])
    # the dots read the tile in place when passes/schedule.py tagged it so
    consumers = in_place_readers(_uses(lw), res) if op.attrs.get("in_place") else None
    report_tma(lw, op, "load (TMA)", ty, tm)
    # a tile read in place must outlive this op (other ops' scratch would overwrite it): its own buffer,
    # or a finished loop's ring (the barrier below orders it after the ring's last readers)
    if consumers:
        base = lw.placed(op, box.nbytes) or reuse_or_allocate(lw, box.nbytes)
    else:
        base = lw.scratch(box.nbytes)
    pool = T.BarrierPool.of(lw)
    btok, boff = pool.take(1)
    bar = pool.address(btok, boff)
    t0 = T.elected(lw)
    tmap = tm.address(lw)
    if not consumers:
        T.fence_proxy_async(lw)  # scratch: other ops' generic accesses come before the copy engine's write
    lw.barrier()  # earlier readers of the buffer and waiters on the barrier are done
    T.mbarrier_init(lw, bar, 1, t0)
    T.fence_mbarrier_init(lw)
    lw.barrier()
    T.mbarrier_expect_tx(lw, bar, box.nbytes, t0)
    T.copy_tile_in(lw, box, tmap, base, bar, offsets, t0)
    T.mbarrier_wait(lw, bar, "0")
    sm = T.box_smem(box, base)
    if consumers:
        for dot, idx, via in consumers:
            trans = operand_orientation(idx == 0, via is not None)
            v = via.results[0] if via is not None else res
            lw.smem_operands[v.id] = (sm, trans, idx == 0)
    else:
        L = lw.plan.get(res)
        lw.tiles[res.id] = Tile(L, read_tile(lw, sm, L, elt, ty.block_shape))
        lw.smem.pending.append((base, base + box.nbytes, False))
    if inside_loop(op):
        # the barrier is initialised again on the next trip: invalidate it once every thread has waited
        lw.barrier()
        T.mbarrier_inval(lw, bar, t0)


@rule("descriptor_store")
def lower_descriptor_store(lw: Lowering, op):
    desc, val = op.operands[0], op.operands[1]
    ty: tensor_descriptor_type = desc.type
    tm = tensor_map_of(lw, desc)
    box = tm.box
    elt = ty.element_ty
    offsets = offsets_of(lw, op.operands[2:])
    report_tma(lw, op, "store (TMA)", ty, tm)
    tile = lw.get(val)
    free = free_span(lw, box.nbytes)
    if free:
        base = free[0]  # finished pipeline rings (1024-byte aligned)
        lw.barrier()  # earlier users (another store's copy, read by thread 0's wait) are done with it
    else:
        base = lw.scratch(box.nbytes)
        lw.smem_access(base, base + box.nbytes, True)
    sm = T.box_smem(box, base)
    write_tile(lw, tile, sm, elt, ty.block_shape)
    T.fence_proxy_async(lw)  # the copy engine reads through the async proxy
    lw.barrier()
    t0 = T.elected(lw)
    tmap = tm.address(lw)
    T.copy_tile_out(lw, box, tmap, base, offsets, t0)
    # commit and wait in every thread (the others' groups are empty): under the elected thread's predicate
    # ptxas branched around the commit, a divergent branch in warp 0. The elected thread waits until the
    # copy has read the buffer; the next writer's barrier waits for it
    T.bulk_commit(lw, None)
    T.bulk_wait_read(lw, 0, None)
    if not free:
        lw.smem.pending.append((base, base + box.nbytes, False))


# -- bulk tensor reductions, one op at a time (passes/bulk_reductions.py wrote the ops) ---------------


class BulkBuffer:
    """A ``bulk_buffer_alloc``'s shared memory: ``stages`` boxes of ``stage_bytes`` at ``token``, each in the
    layout TMA reads through ``tmap`` (``box``)."""

    def __init__(self, token: str, tmap, stages: int, stage_bytes: int):
        self.token, self.tmap, self.box = token, tmap, tmap.box
        self.stages, self.stage_bytes = stages, stage_bytes

    def stage_base(self, lw: Lowering, stage: str) -> str:
        if self.stages == 1:
            return self.token
        e = lw.e
        return e.val(f"add i32 {self.token}, {e.val(f'mul i32 {stage}, {self.stage_bytes}')}")


@rule("bulk_buffer_alloc")
def lower_bulk_buffer_alloc(lw: Lowering, op):
    tm = tensor_map_of(lw, op.operands[0])
    S = op.attrs["stages"]
    stage_bytes = (tm.box.nbytes + 1023) // 1024 * 1024  # TMA's swizzle repeats on 1024-byte boundaries
    lw.rings[op.results[0].id] = BulkBuffer(lw.persistent(S * stage_bytes), tm, S, stage_bytes)


class FlatBulkBuffer:
    """A ``bulk_add_buffer_alloc``'s shared memory: ``stages`` blocks of ``stage_bytes`` at ``token``, each the
    tile in the staging order (``SmemOperand``'s layout, language/bulk.py): the 1-D bulk reduction copies
    those bytes as they lie."""

    def __init__(self, token: str, rows: int, cols: int, ebytes: int, stages: int, stage_bytes: int):
        self.token, self.rows, self.cols, self.eb = token, rows, cols, ebytes
        self.stages, self.stage_bytes = stages, stage_bytes
        self.nbytes = rows * cols * ebytes

    stage_base = BulkBuffer.stage_base

    def smem(self, base) -> SmemOperand:
        return SmemOperand(base, self.rows, self.cols, self.eb)


@rule("bulk_add_buffer_alloc")
def lower_bulk_add_buffer_alloc(lw: Lowering, op):
    ty = op.results[0].type
    rows, cols = shape_of(ty)
    eb = ty.element_ty.itemsize
    S = op.attrs["stages"]
    # 128-byte aligned stages: the swizzle of the staging order is relative to the stage, bulk copies need 16
    stage_bytes = (rows * cols * eb + 127) // 128 * 128
    lw.rings[op.results[0].id] = FlatBulkBuffer(lw.persistent(S * stage_bytes), rows, cols, eb, S, stage_bytes)


@rule("bulk_stage_store")
def lower_bulk_stage_store(lw: Lowering, op):
    buf = lw.rings[op.operands[0].id]
    if isinstance(buf, FlatBulkBuffer):
        ty = op.operands[0].type
        sm = buf.smem(buf.stage_base(lw, lw.scalar(op.operands[1])))
        write_tile(lw, lw.get(op.operands[2]), sm, ty.element_ty, shape_of(ty))
        return
    ty = op.operands[0].op.operands[0].type
    sm = T.box_smem(buf.box, buf.stage_base(lw, lw.scalar(op.operands[1])))
    write_tile(lw, lw.get(op.operands[2]), sm, ty.element_ty, ty.block_shape, op.attrs.get("smem_write") == "stmatrix")


@rule("bulk_reduce_1d")
def lower_bulk_reduce_1d(lw: Lowering, op):
    buf: FlatBulkBuffer = lw.rings[op.operands[0].id]
    if op.attrs.get("source"):
        at = _At(op.attrs["source"])
        lw.reports["memory_accesses"].append({
            "kind": f"atomic {op.attrs['kind']} (1-D bulk reduction)", "file": at.loc.file, "line": at.loc.line,
            "shape": [buf.rows, buf.cols], "elem_bytes": buf.eb, "vector_elems": max(1, 16 // buf.eb),
            "vector_bytes": 16, "contiguous_dim": 1, "contiguity": [], "divisibility_bytes": [], "limits": {},
            "limited_by": [], "engine": "tma"})
    stage, pred = lw.scalar(op.operands[1]), lw.scalar(op.operands[2])
    src = T.smem_addr(lw, buf.stage_base(lw, stage))
    T.bulk_reduce_1d(lw, lw.scalar(op.operands[3]), src, buf.nbytes, op.attrs["kind"], pred, op.attrs.get("l2"))


class _At:
    """Where a source op was (``source`` attribute), for the memory-access report."""

    def __init__(self, source: str):
        from ..ir.core import Loc
        file, line, col = source.rsplit(":", 2)
        self.loc = Loc(file, int(line), int(col))


@rule("bulk_reduce")
def lower_bulk_reduce(lw: Lowering, op):
    buf: BulkBuffer = lw.rings[op.operands[0].id]
    if op.attrs.get("source"):
        report_tma(lw, _At(op.attrs["source"]), f"atomic {op.attrs['kind']} (TMA bulk reduction)", buf.tmap.ty,
                   buf.tmap)
    stage, pred = lw.scalar(op.operands[1]), lw.scalar(op.operands[2])
    offs = [lw.scalar(v) for v in op.operands[3:]]
    T.reduce_tile_out(lw, buf.box, buf.tmap.address(lw), buf.stage_base(lw, stage), offs, op.attrs["kind"], pred)


@rule("bulk_store")
def lower_bulk_store(lw: Lowering, op):
    buf: BulkBuffer = lw.rings[op.operands[0].id]
    report_tma(lw, op, "store (TMA)", buf.tmap.ty, buf.tmap)
    stage, pred = lw.scalar(op.operands[1]), lw.scalar(op.operands[2])
    offs = [lw.scalar(v) for v in op.operands[3:]]
    T.copy_tile_out(lw, buf.box, buf.tmap.address(lw), buf.stage_base(lw, stage), offs, pred)


@rule("bulk_commit_group")
def lower_bulk_commit_group(lw: Lowering, op):
    T.bulk_commit(lw, lw.scalar(op.operands[0]))


@rule("bulk_wait_group")
def lower_bulk_wait_group(lw: Lowering, op):
    pred = lw.scalar(op.operands[0])
    if op.attrs["read"]:
        T.bulk_wait_read(lw, op.attrs["pending"], pred)
    else:
        T.bulk_wait(lw, op.attrs["pending"], pred)
