"""Source lines of Hopper's warpgroup MMAs (``HGMMA``/``QGMMA``), taken from the PTX.

ptxas gives these instructions no row of their own in ``.debug_line``: each takes the row of whatever
instruction it was scheduled after. In a loop that keeps a wgmma group in flight and issues the next stage's
copies around the MMAs (Triton's order, and kernelc's with ``refill='after_dots'``), that is a load or the
loop's counter, so a profile or the analyzer would put tensor-core stalls on the wrong line. Triton's own
cubins show the same (tutorial 03, 128x256x64: two of four ``HGMMA`` on a ``tl.load`` line).

The PTX knows the right line: every ``wgmma.mma_async`` sits under the ``.loc`` of its dot. ptxas keeps the
wgmmas of a function in program order, so when the cubin has as many warpgroup MMAs as the PTX has
``wgmma.mma_async`` instructions (all of them matched by opcode: a kind not in ``WGMMA_OPCODES`` makes the counts
differ), the n-th MMA gets the n-th wgmma's line; when the counts differ (ptxas
duplicated code) and every wgmma of the function has one line, every MMA gets it; otherwise the map is left
as ptxas wrote it. Finding the MMAs needs no disassembler: on sm_90 an instruction's opcode is its low 12 bits
(the test checks these against nvdisasm).
"""
from __future__ import annotations

import re
import struct
from typing import Dict, List, Tuple

# sm_90 opcodes (low 12 bits of the first 64-bit word) of the warpgroup MMAs kernelc emits; bit 10 is set when
# A comes from registers (attention's P). Others (IGMMA, BGMMA) are not matched: their MMAs keep ptxas's lines.
WGMMA_OPCODES = {0x9F0: "HGMMA", 0xDF0: "HGMMA, A in registers", 0x9F3: "QGMMA", 0xDF3: "QGMMA, A in registers"}

_FUNC = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.(?:entry|func)\s+(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)")
_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)")
_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"')


def ptx_wgmma_lines(ptx: str) -> Dict[str, List[Tuple[str, int]]]:
    """``{function: [(file, line) of each wgmma.mma_async, in text order]}`` from the PTX's ``.loc``s."""
    files: Dict[int, str] = {}
    raw: Dict[str, List[Tuple[int, int]]] = {}
    func, loc = None, None
    for text in ptx.splitlines():
        m = _FILE.match(text)
        if m:
            files[int(m.group(1))] = m.group(2)
            continue
        m = _FUNC.match(text)
        if m:
            func, loc = m.group(1), None
            raw.setdefault(func, [])
            continue
        m = _LOC.match(text)
        if m:
            loc = (int(m.group(1)), int(m.group(2)))
            continue
        if func is not None and "wgmma.mma_async" in text and loc is not None:
            raw[func].append(loc)
    return {f: [(files.get(i, ""), ln) for i, ln in locs] for f, locs in raw.items() if locs}


def wgmma_pcs(text: bytes) -> List[int]:
    """pcs (byte offsets) of the warpgroup MMAs in one function's sm_90 ``.text`` section."""
    return [pc for pc in range(0, len(text) - 15, 16)
            if struct.unpack_from("<Q", text, pc)[0] & 0xFFF in WGMMA_OPCODES]


def place_wgmma_lines(smap, cubin: bytes, ptx: str) -> int:
    """Give the warpgroup MMAs of ``smap`` (a :class:`cubintools.sourcemap.SourceMap` of ``cubin``) the lines
    of their ``wgmma.mma_async`` in ``ptx``. Returns how many instructions changed line."""
    want = ptx_wgmma_lines(ptx)
    if not want or not smap:
        return 0
    from cubintools.cubin import _Elf
    elf = _Elf(cubin)
    changed = 0
    for func, lines in want.items():
        sec = elf.by_name.get(".text." + func)
        if sec is None or func not in smap.functions:
            continue
        pcs = wgmma_pcs(sec.data())
        if len(pcs) == len(lines):
            new = dict(zip(pcs, lines))
        elif pcs and len(set(lines)) == 1:
            new = {pc: lines[0] for pc in pcs}
        else:
            continue
        changed += smap.set_lines(func, {pc: (_known_path(smap, f), ln) for pc, (f, ln) in new.items() if f})
    return changed


def _known_path(smap, path: str) -> str:
    """The map's own spelling of ``path`` (the same file, recorded by ptxas with or without its directory)."""
    if path in smap.files:
        return path
    same = [f for f in smap.files if f and (f.endswith("/" + path.lstrip("/")) or path.endswith("/" + f.lstrip("/")))]
    return same[0] if same else path
