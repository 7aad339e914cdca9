"""Brute-force sectors per request: run one program of a kernel in the CPU interpreter, record the
address tile of every global load/store, and count the 32-byte sectors each warp-0 instruction
touches by listing the addresses of its lanes -- independently of the address polynomial
:mod:`analyzer.sectors` derives from the IR.

The lane -> element map is the compiler's layout (from the access report); the addresses are the
interpreter's, relative to the argument the access goes through (tensors are taken as 128-byte
aligned, as the static model assumes).
"""
from __future__ import annotations

from typing import Dict, List, Tuple

import numpy as np

from analyzer.sectors import LINE, SECTOR, _coord


def record_accesses(run) -> Dict[Tuple[str, int], List[np.ndarray]]:
    """Call ``run()`` (one interpreted launch) and return {(kind, line): [byte offset tile, ...]}:
    the offsets of every load/store's pointer tile from the argument pointer it went through."""
    from kernelc.runtime.interpreter import builder as B
    from kernelc.runtime.interpreter.locate import current_location
    seen: Dict[Tuple[str, int], List[np.ndarray]] = {}
    orig_load, orig_store = B.InterpreterBuilder._load, B.InterpreterBuilder._store

    def grab(self, kind, ptr):
        if not isinstance(ptr, np.ndarray) or ptr.ndim == 0:
            return
        loc = current_location(self.known_codes)
        flat = ptr.reshape(-1).astype(np.int64)
        bufs = [b for b in self.memory.buffers if b.base <= int(flat[0]) < b.base + b.size]
        arg = bufs[0].arg_for(int(flat[0])) if bufs else None
        origin = arg[1] if arg else int(flat.min())
        seen.setdefault((kind, loc[1] if loc else -1), []).append(ptr.astype(np.int64) - origin)

    def load(self, ops, ty, *a, **k):
        grab(self, "load", ops[0])
        return orig_load(self, ops, ty, *a, **k)

    def store(self, ops, ty, *a, **k):
        grab(self, "store", ops[0])
        return orig_store(self, ops, ty, *a, **k)

    B.InterpreterBuilder._load, B.InterpreterBuilder._store = load, store
    try:
        run()
    finally:
        B.InterpreterBuilder._load, B.InterpreterBuilder._store = orig_load, orig_store
    return seen


def brute_force(layout: dict, offsets: np.ndarray, elem_bytes: int, vector_elems: int) -> Tuple[int, int, int, int]:
    """(instructions, sectors, min_sectors, lines) of warp 0 from the real address tile."""
    shape = tuple(layout["shape"])
    rank = len(shape)
    offsets = np.broadcast_to(offsets, shape)
    nregs = 1 << len(layout.get("reg") or [])
    vec = max(1, min(vector_elems, nregs))
    instr = secs = mins = lines = 0
    for j in range(nregs // vec):
        addrs = set()
        for r in range(j * vec, (j + 1) * vec):
            rc = _coord(layout["reg"], r, rank)
            for lane in range(32):
                lc = _coord(layout["lane"], lane, rank)
                addrs.add(int(offsets[tuple(x ^ y for x, y in zip(rc, lc))]))
        s = {b // SECTOR for a in addrs for b in (a, a + elem_bytes - 1)}
        ln = {b // LINE for a in addrs for b in (a, a + elem_bytes - 1)}
        instr += 1
        secs += len(s)
        lines += len(ln)
        mins += -(-(len(addrs) * elem_bytes) // SECTOR)
    return instr, secs, mins, lines
