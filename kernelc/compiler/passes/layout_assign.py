"""Layout assignment: decide how each tile value is distributed over threads.

Anchors get concrete layouts: loads/stores/atomics a coalesced blocked layout chosen from the axis
analysis (order by contiguity, 128-bit vectors when alignment allows), dots an MMA accumulator
layout, reductions the slice of their input's layout, loop-carried values the layout their loop
yields (a tile loaded before a loop and reloaded in its body, as the load prefetch produces, gets
one layout for both loads). Everything cheap to recompute (constants, aranges, splats, index
arithmetic on them) stays *flexible* (None): the lowering materialises it directly in whatever
layout its consumer needs, so index math never forces a layout conversion through shared memory.
"""
from __future__ import annotations

from typing import Dict, Optional

from ...language.dtypes import block_type, pointer_type, scalar_of, shape_of
from ..layouts import Layout, default_blocked, is_pow2, mma_v2, mma_warps
from ..ir.core import Block, Function, Op, Value, users
from ..ir.ops import OPS
from ..target_rules import wgmma_eligible
from .axis_info import AxisAnalysis
from .sector_cost import SECTOR_BYTES, global_sectors

# Ops whose result can be recomputed per layout (no memory traffic, no cross-thread work).
REMATERIALIZABLE = {"constant", "arange", "splat", "broadcast", "expand_dims", "reshape", "trans", "cast",
                    "bitcast", "addptr", "select", "cmpi", "cmpf", "hint"} | \
    {n for n, d in OPS.items() if d.elementwise}


# operand type -> k of its mma.sync shape (m16n8k*); fp8 needs sm_89 (passes/fp8_dot.py upcasts before)
MMA_K = {"fp16": 16, "bf16": 16, "fp32": 8, "int8": 32, "fp8e4nv": 32, "fp8e5": 32}


def dot_uses_tensor_cores(op: Op, arch_major: int, arch: str = "") -> Optional[str]:
    """None if the dot can run on mma.sync, else the reason it falls back to FMA."""
    a, b, c = (v.type for v in op.operands[:3])
    at, bt = scalar_of(a), scalar_of(b)
    m, n, k = shape_of(a)[-2], shape_of(b)[-1], shape_of(a)[-1]
    if arch_major < 8:
        return "tensor cores need sm_80 or newer"
    if len(shape_of(a)) == 3:
        return "batched (3-D) dot is lowered with FMA"
    prec = op.attrs.get("input_precision")
    if at.name == "fp32" and prec == "ieee":
        return "fp32 inputs with input_precision='ieee' (TF32 tensor cores would round the inputs)"
    if at.name == "fp64":
        return "fp64 dot is lowered with FMA"
    if at != bt and not (at.is_fp8() and bt.is_fp8()):  # e4m3 x e5m2 is one fp8 MMA
        return f"mixed operand types {at} and {bt}"
    if at.name not in MMA_K:
        return f"operand type {at} has no mma.sync form"
    if at.is_fp8() and arch and int("".join(c for c in arch if c.isdigit()) or 90) < 89:
        return f"fp8 operands need sm_89 or newer for tensor cores (target {arch})"
    kmin = MMA_K[at.name]
    if m < 16 or n < 8 or k < kmin:
        return f"tile {m}x{n}x{k} is below the tensor-core minimum of 16x8x{kmin}"
    if scalar_of(c).name not in ("fp32", "int32"):
        return f"accumulator type {scalar_of(c)} (tensor cores accumulate in fp32/int32 here)"
    if not all(is_pow2(x) for x in (m, n, k)):
        return "non-power-of-two dot shape"
    return None


class LayoutPlan:
    """Value id -> Layout (concrete) or absent (flexible/scalar); plus notes for the compile log."""

    def __init__(self):
        self.layouts: Dict[int, Layout] = {}
        self.notes: list = []
        self.dot_fma: Dict[int, str] = {}  # dot op id -> reason for FMA
        self.op_layouts: Dict[int, Layout] = {}  # reduce/scan op id -> layout of its inputs
        self.wgmma: set = set()  # ids of dots lowered to Hopper wgmma

    def get(self, v: Value) -> Optional[Layout]:
        return self.layouts.get(v.id)


