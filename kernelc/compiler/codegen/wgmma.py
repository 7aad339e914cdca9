"""``dot`` on Hopper warpgroup MMA (``wgmma.mma_async``, sm_90a).

Each warpgroup (4 consecutive warps) owns 64-row blocks of the accumulator, whose registers are
exactly the MMA layout with every warp along M (``mma_v2(shape, (num_warps, 1))``). Operands are
read straight from shared memory through 64-bit matrix descriptors: the buffers are the swizzled
SmemOperand panels (K-major, or MN-major with the transpose bit for 16-bit types), already filled
by the cp.async pipeline, by a one-off staging of a loop-invariant operand, or staged here. An A
operand that lives in the accumulator layout of a previous dot (attention's P) is fed from
registers. The issue sequence is fence -> mma_async per k step -> commit; the waits are `wgmma_wait` ops
(passes/wgmma_waits.py).

fp8 (e4m3 / e5m2, any pairing of the two) runs as ``m64nNk32``: the same 32 bytes of K per step as
the 16-bit types' k16. 8-bit operands have no transpose bit, so both must be K-major in shared memory;
the staging keeps them so (``dot.choose_trans`` transposes only 16-bit types), and a B loaded from a
column-major matrix (``b = b_nk.t()``, as ``torch._scaled_mm`` takes it) already is K-contiguous and
goes through the cp.async pipeline unchanged.
"""
from __future__ import annotations

from typing import List, Optional

from ..layouts import Layout
from ..target_rules import WGMMA_TYPES, wgmma_eligible  # noqa: F401
from .emitter import llty
from .lowering import Lowering, Tile, rule

SWIZZLE_MODE = {128: 1, 64: 2, 32: 3}  # descriptor bits 62-63


def fence_proxy_async(lw: Lowering) -> None:
    """Make generic-proxy writes to shared memory (st.shared, cp.async) visible to wgmma."""
    lw.e.asm("void", "fence.proxy.async.shared::cta;", "", [])


def _smem_addr(lw: Lowering, off: str) -> str:
    e = lw.e
    p = e.val(f"getelementptr i8, ptr addrspace(3) @global_smem, i32 {off}")
    return e.val(f"ptrtoint ptr addrspace(3) {p} to i32")


def _descriptor(lw: Lowering, addr: str, lbo: int, sbo: int, swizzle: int) -> str:
    e = lw.e
    shifted = e.val(f"lshr i32 {addr}, 4")
    lo = e.val(f"zext i32 {e.val(f'and i32 {shifted}, 16383')} to i64")
    hi = ((lbo >> 4) & 0x3FFF) << 16 | ((sbo >> 4) & 0x3FFF) << 32 | SWIZZLE_MODE.get(swizzle, 0) << 62
    if hi >= 1 << 63:
        hi -= 1 << 64
    return e.val(f"or i64 {lo}, {hi}")


