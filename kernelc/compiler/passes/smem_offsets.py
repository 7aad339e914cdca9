"""``assign_smem_offsets``: shared-memory offsets of the kernel's buffers by live range.

The ring passes write one buffer op per shared-memory buffer that outlives a single op: ``ring_alloc``
(a cp.async ring), ``tma_ring_alloc`` (a TMA ring), ``stage_operand`` (a loop-invariant dot operand) and
a ``descriptor_load`` whose tile the dots read ``in_place``. Without this pass the code generator gives
each one bytes of its own for the whole kernel, so a kernel with loops that run one after the other
holds all of their buffers at once: tutorial 06's ``_attn_bwd`` (four pipelined loops) asked for 263168
bytes at ``HEAD_DIM`` 128 where the H100 allows 232448 (docs/triton-tutorials.md).

This pass decides where each buffer lives and writes it on the op: ``smem_buffer={offset=O, bytes=B}``,
``O`` from the start of the region the placed buffers share (1024-byte aligned, as wgmma's swizzle
needs), ``B`` what the buffer takes (the code generator checks that its geometry fits). Two buffers
share bytes only if their live ranges do not overlap. Live ranges are counted in ops of the kernel's
top-level block: a buffer lives from the top-level op that holds its definition to the last top-level op
that holds a reader (through the views a dot reads it by: ``ring_read``, ``trans``, and the other
ops that are lowered where their result is read). A buffer made inside a loop therefore lives for
the whole loop, so only buffers of loops that run one after the other share bytes.

Before the top-level op that holds the first buffer reusing bytes another buffer used, the pass
writes what makes the reuse safe (once for all the buffers that start there):

- ``async_wait_all`` when a cp.async ring ended before it (a copy issued with a zero source size still
  writes its zeros);
- ``fence_async_shared`` on sm_90: earlier generic accesses come before the async proxy's (a TMA ring's
  copies, wgmma reads of a later buffer); once per reuse point, it costs nothing measurable;
- ``barrier``: every thread is done reading the old buffer (its wgmma reads were waited for by
  ``place_wgmma_waits``, which runs before this pass).

With ``KERNELC_REUSE_SYNC=needed`` (opt-in) the wait is left out where an ``async_wait_all`` of the same
block already follows the ring with no copy issued after it (the ring passes write one after the loop: a
second drains nothing), and the fence where the buffers starting there are store conversions (generic
``st.shared``/``stmatrix`` and ``ld.shared``/``ldmatrix`` only) on bytes of cp.async rings or staged
operands only: their async-proxy accesses are wgmma reads, already waited for, and the PTX ISA has an
implicit generic-async proxy fence follow a wgmma's completion. TMA buffers keep the fence. It also
writes each ``async_wait_all`` before which every copy is already committed as ``async_wait_group
{pending=0}`` (``cp.async.wait_all`` is a commit and a wait: the commit, an ``LDGDEPBAR``, closes an empty
group there; Triton writes ``cp.async.wait_group 0``).

A warp-specialised kernel (``ws_producer``) is left alone: its producer warp runs beside the code after
the split, so program order is not time order there. The pass runs when ``KERNELC_SMEM_REUSE`` is on.

Layout conversions through shared memory (``convert_layout`` with a ``smem`` plan) use the per-op
scratch region, which lies beside the placed buffers. A store's conversion at the kernel's top level (a
GEMM's epilogue after its K loop) is placed too, but only inside bytes the placed buffers already span and
no live one holds (the finished ring's), so placing it never grows the kernel: Triton's allocator
gives its epilogue's conversion the ring's bytes in the same way. In a loop body that allocates its ring
and drains it before the epilogue (a persistent tile loop, not flattened) the conversion takes the ring's
bytes with live ranges counted in the body (``_place_in_loop_body``).

A store's conversion left in the scratch (``_fit_scratch_conversions``) beside buffers that live across it
(a flattened tile loop's ring, which stays live across tiles) goes in pieces (``pieces=[..]`` on the op, its
``smem`` planned for one piece; ``kernelc/compiler/conversion_pieces.py``): with ``KERNELC_CVT_PIECES=max``
(default) as many as the two register layouts split on, as Triton's scratch (128x256 fp16 at 8 warps: 2
pieces of 32 KB beside a 192 KB ring; 128x128 at 4 warps: 4 of 8 KB); with ``fit`` the fewest that fit the
target's shared memory (``smem_limit``); ``off`` one. Where no number of pieces fits, the conversion (it
only feeds a store's value: the store writes any layout) is taken out again with a note.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ...language.dtypes import pointer_type, scalar_of, shape_of
from ..codegen.dot import MMA_SHAPES
from ..conversion_pieces import piece_bases, split_layout
from ..ir.core import Block, Function, Op, Value
from ..passes.layout_assign import REMATERIALIZABLE
from ..shared_layouts import SharedLayout, plan_shared_layout
from .coalesce import ldmatrix_reads

ALIGN = 1024  # wgmma's 128-byte swizzle repeats every 1024 bytes: every buffer starts on it
BUFFER_OPS = ("ring_alloc", "tma_ring_alloc", "stage_operand", "descriptor_load")
# ops whose result stands for the same shared memory (a view), or is lowered where its result is read
_VIEWS = frozenset({"ring_read", "trans"}) | REMATERIALIZABLE


_SYNC = ("async_wait_all", "fence_async_shared", "barrier")  # in the order they are written


def _round(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def buffer_bytes(op: Op) -> int:
    """Shared-memory bytes the code generator gives ``op``'s buffer (0: the op holds none)."""
    if op.name == "descriptor_load" and not op.attrs.get("in_place"):
        return 0
    if op.name not in BUFFER_OPS:
        return 0
    ty = op.results[0].type
    elt = scalar_of(ty)
    n = elt.itemsize
    for d in shape_of(ty):
        n *= d
    if op.name == "stage_operand":
        return _round(n) if elt.name in MMA_SHAPES else 0  # other tiles stay in registers
    if op.name in ("ring_alloc", "tma_ring_alloc"):
        return op.attrs["stages"] * _round(n)  # every stage 1024-byte aligned
    return _round(n)


