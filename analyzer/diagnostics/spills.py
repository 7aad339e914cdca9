"""5. Register spills: ptxas's spill count and the local loads/stores (LDL/STL) in the SASS."""
from __future__ import annotations

from collections import Counter
from typing import Dict, List

from .diagnostic import Diagnostic
from ._util import dot_constexprs, largest_tile, pct, source_of, valid_warps
from ..facts import KernelFacts, base

VALUES_PER_THREAD_TARGET = 64


def check(facts: KernelFacts) -> List[Diagnostic]:
    ldl = facts.opcodes("LDL")
    stl = facts.opcodes("STL")
    if not facts.n_spills and not ldl and not stl:
        return []
    per_line = Counter((i.file, i.line) for i in ldl + stl if i.line is not None)
    # the kernel's own lines first (spills inside inlined library code point at the library)
    own = base(facts.kernel_file) if facts.kernel_file else None
    top = sorted(per_line.items(), key=lambda kv: (own is not None and base(kv[0][0]) != own, -kv[1]))[:3]
    file, line = (top[0][0] if top else (None, None))
    # samples on local-memory instructions, when instruction samples exist
    local_samples = 0.0
    for s in facts.lines.values():
        local_samples += sum(v for op, v in s.opcodes.items() if op.startswith(("LDL", "STL")))
    ev: Dict = {"n_regs": facts.n_regs, "spill_bytes": facts.n_spills, "local_bytes_per_thread": facts.local_bytes,
                "ldl_instructions": len(ldl), "stl_instructions": len(stl),
                "top_lines": [{"file": base(f), "line": ln, "local_instructions": n} for (f, ln), n in top]}
    if facts.total_samples and local_samples:
        ev["local_memory_sample_share"] = round(local_samples / facts.total_samples, 4)
    where = facts.location(file, line) if line is not None else facts.name
    if not facts.n_spills:
        return [Diagnostic(
            "register-spills", 5, "local memory use", "info",
            f"{where}: {len(ldl)} LDL / {len(stl)} STL local-memory instructions without register spills: a "
            f"per-thread array lives in local memory ({facts.local_bytes} bytes per thread)",
            "index per-thread tiles with compile-time constants so they stay in registers",
            facts.full_path(file) or file, line, source_of(facts, file, line), ev)]
    tile = largest_tile(facts)
    limits = facts.device.limits
    changes: List[Dict[str, int]] = []
    tc_dots = [d for d in facts.dots if d.get("engine") in ("wgmma", "mma.sync")]
    nw = facts.num_warps
    while nw < limits.max_threads_per_block // 32:
        nw *= 2
        if not valid_warps(nw, limits.max_threads_per_block):
            break
        if tile and tile < nw * 32:
            break
        changes.append({"num_warps": nw})
        if tile and tile / (nw * 32) <= VALUES_PER_THREAD_TARGET:
            break
    changes = changes[-2:][::-1] if len(changes) > 2 else changes[::-1]
    if tc_dots:
        names = dot_constexprs(facts, tc_dots[0])
        for dim in ("N", "M"):
            n = names.get(dim)
            if n and facts.constexprs.get(n, 0) >= 64:
                changes.append({n: facts.constexprs[n] // 2})
                break
    elif tile:
        tiles = facts.tile_constexprs()
        big = [k for k, v in tiles.items() if v == max(tiles.values())] if tiles else []
        if len(big) == 1 and tiles[big[0]] >= 256 and not changes:
            changes.append({big[0]: tiles[big[0]] // 2})
    w = facts.num_warps
    per_thread = f"{tile // (32 * w)} values per thread with {w} warp{'s' if w != 1 else ''}" if tile else ""
    sev = "error" if facts.n_spills >= 1024 or ev.get("local_memory_sample_share", 0) >= 0.1 else "warning"
    sample_note = (f"; {pct(ev['local_memory_sample_share'])} of the samples are on local-memory instructions"
                   if "local_memory_sample_share" in ev else "")
    fix = ("hold fewer values per thread: " + (f"num_warps={changes[0]['num_warps']} for the same tile" if changes
                                              and "num_warps" in changes[0] else "more warps for the same tile")
           + ", a smaller tile, or fewer pipeline stages")
    return [Diagnostic(
        "register-spills", 5, "register spills", sev,
        f"{facts.n_spills} bytes spilled at {facts.n_regs} registers per thread"
        + (f" ({per_thread})" if per_thread else "")
        + f": {len(stl)} STL / {len(ldl)} LDL instructions, {facts.local_bytes} bytes of local memory per thread"
        + (f", most at {where}" if line is not None else "") + sample_note,
        fix, facts.full_path(file) or file, line, source_of(facts, file, line), ev, changes,
        "static+samples" if "local_memory_sample_share" in ev else "static")]