def operand_descriptor(lw: Lowering, sm, trans: bool, k0: int, outer_off: str, smem: Optional[str] = None) -> str:
    """Descriptor of the [outer 64.. x k16] slice at k0 (outer_off: first row/col along M or N).

    ``smem`` (one warpgroup issues the dot, so ``outer_off`` is a constant): the buffer's own descriptor
    plus the slice's offset in 16-byte units. The buffer starts 16-byte aligned below 256 KB (the 14-bit
    start-address field holds any shared address >> 4), so the field of ``base + off`` is the base's plus
    ``off >> 4`` with no carry out of it. ``smem`` is the shared window's base, read where the dot is issued by
    an asm LLVM cannot hoist (``smem_base``), so no descriptor stays live across loops: built from each
    slice's address and hoisted, they were spilled and reloaded in the loops. Several warpgroups keep the
    slice's own address (it spilled a warp-specialised forward; docs/triton-tutorials.md, "06 backward:
    causal and d64")."""
    e = lw.e
    if not trans:  # K-major: rows = outer, cols = K
        panel, within = divmod(k0, sm.panel_cols)
        const = panel * sm.panel_bytes + within * sm.eb
        lbo, sbo = 16, 8 * sm.row_bytes
    else:  # MN-major: rows = K, cols = outer
        const = k0 * sm.row_bytes
        lbo, sbo = sm.panel_bytes, 8 * sm.row_bytes
    if smem is not None and outer_off.isdigit() and const % 16 == 0:
        n = int(outer_off)
        const += n * sm.row_bytes if not trans else (n >> (sm.panel_cols.bit_length() - 1)) * sm.panel_bytes
        if const % 16 == 0:
            addr = e.val(f"add i32 {smem}, {sm.base}") if sm.base not in (0, "0") else smem
            desc = _descriptor(lw, addr, lbo, sbo, sm.swizzle_bytes)
            return e.val(f"add i64 {desc}, {const // 16}") if const else desc
        const -= n * sm.row_bytes if not trans else (n >> (sm.panel_cols.bit_length() - 1)) * sm.panel_bytes
    if not trans:
        off = e.val(f"mul i32 {outer_off}, {sm.row_bytes}") if outer_off != "0" else "0"
    elif outer_off != "0":
        panel = e.val(f"lshr i32 {outer_off}, {sm.panel_cols.bit_length() - 1}")
        off = e.val(f"mul i32 {panel}, {sm.panel_bytes}")
    else:
        off = "0"
    off = e.val(f"add i32 {off}, {const}") if const else off
    off = e.val(f"add i32 {off}, {sm.base}") if sm.base not in (0, "0") else off
    return _descriptor(lw, _smem_addr(lw, off), lbo, sbo, sm.swizzle_bytes)


def smem_base(lw: Lowering) -> str:
    """The shared window's address of ``global_smem``, as an asm with side effects: LLVM neither hoists it out
    of a loop nor merges two reads, so what is computed from it is computed where it is read."""
    return lw.e.asm("i32", "mov.u32 $0, global_smem;", "=r", [])


def k_step_bytes(sm, trans: bool, k0: int) -> int:
    """Bytes from the operand's k = 0 slice to its k0 slice (``operand_descriptor``'s constant part)."""
    if not trans:
        panel, within = divmod(k0, sm.panel_cols)
        return panel * sm.panel_bytes + within * sm.eb
    return k0 * sm.row_bytes


def stepped_descriptor(lw: Lowering, desc0: str, step: int) -> str:
    """The descriptor ``step`` bytes after ``desc0``'s start: one 64-bit add to its address field (address >> 4,
    14 bits). Shared-memory offsets stay below 2**18, so the field never carries into the next one."""
    return lw.e.val(f"add i64 {desc0}, {step >> 4}") if step else desc0


def _promote(lw: Lowering, main: List[str], partial: List[str]) -> List[str]:
    """Add a finished partial accumulator to the fp32 one (waits for the wgmmas that produce it)."""
    e = lw.e
    e.asm("void", "wgmma.commit_group.sync.aligned;", "", [])
    e.asm("void", "wgmma.wait_group.sync.aligned 0;", "", [])
    out = [e.val(f"fadd float {m}, {p}") for m, p in zip(main, partial)]
    e.asm("void", "wgmma.fence.sync.aligned;", "", [])
    return out


def pinned_wait(n: int) -> str:
    """PTX of ``wgmma.wait_group n`` that ptxas keeps where it is: the wait sits in both arms of a branch on
    a CTA-uniform value it cannot fold (``%nctaid.x != 0``), so it starts and ends basic blocks. A plain
    wait has no operands, and ptxas's scheduler moves it up to the first stall of the code before it (the
    softmax's first shuffle), which would serialise the work it is meant to overlap (docs/attention.md)."""
    w = f"wgmma.wait_group.sync.aligned {n};"
    return ("{ .reg .pred kc_p; .reg .b32 kc_n; mov.u32 kc_n, %nctaid.x; setp.ne.u32 kc_p, kc_n, 0; "
            f"@kc_p bra.uni kc_pin_a; {w} bra.uni kc_pin_j; kc_pin_a: {w} kc_pin_j: }}")


