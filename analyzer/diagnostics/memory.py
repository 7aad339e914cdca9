"""4. Uncoalesced or unvectorised global access.

Static, from the compiler's per-access report (``reports["memory_accesses"]``):

* ``uncoalesced-access`` (warning): contiguity 1 along every dimension of the tile: no two
  neighbouring elements are known to be adjacent in memory (a strided or gathered access), so a
  warp's request touches up to one 32-byte sector per element;
* ``unvectorised-access`` (info, warning on a hot line): narrower than 16 bytes because the
  addresses are not known to be aligned, or because the mask changes within a vector.

From samples: a hot line (>= 10 % of the kernel's samples) with a global access whose samples are
>= 40 % ``lg_throttle`` (the memory-instruction queue is full: too many narrow memory
instructions) is reported as uncoalesced even without a static finding, unless the compiler made the line's
accesses 16 bytes wide (then lg_throttle is bandwidth, not access shape).  ``long_scoreboard`` on
the line is added to the evidence.
"""
from __future__ import annotations

from typing import List

from .diagnostic import Diagnostic
from ._util import _scaled_by, evidence_samples, fmt_shape, pct, source_of
from ..facts import KernelFacts, base

HOT_LINE = 0.10
LG_THROTTLE_SHARE = 0.40
SECTOR = 32


