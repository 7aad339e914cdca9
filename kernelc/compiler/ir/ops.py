"""The tile-IR op vocabulary: one row per op, used by the verifier, the printer, the passes and
both executors (the interpreter's numpy rules and the GPU lowering rules).

Operands are SSA values; attributes are plain Python data. Elementwise ops take operands that the
language layer has already cast and broadcast to one shape, so their result shape is the operands'
shape.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Tuple


@dataclass(frozen=True)
class OpDef:
    name: str
    operands: Tuple[int, int]  # (min, max) operand count; max -1 = variadic
    attrs: Tuple[str, ...] = ()  # required attribute names
    elementwise: bool = False  # result[i] depends only on operand[i]s
    pure: bool = True  # no side effects (CSE / DCE may remove or merge it)
    results: int = 1  # -1 = as many as the op says (multi-result)
    regions: int = 0
    category: str = ""
    doc: str = ""
    optional_attrs: Tuple[str, ...] = field(default=())


def _ew(names, n, cat, doc="", attrs=(), optional=()):
    return [OpDef(x, (n, n), tuple(attrs), elementwise=True, category=cat, doc=doc, optional_attrs=tuple(optional))
            for x in names.split()]


OPS = {}
for op in (
    # Float and integer arithmetic (operands share one type).
    _ew("fadd fsub fmul", 2, "float", "IEEE float arithmetic; contract=True lets a*b+c fuse into fma",
        optional=("contract",))
    + _ew("frem", 2, "float", "IEEE float remainder")
    + _ew("fdiv", 2, "float", "float division; ieee=True asks for correctly rounded", optional=("ieee",))
    + _ew("fmax fmin", 2, "float", "float max/min; propagate_nan: none|all", attrs=("propagate_nan",))
    + _ew("exp log fneg", 1, "math", "contract=True: may fuse into an fma (exp/log: their fp32 scaling multiply)",
          optional=("contract",))
    + _ew("exp2", 1, "math", "ftz=True (fp32): a subnormal result flushes to 0 (ex2.approx.ftz); poly={num, den, degree} "
          "(fp32, ftz): num of every den registers by a polynomial on the FMA pipe (passes/exp2_poly.py); "
          "nonnegative=True: every result >= 0 or the positive NaN, the polynomial's too (passes/fp8_bounds.py)",
          optional=("ftz", "poly", "nonnegative"))
    + _ew("fabs log2 sqrt sqrt_rn rsqrt sin cos erf floor ceil tanh", 1, "math")
    + _ew("fma", 3, "float", "fused multiply-add a*b+c")
    + _ew("add sub mul sdiv udiv srem urem smax smin umax umin and or xor shl ashr lshr umulhi smulhi",
          2, "int", "integer arithmetic with C semantics (division truncates toward zero)")
    + _ew("iabs", 1, "int")
    + _ew("cmpi", 2, "compare", "integer/pointer compare; pred: eq ne slt sle sgt sge ult ule ugt uge; uniform: "
          "the result is the same over aligned blocks of this shape (passes/mask_blocks.py)",
          attrs=("pred",), optional=("uniform",))
    + _ew("cmpf", 2, "compare", "float compare; pred: oeq une olt ole ogt oge", attrs=("pred",))
    + _ew("select", 3, "select", "cond ? a : b")
    + [OpDef("cast", (1, 2), (), elementwise=True, category="cast",
             doc="value conversion between element types (int/float/pointer); to fp8: nan_positive=True (the operand "
                 "is never a negative NaN), overflow_bound=True (passes/fp8_bounds.py; operand 1 bounds operand 0's "
                 "magnitudes or is NaN: where it is below e5m2's overflow threshold no overflow fix-up is needed; 'self': "
                 "operand 0 bounds itself, the fix-ups run only where a value is past the threshold or NaN), "
                 "words='a8' (an fp8 wgmma A operand reads it: passes/narrow_carries.py)",
             optional_attrs=("rounding", "nan_positive", "overflow_bound", "words"))]
    + _ew("bitcast", 1, "cast", "reinterpret bits; same width")
    + _ew("addptr", 2, "pointer", "pointer + element offset; mad_wide: formed by one mad.wide.s32 of the i32 "
          "offset, the element size and the pointer (a cp.async copy's address; passes/copy_addresses.py)",
          optional=("mad_wide",))
    + _ew("hint", 1, "hint", "compiler hints: multiple_of / max_contiguous / max_constancy",
          optional=("multiple_of", "max_contiguous", "max_constancy"))
):
    OPS[op.name] = op

for op in [
    OpDef("constant", (0, 0), ("value",), category="create", doc="splat of a Python constant"),
    OpDef("arange", (0, 0), ("start", "end"), category="create"),
    OpDef("program_id", (0, 0), ("axis",), category="grid"),
    OpDef("num_programs", (0, 0), ("axis",), category="grid"),
    OpDef("splat", (1, 1), category="shape", doc="scalar -> tile"),
    OpDef("broadcast", (1, 1), category="shape", doc="size-1 dims -> result shape"),
    OpDef("expand_dims", (1, 1), ("axis",), category="shape"),
    OpDef("reshape", (1, 1), category="shape", doc="row-major reshape"),
    OpDef("trans", (1, 1), ("perm",), category="shape", optional_attrs=("pipeline", "in_place")),
    OpDef("join", (2, 2), category="shape", doc="stack along a new last dim of size 2"),
    OpDef("split", (1, 1), results=2, category="shape", doc="unstack the last dim of size 2"),
    OpDef("cat", (2, 2), category="shape", doc="concatenate along dim 0"),
    OpDef("flip", (1, 1), ("axis",), category="shape", doc="reverse the order of elements along axis"),
    OpDef("gather", (2, 2), ("axis",), category="shape",
          doc="src, index -> out[..i..] = src[..index[..i..]..] along axis (out has index's shape)"),
    OpDef("sort", (1, 1), ("descending",), category="sort",
          doc="sort along the last dim; k keeps the first k of the sorted order (topk)", optional_attrs=("k",)),
    OpDef("bitonic_merge", (1, 1), ("descending",), category="sort",
          doc="the merge network of a bitonic sort along the last dim (sorts a bitonic sequence)"),
    OpDef("histogram", (1, 2), ("num_bins",), category="reduce",
          doc="input [, mask] -> int32 counts of each value in [0, num_bins); other values are not counted"),
    OpDef("map_elementwise", (1, -1), results=-1, regions=1, category="extern",
          doc="tiles of one shape -> tiles: the region (n scalars -> m scalars, ends in reduce.return) "
              "applied to each element (kl.map_elementwise)"),
    # Calls into a device library (libdevice's __nv_* functions), one call per element.
    OpDef("extern_elementwise", (0, -1), ("symbol",), elementwise=True, category="extern",
          doc="symbol(args...) per element; operands already cast to the symbol's parameter types",
          optional_attrs=("lib",)),
    # User PTX per element (tl.inline_asm_elementwise); never merged or removed: it may have effects.
    OpDef("inline_asm", (0, -1), ("asm", "constraints"), elementwise=True, pure=False, category="extern",
          doc="asm text with $0 (result) and $1.. (operands); constraints as in LLVM inline asm"),
    # Layouts (kernelc/compiler/layouts.py): the value unchanged, redistributed over threads into
    # ``layout``; ``smem`` names the shared-memory layout a conversion that must move data between
    # threads goes through (passes/coalesce.py decides both; docs/layouts.md).
    OpDef("convert_layout", (1, 1), ("layout",), category="layout",
          doc="same tile in another register layout (through shared memory if threads must exchange); pieces: "
              "the coordinate bits it goes through shared memory one value at a time on (passes/smem_offsets.py, "
              "kernelc/compiler/conversion_pieces.py), smem then planned for one piece",
          optional_attrs=("smem", "pieces")),
    OpDef("load", (1, 3), ("cache", "eviction", "volatile"), category="memory",
          doc="ptr [, mask [, other]]; l2: an L2 cache policy ('evict_last', 'evict_first': .L2::cache_hint with "
              "createpolicy's value as a constant; passes/l2_reuse.py)",
          optional_attrs=("pipeline", "layout", "l2")),
    OpDef("store", (2, 3), ("cache", "eviction"), pure=False, results=0, category="memory",
          doc="ptr, value [, mask]"),
    # kl.prefetch (language/cache.py): no result, so no register and no scoreboard wait; not a write (passes that
    # look for writes before a load, e.g. to keep it off TMA, do not list it)
    OpDef("prefetch", (1, 2), ("level",), pure=False, results=0, category="memory",
          doc="ptr [, mask]: bring the lines at ptr into the cache level ('L1' or 'L2'); one thread of the "
              "copies of a replicated element issues it"),
    OpDef("atomic_rmw", (2, 3), ("kind", "sem", "scope"), pure=False, category="memory",
          doc="ptr, val [, mask] -> old"),
    OpDef("atomic_cas", (3, 3), ("sem", "scope"), pure=False, category="memory", doc="ptr, cmp, val -> old"),
    # Tensor descriptors (kernelc/language/blocks.py). A descriptor is an SSA value of type
    # tensordesc<elt[block_shape]>; passes/lower_descriptors.py rewrites the loads/stores into
    # masked load/store unless a backend claims them (Hopper TMA: it tags them ``tma=True``).
    OpDef("make_tensor_descriptor", (2, -1), ("padding",), category="descriptor",
          doc="base, shape x n (i32), strides x (n-1) (i64; the last stride is 1) -> tensordesc; "
              "host_arg names the kernel parameter it was flattened from",
          optional_attrs=("host_arg",)),
    OpDef("descriptor_load", (2, -1), ("block_shape",), category="descriptor",
          doc="desc, offsets x n (i32) -> tile of block_shape; out-of-bounds elements read as the padding; "
              "layout: the registers' layout it is read back in (passes/load_layouts.py)",
          optional_attrs=("padding", "pipeline", "tma", "in_place", "smem_buffer", "layout")),
    OpDef("descriptor_store", (3, -1), ("block_shape",), pure=False, results=0, category="descriptor",
          doc="desc, value, offsets x n (i32); out-of-bounds elements are not written", optional_attrs=("tma",)),
    OpDef("descriptor_reduce", (3, -1), ("block_shape", "kind"), pure=False, results=0, category="descriptor",
          doc="desc, value, offsets x n (i32): add (kind) the tile into the tensor element-wise, atomically; "
              "out-of-bounds elements are not touched", optional_attrs=("tma",)),
    OpDef("bulk_add", (2, 2), ("kind",), pure=False, results=0, category="memory",
          doc="pointer (scalar), value [R, C]: add (kind) the tile into the R*C elements at the pointer, element "
              "(r, c) at its staging offset (language/bulk.py); tma=True: by a 1-D bulk reduction "
              "(passes/bulk_adds.py), else relaxed atomics; l2: the bulk reduction's L2 policy ('evict_last', "
              "'evict_first')", optional_attrs=("tma", "l2")),
    OpDef("dot", (3, 5), ("input_precision",), category="dot",
          doc="a @ b + acc; then optionally use_acc (scalar i1, passes/flatten_loops.py): a @ b + (use_acc ? acc : 0); "
              "then optionally the warpgroup index (scalar i32, a warpgroup_index op; passes/uniform_warpgroups.py) "
              "that a wgmma dot's row blocks start from; engine (passes/layout_assign.py): 'wgmma', 'mma' (mma.sync) "
              "or 'fma', the unit that runs it; fp8_mma='f16' (passes/fp8_dot.py): an sm_90 fp8 mma.sync dot issued as "
              "fp16 MMAs on converted fragments",
          optional_attrs=("max_num_imprecise_acc", "fp8_upcast", "wgmma", "wgmma_turns", "pin_wait", "a_words",
                          "engine", "fp8_mma")),
    OpDef("reduce", (1, -1), ("axis",), results=-1, regions=1, category="reduce",
          doc="combine region (2n scalars -> n); kind names a known combine; tree=W: a thread's registers combine "
              "in W chains and a tree of their results (passes/reduce_trees.py)", optional_attrs=("kind", "tree")),
    OpDef("scan", (1, -1), ("axis", "reverse"), results=-1, regions=1, category="reduce",
          optional_attrs=("kind",)),
    OpDef("print", (0, -1), ("prefix",), pure=False, results=0, category="debug", optional_attrs=("hex", "types")),
    OpDef("assert", (1, 1), ("msg",), pure=False, results=0, category="debug"),
    OpDef("barrier", (0, 0), pure=False, results=0, category="sync"),
    # The cp.async ring of a pipelined loop as explicit ops (passes/cp_async_rings.py, docs/schedule-ir.md).
    OpDef("ring_alloc", (0, 0), ("stages", "operand"), pure=False, category="ring",
          doc="a shared-memory ring of `stages` copies of the result's tile, laid out as dot operand 'a' or 'b'; "
              "smem_buffer: where passes/smem_offsets.py placed it", optional_attrs=("smem_buffer",)),
    OpDef("async_copy", (4, 5), ("vec", "masked"), pure=False, results=0, category="ring",
          doc="ring, stage (i32), ptr [, mask], guard (i1): cp.async the tile into the stage, `vec` elements "
              "per copy; masked-off or unguarded elements read as zero; source: the load it stands for "
              "(file:line:col), on the copy the kernel's memory-access report lists", optional_attrs=("source",)),
    OpDef("async_commit_group", (0, 0), pure=False, results=0, category="ring",
          doc="close the group of this thread's cp.async copies issued since the last commit"),
    OpDef("async_wait_group", (0, 0), ("pending",), pure=False, results=0, category="ring",
          doc="wait until at most `pending` of this thread's commit groups are in flight"),
    OpDef("async_wait_all", (0, 0), pure=False, results=0, category="ring", doc="wait for every cp.async copy"),
    OpDef("fence_async_shared", (0, 0), pure=False, results=0, category="ring",
          doc="order this thread's shared-memory writes before async-proxy reads (wgmma)"),
    OpDef("stage_operand", (1, 1), ("operand",), pure=False, category="ring",
          doc="the tile stored once to shared memory, laid out as dot operand 'a' or 'b', read there in place; "
              "smem_buffer: where passes/smem_offsets.py placed it", optional_attrs=("smem_buffer",)),
    OpDef("ring_read", (2, 2), pure=False, category="ring",
          doc="ring, stage (i32) -> the stage's tile, read in place by a tensor-core dot; source: the load it "
              "stands for (file:line:col), where no copy in the loop names it (a warp-specialised loop); "
              "operand/transposed: how this view reads a TMA ring whose first reader reads it otherwise; "
              "registers: the stage's tile read into registers (a TMA ring of operand 'none')",
          optional_attrs=("source", "operand", "transposed", "registers")),
    # The TMA ring of a pipelined loop as explicit ops (passes/tma_rings.py, docs/schedule-ir.md): the
    # ring's stages, one mbarrier per stage that the copies complete on, the phase parity as IR arithmetic.
    OpDef("tma_ring_alloc", (1, 1), ("stages", "operand", "transposed"), pure=False, category="ring",
          doc="desc -> a shared-memory ring of `stages` TMA boxes of the descriptor's block, read in place as "
              "dot operand 'a' or 'b' (transposed: through a 2-D trans, the result's type), or 'none': read into "
              "registers by ring_read {registers} (a tile no dot reads); smem_buffer: where "
              "passes/smem_offsets.py placed it", optional_attrs=("smem_buffer",)),
    OpDef("mbarrier_alloc", (0, 0), ("count",), pure=False, category="ring",
          doc="`count` mbarriers (8 bytes each) in shared memory; the i64 result names the group"),
    OpDef("mbarrier_at", (2, 2), category="ring",
          doc="barrier group, index (i32) -> the shared-memory address (i32) of barrier `index`"),
    OpDef("elect_one", (0, 0), category="ring", optional_attrs=("warp", "by"),
          doc="i1: true in the one thread that drives the copy engine, the lane elect.sync picks in warp `warp` "
              "(default 0; by='tid': thread 32 * warp, passes/elect_form.py); every lane of that warp runs it"),
    OpDef("mbarrier_init", (2, 2), ("count",), pure=False, results=0, category="ring",
          doc="barrier, pred (i1): where pred, initialise the barrier to expect `count` arrivals"),
    OpDef("fence_mbarrier_init", (0, 0), pure=False, results=0, category="ring",
          doc="make initialised barriers visible to the copy engine"),
    OpDef("prefetch_tensormaps", (2, -1), pure=False, results=0, category="ring",
          doc="descs..., pred (i1): where pred, bring the descriptors' tensor maps into the TMA unit's cache"),
    OpDef("mbarrier_expect_tx", (2, 2), ("bytes",), pure=False, results=0, category="ring",
          doc="barrier, pred (i1): where pred, arrive once and announce `bytes` of copies completing on it"),
    OpDef("tma_copy_to_ring", (4, -1), pure=False, results=0, category="ring",
          doc="ring, stage (i32), barrier, pred (i1), offsets (i32, outermost first): where pred, TMA-copy the "
              "descriptor's block at the offsets into the stage, completing on the barrier; source: the "
              "descriptor_load it stands for (file:line:col), on the copy the memory-access report lists",
          optional_attrs=("source",)),
    OpDef("mbarrier_wait", (2, 2), pure=False, results=0, category="ring",
          doc="barrier, parity (i32): wait until the barrier's phase with that parity has completed"),
    OpDef("mbarrier_inval", (2, 2), pure=False, results=0, category="ring",
          doc="barrier, pred (i1): where pred, invalidate the barrier (it may be initialised again)"),
    OpDef("ring_free", (1, 1), pure=False, results=0, category="ring",
          doc="the ring's shared memory may hold later buffers: every copy into it landed, its readers are done"),
    # Bulk tensor reductions from shared memory as explicit ops (passes/bulk_reductions.py, docs/schedule-ir.md).
    OpDef("bulk_buffer_alloc", (1, 1), ("stages",), pure=False, category="ring",
          doc="desc -> `stages` shared-memory boxes of the descriptor's block (TMA's swizzled layout), the "
              "sources of bulk reductions into it; the result has the block's type"),
    OpDef("bulk_stage_store", (3, 3), pure=False, results=0, category="ring",
          doc="buffer, stage (i32), tile: every thread writes its elements of the tile into the stage (smem_write="
              "'stmatrix': 16-bit MMA fragments, eight 8x8 blocks per instruction; passes/tma_stores.py)",
          optional_attrs=("smem_write",)),
    OpDef("bulk_reduce", (3, -1), ("kind",), pure=False, results=0, category="ring",
          doc="buffer, stage (i32), pred (i1), offsets (i32, outermost first): where pred, cp.reduce.async."
              "bulk.tensor the stage into the buffer's descriptor's block at the offsets (`kind`: add) as part of "
              "this thread's bulk group; source: the descriptor_reduce it stands for (file:line:col)",
          optional_attrs=("source",)),
    OpDef("bulk_store", (3, -1), pure=False, results=0, category="ring",
          doc="buffer, stage (i32), pred (i1), offsets (i32, outermost first): where pred, cp.async.bulk.tensor the "
              "stage into the buffer's descriptor's block at the offsets (a TMA store) as part of this thread's bulk "
              "group (passes/tma_stores.py)"),
    OpDef("bulk_add_buffer_alloc", (0, 0), ("stages",), pure=False, category="ring",
          doc="-> the staging buffer of a bulk_add: `stages` blocks of the result type's bytes in shared memory, "
              "in the staging order (passes/bulk_reductions.py)"),
    OpDef("bulk_reduce_1d", (4, 4), ("kind",), pure=False, results=0, category="ring",
          doc="buffer (a bulk_add_buffer_alloc), stage (i32), pred (i1), pointer: where pred, cp.reduce.async.bulk "
              "(1-D) the stage's bytes into global memory at the pointer (`kind`: add) as part of this thread's bulk "
              "group; source: the bulk_add it stands for (file:line:col); l2: its L2 cache policy ('evict_last', "
              "'evict_first': createpolicy + .L2::cache_hint)", optional_attrs=("source", "l2")),
    OpDef("bulk_commit_group", (1, 1), pure=False, results=0, category="ring",
          doc="pred (i1): where pred, close this thread's bulk group (cp.async.bulk.commit_group)"),
    OpDef("bulk_wait_group", (1, 1), ("pending", "read"), pure=False, results=0, category="ring",
          doc="pred (i1): where pred, wait until at most `pending` of this thread's bulk groups are in flight "
              "(read=True: only until they have read their shared-memory source)"),
    # Warp specialisation as explicit ops (passes/warp_regions.py, docs/schedule-ir.md).
    OpDef("ws_producer", (0, 0), ("producer_warps", "stages", "setmaxnreg"), pure=False, results=0, regions=1,
          category="ring", doc="the warps past the consumers run the region (one thread of them; with setmaxnreg "
                               "the warpgroup gives its registers to the consumers) and exit; the consumers go on "
                               "after it; source: the warp-specialised loop; consumer_regs: the consumers' "
                               "setmaxnreg count where not 232 (the producer keeps what is left of 168 x 384)",
          optional_attrs=("source", "consumer_regs")),
    OpDef("ring_cursor", (0, 0), pure=False, category="ring",
          doc="i64: the position of a warp-specialised ring, a stage and a phase parity (i32, both 0 at first) "
              "that the producer and the consumers each keep across runs of the loop"),
    OpDef("cursor_load", (1, 1), ("field",), pure=False, category="ring", doc="cursor -> its 'stage' or 'phase'"),
    OpDef("cursor_store", (2, 2), ("field",), pure=False, results=0, category="ring",
          doc="cursor, value (i32): set its 'stage' or 'phase'"),
    OpDef("warp_leader", (0, 0), category="ring", doc="i1: true in lane 0 of every warp"),
    OpDef("warpgroup_index", (0, 0), category="ring", optional_attrs=("uniform",),
          doc="i32: this thread's warpgroup (tid.x / 128); uniform=True: read through a shuffle from lane 0, so the "
              "assembler knows it is the same in every lane of a warp (passes/uniform_warpgroups.py)"),
    OpDef("mbarrier_arrive", (2, 2), pure=False, results=0, category="ring",
          doc="barrier, pred (i1): where pred, arrive once (a consumer is done with what the barrier guards)"),
    OpDef("wgmma_wait_deferred", (0, 0), pure=False, results=0, category="ring",
          doc="wait for the wgmma groups of deferred dots not waited for yet (before their stage is released); "
              "place_wgmma_waits replaces it with wgmma_wait ops"),
    OpDef("wgmma_wait", (0, -1), ("pending",), pure=False, results=-1, category="ring",
          doc="tiles... -> the same tiles: wgmma.wait_group `pending` (at most that many of this warpgroup's "
              "wgmma groups still in flight), the tiles taken through it so nothing reading them runs before; "
              "pin=True: ptxas keeps it in place too (passes/wgmma_waits.py)", optional_attrs=("pin",)),
    OpDef("pingpong_begin", (0, 0), pure=False, results=0, category="ring",
          doc="the second consumer warpgroup hands the first one the first turn (ws.pingpong)"),
    OpDef("pingpong_end", (0, 0), pure=False, results=0, category="ring",
          doc="the first consumer warpgroup takes the last hand-over (ws.pingpong)"),
    # Structured control flow (compiled code only; the interpreter runs Python control flow).
    OpDef("scf.for", (3, -1), results=-1, regions=1, pure=False, category="control",
          doc="lb, ub, step, inits...; body block args (iv, carried...); flattened: a tile loop and its K loop "
              "fused into this one (passes/flatten_loops.py)",
          optional_attrs=("num_stages", "unroll", "warp_specialize", "flatten", "pipeline", "ws", "carry_words",
                          "async_tail", "exit_wait", "flattened", "refill_top")),
    OpDef("scf.if", (1, 1), results=-1, regions=2, pure=False, category="control", doc="then/else regions"),
    OpDef("scf.while", (0, -1), results=-1, regions=2, pure=False, category="control",
          doc="before region ends in scf.condition, after region in scf.yield"),
    OpDef("scf.yield", (0, -1), results=0, pure=False, category="control"),
    OpDef("scf.condition", (1, -1), results=0, pure=False, category="control"),
    OpDef("reduce.return", (1, -1), results=0, pure=False, category="control"),
    OpDef("return", (0, -1), results=0, pure=False, category="control"),
]:
    OPS[op.name] = op

TERMINATORS = frozenset({"scf.yield", "scf.condition", "reduce.return", "return"})

INT_PREDICATES = ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")
FLOAT_PREDICATES = ("oeq", "une", "olt", "ole", "ogt", "oge")
ATOMIC_KINDS = ("add", "fadd", "max", "umax", "fmax", "min", "umin", "fmin", "xchg", "and", "or", "xor")

# The schedule (passes/schedule.py, docs/schedule-ir.md): attributes the scheduling passes write and
# codegen reads. ``pipeline`` on a loop: {stages, lookahead[, refill]} (refill='after_dots': a cp.async ring
# whose copies go after the dots, so a wgmma left in flight keeps the full lookahead; 'top': a TMA ring whose
# copies go at the top of the iteration, no wgmma being in flight across it, passes/rings.py); on a load the ring copies: {ring, vec} for
# cp.async, {ring} for TMA (also on the 2-D ``trans`` a TMA tile is read through); ``ws`` on the
# warp-specialised loop; ``wgmma`` on a dot: "async" (stays in flight across iterations) or "deferred"
# (waited for at its first read); ``pin_wait``: that wait stays where it is in ptxas too; ``wgmma_turns``: the
# consumer warpgroups issue it in turns;
# ``in_place`` on a descriptor_load outside a ring (and its 2-D trans): the dots read the tile where TMA put it.
RINGS = ("cp.async", "tma")
RING_REFILL = ("after_dots", "top")
WGMMA_ISSUE = ("async", "deferred")
WS_RELEASE = ("lagged", "at_issue")
