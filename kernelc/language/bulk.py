"""``bulk_add``: a 2-D tile added into one contiguous block of global memory by a single bulk copy.

``kl.bulk_add(pointer, value)`` adds the ``[R, C]`` tile ``value`` into the ``R * C`` elements at ``pointer``
(a scalar pointer), element ``(r, c)`` into ``pointer + staging_offsets(R, C, dtype)[r, c]``: the *staging
order*, the layout the compiler stages a tile in shared memory for the copy engine (``dot.SmemOperand``:
panels of at most 128 bytes of columns, each row's 16-byte chunks XOR-swizzled by the row). On sm_90a the
tile is written to shared memory in that order (no bank conflicts for an MMA fragment) and one thread adds
the whole block with a 1-D bulk reduction (``cp.reduce.async.bulk.global.shared::cta.bulk_group.add``),
FlashAttention-3's dQ accumulation; elsewhere (and in the interpreter) it is relaxed element atomics at the
same addresses. Only atomicity per element is promised, as for ``atomic_add``.

A consumer of the block (a postprocess kernel) reads it back in tile order with the same
``staging_offsets``. ``R`` and ``C`` are powers of two; the block is ``R * C * itemsize`` bytes, a multiple
of 16; the bulk path also needs ``pointer`` 16-byte aligned (proven by the compiler, else the atomics).
"""
from __future__ import annotations

from . import dtypes as T
from . import semantic
from .core import _unwrap, current_builder, tensor

# element types the 1-D bulk reduction adds (PTX ``.add.f32``); fp16/bf16 would need ``.noftz``
BULK_ADD_TYPES = ("fp32",)


def _pow2(n: int, what: str) -> int:
    n = int(_unwrap(n))
    if n < 1 or n & (n - 1):
        raise ValueError(f"{what} must be a power of two, got {n}")
    return n


def staging_geometry(rows: int, cols: int, ebytes: int):
    """(panel_cols, chunk, per_phase, max_phase) of the staging order: ``dot.SmemOperand``'s, so the shared
    buffer the compiler writes is the global block byte for byte."""
    pc = min(cols, max(1, 128 // ebytes))
    chunk = max(1, 16 // ebytes)
    row_bytes = pc * ebytes
    per_phase = max(1, 128 // row_bytes)
    max_phase = min(max(1, row_bytes // 16), 8)
    return pc, chunk, per_phase, max_phase


def staging_offset_of(r: int, c: int, rows: int, cols: int, ebytes: int) -> int:
    """The staging offset (elements) of element (r, c), in Python (tests, host code)."""
    pc, chunk, per_phase, max_phase = staging_geometry(rows, cols, ebytes)
    panel, cc = divmod(c, pc)
    if max_phase > 1:
        cc = (((cc // chunk) ^ ((r // per_phase) % max_phase)) * chunk) + cc % chunk
    return panel * rows * pc + r * pc + cc


def _log2(n: int) -> int:
    return n.bit_length() - 1


def staging_offsets(rows, cols, dtype) -> tensor:
    """int32 ``[rows, cols]`` tile of the staging offsets (in elements of ``dtype``) of a tile's elements."""
    R, C = _pow2(rows, "staging_offsets() rows"), _pow2(cols, "staging_offsets() cols")
    dtype = _unwrap(dtype)
    eb = dtype.primitive_bitwidth // 8
    pc, chunk, per_phase, max_phase = staging_geometry(R, C, eb)
    r = semantic.expand_dims(semantic.arange(0, R), 1)
    c = semantic.expand_dims(semantic.arange(0, C), 0)
    cc = semantic.and_(c, pc - 1) if C > pc else c
    if max_phase > 1:
        ph = semantic.and_(semantic.shr(r, _log2(per_phase)) if per_phase > 1 else r, max_phase - 1)
        sw = semantic.xor_(semantic.shr(cc, _log2(chunk)), ph)
        cc = semantic.or_(semantic.shl(sw, _log2(chunk)), semantic.and_(cc, chunk - 1))
    off = semantic.add(semantic.shl(r, _log2(pc)), cc)
    if C > pc:
        off = semantic.add(off, semantic.mul(semantic.shr(c, _log2(pc)), R * pc))
    # runs of `run` consecutive offsets along a row, each starting at a multiple of `run` (16-byte chunks move
    # whole): said to the compiler, which cannot see it through the XOR, so loads at these offsets stay vectors
    run = chunk if max_phase > 1 else pc
    off = semantic.hint(off, "max_contiguous", [1, run])
    return semantic.hint(off, "multiple_of", [1, run])


def _check(pointer, value, what):
    pointer = semantic.to_tensor(pointer)
    value = semantic.to_tensor(value)
    if pointer.shape or not pointer.dtype.is_ptr():
        raise TypeError(f"{what} takes a scalar pointer, got {pointer.type}")
    elt = pointer.dtype.element_ty
    if elt.name not in BULK_ADD_TYPES:
        raise TypeError(f"{what} adds into fp32 memory, got a pointer to {elt}")
    if len(value.shape) != 2:
        raise ValueError(f"{what} takes a 2-D tile, got shape {list(value.shape)}")
    R, C = (_pow2(s, f"{what} tile dims") for s in value.shape)
    if (R * C * elt.itemsize) % 16:
        raise ValueError(f"{what}: the block must be a multiple of 16 bytes, got {R * C * elt.itemsize}")
    if value.dtype != elt:
        value = semantic.cast(value, elt)
    return pointer, value


# eviction_policy -> the L2 policy the bulk reduction carries (``createpolicy`` + ``.L2::cache_hint``); "" none
L2_POLICIES = {"": "", "evict_normal": "", "evict_first": "evict_first", "evict_last": "evict_last"}


def bulk_add(pointer, value, eviction_policy="") -> None:
    """Add ``value`` ([R, C]) into the ``R * C`` elements at ``pointer`` in the staging order (module doc).
    ``eviction_policy`` ("evict_last", "evict_first"): an L2 cache hint on the bulk reduction (FlashAttention-3
    keeps its dQ accumulator in L2 with evict_last); the atomics fallback ignores it."""
    pointer, value = _check(pointer, value, "bulk_add()")
    policy = _unwrap(eviction_policy) or ""
    if policy not in L2_POLICIES:
        raise ValueError(f"bulk_add() eviction_policy must be one of {[p for p in L2_POLICIES if p]}, got {policy!r}")
    policy = L2_POLICIES[policy]
    b = current_builder()
    attrs = dict(l2=policy) if policy else {}
    b.create("bulk_add", [pointer.handle, value.handle], None, kind="add", **attrs)
    return None


def generic_bulk_add(pointer: tensor, value: tensor, kind: str = "add") -> None:
    """``bulk_add`` as relaxed element atomics at the staging offsets (compiler fallback and interpreter)."""
    R, C = value.shape
    offs = staging_offsets(R, C, value.dtype)
    semantic.atomic_rmw(kind, semantic.add(pointer, offs), value, None, sem="relaxed")
