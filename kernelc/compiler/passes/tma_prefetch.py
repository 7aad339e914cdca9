"""``issue_tma_loads_early``: a TMA tile loaded outside any loop and read in place by dots
(``descriptor_load {tma, in_place}``: attention's Q and first K block, a last V block) has its copy issued
as early as its offsets allow and is waited for where it is first read, so the copy runs under the work in
between -- and under the copies of other such tiles. Codegen lowers an unrewritten load as issue-and-wait on
the spot: attention's Q and first K block arrived one after the other, each a full TMA round trip
(docs/attention.md, "fp8 and head dim 64: what bounds a key block").

For each such load in the function's top-level block the pass writes, with the ops of ``passes/rings.py``:

    at the issue point, just after the last op the copy must follow (a definition of an operand, an op
    that is not pure: a store, a loop, a barrier, the producer warp's region, ...):
        %r = tma_ring_alloc %desc {stages=1, operand, transposed} : the tile the dots read
        %bars = mbarrier_alloc {count=1}; %t0 = elect_one; barrier; mbarrier_init (1 arrival) by %t0;
        fence_mbarrier_init; barrier; mbarrier_expect_tx {bytes}; tma_copy_to_ring %r, 0, %bar, %t0, offsets
    at the wait point, just before the first op that reads the tile (or writes memory):
        mbarrier_wait %bar, 0; %t = ring_read %r, 0        (replaces the load and its in-place trans)

which is the sequence ``lower_descriptor_load`` emits for one load, split in two. A load is rewritten only
when something runs while its copy is in flight: a dot, a loop, or another such copy; else
nothing would overlap and the IR stays as it was. With ``KERNELC_TMA_EARLY_RINGS`` a loop's ring prologue (the
``tma_copy_to_ring`` ops ``expand_tma_rings`` put before the loop) counts as such work: a tile first read in that
loop is issued before the prologue and waited for after it, so both round trips overlap. Tiles read into
registers (not in place) and loads in loops or branches are left alone. ``KERNELC_TMA_EARLY_ISSUE=0`` turns the
pass off.
"""
from __future__ import annotations

from typing import Dict, List

from ...language.dtypes import int1, int32, int64
from ..ir.core import Op, Value, replace_all_uses
from ..ir.ops import OPS
from .schedule_ir import function_uses, in_place_readers

_WRITES = frozenset({"store", "atomic_rmw", "atomic_cas", "descriptor_store", "inline_asm", "print", "assert"})
_WORTH = frozenset({"dot", "scf.for", "scf.while"})


def _writes_memory(op: Op) -> bool:
    return any(o.name in _WRITES for o in op.walk())


def _may_issue_after(op: Op) -> bool:
    """Whether a copy may be issued before ``op`` (moved up past it): pure ops without regions only."""
    d = OPS.get(op.name)
    return d is not None and d.pure and not op.regions


class _Plan:
    def __init__(self, ld: Op, via, view: Value, is_a: bool, issue: int, wait: int):
        self.ld, self.via, self.view, self.is_a = ld, via, view, is_a
        self.issue, self.wait = issue, wait


def _reads(op: Op, vals) -> bool:
    ids = {v.id for v in vals}
    return any(o.id in ids for top in op.walk() for o in top.operands)


