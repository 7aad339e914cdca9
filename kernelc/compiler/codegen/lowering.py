"""Tile IR -> per-thread LLVM IR.

Each tile value becomes, in every thread, the list of registers its layout gives that thread
(``Tile``); scalars are single LLVM values computed redundantly by all threads. Concrete values
(loads, dots, reductions, loop-carried tiles) are lowered once in program order; flexible values
(index arithmetic, constants) are materialised on demand in the layout a consumer asks for, memoised
per region so SSA dominance holds. Control flow is structured: ``scf.for``/``scf.if``/``scf.while``
become LLVM blocks with phis.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from ...errors import CompilationError
from ...language.dtypes import block_type, dtype, pointer_type, scalar_of, shape_of
from ..ir.core import Block, Function, Op, Value
from ..ir.ops import OPS
from ..passes.axis_info import AxisAnalysis
from ..passes.layout_assign import REMATERIALIZABLE, LayoutPlan
from . import elementwise as EW
from .emitter import Emitter, llty
from ..backend.consumer_order import ATTRIBUTE as CONSUMER_ORDER
from ..layouts import Layout, default_blocked, register_map


@dataclass
class Tile:
    layout: Layout
    regs: List[str]


class SharedMemory:
    """Dynamic shared memory: per-op scratch at offset 0 (shared by all ops, kept apart by barriers),
    then the buffers ``passes/smem_offsets.py`` placed (at the offsets it wrote, ``placed`` bytes in
    all), then the other persistent buffers (pipeline stages, staged loop-invariant operands, mbarriers)
    one after another. Where each region starts is only known once the whole kernel is lowered: their
    offsets are tokens patched at the end."""

    def __init__(self):
        self.persistent = 0
        self.placed = 0
        self.scratch = 0
        self.pending: List[Tuple[int, int, bool]] = []  # (lo, hi, is_write) since the last barrier

    @property
    def scratch_aligned(self) -> int:
        # persistent buffers start 1024-byte aligned (wgmma's 128-byte swizzle atoms need it); without
        # them keep the request small: the driver sizes the L1/shared carveout from it
        if not (self.persistent or self.placed):
            return (self.scratch + 127) // 128 * 128
        return (self.scratch + 1023) // 1024 * 1024

    @property
    def total(self) -> int:
        return self.scratch_aligned + self.placed + self.persistent


class Lowering:
    def __init__(self, fn: Function, plan: LayoutPlan, axis: AxisAnalysis, num_warps: int, target):
        self.fn = fn
        self.plan = plan
        self.axis = axis
        self.nw = num_warps
        self.target = target
        self.e = Emitter(fn.name, fn.file, fn.line)
        self.e.capability = tuple(target.capability) if target is not None else (9, 0)  # fp8 cvt choice
        self.scalars: Dict[int, str] = {}
        self.tiles: Dict[int, Tile] = {}
        self.memo: List[Dict] = [{}]
        self.defs: Dict[int, Op] = {}
        self.smem = SharedMemory()
        self.persistent_tokens: Dict[str, int] = {}
        self.placed_tokens: Dict[str, int] = {}  # token -> offset the pass wrote (``smem_buffer``)
        # value id -> (shared view, trans[, staged as A]) of a dot operand in shared memory (ring_read,
        # stage_operand, a TMA tile read in place)
        self.smem_operands: Dict[int, tuple] = {}
        # ring_alloc / tma_ring_alloc / mbarrier_alloc / ring_cursor value id -> what it stands for (its shared
        # memory, codegen/pipeline.Ring, TmaRing, BarrierGroup; the cursor's cells, codegen/warp_specialize.py)
        self.rings: Dict[int, object] = {}
        self.reports: Dict[str, list] = {"memory_accesses": [], "dots": []}  # facts for tools (analyzer)
        self.params: List[Tuple[str, str, str]] = []
        self.uses_smem = False
        self.consumer_threads = 0  # set once a warp-specialised kernel has split (ws_producer): barriers count these
        self._base_cache: Dict = {}
        for op in fn.walk():
            for r in op.results:
                self.defs[r.id] = op

    # -- entry ---------------------------------------------------------------------------------
    def run(self) -> str:
        from .descriptors import declare_tensor_maps, is_tensor_map, tensor_map_param
        e = self.e
        for i, (a, v) in enumerate(zip(self.fn.arguments, self.fn.body.args)):
            t = a.type
            name = f"arg{i}"
            attrs = ""
            if isinstance(t, pointer_type):
                attrs = "noundef"
                if a.divisibility >= 16:
                    attrs += f" align {min(a.divisibility, 16)}"
            if is_tensor_map(t):  # a host descriptor's CUtensorMap: 128 bytes by value (TMA)
                self.params.append(tensor_map_param(name))
            else:
                self.params.append((llty(t) if not isinstance(t, pointer_type) else "ptr addrspace(1)", name, attrs))
            self.scalars[v.id] = f"%{name}"
        declare_tensor_maps(self)
        e.set_loc(self.fn.file, self.fn.line)
        tid = e.call("i32", "llvm.nvvm.read.ptx.sreg.tid.x", [])
        self.lane = e.val(f"and i32 {tid}, 31")
        self.warp = e.val(f"lshr i32 {tid}, 5")
        self.tid = tid
        from .device_tensor_map import emit_device_tensor_maps
        emit_device_tensor_maps(self)  # before a warp-specialised split: the producer copies through them too
        self.lower_block(self.fn.body)
        from .warp_specialize import producer_warps
        extra = producer_warps(self.fn)
        # the tile IR's instruction_order (passes/instruction_order.py), for the back end after LLVM's optimiser
        order = CONSUMER_ORDER if self.fn.attrs.get("instruction_order") == "consumers" else ""
        text = e.module(self.params, attrs=order, maxntid=32 * (self.nw + extra))
        for tok, off in self.placed_tokens.items():
            text = text.replace(tok, str(self.smem.scratch_aligned + off))
        for tok, rel in self.persistent_tokens.items():
            text = text.replace(tok, str(self.smem.scratch_aligned + self.smem.placed + rel))
        return text

    # -- values --------------------------------------------------------------------------------
    def is_tile(self, v: Value) -> bool:
        return bool(shape_of(v.type))

    def scalar(self, v: Value) -> str:
        s = self.scalars.get(v.id)
        if s is None:
            op = self.defs.get(v.id)
            if op is None:
                raise CompilationError(f"internal: value {v} used before it was lowered")
            s = self.lower_scalar_op(op)
        return s

    def layout_of(self, v: Value) -> Optional[Layout]:
        t = self.tiles.get(v.id)
        if t is not None:
            return t.layout
        return self.plan.get(v)

    def get(self, v: Value, layout: Optional[Layout] = None) -> Tile:
        """``v`` as a Tile in ``layout`` (its own layout if None)."""
        t = self.tiles.get(v.id)
        if t is not None:
            if layout is None or t.layout == layout:
                return t
            key = (v.id, layout)
            hit = self._memo_get(key)
            if hit is None:
                hit = self.convert(t, layout, llty(scalar_of(v.type)))
                self._memo_put(key, hit)
            return hit
        if layout is None:
            layout = self.plan.get(v) or default_blocked(shape_of(v.type), self.nw)
        key = (v.id, layout)
        hit = self._memo_get(key)
        if hit is None:
            op = self.defs.get(v.id)
            if op is None or op.name not in REMATERIALIZABLE:
                raise CompilationError(f"internal: tile {v} has no lowered value")
            hit = self.materialize(op, v, layout)
            self._memo_put(key, hit)
        return hit

    def _memo_get(self, key):
        for m in reversed(self.memo):
            if key in m:
                return m[key]
        return None

    def _memo_put(self, key, val):
        self.memo[-1][key] = val

    def operand(self, v: Value, layout: Layout):
        """A per-register list for ``v`` in ``layout`` (scalars repeated)."""
        if self.is_tile(v):
            return self.get(v, layout).regs
        s = self.scalar(v)
        return [s] * layout.num_regs

    # -- thread coordinates ----------------------------------------------------------------------
    def base_coords(self, layout: Layout) -> List[str]:
        """Per-dimension runtime coordinate of this thread's register 0 (lane/warp contribution)."""
        key = (layout.lane, layout.warp, layout.shape)
        scope_key = ("base",) + key
        hit = self._memo_get(scope_key)
        if hit is not None:
            return hit
        e = self.e
        out = []
        for d in range(layout.rank):
            terms = []
            for src, bases in ((self.lane, layout.lane), (self.warp, layout.warp)):
                i = 0
                while i < len(bases):
                    b = bases[i][d]
                    if b == 0 or any(x for j, x in enumerate(bases[i]) if j != d):
                        i += 1
                        continue
                    # a run of consecutive bits mapping to consecutive coordinate bits
                    j = i
                    while j + 1 < len(bases) and bases[j + 1][d] == bases[j][d] * 2 and \
                            not any(x for k, x in enumerate(bases[j + 1]) if k != d):
                        j += 1
                    width = j - i + 1
                    sh = b.bit_length() - 1
                    x = e.val(f"lshr i32 {src}, {i}") if i else src
                    x = e.val(f"and i32 {x}, {(1 << width) - 1}")
                    if sh:
                        x = e.val(f"shl i32 {x}, {sh}")
                    terms.append(x)
                    i = j + 1
            acc = "0"
            for t in terms:
                acc = t if acc == "0" else e.val(f"or disjoint i32 {acc}, {t}")
            out.append(acc)
        self._memo_put(scope_key, out)
        return out

    def coords(self, layout: Layout) -> List[List[str]]:
        """coords[r][d]: runtime coordinate of register r along dim d (i32)."""
        base = self.base_coords(layout)
        e = self.e
        out = []
        for r, c in enumerate(layout.reg_coords()):
            row = []
            for d in range(layout.rank):
                if c[d] == 0:
                    row.append(base[d])
                elif base[d] == "0":
                    row.append(str(c[d]))
                else:
                    row.append(e.val(f"or disjoint i32 {base[d]}, {c[d]}"))
            out.append(row)
        return out

    def owner_predicate(self, layout: Layout) -> Optional[str]:
        """True in exactly one of the threads that hold a copy of each element (replicated layouts)."""
        zero = (0,) * layout.rank
        lmask = sum(1 << i for i, b in enumerate(layout.lane) if b == zero)
        wmask = sum(1 << i for i, b in enumerate(layout.warp) if b == zero)
        e = self.e
        preds = []
        if lmask:
            x = e.val(f"and i32 {self.lane}, {lmask}")
            preds.append(e.val(f"icmp eq i32 {x}, 0"))
        if wmask:
            x = e.val(f"and i32 {self.warp}, {wmask}")
            preds.append(e.val(f"icmp eq i32 {x}, 0"))
        if not preds:
            return None
        p = preds[0]
        for q in preds[1:]:
            p = e.val(f"and i1 {p}, {q}")
        return p

    # -- materialisation of flexible values --------------------------------------------------
    def materialize(self, op: Op, v: Value, L: Layout) -> Tile:
        # operands are materialised on demand inside another op's lowering: restore its location after
        prev = self.e.cur_dbg
        try:
            return self._materialize(op, v, L)
        finally:
            self.e.cur_dbg = prev

    def _materialize(self, op: Op, v: Value, L: Layout) -> Tile:
        e = self.e
        e.set_loc(op.loc.file, op.loc.line, op.loc.col)
        name = op.name
        elt = scalar_of(v.type)
        n = L.num_regs
        if name == "constant":
            return Tile(L, [EW.constant(op.attrs["value"], elt)] * n)
        if name == "arange":
            base = self.base_coords(L)[0]
            start = op.attrs["start"]
            regs = []
            for c in L.reg_coords():
                off = c[0] + start
                if base == "0":
                    regs.append(str(off))
                elif off == 0:
                    regs.append(base)
                else:
                    regs.append(e.val(f"add i32 {base}, {off}"))
            return Tile(L, regs)
        if name == "splat":
            return Tile(L, [self.scalar(op.operands[0])] * n)
        if name == "broadcast":
            src_shape = shape_of(op.operands[0].type)
            axes = [i for i, (s, d) in enumerate(zip(src_shape, shape_of(v.type))) if s != d]
            src_l = L.broadcast_from(axes)
            src = self.get(op.operands[0], src_l)
            m = register_map(src.layout, L, lambda c: tuple(0 if i in axes else x for i, x in enumerate(c)))
            assert m is not None, "broadcast_from must give a register-only mapping"
            return Tile(L, [src.regs[i] for i in m])
        if name == "expand_dims":
            ax = op.attrs["axis"]
            src_l = _drop_unit_dim(L, ax)
            if not shape_of(op.operands[0].type):
                return Tile(L, [self.scalar(op.operands[0])] * n)
            return Tile(L, list(self.get(op.operands[0], src_l).regs))
        if name == "reshape":
            src_l = L.reshaped(shape_of(op.operands[0].type))
            return Tile(L, list(self.get(op.operands[0], src_l).regs))
        if name == "trans":
            perm = op.attrs["perm"]
            inv = [perm.index(i) for i in range(len(perm))]
            src_l = L.transposed(inv)
            return Tile(L, list(self.get(op.operands[0], src_l).regs))
        # elementwise
        return Tile(L, self.elementwise(op, L))

    # -- elementwise -------------------------------------------------------------------------------
    def elementwise(self, op: Op, L: Optional[Layout]) -> List[str]:
        e = self.e
        e.set_loc(op.loc.file, op.loc.line, op.loc.col)
        n = L.num_regs if L is not None else 1
        args = [self.operand(o, L) if L is not None else [self.scalar(o)] for o in op.operands]
        rt = scalar_of(op.results[0].type)
        name = op.name
        if name == "cast":  # fp8 conversions go two registers per instruction
            from .fp8_words import word_order  # the words an fp8 wgmma A operand reads (passes/narrow_carries.py)
            return EW.cast_many(e, scalar_of(op.operands[0].type), rt, args[0], op.attrs.get("rounding", "rtne"),
                                nan_positive=bool(op.attrs.get("nan_positive")),
                                bound=args[1] if op.attrs.get("overflow_bound") is True else None,
                                word_order=word_order(L) if op.attrs.get("words") == "a8" else None,
                                self_bound=op.attrs.get("overflow_bound") == "self")
        if name == "exp2" and op.attrs.get("poly"):  # part on the FMA pipe (passes/exp2_poly.py)
            return EW.exp2_split(e, args[0], op.attrs["poly"], bool(op.attrs.get("nonnegative")))
        out = []
        # uniform over aligned blocks (passes/mask_blocks.py): one value per block this thread holds; registers
        # whose coordinates agree above the block bits are in the same block in every thread
        blocks = op.attrs.get("uniform") if L is not None else None
        shifts = [b.bit_length() - 1 for b in blocks] if blocks else None
        first = {}
        for r in range(n):
            if shifts is not None:
                key = tuple(c >> s for c, s in zip(L.reg_coord(r), shifts))
                if key in first:
                    out.append(out[first[key]])
                    continue
                first[key] = r
            a = [x[r] for x in args]
            out.append(self.scalar_rule(op, rt, a))
        return out

    def scalar_rule(self, op: Op, rt, a: List[str]) -> str:
        e = self.e
        name = op.name
        if name in EW.RULES:
            return EW.RULES[name](e, rt, a, op.attrs)
        if name in EW.TYPED_RULES:
            return EW.TYPED_RULES[name](e, rt, a, op.attrs, operand_types=[scalar_of(o.type) for o in op.operands])
        if name in EW.CMP_RULES:
            return EW.CMP_RULES[name](e, rt, a, op.attrs, operand_type=scalar_of(op.operands[0].type))
        if name == "select":
            return e.val(f"select i1 {a[0]}, {llty(rt)} {a[1]}, {llty(rt)} {a[2]}")
        if name == "cast":
            return EW.cast(e, scalar_of(op.operands[0].type), rt, a[0], op.attrs.get("rounding", "rtne"))
        if name == "bitcast":
            return EW.bitcast(e, scalar_of(op.operands[0].type), rt, a[0])
        if name == "addptr":
            off_t = scalar_of(op.operands[1].type)
            off = a[1]
            if off_t.is_int_unsigned() and off_t.int_bitwidth < 64:
                off = e.val(f"zext {llty(off_t)} {off} to i64")
                off_ty = "i64"
            else:
                off_ty = llty(off_t)
            elt = rt.element_ty
            ety = "i8" if elt.is_int1() else llty(elt)
            if op.attrs.get("mad_wide"):
                # passes/copy_addresses.py: ptxas makes mad.wide an LEA pair with the base in uniform registers
                base = e.val(f"ptrtoint ptr addrspace(1) {a[0]} to i64")
                w = e.asm("i64", f"mad.wide.s32 $0, $1, {elt.itemsize}, $2;", "=l,r,l",
                          [("i32", a[1]), ("i64", base)], side_effects=False)
                return e.val(f"inttoptr i64 {w} to ptr addrspace(1)")
            return e.val(f"getelementptr {ety}, ptr addrspace(1) {a[0]}, {off_ty} {off}")
        if name == "hint":
            return a[0]
        if name == "constant":
            return EW.constant(op.attrs["value"], rt)
        raise CompilationError(f"the GPU backend cannot lower `{name}` yet", op.loc.file, op.loc.line, op.loc.col)

    def lower_scalar_op(self, op: Op) -> str:
        prev = self.e.cur_dbg
        try:
            return self._lower_scalar_op(op)
        finally:
            self.e.cur_dbg = prev

    def _lower_scalar_op(self, op: Op) -> str:
        e = self.e
        e.set_loc(op.loc.file, op.loc.line, op.loc.col)
        name = op.name
        v = op.results[0]
        if name == "program_id":
            s = e.call("i32", f"llvm.nvvm.read.ptx.sreg.ctaid.{'xyz'[op.attrs['axis']]}", [])
        elif name == "num_programs":
            s = e.call("i32", f"llvm.nvvm.read.ptx.sreg.nctaid.{'xyz'[op.attrs['axis']]}", [])
        elif name == "constant":
            s = EW.constant(op.attrs["value"], v.type)
        else:
            s = self.elementwise(op, None)[0]
        self.scalars[v.id] = s
        return s

    # -- layout conversion ---------------------------------------------------------------------------
    def convert(self, t: Tile, dst: Layout, ty: str) -> Tile:
        m = register_map(t.layout, dst, lambda c: c)
        if m is not None:
            return Tile(dst, [t.regs[i] for i in m])
        from .convert import convert_through_smem
        return convert_through_smem(self, t, dst, ty)

    # -- shared memory -------------------------------------------------------------------------------
    def smem_base(self) -> str:
        self.uses_smem = True
        self.e.add_global("@global_smem = external addrspace(3) global [0 x i8], align 16") \
            if not any("@global_smem" in g for g in self.e.globals) else None
        return "@global_smem"

    def scratch(self, nbytes: int) -> int:
        """Reserve ``nbytes`` of per-op scratch (shared by all ops: barriers keep them apart)."""
        self.smem.scratch = max(self.smem.scratch, (nbytes + 15) // 16 * 16)
        self.smem_base()
        return 0

    def scratch_at(self, offset: int, nbytes: int) -> int:
        """Reserve per-op scratch ``[offset, offset + nbytes)`` (an area a pass gave one op) and return ``offset``."""
        self.smem.scratch = max(self.smem.scratch, (offset + nbytes + 15) // 16 * 16)
        self.smem_base()
        return offset

    def persistent(self, nbytes: int) -> str:
        """A buffer that lives across ops (pipeline stages); returns an i32 offset token."""
        self.smem_base()
        tok = f"__PBASE{len(self.persistent_tokens)}__"
        self.persistent_tokens[tok] = self.smem.persistent
        self.smem.persistent += (nbytes + 1023) // 1024 * 1024
        return tok

    def placed(self, op: Op, nbytes: int) -> Optional[str]:
        """The offset token of the buffer of ``op`` where ``passes/smem_offsets.py`` placed it (its
        ``smem_buffer`` attribute), or None if it did not (then the caller allocates as before)."""
        at = op.attrs.get("smem_buffer")
        if at is None:
            return None
        off, size = at["offset"], at["bytes"]
        if nbytes > size:
            raise CompilationError(f"internal: `{op.name}` needs {nbytes} bytes of shared memory, the pass "
                                   f"placed {size} (passes/smem_offsets.buffer_bytes)",
                                   op.loc.file, op.loc.line, op.loc.col)
        self.smem_base()
        tok = f"__PSET{len(self.placed_tokens)}__"
        self.placed_tokens[tok] = off
        self.smem.placed = max(self.smem.placed, off + size)
        # these bytes are this buffer's now: a finished ring that had them is no longer free for others
        from .descriptors import free_regions
        free = free_regions(self)
        free[:] = [(t, n) for t, n in free
                   if not (t in self.placed_tokens and self.placed_tokens[t] < off + size
                           and off < self.placed_tokens[t] + n)]
        return tok

    def smem_access(self, lo: int, hi: int, write: bool) -> None:
        """Record an access; emit a barrier first if it conflicts with one since the last barrier."""
        for (a, b, w) in self.smem.pending:
            if a < hi and lo < b and (w or write):
                self.barrier()
                break
        self.smem.pending.append((lo, hi, write))

    def barrier(self) -> None:
        """CTA barrier over the threads that run tile code (all, or the consumers of a warp-specialised
        kernel: its producer warp never joins one)."""
        if self.consumer_threads:
            from .warp_specialize import CONSUMER_BARRIER
            self.e.call("void", "llvm.nvvm.barrier.cta.sync.aligned.count",
                        [("i32", str(CONSUMER_BARRIER)), ("i32", str(self.consumer_threads))])
        else:
            self.e.call("void", "llvm.nvvm.barrier0", [])
        self.smem.pending = []

    # -- ops ----------------------------------------------------------------------------------------
    def lower_block(self, block: Block) -> None:
        for op in block.ops:
            self.lower_op(op)

    def lower_op(self, op: Op) -> None:
        if op.attrs.get("in_place") and op.name == "trans":
            return  # a view of a tile its dots read in place (passes/schedule.py)
        if op.attrs.get("pipeline") and op.name != "scf.for":
            raise CompilationError(f"internal: a ringed `{op.name}` reached code generation (the ring passes "
                                   "rewrite every ring into ops: passes/rings.py, passes/warp_regions.py)",
                                   op.loc.file, op.loc.line, op.loc.col)
        e = self.e
        e.set_loc(op.loc.file, op.loc.line, op.loc.col)
        name = op.name
        rule = OP_RULES.get(name)
        if rule is not None:
            rule(self, op)
            return
        if name in REMATERIALIZABLE or (OPS.get(name) and OPS[name].elementwise):
            v = op.results[0]
            if not self.is_tile(v):
                self.lower_scalar_op(op)
                return
            L = self.plan.get(v)
            if L is None:
                return  # flexible: materialised where used
            self.tiles[v.id] = self.materialize(op, v, L)
            return
        if name in ("program_id", "num_programs"):
            self.lower_scalar_op(op)
            return
        raise CompilationError(f"the GPU backend cannot lower `{name}` yet", op.loc.file, op.loc.line, op.loc.col)

    def set_result(self, v: Value, regs_or_scalar, layout: Optional[Layout] = None) -> None:
        if self.is_tile(v):
            self.tiles[v.id] = Tile(layout, regs_or_scalar)
        else:
            self.scalars[v.id] = regs_or_scalar

    def flat(self, v: Value, layout: Optional[Layout]) -> Tuple[str, List[str]]:
        """(LLVM element type, registers) of a carried value in ``layout`` (1 register for scalars)."""
        ty = llty(scalar_of(v.type))
        if self.is_tile(v):
            return ty, list(self.get(v, layout).regs)
        return ty, [self.scalar(v)]

    # region scoping for memoised materialisations
    def push_scope(self):
        self.memo.append({})

    def pop_scope(self):
        self.memo.pop()

    # -- region evaluation for reduce/scan combine functions ------------------------------------------
    def combine(self, region: Block, lhs: List[str], rhs: List[str]) -> List[str]:
        for a, x in zip(region.args, lhs + rhs):
            self.scalars[a.id] = x
        for op in region.ops[:-1]:
            self.lower_scalar_op(op) if op.results else self.lower_op(op)
        return [self.scalar(v) for v in region.ops[-1].operands]


def _drop_unit_dim(L: Layout, axis: int) -> Layout:
    def drop(c):
        return c[:axis] + c[axis + 1:]
    return Layout(L.shape[:axis] + L.shape[axis + 1:], tuple(drop(b) for b in L.reg), tuple(drop(b) for b in L.lane),
                  tuple(drop(b) for b in L.warp), "derived")


# Registry of rules for concrete ops, filled by the rule modules (memory, reduce, dot, control).
OP_RULES: Dict[str, callable] = {}


def rule(*names):
    def deco(fn):
        for n in names:
            OP_RULES[n] = fn
        return fn
    return deco
