"""6. Latency-bound loops: a tensor-core dot in a loop whose operand loads are not prefetched.

Static: the loads feeding a tensor-core dot in a loop are plain loads (not ``cp.async``
pipelined) because ``num_stages < 2``: every iteration waits a full global-memory round trip
before its MMA.  With samples: ``long_scoreboard`` on the loop's load and dot lines is at least
25 % of the kernel's samples while the pipeline is shallow (``num_stages <= 2`` or not pipelined).
"""
from __future__ import annotations

from typing import Dict, List

from .diagnostic import Diagnostic
from ._util import loads_in_loop, pct, source_of
from ..facts import KernelFacts, base

LONG_SCOREBOARD_SHARE = 0.25


def _stage_bytes(loads: List[dict]) -> int:
    total = 0
    for a in loads:
        n = 1
        for s in a.get("shape") or ():
            n *= int(s)
        total += n * int(a.get("elem_bytes") or 2)
    return total


def check(facts: KernelFacts) -> List[Diagnostic]:
    out: List[Diagnostic] = []
    seen_loops = set()
    for d in facts.dots:
        if d.get("engine") not in ("wgmma", "mma.sync"):
            continue
        loops = facts.tir.loops_of_line(d.get("file") or "", d.get("line") or 0)
        if not loops:
            continue
        loop = loops[-1]
        if id(loop) in seen_loops:
            continue
        seen_loops.add(id(loop))
        loads = loads_in_loop(facts, loop)
        if not loads:
            continue
        pipelined = [a for a in loads if "pipelined" in str(a.get("kind"))]
        stages = loop.num_stages or facts.num_stages
        lines = sorted({(base(a.get("file")), a.get("line")) for a in loads} | {(base(d.get("file")), d.get("line"))})
        ls = 0.0
        if facts.total_samples:
            for f, ln in lines:
                s = facts.line_stat(f, ln)
                if s:
                    ls += s.stalls.get("long_scoreboard", 0.0)
            ls /= facts.total_samples
        stage_bytes = _stage_bytes(loads)
        limit = facts.device.limits.max_shared_per_block_optin
        other_smem = max(0, facts.shared - (stage_bytes * stages if pipelined else 0))
        changes: List[Dict[str, int]] = []
        for s in (3, 4, 2):
            if s > stages and s * stage_bytes + other_smem <= limit and {"num_stages": s} not in changes:
                changes.append({"num_stages": s})
        changes = changes[:2]
        load_lines = ", ".join(str(ln) for f, ln in lines if ln != d.get("line"))
        where = facts.location(loop.file, loop.line)
        ev = {"loop_line": loop.line, "num_stages": stages, "load_lines": [ln for _, ln in lines if ln != d.get("line")],
              "dot_line": d.get("line"), "engine": d.get("engine"), "loads": len(loads), "pipelined_loads": len(pipelined),
              "stage_bytes": stage_bytes}
        if facts.total_samples:
            ev["long_scoreboard_share_of_kernel"] = round(ls, 4)
        sampled_bad = facts.total_samples and ls >= LONG_SCOREBOARD_SHARE
        if not pipelined and stages < 2:
            sev = "warning"
            msg = (f"{where}: the {d.get('engine')} dot loop runs with num_stages={stages}: the operand loads at line "
                   f"{load_lines} are not prefetched (no cp.async pipeline), so every iteration waits for global "
                   "memory before its MMA")
            basis = "static"
        elif not pipelined:
            sev = "warning" if sampled_bad else "info"
            msg = (f"{where}: the loads at line {load_lines} feeding the dot were not pipelined although "
                   f"num_stages={stages} (the compiler could not prefetch their address chain)")
            basis = "static"
        elif sampled_bad and stages <= 2:
            sev = "warning"
            msg = f"{where}: num_stages={stages} leaves the dot loop waiting on its loads"
            basis = "samples"
        else:
            continue
        if sampled_bad:
            msg += f"; {pct(ls)} of the kernel's samples are long_scoreboard stalls on these lines"
            basis = "static+samples" if basis == "static" else basis
        fix = ("prefetch the operands: " + (f"num_stages={changes[0]['num_stages']}" if changes else "num_stages >= 3")
               + " (a cp.async ring of stages in shared memory"
               + (f", {stage_bytes} bytes per stage" if stage_bytes else "") + ")"
               + ("; keep the loads' address arithmetic simple (pointer += constant) so they can be pipelined"
                  if pipelined == [] and stages >= 2 else ""))
        out.append(Diagnostic("latency-bound-loop", 6, "latency-bound dot loop", sev, msg, fix,
                              facts.full_path(loop.file) or loop.file, loop.line, source_of(facts, loop.file, loop.line),
                              ev, changes, basis))
    return out
