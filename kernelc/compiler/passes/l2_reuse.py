"""Loads whose addresses recur in other programs, a fixed number of programs apart: an L2 ``evict_last`` policy
(``KERNELC_L2_REUSE``).

A load whose address depends on ``program_id`` only through a remainder (``pid % n``) reads what program
``pid + n`` reads again. rope (one program per token, ``pos = pid % seq_len``) reads a cos/sin row that the next
batch's program of the same position reads ``seq_len`` programs later; between the two, those programs stream
their q rows through L2 (64 MB at 4x4096x32x128 bf16: more than the L2 holds), so the row is read from DRAM once
per batch. Under ``evict_last`` the rows stay in L2 (``ld.global.L2::cache_hint`` with the policy
``createpolicy.fractional.L2::evict_last`` makes, passed as a constant: codegen/memory.py). A load whose address does not depend on the program at all is read by every program
in turn and stays in L2 anyway: it is left as written, as is one the kernel writes to elsewhere or inside a loop
(the analysis does not follow loop-carried values).

Example: ``%19 = load %17, %12, %18`` with ``%17`` built from ``srem (cast program_id), %seq_len`` ->
``%19 = load %17, %12, %18 {l2='evict_last'}``.
"""
from __future__ import annotations

from typing import Dict

from ..ir.core import Block, Function, Value

_NONE, _PERIODIC, _UNIQUE = 0, 1, 2
_LOOPS = ("scf.for", "scf.while")


def _kind(v: Value, memo: Dict[int, int]) -> int:
    """How ``v`` depends on the program id: not at all, only through a remainder, or otherwise."""
    if v.id in memo:
        return memo[v.id]
    op = v.owner
    if isinstance(op, Block) or op is None:
        # a function argument, or a loop's block argument (not followed): the latter counts as unique
        k = _NONE if isinstance(op, Block) and op.parent is None else _UNIQUE
    elif op.name == "program_id":
        k = _UNIQUE
    else:
        ks = [_kind(o, memo) for o in op.operands]
        k = max(ks, default=_NONE)
        if op.name in ("srem", "urem") and ks[0] != _NONE and ks[1] == _NONE:
            k = _PERIODIC
    memo[v.id] = k
    return k


def mark_l2_reuse(fn: Function, mode: str = "off") -> Function:
    """Give each load whose address depends on the program id only through a remainder the L2 policy ``mode``
    (``evict_last``); ``off``: none. Mutates ``fn``."""
    if mode == "off":
        return fn
    in_loop = {id(o) for lp in fn.walk() if lp.name in _LOOPS for o in lp.walk() if o is not lp}
    stored = {id(op.operands[0]) for op in fn.walk() if op.name in ("store", "atomic_rmw", "atomic_cas")}
    memo: Dict[int, int] = {}
    for op in fn.walk():
        if op.name != "load" or id(op) in in_loop or id(op.operands[0]) in stored:
            continue
        if op.attrs.get("eviction") or op.attrs.get("cache"):   # the kernel's own hint wins
            continue
        if _kind(op.operands[0], memo) == _PERIODIC:
            op.attrs["l2"] = mode
    return fn