def issue_tma_loads_early(fn, ctx) -> object:
    from ...options import get
    if not get("KERNELC_TMA_EARLY_ISSUE"):
        return fn
    ops = fn.body.ops
    pos = {id(o): i for i, o in enumerate(ops)}
    uses = function_uses(fn)
    plans: List[_Plan] = []
    for i, ld in enumerate(ops):
        if ld.name != "descriptor_load" or not (ld.attrs.get("tma") and ld.attrs.get("in_place")):
            continue
        readers = in_place_readers(uses, ld.results[0])
        if not readers or any(r.name != "dot" for r, _, _ in readers):
            continue
        roles = {(idx == 0, via is not None) for _, idx, via in readers}
        vias = {id(via): via for _, _, via in readers if via is not None}
        if len(roles) != 1 or len(vias) > 1:
            continue  # read as A and B, or through two views: leave it to the codegen's per-reader binding
        (is_a, _), = roles
        via = next(iter(vias.values()), None)
        if via is not None and (id(via) not in pos or pos[id(via)] < i):
            continue
        view = via.results[0] if via is not None else ld.results[0]
        defs = {v.id for v in ld.operands}
        issue = 0
        for j in range(i - 1, -1, -1):
            o = ops[j]
            if any(r.id in defs for r in o.results) or not _may_issue_after(o):
                issue = j + 1
                break
        wait = len(ops)
        for j in range(i + 1, len(ops)):
            o = ops[j]
            if o is via:
                continue
            if _reads(o, [ld.results[0], view]) or _writes_memory(o):
                wait = j
                break
        plans.append(_Plan(ld, via, view, is_a, issue, wait))
    # worth it: a dot or loop runs while the copy is in flight, or another such copy is in flight with it (with
    # KERNELC_TMA_EARLY_RINGS, a ring prologue's copy too)
    rings = get("KERNELC_TMA_EARLY_RINGS")

    def worth(op: Op) -> bool:
        return op.name in _WORTH or (rings and any(o.name == "tma_copy_to_ring" for o in op.walk()))
    plans = [p for p in plans
             if any(worth(ops[j]) for j in range(p.issue, p.wait))
             or any(q is not p and p.issue < q.wait and q.issue < p.wait for q in plans)]
    if not plans:
        return fn
    plan = getattr(ctx, "plan", None)
    axis = getattr(ctx, "axis", None)

    def like(new: Value, old: Value) -> None:
        if plan is not None and plan.layouts.get(old.id) is not None:
            plan.layouts[new.id] = plan.layouts[old.id]
        if axis is not None and axis.info.get(old.id) is not None:
            axis.info[new.id] = axis.info[old.id]

    before: Dict[int, List[Op]] = {}  # op index -> ops inserted before it (len(ops): at the end)
    removed = set()
    for p in plans:
        ld = p.ld
        loc = ld.loc
        out = before.setdefault(p.issue, [])

        def op(name, operands, types, attrs=None, out=out):
            o = Op(name, operands, types, attrs or {}, loc=loc)
            out.append(o)
            return o

        ring = op("tma_ring_alloc", [ld.operands[0]], [p.view.type],
                  {"stages": 1, "operand": "a" if p.is_a else "b", "transposed": p.via is not None}).results[0]
        like(ring, p.view)
        bars = op("mbarrier_alloc", [], [int64], {"count": 1}).results[0]
        zero = op("constant", [], [int32], {"value": 0}).results[0]
        bar = op("mbarrier_at", [bars, zero], [int32]).results[0]
        t0 = op("elect_one", [], [int1]).results[0]
        op("barrier", [], [])  # earlier readers of reused shared memory are done
        op("mbarrier_init", [bar, t0], [], {"count": 1})
        op("fence_mbarrier_init", [], [])
        op("barrier", [], [])
        ty = ld.operands[0].type
        nbytes = ty.element_ty.itemsize
        for d in ty.block_shape:
            nbytes *= d
        op("mbarrier_expect_tx", [bar, t0], [], {"bytes": nbytes})
        op("tma_copy_to_ring", [ring, zero, bar, t0] + list(ld.operands[1:]), [], {"source": str(loc)})
        w = before.setdefault(p.wait, [])
        op("mbarrier_wait", [bar, zero], [], out=w)
        t = op("ring_read", [ring, zero], [p.view.type], {"source": str(loc)}, out=w).results[0]
        like(t, p.view)
        replace_all_uses(fn.body, p.view, t)
        removed.add(id(ld))
        if p.via is not None:
            removed.add(id(p.via))
    new_ops: List[Op] = []
    for j, o in enumerate(ops + [None]):
        for ins in before.get(j, []):
            ins.block = fn.body
            new_ops.append(ins)
        if o is not None and id(o) not in removed:
            new_ops.append(o)
    fn.body.ops = new_ops
    return fn