def conversion_bytes(op: Op) -> int:
    """Shared-memory bytes of a ``convert_layout`` through its ``smem`` plan (0: none planned)."""
    sl = op.attrs.get("smem") if op.name == "convert_layout" else None
    if not isinstance(sl, SharedLayout):
        return 0
    return _round(sl.nbytes(scalar_of(op.operands[0].type).itemsize))  # pointers 8, i1 1 (stored as i8)


def _feeds_only_a_store(op: Op, uses) -> bool:
    users = uses.get(op.results[0].id, [])
    return bool(users) and all(u.name == "store" and u.operands[1] is op.results[0]
                               and all(o is not op.results[0] for i, o in enumerate(u.operands) if i != 1)
                               for u in users)


@dataclass
class _Buffer:
    op: Op
    nbytes: int
    start: int      # index in the top-level block of the op that holds the definition
    end: int        # ... of the last op that holds a reader
    offset: int = -1
    shares: List["_Buffer"] = field(default_factory=list)  # earlier buffers whose bytes it takes


def assign_smem_offsets(func: Function, ctx=None, enabled: Optional[bool] = None,
                        pieces: Optional[str] = None) -> Function:
    from ...options import get
    if enabled is None:
        enabled = get("KERNELC_SMEM_REUSE")
    if pieces is None:
        pieces = get("KERNELC_CVT_PIECES")
    top = func.body
    uses = _users(top)
    limit = getattr(ctx, "smem_limit", 0) if ctx is not None else 0
    conversions = [op for op in func.walk() if conversion_bytes(op)]
    ws = any(op.name == "ws_producer" for op in func.walk())
    needed = get("KERNELC_REUSE_SYNC") == "needed"
    if not enabled or ws:
        # buffers keep bytes of their own: they add up
        total = sum(buffer_bytes(op) for op in func.walk())
        _fit_scratch_conversions(conversions, total, limit, uses, ctx, pieces, lambda op: total > 0)
        if needed and not ws:
            _waits_without_commit(func)
        return func
    index = {id(op): i for i, op in enumerate(top.ops)}
    bufs: List[_Buffer] = []
    for op in func.walk():
        n = buffer_bytes(op)
        if n:
            start = index[id(_top_level(op, top))]
            bufs.append(_Buffer(op, n, start, _last_use(op.results[0], uses, top, index, start)))
    placed: List[_Buffer] = []
    for b in bufs:  # program order, first fit
        b.offset = _first_fit(b, placed)
        b.shares = [p for p in placed if p.end < b.start and p.offset < b.offset + b.nbytes
                    and b.offset < p.offset + p.nbytes]
        placed.append(b)
        b.op.attrs["smem_buffer"] = {"offset": b.offset, "bytes": b.nbytes}
    extent = max((p.offset + p.nbytes for p in placed), default=0)
    left = []
    for op in conversions:  # at the top level, inside the bytes already spanned: a finished ring's
        if op.block is top and _feeds_only_a_store(op, uses):
            i = index[id(op)]
            b = _Buffer(op, conversion_bytes(op), i, i)
            off = _first_fit(b, placed)
            if off + b.nbytes <= extent:
                b.offset = off
                b.shares = [p for p in placed if p.end < b.start and p.offset < off + b.nbytes
                            and off < p.offset + p.nbytes]
                placed.append(b)
                bufs.append(b)
                op.attrs["smem_buffer"] = {"offset": off, "bytes": b.nbytes}
                continue
        if (op.block is not top and _feeds_only_a_store(op, uses)
                and _place_in_loop_body(op, placed, extent, ctx, needed)):
            continue
        left.append(op)

    def beside_live(op: Op) -> bool:  # a placed buffer lives across the op (its scratch adds to the buffers)
        i = index[id(_top_level(op, top))]
        return any(p.start <= i <= p.end for p in placed if p.op.name in BUFFER_OPS)

    _fit_scratch_conversions(left, extent, limit, uses, ctx, pieces, beside_live)
    if bufs:
        bufs.sort(key=lambda b: b.start)
        _synchronise(bufs, top, ctx, needed)
    if needed:
        _waits_without_commit(func)
    return func


