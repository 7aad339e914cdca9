"""Say in which order the kernel's pure instructions reach the assembler: ``fn.attrs["instruction_order"]``.

Code generation lowers a tile op over all of a thread's elements before the next op, and ptxas schedules from
the order it is given: a streaming kernel then waits on all of a load's elements before its first result, and
keeps fewer loads in flight than the same arithmetic written element by element (geglu's backward row: 2.7
against 4.3 a thread, Triton's PTX of the same source 4.3 under the same ptxas; docs/performance.md,
"Instruction order"). ``consumers`` asks the back end to put each pure instruction just before its first user,
depth first from the stores (``backend/consumer_order.py``); code generation writes it into the LLVM function.

Only kernels made of elementwise chains between their loads and stores are marked (``KERNELC_CONSUMER_ORDER=
elementwise``): on an H100 it took geglu bwd from 0.985 to 1.015 of Triton, but a layer-norm row (two reductions)
lost 5.5% and a permute (a layout conversion) 1.3%, where the fill policy then picked other builds.

Nor is a chain with a loaded row broadcast over the tile (rope's cos/sin over the heads): each store's cone then
needs all of a thread's loads of that row, so consumer order starts no chain earlier, and ptxas put every one of
rope's loads before the first use (56 registers); in op order it issues half of the q loads after the first results
(48 registers, Triton's schedule). On an H200 that was 0.968 against 1.006 of Triton (control 1.006), geglu bwd
1.051 in consumer order and 1.024 in op order (docs/performance.md, "rope: what in kernelc's PTX costs 3%").
"""
from __future__ import annotations

from ..ir.core import Function
from ..ir.ops import OPS

# categories of ops that keep a kernel a chain of elementwise work between its loads and stores
_CHAIN = frozenset(("float", "math", "int", "compare", "select", "cast", "pointer", "hint", "create", "grid",
                    "extern", "control", "debug"))
_CHAIN_SHAPE = frozenset(("splat", "broadcast", "expand_dims", "reshape"))   # register-only shape ops
_CHAIN_MEMORY = frozenset(("load", "store"))


def is_elementwise_chain(fn: Function) -> bool:
    """Whether every op of ``fn`` is elementwise arithmetic, a plain load/store, or a register-only shape op (no
    dot, reduction, scan, sort, layout conversion, atomic, descriptor, ring or barrier)."""
    for op in fn.walk():
        d = OPS.get(op.name)
        if d is None:
            return False
        if not (d.category in _CHAIN or op.name in _CHAIN_SHAPE or op.name in _CHAIN_MEMORY):
            return False
    return True


# what a loaded value may pass through on its way to a broadcast and still be the load's elements (one per element)
_SAME_ELEMENTS = frozenset(("expand_dims", "reshape", "cast", "bitcast", "hint"))


def broadcast_loads(fn: Function) -> list:
    """The loads whose tile is broadcast into a larger one (a cos/sin, scale or bias row applied to every row of a
    tile): every store's cone then needs all of a thread's elements of that load."""
    out = []
    for op in fn.walk():
        if op.name != "broadcast":
            continue
        v = op.operands[0]
        while v.op is not None and v.op.name in _SAME_ELEMENTS:
            v = v.op.operands[0]
        if v.op is not None and v.op.name == "load" and v.op not in out:
            out.append(v.op)
    return out


def mark_instruction_order(fn: Function, mode: str = "elementwise") -> Function:
    """Set ``instruction_order="consumers"`` on ``fn`` when ``mode`` is ``elementwise``, :func:`is_elementwise_chain`
    and no load is broadcast (:func:`broadcast_loads`); else remove it. Mutates ``fn``."""
    if mode == "elementwise" and is_elementwise_chain(fn) and not broadcast_loads(fn):
        fn.attrs["instruction_order"] = "consumers"
    else:
        fn.attrs.pop("instruction_order", None)
    return fn
