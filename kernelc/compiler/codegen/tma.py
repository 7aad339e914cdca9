"""Hopper's tensor memory accelerator (TMA, ``cp.async.bulk.tensor``) and mbarriers: geometry and PTX.

A tensor-descriptor tile lands in shared memory in exactly the layout ``dot.SmemOperand`` describes
([panel][row][<=128 B], 16-byte chunks XOR-swizzled by the row), so wgmma/ldmatrix read it as they
read a cp.async-filled operand. TMA writes that layout by itself: a box whose inner extent is one
panel (at most 128 bytes, the swizzle span) and whose 128B/64B/32B swizzle is the SmemOperand XOR,
provided every box starts on the swizzle's repeat (1024/512/256 bytes; 8 rows): ``TmaBox`` (a
target rule: compiler/target_rules.py, re-exported here) works out the boxes of a block and where each
lands; ``box_smem`` is its SmemOperand view. The host encodes the CUtensorMap from the same
``TmaBox`` (runtime/tensor_map.py), so the compiler and the map always agree.

The helpers below emit the PTX; the copy engine is driven from one elected thread (``elected``) and
completes on an mbarrier (``complete_tx::bytes``) that every thread waits on by phase parity.
Without a GPU they are checked down to SASS: UTMALDG / UTMASTG (copies), SYNCS.EXCH.64 (init),
SYNCS.ARRIVE.TRANS64 (arrive.expect_tx), SYNCS.PHASECHK.TRANS64.TRYWAIT (wait), UTMACCTL.PF
(prefetch.tensormap), UTMACMDFLUSH (commit), SYNCS.CCTL.IV (inval), UTMAREDG (bulk tensor reduction).
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

from ..target_rules import (MAX_BOX_DIM, MAX_RANK, NAN_FILL_TYPES, SWIZZLE_SPAN, TMA_ELEMENT_BYTES,  # noqa: F401
                            TmaBox, arch_has_tma, tma_box, tma_enabled, tma_type_ok)
from .dot import SmemOperand

MBARRIER_BYTES = 8


def box_smem(box: TmaBox, base) -> SmemOperand:
    """The SmemOperand view of ``box``'s tile at ``base`` (1024-byte aligned), swizzled iff TMA swizzles."""
    sm = SmemOperand(base, box.rows, box.cols, box.ebytes)
    assert sm.row_bytes == box.row_bytes
    if box.swizzle == 0:
        sm.max_phase = 1  # TMA writes rows unswizzled: read them back the same way
    else:
        assert sm.swizzle_bytes == box.swizzle
    return sm


# -- PTX emission --------------------------------------------------------------------------------


def smem_addr(lw, off) -> str:
    """The 32-bit shared::cta address of byte ``off`` of the dynamic shared memory."""
    e = lw.e
    lw.smem_base()
    p = e.val(f"getelementptr i8, ptr addrspace(3) @global_smem, i32 {off}")
    return e.val(f"ptrtoint ptr addrspace(3) {p} to i32")


def elected(lw, warp: int = 0) -> str:
    """True in the one thread that drives the copy engine: the lane ``elect.sync`` picks in warp ``warp``
    (a warp-specialised kernel's producer warp runs its region whole, ``codegen/warp_specialize.py``).

    ``tid == 0`` names the same thread, but ptxas cannot tell that at most one lane of a warp holds it, so
    it wrapped every copy (whose operands must be warp-uniform registers) and every predicated barrier
    init in an ELECT loop or a divergent branch; with the predicate from ``elect.sync`` it issues the copy
    under a uniform predicate, as for Triton (docs/triton-tutorials.md, "06 forward kernel: branches").
    Every caller runs with warp 0 converged (the ops are not under thread-dependent branches), and over a
    full warp the election is a function of the active mask alone, so each call elects the same lane:
    bulk groups committed under one call are waited for under another."""
    if lw.fn.attrs.get("elect") == "tid":   # passes/elect_form.py (KERNELC_TMA_ELECT=tid)
        return lw.e.val(f"icmp eq i32 {lw.tid}, {warp * 32}")
    e = lw.e
    pair = e.call("{ i32, i1 }", "llvm.nvvm.elect.sync", [("i32", "-1")])
    leader = e.val(f"extractvalue {{ i32, i1 }} {pair}, 1")
    return e.val(f"and i1 {e.val(f'icmp eq i32 {lw.warp}, {warp}')}, {leader}")


def _pred(lw, pred: Optional[str]) -> str:
    return pred if pred is not None else "true"


def mbarrier_init(lw, bar: str, count: int, pred: Optional[str]) -> None:
    lw.e.asm("void", f"@$0 mbarrier.init.shared::cta.b64 [$1], {count};", "b,r",
             [("i1", _pred(lw, pred)), ("i32", bar)])


def fence_mbarrier_init(lw) -> None:
    """Make initialised barriers visible to the async proxy (the copy engine's complete_tx)."""
    lw.e.asm("void", "fence.mbarrier_init.release.cluster;", "", [])


