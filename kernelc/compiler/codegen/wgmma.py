"""``dot`` on Hopper warpgroup MMA (``wgmma.mma_async``, sm_90a).

Each warpgroup (4 consecutive warps) owns 64-row blocks of the accumulator, whose registers are
exactly the MMA layout with every warp along M (``mma_v2(shape, (num_warps, 1))``). Operands are
read straight from shared memory through 64-bit matrix descriptors: the buffers are the swizzled
SmemOperand panels (K-major, or MN-major with the transpose bit for 16-bit types), already filled
by the cp.async pipeline, by a one-off staging of a loop-invariant operand, or staged here. An A
operand that lives in the accumulator layout of a previous dot (attention's P) is fed from
registers. The issue sequence is fence -> mma_async per k16 step -> commit -> wait.
"""
from __future__ import annotations

from typing import List, Optional

from ...language.dtypes import scalar_of, shape_of
from ..layouts import Layout
from .emitter import llty
from .lowering import Lowering, Tile

WGMMA_TYPES = {"fp16": "f16", "bf16": "bf16"}
SWIZZLE_MODE = {128: 1, 64: 2, 32: 3}  # descriptor bits 62-63


def wgmma_eligible(a_ty, b_ty, c_ty, num_warps: int, arch: str) -> bool:
    if not arch.endswith("a") or not arch.startswith("sm_90"):
        return False
    at, bt, ct = scalar_of(a_ty), scalar_of(b_ty), scalar_of(c_ty)
    sa, sb, sc = shape_of(a_ty), shape_of(b_ty), shape_of(c_ty)
    if len(sa) != 2 or at != bt or at.name not in WGMMA_TYPES or ct.name != "fp32":
        return False
    M, K = sa
    N = sb[1]
    return num_warps % 4 == 0 and M % (16 * num_warps) == 0 and N % 8 == 0 and 8 <= N <= 256 and K % 16 == 0


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


def operand_descriptor(lw: Lowering, sm, trans: bool, k0: int, outer_off: str) -> str:
    """Descriptor of the [outer 64.. x k16] slice at k0 (outer_off: first row/col along M or N)."""
    e = lw.e
    if not trans:  # K-major: rows = outer, cols = K
        panel, within = divmod(k0, sm.panel_cols)
        const = panel * sm.panel_bytes + within * sm.eb
        off = e.val(f"mul i32 {outer_off}, {sm.row_bytes}") if outer_off != "0" else "0"
        lbo, sbo = 16, 8 * sm.row_bytes
    else:  # MN-major: rows = K, cols = outer
        const = k0 * sm.row_bytes
        if outer_off != "0":
            panel = e.val(f"lshr i32 {outer_off}, {sm.panel_cols.bit_length() - 1}")
            off = e.val(f"mul i32 {panel}, {sm.panel_bytes}")
        else:
            off = "0"
        lbo, sbo = sm.panel_bytes, 8 * sm.row_bytes
    off = e.val(f"add i32 {off}, {const}") if const else off
    off = e.val(f"add i32 {off}, {sm.base}") if sm.base not in (0, "0") else off
    return _descriptor(lw, _smem_addr(lw, off), lbo, sbo, sm.swizzle_bytes)


def run_wgmma(lw: Lowering, kind: str, A, a_trans: bool, B, b_trans: bool, acc: List[str], L: Layout,
              M: int, N: int, K: int, a_regs=None, in_flight: int = 0) -> None:
    e = lw.e
    nw = lw.nw
    t = WGMMA_TYPES[kind]
    reps_m = M // (16 * nw)
    nbits_n = (max(1, N // 8) - 1).bit_length()
    nacc = N // 2
    g = e.val(f"lshr i32 {lw.warp}, 2")
    wg_row = e.val(f"shl i32 {g}, 6")  # 64 rows per warpgroup
    e.asm("void", "wgmma.fence.sync.aligned;", "", [])
    ret = "{ " + ", ".join(["float"] * nacc) + " }"
    outs = ", ".join(f"${i}" for i in range(nacc))
    for r in range(reps_m):
        row0 = e.val(f"add i32 {wg_row}, {r * 16 * nw}") if r else wg_row
        base_idx = r << (2 + nbits_n)
        cur = acc[base_idx:base_idx + nacc]
        for kk in range(K // 16):
            b_desc = operand_descriptor(lw, B, b_trans, kk * 16, "0")
            tied = ",".join(str(i) for i in range(nacc))
            if a_regs is not None:
                a = a_regs[(r, kk)]
                code = (f"{{ .reg .pred p; setp.ne.b32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n{N}k16.f32.{t}.{t} "
                        f"{{{outs}}}, {{${nacc}, ${nacc + 1}, ${nacc + 2}, ${nacc + 3}}}, ${nacc + 4}, p, 1, 1, "
                        f"{int(b_trans)}; }}")
                cons = ",".join(["=f"] * nacc + ["r"] * 4 + ["l"]) + "," + tied
                args = [("i32", x) for x in a] + [("i64", b_desc)] + [("float", x) for x in cur]
            else:
                a_desc = operand_descriptor(lw, A, a_trans, kk * 16, row0)
                code = (f"{{ .reg .pred p; setp.ne.b32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n{N}k16.f32.{t}.{t} "
                        f"{{{outs}}}, ${nacc}, ${nacc + 1}, p, 1, 1, {int(a_trans)}, {int(b_trans)}; }}")
                cons = ",".join(["=f"] * nacc + ["l", "l"]) + "," + tied
                args = [("i64", a_desc), ("i64", b_desc)] + [("float", x) for x in cur]
            res = e.asm(ret, code, cons, args)
            cur = [e.val(f"extractvalue {ret} {res}, {i}") for i in range(nacc)]
        acc[base_idx:base_idx + nacc] = cur
    e.asm("void", "wgmma.commit_group.sync.aligned;", "", [])
    e.asm("void", f"wgmma.wait_group.sync.aligned {in_flight};", "", [])
