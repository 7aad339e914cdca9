"""``prefetch``: ask for the cache lines at a tile of pointers to be brought into L1 (or L2) ahead of a load.

``kl.prefetch(pointer, mask=None, level="L1")`` returns nothing and waits for nothing: the loads that later read
those lines hit the cache instead of waiting on the level below. Used where a register prefetch (a load a loop trip
ahead) would cost registers a kernel does not have (tried on the attention backward's dK/dV loop at head dim 128:
docs/attention.md, "att21"). One pointer per 128-byte line is enough; a masked-off element issues nothing. PTX ``prefetch.global.L1`` / ``.L2``; the interpreter ignores it.
"""
from __future__ import annotations

from . import semantic
from .core import _unwrap, current_builder

PREFETCH_LEVELS = ("L1", "L2")


def prefetch(pointer, mask=None, level="L1") -> None:
    """Prefetch the lines at ``pointer`` (a pointer or a tile of them; ``mask`` the elements to prefetch) into
    ``level`` ("L1", "L2")."""
    level = _unwrap(level)
    if level not in PREFETCH_LEVELS:
        raise ValueError(f"prefetch() level must be one of {PREFETCH_LEVELS}, got {level!r}")
    ptr = semantic._pointer_operand(pointer, "prefetch")
    shape = tuple(ptr.shape)
    mask = _unwrap(mask)
    operands = [ptr]
    if mask is not None:
        mask = semantic._to_bool(mask)
        if mask.type.is_block():
            shape = semantic.broadcast_shapes(shape, mask.shape)
        if shape:
            operands = [semantic.broadcast_to(ptr, shape), semantic.broadcast_to(mask, shape)]
        else:
            operands = [ptr, mask]
    current_builder().create("prefetch", [o.handle for o in operands], None, level=level)
    return None