def mbarrier_inval(lw, bar: str, pred: Optional[str]) -> None:
    lw.e.asm("void", "@$0 mbarrier.inval.shared::cta.b64 [$1];", "b,r", [("i1", _pred(lw, pred)), ("i32", bar)])


def mbarrier_expect_tx(lw, bar: str, nbytes: int, pred: Optional[str]) -> None:
    """Arrive once and announce ``nbytes`` of copies that will complete on ``bar``."""
    lw.e.asm("void", f"@$0 mbarrier.arrive.expect_tx.shared::cta.b64 _, [$1], {nbytes};", "b,r",
             [("i1", _pred(lw, pred)), ("i32", bar)])


def mbarrier_arrive(lw, bar: str, pred: Optional[str]) -> None:
    """Arrive once (no transaction bytes): a consumer is done with what the barrier guards."""
    lw.e.asm("void", "@$0 mbarrier.arrive.shared::cta.b64 _, [$1];", "b,r", [("i1", _pred(lw, pred)), ("i32", bar)])


def mbarrier_wait(lw, bar: str, parity: str) -> None:
    """Wait until the phase with ``parity`` (0/1, i32) of ``bar`` has completed. The labels are local
    to the braces, so the asm may be duplicated (unrolled) freely."""
    lw.e.asm("void", "{ .reg .pred p; kc_wait: mbarrier.try_wait.parity.shared::cta.b64 p, [$0], $1; "
                     "@!p bra kc_wait; }", "r,r", [("i32", bar), ("i32", parity)])


def tensormap_address(lw, param: str) -> str:
    """Generic address (i64) of a by-value CUtensorMap kernel parameter (``cvta.param``)."""
    return lw.e.val(f"ptrtoint ptr %{param} to i64")


def prefetch_tensormap(lw, tmap: str, pred: Optional[str] = None) -> None:
    lw.e.asm("void", "@$0 prefetch.tensormap [$1];", "b,l", [("i1", _pred(lw, pred)), ("i64", tmap)])


def _coords(coords: Sequence[str], first: int) -> str:
    return "{" + ", ".join(f"${first + i}" for i in range(len(coords))) + "}"


def tma_load(lw, tmap: str, dst: str, bar: str, coords: Sequence[str], pred: Optional[str]) -> None:
    """One box global -> shared at ``dst`` (i32 shared address); ``coords`` innermost first (i32)."""
    n = len(coords)
    code = (f"@$0 cp.async.bulk.tensor.{n}d.shared::cluster.global.mbarrier::complete_tx::bytes "
            f"[$1], [$2, {_coords(coords, 4)}], [$3];")
    args = [("i1", _pred(lw, pred)), ("i32", dst), ("i64", tmap), ("i32", bar)] + [("i32", c) for c in coords]
    lw.e.asm("void", code, ",".join(["b", "r", "l", "r"] + ["r"] * n), args)


def tma_store(lw, tmap: str, src: str, coords: Sequence[str], pred: Optional[str]) -> None:
    """One box shared (``src``) -> global; out-of-bounds elements of the box are not written."""
    n = len(coords)
    code = f"@$0 cp.async.bulk.tensor.{n}d.global.shared::cta.bulk_group [$1, {_coords(coords, 3)}], [$2];"
    args = [("i1", _pred(lw, pred)), ("i64", tmap), ("i32", src)] + [("i32", c) for c in coords]
    lw.e.asm("void", code, ",".join(["b", "l", "r"] + ["r"] * n), args)


def tma_reduce(lw, tmap: str, src: str, coords: Sequence[str], kind: str, pred: Optional[str]) -> None:
    """One box shared (``src``) added (``kind``) into global memory by the copy engine, element by element;
    out-of-bounds elements of the box are not touched. The element type is the map's."""
    n = len(coords)
    code = (f"@$0 cp.reduce.async.bulk.tensor.{n}d.global.shared::cta.{kind}.tile.bulk_group "
            f"[$1, {_coords(coords, 3)}], [$2];")
    args = [("i1", _pred(lw, pred)), ("i64", tmap), ("i32", src)] + [("i32", c) for c in coords]
    lw.e.asm("void", code, ",".join(["b", "l", "r"] + ["r"] * n), args)


def bulk_reduce_1d(lw, dst: str, src: str, nbytes: int, kind: str, pred: Optional[str],
                   l2: Optional[str] = None) -> None:
    """``nbytes`` of fp32 at shared ``src`` (i32) added (``kind``) into global memory at the pointer ``dst`` by
    the copy engine (``cp.reduce.async.bulk``, no tensor map; both 16-byte aligned, ``nbytes`` a multiple of
    16); part of this thread's bulk group. ``l2`` ('evict_last', 'evict_first'): an L2 cache policy made by
    ``createpolicy`` and carried by ``.L2::cache_hint``."""
    args = [("i1", _pred(lw, pred)), ("ptr addrspace(1)", dst), ("i32", src)]
    if not l2:
        code = f"@$0 cp.reduce.async.bulk.global.shared::cta.bulk_group.{kind}.f32 [$1], [$2], {nbytes};"
        lw.e.asm("void", code, "b,l,r", args)
        return
    code = (f"{{ .reg .b64 pol; createpolicy.fractional.L2::{l2}.b64 pol, 1.0; "
            f"@$0 cp.reduce.async.bulk.global.shared::cta.bulk_group.L2::cache_hint.{kind}.f32 [$1], [$2], {nbytes}, "
            f"pol; }}")
    lw.e.asm("void", code, "b,l,r", args)