class LayoutAssigner:
    def __init__(self, fn: Function, axis: AxisAnalysis, num_warps: int, arch_major: int, arch: str = ""):
        self.fn = fn
        self.axis = axis
        self.nw = num_warps
        self.arch_major = arch_major
        self.arch = arch
        self.plan = LayoutPlan()

    def run(self) -> LayoutPlan:
        self.chained = _chained_dots(self.fn)
        self.users = users(self.fn.body)
        self.shared_load_layouts = self._carried_load_layouts()
        self._block(self.fn.body)
        return self.plan

    # -- anchors -------------------------------------------------------------------------------
    def memory_layout(self, ptr: Value, vec_limit_bits: int = 128, info=None) -> Layout:
        """Coalesced layout for accessing the pointer tile ``ptr`` (``info``: its axis info if not the
        analysis' own)."""
        shape = shape_of(ptr.type)
        info = info if info is not None else self.axis.get(ptr)
        rank = len(shape)
        elt = scalar_of(ptr.type).element_ty
        ebytes = max(1, elt.itemsize)
        order = sorted(range(rank), key=lambda d: (-info.contiguity[d], -d))
        d0 = order[0]
        vec = min(info.contiguity[d0], max(1, info.divisibility[d0] // ebytes), max(1, vec_limit_bits // 8 // ebytes),
                  shape[d0])
        vec = 1 << (max(1, vec).bit_length() - 1)
        return default_blocked(shape, self.nw, order, vec)

    def _vector_atomic_layout(self, op: Op, coalesced: Layout, vec: int) -> Layout:
        """A vector atomic keeps its value's layout (an MMA accumulator: fp32 pairs along the row) when
        that already gives vectors and the sectors a conversion to ``coalesced`` would save do not pay
        for it (the store cost model of passes/coalesce.py)."""
        from ..shared_layouts import vector_elems
        cur = self.plan.get(op.operands[1])
        if cur is None or cur == coalesced:
            return coalesced
        ptr = op.operands[0]
        info = self.axis.get(ptr)
        d = max(range(len(info.contiguity)), key=lambda i: (info.contiguity[i], i))
        if vector_elems(cur, d, vec) < 2:
            return coalesced
        ebytes = scalar_of(op.results[0].type).primitive_bitwidth // 8
        mask = op.operands[2] if len(op.operands) > 2 and shape_of(op.operands[2].type) else None
        mc = self.axis.get(mask).constancy if mask is not None else None
        saved = (global_sectors(cur, info, ebytes, mc) - global_sectors(coalesced, info, ebytes, mc)) * SECTOR_BYTES
        return coalesced if saved > 2 * cur.num_regs * 32 * ebytes else cur

    def elementwise_layout(self, op: Op) -> Optional[Layout]:
        best = None
        for o in op.operands:
            lay = self.plan.get(o)
            if lay is None:
                continue
            if best is None or (lay.kind == "mma" and best.kind != "mma"):
                best = lay
        return best

    # -- walk ----------------------------------------------------------------------------------
    def _block(self, block: Block):
        for op in block.ops:
            self._op(op)

    def _set(self, v: Value, lay: Optional[Layout]):
        if lay is not None and shape_of(v.type):
            self.plan.layouts[v.id] = lay

    def _op(self, op: Op):
        name = op.name
        if name == "scf.for":
            self._loop(op, op.regions[0], op.operands[3:], body_args=op.regions[0].args[1:])
            return
        if name == "scf.while":
            self._while(op)
            return
        if name == "scf.if":
            for r in op.regions:
                self._block(r)
            for i, res in enumerate(op.results):
                lays = [self.plan.get(r.ops[-1].operands[i]) for r in op.regions]
                lay = next((x for x in lays if x is not None), None)
                if lay is None and shape_of(res.type):
                    lay = default_blocked(shape_of(res.type), self.nw)
                self._set(res, lay)
            return
        if not op.results:
            if name in ("store", "atomic_rmw", "atomic_cas"):
                pass
            for r in op.regions:
                self._block(r)
            return
        res = op.results[0]
        shape = shape_of(res.type)
        if name == "load":
            if shape:
                lay = op.attrs.get("layout") or self.shared_load_layouts.get(id(op))  # passes/load_layouts.py
                self._set(res, lay if lay is not None else self.memory_layout(op.operands[0]))
            return
        if name in ("atomic_rmw", "atomic_cas"):
            if shape:
                # one element per thread, unless passes/atomic_results.py made it a vector red (vec)
                vec = op.attrs.get("vec", 1)
                lay = self.memory_layout(op.operands[0], vec_limit_bits=scalar_of(res.type).primitive_bitwidth * vec)
                self._set(res, self._vector_atomic_layout(op, lay, vec) if vec > 1 else lay)
            return
        if name == "dot":
            reason = dot_uses_tensor_cores(op, self.arch_major, self.arch)
            a_shape = shape_of(op.operands[0].type)
            if reason is None:
                m, n = shape[-2], shape[-1]
                if wgmma_eligible(op.operands[0].type, op.operands[1].type, res.type, self.nw, self.arch):
                    # warpgroups own 64-row blocks: every warp along M
                    self.plan.wgmma.add(id(op))
                    self._set(res, mma_v2(shape, (self.nw, 1)))
                else:
                    self._set(res, mma_v2(shape, mma_warps(m, n, self.nw, id(op) in self.chained)))
            else:
                self.plan.dot_fma[id(op)] = reason
                self.plan.notes.append(f"{op.loc.file}:{op.loc.line}: dot {list(a_shape)} x "
                                       f"{list(shape_of(op.operands[1].type))} runs on FMA, not tensor cores: {reason}")
                self._set(res, default_blocked(shape, self.nw))
            return
        if name in ("reduce", "scan"):
            for r in op.regions:
                self._block(r)
            src = self.plan.get(op.operands[0])
            if src is None:
                src = default_blocked(shape_of(op.operands[0].type), self.nw)
            self.plan.op_layouts[id(op)] = src
            for r in op.results:
                if name == "reduce":
                    self._set(r, src.sliced(op.attrs["axis"]))
                else:
                    self._set(r, src)
            return
        if name == "convert_layout":  # passes/coalesce.py chose it
            self._set(res, op.attrs["layout"])
            return
        if name in REMATERIALIZABLE or OPS[name].elementwise:
            lay = self._derived(op)
            self._set(res, lay)
            return
        if name in ("join",):
            lay = self.elementwise_layout(op)
            self._set(res, lay.joined() if lay is not None else None)
            return
        if name == "split":
            src = self.plan.get(op.operands[0])
            bit = src.pair_bit() if src is not None else None
            # pairs held in one thread's registers split by renaming registers: the halves keep the
            # source's distribution; otherwise the lowering converts the source first (codegen/permute.py)
            for r in op.results:
                self._set(r, src.unpaired(bit) if bit is not None else None)
            return
        if name == "map_elementwise":
            for r in op.regions:
                self._block(r)
            lay = self.elementwise_layout(op) or (default_blocked(shape, self.nw) if shape else None)
            for r in op.results:
                self._set(r, lay)
            return
        if name == "cat":
            self._set(res, default_blocked(shape, self.nw))
            return
        if name == "descriptor_load" and shape:
            if op.attrs.get("layout") is not None:  # read back in its reader's layout (passes/load_layouts.py)
                self._set(res, op.attrs["layout"])
                return
            # a TMA tile read back from (swizzled) shared memory: 16-byte vectors along the last dim
            self._set(res, default_blocked(shape, self.nw, vec=max(1, 16 // max(1, scalar_of(res.type).itemsize))))
            return
        # Anything else with a tile result: a default layout.
        if shape:
            self._set(res, default_blocked(shape, self.nw))

    def _derived(self, op: Op) -> Optional[Layout]:
        """Layout of a rematerialisable op from its operands (None stays flexible)."""
        name = op.name
        if name in ("constant", "arange", "splat"):
            return None
        src = self.plan.get(op.operands[0]) if op.operands else None
        res = op.results[0]
        if name == "expand_dims":
            return src.expanded(op.attrs["axis"]) if src is not None else None
        if name == "broadcast":
            if src is None:
                return None
            if src.parent is not None and src.parent.shape == shape_of(res.type):
                return src.parent
            if src.parent is not None and src.parent.kind == "mma" and len(shape_of(res.type)) == 2:
                # a row/column vector of an MMA tile broadcast to another width: same warps, new shape
                cand = mma_v2(shape_of(res.type), src.parent.mma_meta[0])
                axes = [i for i, (a, b) in enumerate(zip(src.shape, cand.shape)) if a != b]
                if cand.broadcast_from(axes) == src:
                    return cand
            # A broadcast of a concrete tile: the layout of a full-size tile it is combined with (so
            # only the small source converts), else a default layout (source converted).
            sib = self._sibling_layout(op)
            return sib if sib is not None else default_blocked(shape_of(res.type), self.nw)
        if name == "trans":
            return src.transposed(op.attrs["perm"]) if src is not None else None
        if name == "reshape":
            return src.reshaped(shape_of(res.type)) if src is not None else None
        return self.elementwise_layout(op)

    def _sibling_layout(self, op: Op) -> Optional[Layout]:
        """Concrete layout of another operand of an elementwise user of ``op``'s result."""
        res = op.results[0]
        for user in self.users.get(res.id, ()):
            if not OPS[user.name].elementwise or shape_of(user.results[0].type) != shape_of(res.type):
                continue
            for o in user.operands:
                lay = self.plan.get(o) if o is not res else None
                if lay is not None and lay.shape == shape_of(res.type):
                    return lay
        return None

    def _loop(self, op: Op, body: Block, inits, body_args):
        # Carried tiles take their init's layout if concrete; otherwise what the body yields; if both
        # are flexible (pointer tiles advanced each iteration), the layout of the access they feed.
        for a, v in zip(body_args, inits):
            lay = self.plan.get(v)
            if lay is None and shape_of(a.type):
                lay = self._consumer_layout(a, body)
            self._set(a, lay)
        for _ in range(2):
            self._block(body)
            yld = body.ops[-1]
            changed = False
            for a, y in zip(body_args, yld.operands):
                if not shape_of(a.type):
                    continue
                cur = self.plan.get(a)
                ylay = self.plan.get(y)
                if cur is None:
                    new = ylay if ylay is not None else default_blocked(shape_of(a.type), self.nw)
                    self._set(a, new)
                    changed = True
            if not changed:
                break
        for r, a in zip(op.results, body_args):
            self._set(r, self.plan.get(a))

    def _carried_load_layouts(self) -> Dict[int, Layout]:
        """One layout for a loop-carried tile that is loaded before the loop and reloaded in the body
        (register prefetch): both loads take the layout their addresses' common axis info allows,
        so the carried value never needs a layout conversion."""
        out: Dict[int, Layout] = {}
        for op in self.fn.walk():
            if op.name != "scf.for":
                continue
            yld = op.regions[0].ops[-1]
            for init, y in zip(op.operands[3:], yld.operands):
                a, b = init.op, y.op
                if a is None or b is None or a.name != "load" or b.name != "load" or not shape_of(init.type) \
                        or shape_of(a.operands[0].type) != shape_of(b.operands[0].type):
                    continue
                lay = out.get(id(a)) or out.get(id(b))
                if lay is None:
                    info = self.axis.get(a.operands[0]).meet(self.axis.get(b.operands[0]))
                    lay = self.memory_layout(a.operands[0], info=info)
                out[id(a)] = out[id(b)] = lay
        return out

    def _consumer_layout(self, arg: Value, body: Block) -> Optional[Layout]:
        """Memory layout of the first load/store in ``body`` whose pointer derives from ``arg``. A smaller
        tile that reaches the access through ``expand_dims`` and broadcasts (a flattened loop's carried row
        offsets, passes/flatten_loops.py) takes that layout's slice, so it broadcasts into it in registers."""
        derived = {arg.id: ()}  # value id -> the axes expand_dims added on the way from arg (in its dims)
        for op in _walk(body):
            if op.name in ("load", "store", "atomic_rmw", "atomic_cas") and op.operands[0].id in derived:
                return _slice_to(self.memory_layout(op.operands[0]), derived[op.operands[0].id],
                                 shape_of(arg.type))
            if op.name not in REMATERIALIZABLE or op.name in ("reshape", "trans") or not op.results:
                continue
            src = next((derived[o.id] for o in op.operands if o.id in derived), None)
            if src is None:
                continue
            if op.name == "expand_dims":
                ax = op.attrs["axis"]
                src = tuple(a + (a >= ax) for a in src) + (ax,)
            derived.update((r.id, src) for r in op.results)
        return None

    def _while(self, op: Op):
        before, after = op.regions
        for region in (before, after):
            for a, v in zip(region.args, op.operands):
                lay = self.plan.get(v)
                if lay is None and shape_of(a.type):
                    lay = default_blocked(shape_of(a.type), self.nw)
                self._set(a, lay)
        self._block(before)
        self._block(after)
        for r, a in zip(op.results, after.args):
            self._set(r, self.plan.get(a))


def assign_layouts(fn: Function, axis: AxisAnalysis, num_warps: int, arch_major: int, arch: str = "") -> LayoutPlan:
    """The layout of every tile value (the plan), and each dot's engine written on it as ``engine``: 'wgmma'
    (Hopper warpgroup MMA), 'mma' (mma.sync) or 'fma' (no tensor cores; the reason is in the plan's notes).
    The later passes and codegen read the attribute (issue 21: the decision is in the IR, not in a table keyed
    by the op's id). Mutates the dots' attributes only."""
    plan = LayoutAssigner(fn, axis, num_warps, arch_major, arch).run()
    for op in fn.walk():
        if op.name == "dot":
            op.attrs["engine"] = ("fma" if id(op) in plan.dot_fma or plan.get(op.results[0]) is None
                                  else "wgmma" if id(op) in plan.wgmma else "mma")
    return plan


def _slice_to(lay: Layout, added, shape) -> Optional[Layout]:
    """``lay`` without the axes ``added`` (each a slice, so ``expand_dims`` and a broadcast return to
    ``lay``), and sliced and expanded again on each axis of size 1 in ``shape``; None if the shape differs."""
    for ax in sorted(added, reverse=True):
        lay = lay.sliced(ax)
    if lay.rank != len(shape):
        return None
    for ax, n in enumerate(shape):
        if n == 1 and lay.shape[ax] != 1:
            lay = lay.sliced(ax).expanded(ax)
    return lay if tuple(lay.shape) == tuple(shape) else None


def _walk(block: Block):
    for op in block.ops:
        yield from op.walk()


def _chained_dots(fn: Function) -> set:
    """ids of dots whose result reaches another dot's A operand, and of those consumer dots."""
    producers = {}  # value id -> set of dot op ids it derives from
    chained = set()
    for op in fn.walk():
        srcs = set()
        for o in op.operands:
            srcs |= producers.get(o.id, set())
        if op.name == "dot":
            a_src = producers.get(op.operands[0].id, set())
            if a_src:
                chained |= a_src
                chained.add(id(op))
            srcs = {id(op)}
        if op.name in ("scf.for", "scf.while"):
            continue
        for r in op.results:
            if srcs:
                producers[r.id] = srcs
    return chained
