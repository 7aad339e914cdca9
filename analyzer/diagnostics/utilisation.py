"""3. Low utilisation: too few programs for the GPU, or occupancy capped by registers / shared memory.

* ``low-utilisation``: ``programs < SMs`` is a warning (an error when at most 1/8 of the SMs get
  work); a grid that fills less than half of the resident slots (``SMs x blocks per SM``) is noted
  as info for kernels without a tensor-core pipeline.
* ``low-occupancy``: resident warps per SM below 16 (25 %) when registers or shared memory bind,
  for kernels that rely on warps to hide latency; tensor-core kernels with pipelined loops hide it
  with asynchronous copies and are only flagged below 4 warps per SM.
"""
from __future__ import annotations

from typing import Dict, List

from .diagnostic import Diagnostic
from ._util import (dot_constexprs, grid_constexprs, is_tensor_core_kernel, largest_tile, next_pow2, pct,
                    shrink_for_programs, valid_warps)
from ..facts import KernelFacts
from ..occupancy import LIMIT_NAMES, occupancy

WARPS_FLOOR = 16          # resident warps per SM below which latency hiding suffers
WARPS_FLOOR_TC = 4        # ... for pipelined tensor-core kernels


def check_grid(facts: KernelFacts) -> List[Diagnostic]:
    p = facts.num_programs
    occ = facts.occupancy
    if not p:
        return []
    sms = facts.device.num_sms
    per_sm = occ.blocks_per_sm if occ else facts.device.limits.max_warps_per_sm // max(1, facts.num_warps)
    capacity = sms * max(1, per_sm)
    ev = {"programs": p, "grid": list(facts.grid), "sms": sms, "blocks_per_sm": per_sm, "resident_capacity": capacity,
          "sm_count_source": facts.device.source}
    gcx = grid_constexprs(facts)
    certain = bool(facts.arg_values)      # grid constexprs matched against the recorded sizes
    changes = []
    for target in (4 * sms, capacity):
        delta = shrink_for_programs(facts, next_pow2(target / p))
        if delta and delta not in changes:
            changes.append(delta)
    assumption = (f" (assuming the grid is cdiv(size, {' x '.join(gcx)}))" if gcx else "")
    if p < sms:
        idle = sms - p
        sev = "error" if p * 8 <= sms else "warning"
        want = min(capacity, 4 * sms)
        cfg = ", ".join(f"{k}={v}" for k, v in changes[0].items()) if changes else None
        fix = (f"launch at least {sms} programs (ideally {want}+): split the work into smaller pieces per program"
               + (f", e.g. {cfg}{assumption}" if cfg else " (smaller tiles, split-K, or a persistent loop over tiles)"))
        return [Diagnostic(
            "low-utilisation", 3, "too few programs to fill the GPU", sev,
            f"only {p} program{'s' if p != 1 else ''} for {sms} SMs: {idle} SMs ({pct(idle / sms)}) idle; the GPU "
            f"holds {capacity} of these programs at once ({per_sm} per SM)",
            fix, evidence=ev, changes=changes)]
    if p < capacity / 2 and not is_tensor_core_kernel(facts):
        return [Diagnostic(
            "low-utilisation", 3, "grid fills part of the GPU", "info",
            f"{p} programs fill {pct(p / capacity)} of the {capacity} resident slots ({per_sm} per SM x {sms} SMs)",
            "more, smaller programs (or more warps per program) would let each SM hide more latency",
            evidence=ev, changes=changes if certain else [])]
    return []


def check_occupancy(facts: KernelFacts) -> List[Diagnostic]:
    occ = facts.occupancy
    if occ is None or facts.compiled is None and not facts.n_regs:
        return []
    tc = is_tensor_core_kernel(facts)
    floor = WARPS_FLOOR_TC if tc else WARPS_FLOOR
    limits = facts.device.limits
    ev = {"num_warps": facts.num_warps, "n_regs": facts.n_regs, "regs_per_warp_allocated": occ.regs_per_warp_allocated,
          "shared_bytes": facts.shared, "blocks_by_warps": occ.by_warps, "blocks_by_registers": occ.by_registers,
          "blocks_by_shared": occ.by_shared, "blocks_by_block_limit": occ.by_blocks, "blocks_per_sm": occ.blocks_per_sm,
          "limiter": occ.limiter, "active_warps": occ.active_warps, "max_warps": occ.max_warps,
          "occupancy": round(occ.fraction, 4)}
    changes: List[Dict[str, int]] = []
    if occ.limiter in ("registers", "shared") and occ.active_warps < floor:
        if occ.limiter == "registers":
            tile = largest_tile(facts)
            # registers scale about as 1/warps for the same tile: the smallest warp count that reaches
            # the floor, and the next one
            nw = facts.num_warps
            while len(changes) < 3 and nw < 16:
                nw *= 2
                if not valid_warps(nw, limits.max_threads_per_block) or (tile and tile < nw * 32):
                    break
                est = occupancy(nw, max(24, facts.n_regs * facts.num_warps // nw), facts.shared, limits)
                if est.active_warps >= floor:
                    changes.append({"num_warps": nw})
            # what the change buys: registers scale ~1/warps for the same tile
            detail = (f"{facts.n_regs} registers per thread ({occ.regs_per_warp_allocated} per warp) allow "
                      f"{occ.by_registers} block(s) of {facts.num_warps} warp(s) per SM")
            fix = ("spread the tile over more warps (fewer values per thread -> fewer registers)"
                   + (", e.g. num_warps=" + " or ".join(str(c["num_warps"]) for c in changes) if changes else "")
                   + ", or use a smaller tile")
        else:
            names = {}
            for d in facts.dots:
                names = dot_constexprs(facts, d)
                break
            if facts.num_stages > 2:
                changes.append({"num_stages": facts.num_stages - 1})
            kname = names.get("K")
            if kname and facts.constexprs.get(kname, 0) >= 32:
                changes.append({kname: facts.constexprs[kname] // 2})
            detail = (f"{facts.shared} bytes of shared memory per block ({occ.shared_per_block_allocated} allocated) "
                      f"allow {occ.by_shared} block(s) per SM out of {limits.max_shared_per_sm}")
            fix = "use less shared memory per block: fewer pipeline stages or a smaller BLOCK_K"
        sev = "warning"
        return [Diagnostic(
            "low-occupancy", 3, f"occupancy capped by {LIMIT_NAMES[occ.limiter]}", sev,
            f"occupancy {occ.active_warps}/{occ.max_warps} warps per SM ({pct(occ.fraction)}): {detail}",
            fix, evidence=ev, changes=changes)]
    if occ.limiter == "blocks" and occ.fraction <= 0.5 and not tc:
        nw = facts.num_warps * 4
        if valid_warps(nw, limits.max_threads_per_block):
            changes.append({"num_warps": nw})
        return [Diagnostic(
            "low-occupancy", 3, "occupancy capped by the blocks-per-SM limit", "info",
            f"blocks of {facts.num_warps} warp(s): at most {occ.by_blocks} resident per SM = {occ.active_warps}/"
            f"{occ.max_warps} warps ({pct(occ.fraction)})",
            "use more warps per program" + (f" (num_warps={nw})" if changes else ""), evidence=ev, changes=changes)]
    return []


__all__ = ["check_grid", "check_occupancy", "occupancy"]
