"""``stage_invariant_operands``: tensor-core dot operands that a loop does not change (attention's Q)
are stored to shared memory once, before the loop, as explicit ``stage_operand`` ops
(docs/schedule-ir.md, "Loop-invariant dot operands").

The ring passes (``passes/rings.py``) stage the invariants of the loops they expand with the same
function, :func:`stage_invariants`; this pass, the last tile pass, does it for every other ``scf.for``
(a loop without a ring: not pipelined, or its loads could not be ringed). For such a loop it writes,
right before the loop::

    (the ops defining the loop's tile inits that only the loop reads, moved here: see below)
    %s = stage_operand %v {operand='a'|'b'}     one per (operand value, role) the loop's dots read
    [fence_async_shared]                        when one of the loop's dots runs on wgmma
    barrier

and the loop's dots read ``%s``. One staged copy serves each role: a tile that one dot reads as A and
another as B is staged twice (a copy laid out as A read as B was wrong on an H100, 2026-11-27). A
copy staged before a loop also serves every later tensor-core dot that reads the same value in the same
role where the copy dominates it (later loops, dots after the loop): those read it in place and no
barrier is added for them. The moved inits are what the code generator materialised on loop entry,
before the staging, when the decision was made there (so the generated code did not change).
"""
from __future__ import annotations

from typing import Dict, List, Optional

from ...language.dtypes import scalar_of, shape_of
from ...options import get
from ..codegen.dot import MMA_SHAPES
from ..ir.core import Block, Function, Op, Value

_READ_IN_PLACE = ("stage_operand", "ring_read")  # already shared-memory operands


def tensor_core_dot(plan, op: Op) -> bool:
    """A dot the code generator runs on mma.sync or wgmma (the others read registers)."""
    return op.name == "dot" and op.attrs.get("engine") in ("wgmma", "mma")


def _stageable(v: Value, inner: set) -> bool:
    if v.id in inner or len(shape_of(v.type)) != 2 or scalar_of(v.type).name not in MMA_SHAPES:
        return False
    d = v.op
    return d is None or not (d.attrs.get("in_place") or d.name in _READ_IN_PLACE)


def a_in_registers(plan, dot: Op, v: Value) -> bool:
    """``v``, the A operand of wgmma ``dot``, stays in registers (KERNELC_WGMMA_A_REGS): 16-bit, already in the
    accumulator layout of a dot with ``dot``'s warps along M and one along N, which is the layout of a register A
    fragment (codegen/dot.py's ``_a_from_registers`` reads it as it is). Such an operand is not staged; its dot is
    marked ``a_regs`` and the kernel ``registers="occupancy_step"`` (:func:`stage_invariant_operands`)."""
    if not get("KERNELC_WGMMA_A_REGS") or dot.attrs.get("engine") != "wgmma" or scalar_of(v.type).itemsize != 2:
        return False
    L, A = plan.layouts.get(dot.results[0].id), plan.layouts.get(v.id)
    if L is None or A is None or L.mma_meta is None:
        return False
    from ..layouts import mma_v2
    (wm, wn), (M, K) = L.mma_meta[0], shape_of(v.type)
    return wn == 1 and K % 16 == 0 and A == mma_v2((M, K), (wm, 1))


def like(plan, axis, new: Value, old: Value) -> None:
    """``new`` stands for ``old``: the same register layout and axis facts."""
    L = plan.layouts.get(old.id)
    if L is not None:
        plan.layouts[new.id] = L
    info = axis.info.get(old.id) if axis is not None else None
    if info is not None:
        axis.info[new.id] = info


def stage_invariants(plan, axis, loop: Op, pre: List[Op], staged: Optional[Dict[tuple, Value]] = None) -> bool:
    """Stage the tensor-core dot operands of ``loop``'s body that are defined outside it: a
    ``stage_operand`` per (value id, operand index) appended to ``pre`` (to go before the loop), unless
    ``staged`` already has a copy for that key (reused); the dots read the copies. Appends the fence
    (wgmma readers) and the barrier after new copies; returns whether it made any."""
    body = loop.regions[0]
    inner = {r.id for o in body.ops for t in o.walk() for r in t.results} | {a.id for a in body.args}
    staged = {} if staged is None else staged
    new = False
    # no register A fragment held across a loop in a kernel with a producer warp(group): ptxas (CUDA 13.0) reused
    # such a fragment's registers inside the specialised loop (the D=64 dK/dV kernel with KV_REGS under WS=1: K's
    # fragment overwritten by P^T, wrong dK on an H200; docs/attention.md "kvr26"); the operand is staged instead.
    # Nor across a loop with a pinned wgmma wait (KERNELC_WGMMA_A_REGS_PINNED, :func:`_pinned_loop`)
    regs_ok = not _warp_specialised(loop) and not _stages_for_pins(plan, loop)
    kept = False
    for o in body.ops:
        if not tensor_core_dot(plan, o):
            continue
        for idx in (0, 1):
            v = o.operands[idx]
            key = (v.id, idx)
            if key not in staged:
                if not _stageable(v, inner):
                    continue
                if idx == 0 and regs_ok and a_in_registers(plan, o, v):
                    o.attrs["a_regs"] = True  # read from registers every trip (codegen/dot.py)
                    kept = True
                    continue
                st = Op("stage_operand", [v], [v.type], {"operand": "a" if idx == 0 else "b"}, loc=loop.loc)
                pre.append(st)
                like(plan, axis, st.results[0], v)
                staged[key] = st.results[0]
                new = True
            o.operands[idx] = staged[key]
    if kept and _pinned_loop(loop) and get("KERNELC_WGMMA_A_REGS_PINNED") == "unpin":
        for t in loop.walk():  # the fragment stays in registers; the loop's waits are plain (passes/wgmma_waits.py)
            t.attrs.pop("pin_wait", None)
    if new:
        if any(o.name == "dot" and o.attrs.get("engine") == "wgmma" for o in body.ops):
            pre.append(Op("fence_async_shared", [], [], loc=loop.loc))
        pre.append(Op("barrier", [], [], loc=loop.loc))
    return new