def tie_through_wait(lw: Lowering, n: int, regs: List[str], pin: bool = False) -> List[str]:
    """``wgmma.wait_group n`` that takes ``regs`` (fp32 accumulators) and hands them back: every later read
    depends on the wait, so LLVM cannot hoist one above it (ptxas would then serialise the wgmmas).
    ``pin``: the wait itself stays in place in ptxas too (:func:`pinned_wait`)."""
    e = lw.e
    code = pinned_wait(n) if pin else f"wgmma.wait_group.sync.aligned {n};"
    if not regs:
        e.asm("void", code, "", [])
        return []
    m = len(regs)
    ret = "{ " + ", ".join(["float"] * m) + " }"
    r = e.asm(ret, code, ",".join(["=f"] * m + [str(i) for i in range(m)]), [("float", x) for x in regs])
    return [e.val(f"extractvalue {ret} {r}, {i}") for i in range(m)]


def run_wgmma(lw: Lowering, kind: str, A, a_trans: bool, B, b_trans: bool, acc: List[str], L: Layout,
              M: int, N: int, K: int, a_regs=None, b_kind: Optional[str] = None,
              promote_every: Optional[int] = None, turn=None, use_acc: Optional[str] = None,
              stepped: bool = False, warpgroup: Optional[str] = None) -> None:
    """Issue the wgmmas of one dot. ``promote_every`` (fp8 only; Triton's ``max_num_imprecise_acc``): the fp8
    tensor cores accumulate with reduced precision, so every ``promote_every`` K elements the products are
    summed into a fresh accumulator and added to the fp32 one with FADD (slower, as accurate as cuBLAS
    without fast accumulation); None keeps the tensor cores' own accumulation, Triton's default on Hopper.
    ``turn``: warpgroups issue this dot in turns (``warp_specialize.PingPong``): wait before the fence,
    hand over after the commit. ``use_acc`` (an i1, the dot's ``use_acc`` operand): when false the first
    wgmma of each row block ignores the accumulator (its scale-d predicate), so the result is ``a @ b``.
    ``stepped`` (the dot's ``wgmma_desc='stepped'``, passes/schedule.py): each operand's descriptor is built
    once and stepped along K (:func:`stepped_descriptor`), not rebuilt from the address per k step.
    ``warpgroup`` (the dot's warpgroup index operand, a ``warpgroup_index`` op; passes/uniform_warpgroups.py): the
    row blocks of several warpgroups start from it; None: from ``tid.x``."""
    e = lw.e
    nw = lw.nw
    t, kstep, has_trans = WGMMA_TYPES[kind]
    tb = WGMMA_TYPES[b_kind or kind][0]
    if not has_trans and (a_trans or b_trans):
        raise AssertionError(f"internal: {kind} wgmma operands must be K-major in shared memory")
    # 16-bit types take the transpose immediates; 8-bit types have none (K-major only)
    a_imm = f", {int(a_trans)}, {int(b_trans)}" if has_trans else ""
    b_imm = f", {int(b_trans)}" if has_trans else ""
    reps_m = M // (16 * nw)
    nbits_n = (max(1, N // 8) - 1).bit_length()
    nacc = N // 2
    smem = smem_base(lw) if nw == 4 else None
    if smem is not None:
        # one warpgroup issues every wgmma (a producer warp, if any, comes after it): its rows start at 0,
        # so each descriptor is a constant offset from the buffer's (operand_descriptor)
        wg_row = "0"
    else:
        g = warpgroup if warpgroup is not None else e.val(f"lshr i32 {lw.warp}, 2")
        wg_row = e.val(f"shl i32 {g}, 6")  # 64 rows per warpgroup
    nk = K // kstep
    partial = not has_trans and promote_every is not None and promote_every <= K
    group = max(1, promote_every // kstep) if partial else nk
    instr = f"wgmma.mma_async.sync.aligned.m64n{N}k{kstep}.f32.{t}.{tb}"
    if use_acc is not None and partial:
        acc[:] = [e.val(f"select i1 {use_acc}, float {x}, float 0.0") for x in acc]
        use_acc = None
    scale_d = e.val(f"zext i1 {use_acc} to i32") if use_acc is not None else None
    if turn is not None and partial:
        turn = None  # (fp8 promotion waits inside the issue sequence)
    if turn is not None and turn.take:
        turn.before_issue()
    e.asm("void", "wgmma.fence.sync.aligned;", "", [])
    ret = "{ " + ", ".join(["float"] * nacc) + " }"
    outs = ", ".join(f"${i}" for i in range(nacc))
    steps_b = [k_step_bytes(B, b_trans, kk * kstep) for kk in range(nk)]
    b_desc0 = operand_descriptor(lw, B, b_trans, 0, "0", smem) if stepped and all(st % 16 == 0 for st in steps_b) \
        else None
    for r in range(reps_m):
        row0 = (str(r * 16 * nw) if wg_row == "0" else e.val(f"add i32 {wg_row}, {r * 16 * nw}")) if r else wg_row
        base_idx = r << (2 + nbits_n)
        main = cur = acc[base_idx:base_idx + nacc]
        a_desc0 = None
        if stepped and a_regs is None and all(k_step_bytes(A, a_trans, kk * kstep) % 16 == 0 for kk in range(nk)):
            a_desc0 = operand_descriptor(lw, A, a_trans, 0, row0, smem)
        for kk in range(nk):
            if partial and kk % group == 0:
                if kk:
                    main = _promote(lw, main, cur)
                cur = ["0.0"] * nacc
            b_desc = stepped_descriptor(lw, b_desc0, steps_b[kk]) if b_desc0 is not None else \
                operand_descriptor(lw, B, b_trans, kk * kstep, "0", smem)
            tied = ",".join(str(i) for i in range(nacc))
            if a_regs is not None:
                a = a_regs[(r, kk)]
                sd = f"${nacc + 5 + nacc}" if scale_d is not None and kk == 0 else "1"
                code = (f"{{ .reg .pred p; setp.ne.b32 p, {sd}, 0; {instr} "
                        f"{{{outs}}}, {{${nacc}, ${nacc + 1}, ${nacc + 2}, ${nacc + 3}}}, ${nacc + 4}, p, 1, 1"
                        f"{b_imm}; }}")
                cons = ",".join(["=f"] * nacc + ["r"] * 4 + ["l"]) + "," + tied
                args = [("i32", x) for x in a] + [("i64", b_desc)] + [("float", x) for x in cur]
            else:
                a_desc = stepped_descriptor(lw, a_desc0, k_step_bytes(A, a_trans, kk * kstep)) \
                    if a_desc0 is not None else operand_descriptor(lw, A, a_trans, kk * kstep, row0, smem)
                sd = f"${nacc + 2 + nacc}" if scale_d is not None and kk == 0 else "1"
                code = (f"{{ .reg .pred p; setp.ne.b32 p, {sd}, 0; {instr} "
                        f"{{{outs}}}, ${nacc}, ${nacc + 1}, p, 1, 1{a_imm}; }}")
                cons = ",".join(["=f"] * nacc + ["l", "l"]) + "," + tied
                args = [("i64", a_desc), ("i64", b_desc)] + [("float", x) for x in cur]
            if sd != "1":  # the scale-d predicate's input follows the tied accumulators
                cons += ",r"
                args.append(("i32", scale_d))
            res = e.asm(ret, code, cons, args)
            cur = [e.val(f"extractvalue {ret} {res}, {i}") for i in range(nacc)]
        acc[base_idx:base_idx + nacc] = _promote(lw, main, cur) if partial else cur
    if not partial:  # (each promotion already waited for its group)
        e.asm("void", "wgmma.commit_group.sync.aligned;", "", [])
        if turn is not None and turn.give:
            turn.after_commit()
        # the waits are wgmma_wait ops (passes/wgmma_waits.py)


class PingPong:
    """Two consumer warpgroups take turns issuing the loop's first dot (FlashAttention-3's ping-pong):
    while one runs the softmax between its dots, the other's first dot has the tensor cores. Turn ``w``
    is named barrier ``2 + w`` over both warpgroups: a warpgroup waits for its turn (bar.sync), issues the
    wgmmas, commits, then hands the turn over (bar.arrive) before waiting for its results. Warpgroup 1
    hands warpgroup 0 the first turn before the loop; warpgroup 0 takes the last hand-over after it, so
    every barrier phase completes. passes/schedule.py turns it on (``ws.pingpong``) only with
    ``KERNELC_WS_PINGPONG=1``: without FA3's other half (issuing
    the next QK before this block's softmax) the turns mostly reorder work that already overlapped, and it
    measured no gain (docs/performance.md, "Warp specialisation")."""

    THREADS = 256

    def __init__(self, lw: Lowering, mode=True):
        # mode (the dot's ``wgmma_turns``): True takes the turn before this dot and hands it over after it;
        # 'take' / 'give': the first / last of dots issued back to back (FA3's order: QK^T and PV in one turn)
        self.lw = lw
        self.take = mode in (True, "take")
        self.give = mode in (True, "give")

    def _asm(self, code: str, pred: Optional[str] = None) -> None:
        lw = self.lw
        wg = lw.e.val(f"lshr i32 {lw.warp}, 2")
        if pred is None:
            lw.e.asm("void", code, "r", [("i32", wg)])
        else:
            lw.e.asm("void", "@$1 " + code, "r,b", [("i32", wg), ("i1", pred)])

    def _is_wg(self, w: int) -> str:
        e = self.lw.e
        return e.val(f"icmp eq i32 {e.val(f'lshr i32 {self.lw.warp}, 2')}, {w}")

    def before_loop(self) -> None:
        self._asm(f"bar.arrive 2, {self.THREADS};", self._is_wg(1))

    def before_issue(self) -> None:  # bar.sync (2 + my warpgroup)
        self._asm(f"{{ .reg .b32 t; add.u32 t, $0, 2; bar.sync t, {self.THREADS}; }}")

    def after_commit(self) -> None:  # bar.arrive (2 + the other warpgroup)
        self._asm(f"{{ .reg .b32 t; sub.u32 t, 3, $0; bar.arrive t, {self.THREADS}; }}")

    def after_loop(self) -> None:
        self._asm(f"bar.sync 2, {self.THREADS};", self._is_wg(0))


@rule("wgmma_wait")
def lower_wgmma_wait(lw: Lowering, op) -> None:
    """``wgmma.wait_group pending``, the operand tiles taken through it (:func:`tie_through_wait`); the results
    are their registers after the wait."""
    tiles = [lw.get(v) for v in op.operands]
    new = tie_through_wait(lw, op.attrs["pending"], [r for t in tiles for r in t.regs], pin=bool(op.attrs.get("pin")))
    k = 0
    for res, t in zip(op.results, tiles):
        lw.tiles[res.id] = Tile(t.layout, new[k:k + len(t.regs)])
        k += len(t.regs)


@rule("warpgroup_index")
def lower_warpgroup_index(lw: Lowering, op) -> None:
    """tid.x / 128; ``uniform``: lane 0's, through ``shfl.sync.idx``, which ptxas takes as the same in every lane of
    the warp, so values computed from it (wgmma descriptors) stay on the uniform datapath."""
    e = lw.e
    wg = e.val(f"lshr i32 {lw.tid}, 7")
    if op.attrs.get("uniform"):
        wg = e.call("i32", "llvm.nvvm.shfl.sync.idx.i32", [("i32", "-1"), ("i32", wg), ("i32", "0"), ("i32", "31")])
    lw.scalars[op.results[0].id] = wg
