"""4. Exact memory efficiency per global access: 32-byte sectors per warp request (``uncoalesced-access``).

For every global load/store with the compiler's layout and affine address facts
(:mod:`analyzer.sectors`), the sectors one warp instruction touches against the fewest that hold
the bytes it moves.  An access below :data:`MIN_EFFICIENCY` is a finding when its line is hot
(>= :data:`HOT_LINE` of the kernel's PC samples) or the kernel is memory-bound
(:mod:`analyzer.roofline`), whatever the line's stall mix; else it is an info.  With a measured time,
memory-bound also counts the whole sectors the inefficient accesses fetch
(:func:`analyzer.roofline.sector_fraction`): a strided load that moves four times its bytes bounds the
kernel by memory traffic even when the useful bytes reach a fraction of the DRAM peak (without samples
this is the only way to tell such a kernel from a latency-bound one).

The fix depends on the address:

* a dim with unit stride exists but the layout walks another one: the compiler can fix it with a
  layout conversion (through shared memory) to a layout whose fastest dim is the contiguous one --
  the evidence gives the sectors after the conversion and the shared memory it costs;
* no dim has unit stride (a column walk, offsets scaled by a stride): the code or the data layout
  must change.

Gathers (addresses from loaded values) have no static address form; :mod:`.memory` keeps its
contiguity rule for them.
"""
from __future__ import annotations

from typing import List

from .diagnostic import Diagnostic
from ._util import evidence_samples, fmt_shape, numel, pct, source_of
from .. import roofline as R
from ..facts import KernelFacts
from ..sectors import converted_layout, model_access, simulate

MIN_EFFICIENCY = 0.5
HOT_LINE = 0.10


def models(facts: KernelFacts):
    """(access, AccessModel) for every modelled access of the kernel."""
    spec = facts.specialization or {}
    div = dict(spec.get("divisibility") or {})
    eq1 = tuple(spec.get("equal_to_1") or ())
    out = []
    for a in facts.memory_accesses:
        if a.get("engine") == "tma":
            continue
        m = model_access(a, arg_values=facts.arg_values, equal_to_1=eq1, divisibility=div)
        if m is not None:
            out.append((a, m))
    return out


CONVERT_OPS = ("convert_layout",)


