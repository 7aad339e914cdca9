"""Which values of a kernel may differ between the programs of one cluster (``num_ctas``): a cluster's programs
are adjacent along grid axis 0, so they differ in ``program_id(0)`` and in what is computed from it; everything else
(arguments, ``program_id(1)``/``(2)``, ``num_programs``, loads of the same address) is the same in both. Atomics and
inline assembly count as differing (their results depend on the order programs run in, or are opaque).

Used by ``passes/multicast.py`` (a TMA ring's copies may be multicast only where both programs of a cluster make the
same copies in the same trips) and by the verifier (a multicast copy whose coordinates may differ is an error).
"""
from __future__ import annotations

from typing import Set

from .core import Block, Function, Op

_OPAQUE = ("atomic_rmw", "atomic_cas", "inline_asm")


def cluster_varying(fn: Function) -> Set[int]:
    """Ids of the values that may differ between the programs of a cluster along grid axis 0 (a fixpoint over
    loops: a carried value differs where its initial or its yielded value does)."""
    out: Set[int] = set()
    while True:
        n = len(out)
        _block(fn.body, out)
        if len(out) == n:
            return out


def _block(block: Block, out: Set[int]) -> None:
    for op in block.ops:
        _op(op, out)


def _taint(vals, out: Set[int]) -> None:
    for v in vals:
        out.add(v.id)


def _op(op: Op, out: Set[int]) -> None:
    varying = any(v.id in out for v in op.operands)
    if op.name == "program_id":
        if op.attrs.get("axis", 0) == 0:
            out.add(op.results[0].id)
        return
    if op.name in _OPAQUE:
        _taint(op.results, out)
        return
    if not op.regions:
        if varying:
            _taint(op.results, out)
        return
    if op.name == "scf.for":
        body = op.regions[0]
        lb, ub, step = op.operands[:3]
        inits = op.operands[3:]
        if any(v.id in out for v in (lb, ub, step)):
            # another trip count or other induction values: everything the loop makes differs
            _taint(body.args, out)
            _taint(op.results, out)
        for i, a in enumerate(body.args[1:]):
            if i < len(inits) and inits[i].id in out:
                out.add(a.id)
        _block(body, out)
        yld = body.ops[-1] if body.ops else None
        ys = yld.operands if yld is not None and yld.name == "scf.yield" else []
        for i, a in enumerate(body.args[1:]):
            if i < len(ys) and ys[i].id in out:
                out.add(a.id)
                if i < len(op.results):
                    out.add(op.results[i].id)
            if a.id in out and i < len(op.results):
                out.add(op.results[i].id)
        return
    # scf.if, scf.while and other region ops: a differing operand (the condition) makes every result and region
    # argument differ; otherwise a result differs where a yielded value does
    if varying:
        _taint(op.results, out)
        for r in op.regions:
            _taint(r.args, out)
    for r in op.regions:
        _block(r, out)
        term = r.ops[-1] if r.ops else None
        if term is not None and term.name in ("scf.yield", "scf.condition"):
            ys = term.operands[1:] if term.name == "scf.condition" else term.operands
            if term.name == "scf.condition" and term.operands and term.operands[0].id in out:
                _taint(op.results, out)
                for rr in op.regions:
                    _taint(rr.args, out)
            for i, y in enumerate(ys):
                if y.id in out and i < len(op.results):
                    out.add(op.results[i].id)
    if op.name == "scf.while":
        # the before region's arguments take the inits and the after region's yields
        before = op.regions[0]
        for i, a in enumerate(before.args):
            if i < len(op.operands) and op.operands[i].id in out:
                out.add(a.id)
        after = op.regions[1] if len(op.regions) > 1 else None
        if after is not None and after.ops and after.ops[-1].name == "scf.yield":
            for i, y in enumerate(after.ops[-1].operands):
                if y.id in out and i < len(before.args):
                    out.add(before.args[i].id)
        cond = before.ops[-1] if before.ops else None
        if cond is not None and cond.name == "scf.condition" and after is not None:
            for i, y in enumerate(cond.operands[1:]):
                if y.id in out and i < len(after.args):
                    out.add(after.args[i].id)


def enclosing_control_varies(op: Op, varying: Set[int]) -> bool:
    """Whether ``op`` runs under a loop or branch whose bounds or condition may differ within a cluster (then the
    two programs need not run it equally often)."""
    blk = op.block
    while blk is not None and blk.parent is not None:
        parent = blk.parent
        if parent.name == "scf.for":
            if any(v.id in varying for v in parent.operands[:3]):
                return True
        elif any(v.id in varying for v in parent.operands):
            return True
        if parent.name == "scf.while":
            before = parent.regions[0]
            cond = before.ops[-1] if before.ops else None
            if cond is not None and cond.operands and cond.operands[0].id in varying:
                return True
        blk = parent.block
    return False