def check(facts: KernelFacts) -> List[Diagnostic]:
    out: List[Diagnostic] = []
    flagged = set()
    # accesses with the compiler's layout and an affine address: .sectors counts their sectors exactly
    from .sectors import MIN_EFFICIENCY, models
    modelled = {id(a): m for a, m in models(facts)}
    for a, m in ((a, m) for a, m in models(facts) if m.efficiency < MIN_EFFICIENCY):
        flagged.add((base(a.get("file")), a.get("line")))
    for a in facts.memory_accesses:
        shape = list(a.get("shape") or [])
        contig = list(a.get("contiguity") or [])
        eb = int(a.get("elem_bytes") or 4)
        vb = int(a.get("vector_bytes") or eb)
        file, line = a.get("file"), a.get("line")
        kind = str(a.get("kind", "access"))
        what = "load" if kind.startswith("load") else ("store" if kind.startswith("store") else kind)
        where = facts.location(file, line)
        src = source_of(facts, file, line)
        dims = [d for d, s in enumerate(shape) if s > 1]
        ev = {"access": kind, "shape": shape, "elem_bytes": eb, "vector_bytes": vb, "contiguity": contig,
              "divisibility_bytes": a.get("divisibility_bytes"), "limited_by": a.get("limited_by")}
        ev.update(evidence_samples(facts, file, line, ("lg_throttle", "long_scoreboard")))
        basis = "static+samples" if "line_samples" in ev else "static"
        if dims and id(a) not in modelled and len(contig) == len(shape) and all(contig[d] <= 1 for d in dims):
            scaled = _scaled_by(facts, src)
            ev["sector_efficiency_at_most"] = round(eb / SECTOR, 4)
            hot = ev.get("line_share_of_kernel")
            msg = (f"{where}: {what} of a {fmt_shape(shape)} tile is uncoalesced: contiguity 1 in every dimension "
                   f"(no two neighbouring elements adjacent{', offsets scaled by ' + scaled if scaled else ''}), "
                   f"{vb}-byte accesses; a warp may fetch a 32-byte sector per {eb}-byte element "
                   f"(<= {pct(eb / SECTOR)} of the bytes moved are used)")
            if hot is not None:
                msg += f"; {pct(hot)} of the kernel's samples are on this line"
            sev = "warning"
            stride_args = [n for n, t in facts.signature.items() if "stride" in n.lower() and not str(t).startswith("*")]
            if not facts.specialization_known and stride_args:
                # recompiled without knowing which strides were 1 at launch: this may be an artifact of that
                sev = "info"
                msg += (" (the profile does not record which stride arguments were 1 at launch; if one was, "
                        "this access is coalesced in the real kernel)")
            fix = ("make the tile's fastest dimension walk memory with stride 1: lay the data out so that "
                   "consecutive elements of a row are adjacent (transpose once, or pass a .contiguous() tensor), "
                   "or gather through shared memory; if a stride argument is 1 at run time, keep it specialised "
                   "(not in do_not_specialize) so the compiler can prove contiguity")
            out.append(Diagnostic("uncoalesced-access", 4, f"uncoalesced global {what}", sev, msg, fix,
                                  facts.full_path(file) or file, line, src, ev, [], basis))
            flagged.add((base(file), line))
            continue
        limited = set(a.get("limited_by") or ())
        if vb >= 16 or not limited or not dims:
            continue
        share = ev.get("line_share_of_kernel")
        sev = "warning" if share is not None and share >= 0.10 else "info"
        if "alignment_elems" in limited:
            div = a.get("divisibility_bytes")
            msg = (f"{where}: {what} of a {fmt_shape(shape)} tile uses {vb}-byte accesses instead of 16: the addresses "
                   f"are only known to be {div} bytes aligned")
            fix = ("allocate with 16-byte alignment and make sizes/strides multiples of "
                   f"{max(1, 16 // eb)} elements so the runtime specialises them (divisibility 16), or assert it with "
                   "kl.multiple_of(offsets, 16)")
        elif "mask_constancy" in limited:
            msg = (f"{where}: {what} of a {fmt_shape(shape)} tile uses {vb}-byte accesses: the mask is not constant "
                   f"over a 16-byte vector ({a.get('limits', {}).get('mask_constancy')} elements)")
            fix = "pad the masked dimension to a multiple of the vector width, or mask whole rows instead of elements"
        else:
            continue
        out.append(Diagnostic("unvectorised-access", 4, f"unvectorised global {what}", sev, msg, fix,
                              facts.full_path(file) or file, line, src, ev, [], basis))
        flagged.add((base(file), line))
    # samples: lg_throttle-dominated lines with global memory instructions
    if facts.total_samples:
        mem_lines = {(base(a.get("file")), a.get("line")) for a in facts.memory_accesses}
        # lines whose accesses the compiler made 16-byte wide: lg_throttle there is bandwidth, not
        # access shape
        wide = {(base(a.get("file")), a.get("line")) for a in facts.memory_accesses
                if int(a.get("vector_bytes") or 0) >= 16}
        for ins in facts.opcodes("LDG", "STG", "LD", "ST", "RED", "ATOMG"):
            if ins.line is not None:
                mem_lines.add((base(ins.file), ins.line))
        for s in facts.hot_lines(20):
            key = (s.file, s.line)
            if key in flagged or key in wide or \
                    key not in mem_lines and not any(o.startswith(("LDG", "STG")) for o in s.opcodes):
                continue
            sh = s.samples / facts.total_samples
            lg = s.share(("lg_throttle",))
            if sh >= HOT_LINE and lg >= LG_THROTTLE_SHARE:
                ev = {"line_samples": s.samples, "line_share_of_kernel": round(sh, 4),
                      "lg_throttle_share_of_line": round(lg, 4),
                      "long_scoreboard_share_of_line": round(s.share(("long_scoreboard",)), 4)}
                out.append(Diagnostic(
                    "uncoalesced-access", 4, "memory-instruction bound global access", "warning",
                    f"{facts.location(s.file, s.line)}: {pct(lg)} of this line's samples wait on lg_throttle (the "
                    f"memory-instruction queue is full) and the line has {pct(sh)} of the kernel's samples: too many "
                    "narrow or scattered global accesses",
                    "vectorise and coalesce the access: contiguous, 16-byte aligned addresses along the tile's fastest "
                    "dimension (LDG.E.128), fewer, wider memory instructions",
                    facts.full_path(s.file) or s.file, s.line, source_of(facts, s.file, s.line), ev, [], "samples"))
    return out