def _pinned_loop(loop: Op) -> bool:
    """Whether a wgmma wait of ``loop`` is pinned (schedule_wgmma's ``pin_wait``: the wait in both arms of a
    branch, codegen/wgmma.pinned_wait). ptxas 13.0 (nvJitLink 13.0.88, the GPU hosts') gave the registers of an A
    fragment held across such a loop to values the loop computes after the wait (the D=64 dK/dV kernel at 64 x 128,
    8 warps, KV_REGS: the last trip's P^T read as K, wrong dK and dV on an H200); with the waits plain it kept them
    in every build checked, and nvJitLink 13.5 kept them either way (docs/attention.md, kvr27)."""
    return any(t.name == "dot" and t.attrs.get("pin_wait") for t in loop.walk())


def _stages_for_pins(plan, loop: Op) -> bool:
    """Whether ``loop``'s loop-invariant A operands are staged rather than held in registers because of a pinned
    wait: KERNELC_WGMMA_A_REGS_PINNED=stage, or auto when the compile is the second one of a kernel whose first build's
    SASS overwrote such a fragment (the driver's ``stage_pinned_a``, compiler.py)."""
    mode = get("KERNELC_WGMMA_A_REGS_PINNED")
    staged = mode == "stage" or (mode == "auto" and getattr(plan, "stage_pinned_a", False))
    return staged and _pinned_loop(loop)


def _warp_specialised(op: Op) -> bool:
    """Whether the kernel holding ``op`` has a producer warp(group): a loop marked ``ws`` (the warp_specialize
    pass) or, once that loop is expanded, a ``ws_producer`` region."""
    blk = op.block
    while blk is not None and blk.parent is not None:
        blk = blk.parent.block
    ops = [op] if blk is None else [t for o in blk.ops for t in o.walk()]
    return any(t.name == "ws_producer" or (t.name == "scf.for" and t.attrs.get("ws")) for t in ops)


def entry_values(plan, loop: Op) -> List[Op]:
    """The defining ops of ``loop``'s tile inits that only the loop reads and that have no layout yet
    (flexible values, materialised where used), removed from before the loop and given the carried
    value's layout: the caller puts them back right before what it writes in front of the loop, where
    lowering the loop would otherwise materialise them (in operand order)."""
    blk, out = loop.block, []
    body = loop.regions[0]
    before = blk.ops[:blk.ops.index(loop)]
    for v, a in zip(loop.operands[3:], body.args[1:]):
        d = v.op
        L = plan.layouts.get(a.id)
        if d is None or d not in before or L is None or plan.layouts.get(v.id) is not None \
                or len(d.results) != 1 or d.name == "constant":
            continue
        readers = [o for o in blk.ops for t in o.walk() for x in t.operands if x is v]
        if readers != [loop] or loop.operands.count(v) != 1:
            continue
        blk.ops.remove(d)
        before.remove(d)
        plan.layouts[v.id] = L
        out.append(d)
    return out


def stage_invariant_operands(fn: Function, ctx) -> Function:
    """The pass (see the module docstring). Walks the kernel in program order with one table of staged
    copies per block: a copy made before a loop in block B is visible in B after it and in the regions
    nested there, i.e. exactly where it dominates."""
    plan, axis = ctx.plan, ctx.axis
    scopes: List[Dict[tuple, Value]] = []

    def visible() -> Dict[tuple, Value]:
        out: Dict[tuple, Value] = {}
        for sc in scopes:
            out.update(sc)
        return out

    def visit(block: Block) -> None:
        scopes.append({})
        i = 0
        while i < len(block.ops):
            op = block.ops[i]
            if tensor_core_dot(plan, op):
                seen = visible()
                for idx in (0, 1):
                    st = seen.get((op.operands[idx].id, idx))
                    if st is not None:
                        op.operands[idx] = st
            elif op.name == "scf.for":
                seen = visible()
                before = set(seen)
                pre: List[Op] = []
                moved = entry_values(plan, op) if _needs_staging(plan, op, seen) else []
                i = block.ops.index(op)
                stage_invariants(plan, axis, op, pre, seen)
                scopes[-1].update({k: v for k, v in seen.items() if k not in before})
                block.ops[i:i] = moved + pre
                for o in moved + pre:
                    o.block = block
                i += len(moved) + len(pre)
            for r in op.regions:
                visit(r)
            i += 1
        scopes.pop()

    visit(fn.body)
    if any(o.attrs.get("a_regs") for o in fn.walk() if o.name == "dot"):
        # the A fragments held across the loop cost registers (16 a thread for a 64x64 fp16 tile a warpgroup) that
        # can cost a program an SM: the assembler is asked for the next occupancy step's ceiling where nothing spills
        fn.attrs["registers"] = "occupancy_step"
    return fn


def _needs_staging(plan, loop: Op, seen: Dict[tuple, Value]) -> bool:
    """Whether :func:`stage_invariants` will make a new copy for ``loop`` (the inits move only then)."""
    body = loop.regions[0]
    inner = {r.id for o in body.ops for t in o.walk() for r in t.results} | {a.id for a in body.args}
    return any(tensor_core_dot(plan, o) and (o.operands[idx].id, idx) not in seen and _stageable(o.operands[idx], inner)
               and not (idx == 0 and not _stages_for_pins(plan, loop) and a_in_registers(plan, o, o.operands[idx]))
               for o in body.ops for idx in (0, 1))
