"""Paths through a SASS loop: how many instructions one trip runs when it takes no optional branch.

A flattened persistent GEMM (Triton's ``tl.range(..., flatten=True)``, kernelc's ``passes/flatten_loops.py``)
holds its epilogue and the next tile's setup in branches that run once per tile. The loop's size says little
about a K step's cost then; the shortest path from the loop's head to its back edge does: every conditional
branch is free to go either way, so the path skips whatever runs only on some trips (a tile's last step).
"""
from __future__ import annotations

import heapq
import re
from typing import Dict, List, Optional, Sequence, Tuple

from .sass import Instr

_TARGET = re.compile(r"`\(\.L_x_(\d+)\)")
_HEX = re.compile(r"0x([0-9a-fA-F]+)")
# instructions that end a thread's path (a trip through the loop never runs them)
_ENDS = ("EXIT", "RET", "BPT", "KILL")


def _labels(text: str) -> Dict[str, int]:
    """``.L_x_N`` label -> pc of the instruction after it, from nvdisasm text."""
    out, pending = {}, []
    for raw in text.splitlines():
        s = raw.strip()
        m = re.match(r"^\.L_x_(\d+):", s)
        if m:
            pending.append(m.group(1))
            continue
        m = re.match(r"^\s*/\*([0-9a-fA-F]+)\*/\s", raw)
        if m:
            for lab in pending:
                out[lab] = int(m.group(1), 16)
            pending = []
    return out


def branch_target(ins: Instr, labels: Dict[str, int]) -> Optional[int]:
    m = _TARGET.search(ins.operands)
    if m:
        return labels.get(m.group(1))
    m = _HEX.search(ins.operands)
    return int(m.group(1), 16) if m else None


def _always(ins: Instr) -> bool:
    return ins.predicate in ("", "@PT")


def loops(instrs: Sequence[Instr], labels: Dict[str, int]) -> List[Tuple[int, int]]:
    """[(head pc, back-edge pc)] of every backward branch."""
    out = []
    for ins in instrs:
        if ins.opcode.startswith("BRA"):
            t = branch_target(ins, labels)
            if t is not None and t <= ins.pc:
                out.append((t, ins.pc))
    return out


def shortest_trip(instrs: Sequence[Instr], labels: Dict[str, int], head: int, back: int) -> List[Instr]:
    """The instructions of the shortest path from ``head`` to the back edge at ``back`` (both included): a
    conditional branch may go either way, an unconditional one goes to its target; the path may leave
    ``[head, back]`` (a branch moved out of line) and come back. Raises ValueError if there is none."""
    at = {ins.pc: i for i, ins in enumerate(instrs)}
    start = at[head]
    dist = {start: 1}
    prev: Dict[int, int] = {}
    heap = [(1, start)]
    while heap:
        d, i = heapq.heappop(heap)
        if d > dist.get(i, 1 << 60):
            continue
        ins = instrs[i]
        if ins.pc == back:
            path = [i]
            while path[-1] != start:
                path.append(prev[path[-1]])
            return [instrs[j] for j in reversed(path)]
        nxt = []
        if ins.opcode.startswith("BRA"):
            t = branch_target(ins, labels)
            if t is not None and t in at:
                nxt.append(at[t])
            if not _always(ins) and i + 1 < len(instrs):
                nxt.append(i + 1)
        elif ins.opcode.startswith(_ENDS) and _always(ins):
            pass
        elif i + 1 < len(instrs):
            nxt.append(i + 1)
        for j in nxt:
            if d + 1 < dist.get(j, 1 << 60):
                dist[j] = d + 1
                prev[j] = i
                heapq.heappush(heap, (d + 1, j))
    raise ValueError(f"no path from {head:#x} to the back edge at {back:#x}")


def step_path(text: str, instrs: Sequence[Instr], mma=("HGMMA", "HMMA", "QGMMA")) -> Optional[List[Instr]]:
    """The shortest trip through the main loop (the innermost loop holding the most MMA instructions) of one
    function's SASS (``text``: nvdisasm output, ``instrs``: its parsed instructions); None without one."""
    labels = _labels(text)
    cands = []
    for head, back in loops(instrs, labels):
        n = sum(1 for ins in instrs if head <= ins.pc <= back and ins.opcode.startswith(mma))
        if n:
            cands.append((-n, back - head, head, back))
    if not cands:
        return None
    _, _, head, back = min(cands)
    return shortest_trip(instrs, labels, head, back)