def _place_in_loop_body(op: Op, placed: List["_Buffer"], extent: int, ctx,
                        needed: bool = False) -> bool:
    """A store's conversion in a loop body whose own ring ended before it (a persistent tile loop that fills
    and drains its ring per tile): the bytes of that ring, with live ranges counted in the body's ops.
    Buffers of other blocks are busy for the whole body. Before the conversion: the ring's copies waited
    for, a fence (sm_90) and a barrier; after it a barrier, since the next trip's copies write the same bytes."""
    blk = op.block
    body_index = {id(o): i for i, o in enumerate(blk.ops)}
    uses = _users(blk)
    local, busy = [], []
    for p in placed:
        if p.op.block is blk:
            start = body_index[id(p.op)]
            local.append((p, start, _last_use(p.op.results[0], uses, blk, body_index, start)))
        else:
            busy.append((p.offset, p.offset + p.nbytes))
    i = body_index[id(op)]
    ended = [p for p, _, end in local if end < i]
    if not ended:
        return False
    busy += [(p.offset, p.offset + p.nbytes) for p, start, end in local if start <= i <= end]
    n = conversion_bytes(op)
    off = 0
    for lo, hi in sorted(busy):
        if off + n <= lo:
            break
        off = max(off, _round(hi))
    if off + n > extent:
        return False
    op.attrs["smem_buffer"] = {"offset": off, "bytes": n}
    taken = [p for p in ended if p.offset < off + n and off < p.offset + p.nbytes]
    pos = blk.ops.index(op)
    want = ["barrier"]
    if tuple(ctx.capability if ctx is not None else (9, 0)) >= (9, 0) and not (
            needed and _generic_only_reuse([op], [p.op for p in taken])):
        want.insert(0, "fence_async_shared")
    if any(p.op.name == "ring_alloc" for p in taken) and not (needed and _drained(blk, pos)):
        want.insert(0, "async_wait_all")
    for name in reversed(want):
        sync = Op(name, [], [], loc=op.loc)
        sync.block = blk
        blk.ops.insert(pos, sync)
    after = Op("barrier", [], [], loc=op.loc)
    after.block = blk
    blk.ops.insert(blk.ops.index(op) + 1, after)
    return True


def _first_fit(b: "_Buffer", placed: List["_Buffer"]) -> int:
    busy = sorted((p.offset, p.offset + p.nbytes) for p in placed if p.start <= b.end and b.start <= p.end)
    off = 0
    for lo, hi in busy:
        if off + b.nbytes <= lo:
            break
        off = max(off, _round(hi))
    return off