def _conversions(facts: KernelFacts):
    """{(file, line): [bytes moved through shared memory]} of the layout conversions in the tile IR."""
    from ..tir import shape_of
    from ..facts import base
    out = {}
    for o in facts.tir.ops:
        if o.op in CONVERT_OPS:
            ty = o.result_type.strip()
            shape = shape_of(ty)
            elt = ty.rstrip(">").rsplit("x", 1)[-1] if shape else ""
            bits = int("".join(ch for ch in elt if ch.isdigit()) or 32)
            out.setdefault((base(o.file), o.line), []).append(numel(shape) * max(1, bits // 8))
    return out


def check(facts: KernelFacts) -> List[Diagnostic]:
    out: List[Diagnostic] = []
    mem_bound = None
    conv = _conversions(facts) if facts.tir.ops else {}
    from ..facts import base
    ms = models(facts)
    sector_frac, by_sectors = None, False
    for a, m in ms:
        key = (base(a.get("file")), a.get("line"))
        if m.efficiency >= MIN_EFFICIENCY:
            if key in conv:
                out.append(_converted(facts, a, m, sum(conv[key])))
            continue
        if mem_bound is None:
            rl = R.roofline(facts)
            mem_bound = rl is not None and rl.bound == "memory"
            sector_frac = R.sector_fraction(facts, rl, [(x, mx.efficiency) for x, mx in ms
                                                        if mx.efficiency < MIN_EFFICIENCY])
            by_sectors = not mem_bound and sector_frac is not None and sector_frac >= R.BOUND_FRACTION
            mem_bound = mem_bound or by_sectors
        file, line = a.get("file"), a.get("line")
        kind = str(a.get("kind", "access"))
        what = "load" if kind.startswith("load") else ("store" if kind.startswith("store") else kind)
        shape = list(a.get("shape") or [])
        eb = int(a.get("elem_bytes") or 4)
        ev = {"access": kind, "shape": shape, "elem_bytes": eb, "vector_bytes": m.vector_elems * eb,
              "sectors_per_request": round(m.sectors_per_request, 2),
              "min_sectors_per_request": round(m.min_sectors_per_request, 2),
              "sector_efficiency": round(m.efficiency, 4),
              "lines_per_request": round(m.lines / max(1, m.instructions), 2),
              "min_lines_per_request": round(m.min_lines / max(1, m.instructions), 2),
              "requests_per_warp": m.instructions, "stride_bytes": m.strides,
              "contiguous_dim": m.contiguous_dim, "layout_fastest_dim": m.fastest_dim,
              "contiguity": list(a.get("contiguity") or [])}
        if m.assumed:
            ev["assumed_strides"] = m.assumed
        ev.update(evidence_samples(facts, file, line, ("lg_throttle", "long_scoreboard")))
        hot = ev.get("line_share_of_kernel")
        finding = (hot is not None and hot >= HOT_LINE) or mem_bound
        where = facts.location(file, line)
        if m.contiguous_dim is not None:
            dims = f"dim {m.contiguous_dim}"
        else:
            from ._util import _scaled_by
            scaled = _scaled_by(facts, source_of(facts, file, line))
            dims = "no dim (no dimension has stride 1" + (f"; offsets scaled by {scaled}" if scaled else "") + ")"
        msg = (f"{where}: {what} of a {fmt_shape(shape)} tile touches {m.sectors_per_request:.1f} sectors per warp "
               f"request where {m.min_sectors_per_request:.1f} hold its bytes ({pct(m.efficiency)} sector efficiency"
               f", {ev['lines_per_request']:g} lines/request); memory is contiguous along {dims}, the layout's "
               f"fastest dim is {m.fastest_dim}")
        if hot is not None:
            msg += f"; {pct(hot)} of the kernel's samples are on this line"
        if sector_frac is not None:
            ev["sector_traffic_pct_of_dram_peak"] = round(100 * sector_frac, 2)
        if mem_bound:
            msg += ("; the kernel is memory-bound" + (f" counting the whole sectors its accesses fetch "
                                                      f"({pct(sector_frac)} of the DRAM peak)" if by_sectors else ""))
        if m.assumed:
            msg += " (assumed " + ", ".join(f"{k}={v}" for k, v in m.assumed.items()) + ")"
        if m.contiguous_dim is not None and m.contiguous_dim != m.fastest_dim:
            warps = 1 << len(a["layout"].get("warp") or [])
            conv = converted_layout(a["layout"]["shape"], warps, m.contiguous_dim, eb)
            strides_el = [s // eb for s in m.strides]
            ci, cs, cmin, _, _, _ = simulate(conv, strides_el, eb, conv["vector_elems"])
            ev["after_conversion"] = {"sectors_per_request": round(cs / max(1, ci), 2),
                                      "sector_efficiency": round(cmin / cs, 4) if cs else 1.0,
                                      "requests_per_warp": ci,
                                      "shared_bytes": numel(shape) * eb}
            ev["fix_by"] = "compiler"
            fix = (f"the compiler can fix this: convert the {what}'s layout (convert_layout through "
                   f"{numel(shape) * eb} bytes of shared memory) to one whose fastest dim is {m.contiguous_dim}: "
                   f"{ci} requests of {ev['after_conversion']['sectors_per_request']:g} sectors per warp instead of "
                   f"{m.instructions} of {m.sectors_per_request:g} "
                   f"({pct(ev['after_conversion']['sector_efficiency'])} efficiency); until it does, kl.trans() the "
                   f"tile and index it with the transposed offsets so that its last dim is dim {m.contiguous_dim}")
        else:
            ev["fix_by"] = "code"
            fix = ("the code must change: no dimension of this access walks memory with stride 1 (a column walk or "
                   "offsets scaled by a stride); lay the data out so the tile's dimension is contiguous (transpose "
                   "once, .contiguous()), or make the program walk rows instead of columns")
        saving = (hot if hot is not None else R.access_share(facts, a)) * (1.0 - m.efficiency)
        ev["est_time_saved_share"] = round(saving, 4)
        sev = "warning" if finding else "info"
        out.append(Diagnostic("uncoalesced-access", 4, f"uncoalesced global {what}", sev, msg, fix,
                              facts.full_path(file) or file, line, source_of(facts, file, line), ev, [],
                              "static+samples" if "line_samples" in ev else "static"))
    return out


def _converted(facts: KernelFacts, a: dict, m, shared_bytes: int) -> Diagnostic:
    """An info: the compiler converts this access's layout, and what that buys and costs."""
    file, line = a.get("file"), a.get("line")
    kind = str(a.get("kind", "access"))
    what = "load" if kind.startswith("load") else ("store" if kind.startswith("store") else kind)
    ev = {"access": kind, "sectors_per_request": round(m.sectors_per_request, 2),
          "min_sectors_per_request": round(m.min_sectors_per_request, 2), "sector_efficiency": round(m.efficiency, 4),
          "requests_per_warp": m.instructions, "conversion_shared_bytes": shared_bytes,
          "contiguous_dim": m.contiguous_dim, "layout_fastest_dim": m.fastest_dim, "est_time_saved_share": 0.0}
    ev.update(evidence_samples(facts, file, line, ("barrier", "mio_throttle", "short_scoreboard")))
    msg = (f"{facts.location(file, line)}: the compiler converts this {what}'s layout through {shared_bytes} bytes "
           f"of shared memory so that it walks dim {m.contiguous_dim}: {m.sectors_per_request:g} sectors per request "
           f"({pct(m.efficiency)} efficiency) in {m.instructions} requests per warp")
    if "line_samples" in ev:
        msg += (f"; the conversion's cost shows as this line's barrier/shared-memory stalls "
                f"({pct(ev['barrier_share_of_line'] + ev['mio_throttle_share_of_line'] + ev['short_scoreboard_share_of_line'])}"
                f" of its samples)")
    return Diagnostic("layout-conversion", 4, f"layout converted for a coalesced {what}", "info", msg,
                      "nothing to do; to avoid the shared-memory round trip, compute the tile in the layout memory "
                      "wants (index it with the contiguous dim last)", facts.full_path(file) or file, line,
                      source_of(facts, file, line), ev, [], "static+samples" if "line_samples" in ev else "static")