def bulk_wait(lw, pending: int, pred: Optional[str]) -> None:
    """Wait until at most ``pending`` bulk groups are still in flight (their writes done, not only their reads)."""
    lw.e.asm("void", f"@$0 cp.async.bulk.wait_group {pending};", "b", [("i1", _pred(lw, pred))])


def _maybe_pred(lw, code: str, pred: Optional[str]) -> None:
    if pred is None:  # every thread: one without bulk copies commits an empty group and does not wait
        lw.e.asm("void", code, "", [])
    else:
        lw.e.asm("void", "@$0 " + code, "b", [("i1", pred)])


def bulk_commit(lw, pred: Optional[str]) -> None:
    _maybe_pred(lw, "cp.async.bulk.commit_group;", pred)


def bulk_wait_read(lw, pending: int, pred: Optional[str]) -> None:
    """Wait until at most ``pending`` bulk groups still read their shared-memory source."""
    _maybe_pred(lw, f"cp.async.bulk.wait_group.read {pending};", pred)


def fence_proxy_async(lw) -> None:
    """Order this thread's generic-proxy shared-memory writes before async-proxy reads (TMA store, wgmma)."""
    lw.e.asm("void", "fence.proxy.async.shared::cta;", "", [])


def copy_tile_in(lw, box: TmaBox, tmap: str, base, bar: str, offsets: Sequence[str], pred: Optional[str]) -> None:
    """Issue every box of a tile whose element ``offsets`` (outermost first, i32) land at smem byte
    offset ``base``; completes on ``bar`` (the caller announced ``box.nbytes``)."""
    e = lw.e
    for delta, off in box.boxes():
        coords = [o if d == 0 else e.val(f"add i32 {o}, {d}") for o, d in zip(offsets, delta)]
        dst = smem_addr(lw, base if off == 0 else e.val(f"add i32 {base}, {off}"))
        tma_load(lw, tmap, dst, bar, list(reversed(coords)), pred)


def reduce_tile_out(lw, box: TmaBox, tmap: str, base, offsets: Sequence[str], kind: str,
                    pred: Optional[str]) -> None:
    """``copy_tile_out`` as a reduction: every box of the tile at ``base`` added into the tensor."""
    e = lw.e
    for delta, off in box.boxes():
        coords = [o if d == 0 else e.val(f"add i32 {o}, {d}") for o, d in zip(offsets, delta)]
        src = smem_addr(lw, base if off == 0 else e.val(f"add i32 {base}, {off}"))
        tma_reduce(lw, tmap, src, list(reversed(coords)), kind, pred)


def copy_tile_out(lw, box: TmaBox, tmap: str, base, offsets: Sequence[str], pred: Optional[str]) -> None:
    e = lw.e
    for delta, off in box.boxes():
        coords = [o if d == 0 else e.val(f"add i32 {o}, {d}") for o, d in zip(offsets, delta)]
        src = smem_addr(lw, base if off == 0 else e.val(f"add i32 {base}, {off}"))
        tma_store(lw, tmap, src, list(reversed(coords)), pred)


class BarrierPool:
    """mbarriers (8 bytes each) carved out of 1024-byte persistent shared-memory blocks."""

    PER_BLOCK = 1024 // MBARRIER_BYTES

    def __init__(self, lw):
        self.lw = lw
        self.block: Optional[str] = None
        self.used = 0

    @staticmethod
    def of(lw) -> "BarrierPool":
        pool = getattr(lw, "_mbarrier_pool", None)
        if pool is None:
            pool = lw._mbarrier_pool = BarrierPool(lw)
        return pool

    def take(self, n: int) -> Tuple[str, int]:
        """(persistent offset token, byte offset from it) of ``n`` consecutive barriers."""
        if self.block is None or self.used + n > self.PER_BLOCK:
            self.block = self.lw.persistent(max(n, self.PER_BLOCK) * MBARRIER_BYTES)
            self.used = 0
        off = self.used * MBARRIER_BYTES
        self.used += n
        return self.block, off

    def address(self, token: str, off: int, index="0") -> str:
        """Shared address (i32) of barrier ``index`` (i32 value or constant) of a group from ``take``."""
        e = self.lw.e
        if index in (0, "0"):
            rel = str(off)
        else:
            rel = e.val(f"add i32 {e.val(f'shl i32 {index}, 3')}, {off}") if off else e.val(f"shl i32 {index}, 3")
        return smem_addr(self.lw, e.val(f"add i32 {token}, {rel}"))