def conversion_pieces(op: Op, ctx) -> List[Tuple[Tuple, SharedLayout, int]]:
    """(piece bases, shared layout of one piece, its bytes) for 1, 2, 4, ... pieces of the conversion ``op``
    (``kernelc/compiler/conversion_pieces.py``): only the whole when the pass context has no layout plan or
    the two layouts share no register bit to split on."""
    out = [((), op.attrs["smem"], conversion_bytes(op))]
    plan = getattr(ctx, "plan", None)
    src = plan.get(op.operands[0]) if plan is not None else None
    if src is None:
        return out
    dst = op.attrs["layout"]
    elt = scalar_of(op.operands[0].type)
    ebytes = elt.itemsize
    vec_bytes = 8 if isinstance(elt, pointer_type) else 16   # as passes/coalesce.py plans the whole
    bases = piece_bases(src, dst, ebytes, vec_bytes)
    sm90 = tuple(getattr(ctx, "capability", (9, 0))) >= (9, 0)
    for k in range(1, len(bases) + 1):
        src_piece, _ = split_layout(src, bases[:k])
        dst_piece, _ = split_layout(dst, bases[:k])
        sl = plan_shared_layout(src_piece, dst_piece, ebytes, vec_bytes, stmatrix=sm90,
                                ldmatrix=ldmatrix_reads(tuple(getattr(ctx, "capability", (9, 0)))[0]))
        out.append((bases[:k], sl, _round(sl.nbytes(ebytes))))
    return out


def _fit_scratch_conversions(conversions: List[Op], buffers: int, limit: int, uses, ctx, mode: str,
                             beside_live) -> None:
    """A store's optional conversion left in the per-op scratch, beside ``buffers`` bytes of placed buffers:
    beside buffers that live across it (``beside_live(op)``) and with ``mode`` max, in as many pieces as its
    layouts split on (Triton's scratch); else in the fewest pieces that fit ``limit`` (one if it fits whole;
    ``mode`` off: one). Taken out, with a note, when no number of pieces fits: the store keeps the value's
    layout."""
    for op in conversions:
        if not _feeds_only_a_store(op, uses):
            continue
        opts = conversion_pieces(op, ctx) if mode != "off" else [((), op.attrs["smem"], conversion_bytes(op))]
        if mode == "max" and beside_live(op):
            opts = opts[-1:]
        pick = next((o for o in opts if not limit or buffers + o[2] <= limit), None)
        if pick is not None:
            bases, sl, n = pick
            if bases:
                op.attrs["pieces"] = bases
                op.attrs["smem"] = sl
                if ctx is not None:
                    ctx.notes.append(f"{op.loc.file}:{op.loc.line}: store's conversion in {1 << len(bases)} pieces "
                                     f"through {n} bytes of shared memory beside the kernel's {buffers}")
            continue
        if not limit:
            continue
        n = opts[-1][2]
        src = op.operands[0]
        for u in uses.get(op.results[0].id, []):
            u.operands[1] = src
        op.block.ops.remove(op)
        if ctx is not None:
            ctx.notes.append(f"{op.loc.file}:{op.loc.line}: store not converted to its coalesced layout: the "
                             f"conversion's {n} bytes of shared memory and the kernel's {buffers} exceed {limit}")


# buffers that only generic-proxy accesses touch after a reuse point (a store's conversion), and buffers whose
# async-proxy accesses (wgmma reads) are complete at one: a cp.async ring, a staged operand. TMA ones are not.
_GENERIC_AFTER = ("convert_layout",)
_WAITED_BEFORE = ("ring_alloc", "stage_operand")


def _generic_only_reuse(new_ops: List[Op], old_ops: List[Op]) -> bool:
    """No proxy fence is needed between the old buffers' accesses and the new ones' (``KERNELC_REUSE_SYNC``)."""
    return (bool(new_ops) and all(o.name in _GENERIC_AFTER for o in new_ops)
            and all(o.name in _WAITED_BEFORE for o in old_ops))


def _drained(blk: Block, pos: int) -> bool:
    """An ``async_wait_all`` of ``blk`` before index ``pos`` with no cp.async copy issued (in any op, nested
    ones too) between it and ``pos``: a wait at ``pos`` would drain nothing."""
    for o in reversed(blk.ops[:pos]):
        if o.name == "async_wait_all":
            return True
        if any(x.name == "async_copy" for x in o.walk()):
            return False
    return False


def _ends_committed(blk: Block) -> bool:
    """No copy of ``blk`` (nested ones included) is left uncommitted when it ends."""
    return _committed_before(blk, len(blk.ops), climb=False)


