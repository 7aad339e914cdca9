"""Sectors per request: the static twin of Nsight Compute's ``sectors/request`` for each global access.

The compiler reports, per load/store (``reports["memory_accesses"]``), the register layout it
assigned (GF(2) bases of registers, lanes and warps, ``compiler/layouts.py``) and the address as
``base + sum_d stride_d * x_d`` (``address``: strides as polynomials over argument names). From the
two, the addresses each lane of warp 0 touches in each vector instruction are known exactly, and so
are the 32-byte sectors and 128-byte lines one warp instruction touches, against the fewest that
could hold the bytes it moves.

Strides that are argument names take the launch's value when the profile recorded it, 1 when the
argument was specialised equal to 1, else an assumed row pitch (:data:`ASSUMED_PITCH` elements, at
least the argument's divisibility): a row of a large tensor, so distinct rows never share a sector.
The evidence names every assumption.  The uniform part of the address (program id, loop trip, base
pointer) is taken as 128-byte aligned, as allocator pointers and tile origins usually are.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

SECTOR = 32
LINE = 128
ASSUMED_PITCH = 4096   # elements: the row pitch assumed for an unrecorded stride argument


@dataclass
class AccessModel:
    """Sectors and lines of one access, per warp instruction (warp 0, every lane active)."""
    instructions: int
    sectors: int
    min_sectors: int
    lines: int
    min_lines: int
    bytes_moved: int
    strides: List[Optional[int]]          # bytes per step along each dim
    contiguous_dim: Optional[int]          # dim with a unit element stride (None: no such dim)
    fastest_dim: Optional[int]             # dim the layout puts consecutive lanes/registers along
    vector_elems: int
    assumed: Dict[str, int] = field(default_factory=dict)   # stride arguments given an assumed value

    @property
    def sectors_per_request(self) -> float:
        return self.sectors / max(1, self.instructions)

    @property
    def min_sectors_per_request(self) -> float:
        return self.min_sectors / max(1, self.instructions)

    @property
    def efficiency(self) -> float:
        return self.min_sectors / self.sectors if self.sectors else 1.0


def _coord(bases: Sequence[Sequence[int]], bits: int, rank: int) -> Tuple[int, ...]:
    c = [0] * rank
    for i, b in enumerate(bases):
        if bits >> i & 1:
            for d in range(rank):
                c[d] ^= int(b[d])
    return tuple(c)


def stride_values(address: dict, *, arg_values: Optional[Dict] = None, equal_to_1: Sequence[str] = (),
                  divisibility: Optional[Dict[str, int]] = None) -> Tuple[Optional[List[int]], Dict[str, int]]:
    """Element strides per dim from the report's polynomial form; (None, {}) for a gather.
    Returns the strides and the arguments whose value was assumed."""
    if not address or not address.get("affine"):
        return None, {}
    arg_values = arg_values or {}
    divisibility = divisibility or {}
    assumed: Dict[str, int] = {}
    out = []
    for terms in address.get("strides") or []:
        total = 0
        for coef, names in terms:
            v = int(coef)
            for n in names:
                if n in equal_to_1:
                    x = 1
                elif isinstance(arg_values.get(n), int) and not isinstance(arg_values.get(n), bool):
                    x = int(arg_values[n])
                else:
                    div = int(divisibility.get(n) or 1)
                    x = max(ASSUMED_PITCH, div) // div * div
                    assumed[n if n != "?" else "uniform value"] = x
                v *= x
            total += v
        out.append(total)
    return out, assumed


def fastest_dim(layout: dict) -> Optional[int]:
    """The dim along which a thread's first registers, else consecutive lanes, step by one element."""
    rank = len(layout.get("shape") or ())
    for bases in (layout.get("reg") or [])[:1], (layout.get("lane") or [])[:1]:
        for b in bases:
            nz = [d for d in range(rank) if b[d]]
            if len(nz) == 1 and b[nz[0]] == 1:
                return nz[0]
    for b in layout.get("lane") or []:
        nz = [d for d in range(rank) if b[d]]
        if nz:
            return nz[0]
    return None


def simulate(layout: dict, strides_elems: Sequence[int], elem_bytes: int, vector_elems: int) -> Tuple[int, int, int, int, int, int]:
    """(instructions, sectors, min_sectors, lines, min_lines, bytes) of warp 0 over the whole tile.

    One instruction moves one vector (``vector_elems`` consecutive registers) per lane; the
    registers of a thread are split into ``num_regs / vector_elems`` instructions.  Lanes holding the
    same element (a replicated layout) read it once."""
    shape = layout["shape"]
    rank = len(shape)
    reg, lane = layout.get("reg") or [], layout.get("lane") or []
    nregs = 1 << len(reg)
    vec = max(1, min(int(vector_elems), nregs))
    lane_c = [_coord(lane, l, rank) for l in range(32)]
    reg_c = [_coord(reg, r, rank) for r in range(nregs)]
    instr = sectors = min_sectors = lines = min_lines = moved = 0
    for j in range(nregs // vec):
        addrs = set()
        for r in range(j * vec, (j + 1) * vec):
            rc = reg_c[r]
            for lc in lane_c:
                off = 0
                for d in range(rank):
                    off += (rc[d] ^ lc[d]) * strides_elems[d]
                addrs.add(off * elem_bytes)
        secs, lns = set(), set()
        for a in addrs:
            for byte in (a, a + elem_bytes - 1):
                secs.add(byte // SECTOR)
                lns.add(byte // LINE)
        nbytes = len(addrs) * elem_bytes
        instr += 1
        sectors += len(secs)
        lines += len(lns)
        min_sectors += -(-nbytes // SECTOR)
        min_lines += -(-nbytes // LINE)
        moved += nbytes
    return instr, sectors, min_sectors, lines, min_lines, moved


def model_access(access: dict, *, arg_values=None, equal_to_1=(), divisibility=None) -> Optional[AccessModel]:
    """The sector model of one access report entry; None when the report lacks the layout or the
    access is not affine in the tile position (a gather: data-dependent)."""
    layout = access.get("layout")
    if not layout or not layout.get("shape"):
        return None
    strides, assumed = stride_values(access.get("address") or {}, arg_values=arg_values, equal_to_1=equal_to_1,
                                     divisibility=divisibility)
    if strides is None or len(strides) != len(layout["shape"]):
        return None
    eb = int(access.get("elem_bytes") or 4)
    vec = int(access.get("vector_elems") or 1)
    instr, secs, mins, lines, minl, moved = simulate(layout, strides, eb, vec)
    shape = layout["shape"]
    unit = [d for d, s in enumerate(strides) if abs(s) == 1 and shape[d] > 1]
    return AccessModel(instr, secs, mins, lines, minl, moved, [s * eb for s in strides],
                       unit[0] if unit else None, fastest_dim(layout), vec, assumed)


def converted_layout(shape: Sequence[int], num_warps: int, dim: int, elem_bytes: int) -> dict:
    """The blocked layout a layout conversion would give the access: ``dim`` fastest, 16-byte vectors."""
    from kernelc.compiler.layouts import default_blocked
    rank = len(shape)
    order = [dim] + [d for d in reversed(range(rank)) if d != dim]
    L = default_blocked(tuple(shape), num_warps, order=order, vec=max(1, 16 // elem_bytes))
    return {"shape": list(L.shape), "reg": [list(b) for b in L.reg], "lane": [list(b) for b in L.lane],
            "warp": [list(b) for b in L.warp], "vector_elems": L.contig_regs(dim)}