def _committed_before(blk: Block, pos: int, climb: bool = True) -> bool:
    """Every cp.async copy issued before ``blk.ops[pos]`` is in a committed group: going back from there, a
    commit (``async_wait_all`` commits too) comes before any copy, an op whose blocks copy ends them committed,
    and (``climb``) the same holds in the enclosing blocks; a loop body must also end committed (its last trip
    runs before its first)."""
    while True:
        for o in reversed(blk.ops[:pos]):
            if o.name in ("async_commit_group", "async_wait_all"):
                return True
            if o.name == "async_copy":
                return False
            for inner in o.regions:
                if any(x.name == "async_copy" for op in inner.ops for x in op.walk()) and not _ends_committed(inner):
                    return False
        parent = getattr(blk, "parent", None)
        if not climb or parent is None or parent.block is None:
            return True
        if parent.name in ("scf.for", "scf.while") and not _ends_committed(blk):
            return False
        blk, pos = parent.block, parent.block.ops.index(parent)


def _waits_without_commit(func: Function) -> None:
    """``KERNELC_REUSE_SYNC=needed``: an ``async_wait_all`` with every earlier copy committed becomes
    ``async_wait_group {pending=0}`` (the same wait without the commit of an empty group)."""
    for op in list(func.walk()):
        if op.name == "async_wait_all" and op.block is not None:
            blk = op.block
            pos = blk.ops.index(op)
            if _committed_before(blk, pos):
                new = Op("async_wait_group", [], [], {"pending": 0}, loc=op.loc)
                new.block = blk
                blk.ops[pos] = new


def _synchronise(bufs: List[_Buffer], top: Block, ctx, needed: bool = False) -> None:
    """The waits, fence and barrier before each top-level op where a buffer takes bytes another used
    (``needed``: ``KERNELC_REUSE_SYNC=needed``, only those that order something; see the module's doc)."""
    sm90 = ctx is None or tuple(ctx.capability) >= (9, 0)
    synced = -1  # every top-level op before this index is ordered before the ones after it
    points: List[int] = []
    for b in bufs:
        if b.start != synced and any(p.end >= synced for p in b.shares):
            synced = b.start
            points.append(b.start)
    anchors = [top.ops[i] for i in points]
    for i, at in zip(points, anchors):
        want = set()
        pos = top.ops.index(at)
        if any(b.op.name == "ring_alloc" and b.end < i for b in bufs) and not (needed and _drained(top, pos)):
            want.add("async_wait_all")
        starting = [b for b in bufs if b.start == i]
        old = [p.op for b in starting for p in b.shares]
        if sm90 and not (needed and _generic_only_reuse([b.op for b in starting], old)):
            want.add("fence_async_shared")
        want.add("barrier")
        # sync ops right before it (a staged operand's fence and barrier) join the sequence: one barrier
        while pos and top.ops[pos - 1].name in _SYNC and not top.ops[pos - 1].operands:
            pos -= 1
            want.add(top.ops.pop(pos).name)
        for name in reversed(_SYNC):
            if name in want:
                op = Op(name, [], [], loc=at.loc)
                op.block = top
                top.ops.insert(pos, op)


def _top_level(op: Op, top: Block) -> Op:
    while op.block is not top:
        op = op.block.parent
    return op


def _users(top: Block) -> Dict[int, List[Op]]:
    out: Dict[int, List[Op]] = {}
    for op in top.ops:
        for o in op.walk():
            for v in o.operands:
                out.setdefault(v.id, []).append(o)
    return out


def _last_use(v: Value, uses, top: Block, index, start: int) -> int:
    """The top-level index of the last op that reads ``v``'s shared memory, directly or through views;
    the end of the kernel if a view of it flows into control flow (a yield, a loop's operands)."""
    end = start
    todo, seen = [v], set()
    while todo:
        x = todo.pop()
        if x.id in seen:
            continue
        seen.add(x.id)
        for u in uses.get(x.id, ()):
            if u.regions or u.name in ("scf.yield", "scf.condition"):
                return len(top.ops)
            end = max(end, index[id(_top_level(u, top))])
            if u.name in _VIEWS:
                todo.extend(u.results)
    # the wgmma waits right after it complete the dots' reads of the buffer (passes/wgmma_waits.py)
    while end + 1 < len(top.ops) and top.ops[end + 1].name == "wgmma_wait":
        end += 1
    return end
