"""``--source KERNEL``: a kernel's source with per-line samples, share and top stall reasons.

Everything comes from the profile alone: the text from the kernel frame's ``kprof.source``, the
samples from the per-line sample frames under it (kprof's ``"file.py:42"`` line frames, or
Proton's ``"/dir/file.py:42@function"`` PC-sampling frames), or, failing those, from the frame's
``kprof.instructions``.  A Proton profile has no source text: its sampled lines are listed alone.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from .. import format as fmt
from . import render
from .render import Line
from .tree import Profile, VNode

SAMPLE_FRAME = re.compile(r"^(?P<file>.*?):(?P<line>\d+)(?:@(?P<func>.*))?$")
SAMPLES, STALLED, STALL_PREFIX = "num_samples", "num_stalled_samples", "stalled_"
# Not stalls: "selected" means the warp was issuing when sampled.
NOT_A_STALL = frozenset({"selected"})
TOP_STALLS = 2


class SourceViewError(ValueError):
    """No such kernel, or an ambiguous name; the message is one line."""


@dataclass
class LineStats:
    samples: float = 0
    stalled: float = 0
    stalls: dict[str, float] = field(default_factory=dict)
    opcodes: dict[str, float] = field(default_factory=dict)

    def add_stalls(self, stalls: dict[str, Any]) -> None:
        for reason, n in stalls.items():
            if isinstance(n, (int, float)) and not isinstance(n, bool) and n:
                key = stall_name(reason)
                self.stalls[key] = self.stalls.get(key, 0) + n


def stall_name(metric: str) -> str:
    """``stalled_long_scoreboard`` -> ``long_scoreboard`` (Proton's ``stalled_not_Selected`` ->
    ``not_selected``)."""
    name = metric[len(STALL_PREFIX):] if metric.startswith(STALL_PREFIX) else metric
    return name.lower()


def kernel_identity(node: VNode) -> str:
    """The kernel's own name: ``kprof.kernel``, else the frame name without kprof's
    ``" [grid ...]"`` launch summary."""
    if node.extra and isinstance(node.extra.get("kernel"), str):
        return node.extra["kernel"]
    return node.name.split(" [", 1)[0]


def _is_sample_frame(node: VNode) -> bool:
    return SAMPLES in node.own and bool(SAMPLE_FRAME.match(node.name))


def _is_kernel_frame(node: VNode) -> bool:
    if node.extra and node.extra.get("kind") == "kernel":
        return True
    if fmt.DEVICE_ID in node.own:
        return True
    return any(_is_sample_frame(c) for c in node.children)


def kernel_frames(root: VNode) -> list[VNode]:
    return [n for n, d in root.walk() if d > 0 and _is_kernel_frame(n) and not _is_sample_frame(n)]


def find_kernel(root: VNode, query: str) -> tuple[str, list[VNode]]:
    """``(identity, frames)`` for a kernel name: exact, then case-insensitive, then a regex/
    substring that picks out exactly one kernel.  Raises :class:`SourceViewError`."""
    frames = kernel_frames(root)
    by_id: dict[str, list[VNode]] = {}
    for f in frames:
        by_id.setdefault(kernel_identity(f), []).append(f)
    for test in (lambda k, f: k == query, lambda k, f: k.lower() == query.lower(),
                 lambda k, f: any(x.name == query for x in f)):
        hits = [k for k, fs in by_id.items() if test(k, fs)]
        if len(hits) == 1:
            return hits[0], by_id[hits[0]]
    try:
        pattern = re.compile(query, re.IGNORECASE)
        hits = [k for k in by_id if pattern.search(k)]
    except re.error:
        hits = [k for k in by_id if query.lower() in k.lower()]
    if len(hits) == 1:
        return hits[0], by_id[hits[0]]
    if len(hits) > 1:
        raise SourceViewError(f"--source {query!r} matches {len(hits)} kernels ({', '.join(sorted(hits))}); "
                              "give the full kernel name")
    known = sorted(by_id)
    close = difflib.get_close_matches(query, known, n=3, cutoff=0.5)
    hint = f" (did you mean {', '.join(close[:-1]) + ' or ' + close[-1] if len(close) > 1 else close[0]}?)" if close else ""
    listing = ", ".join(known[:8]) + (" ..." if len(known) > 8 else "") if known else "none"
    raise SourceViewError(f"--source: no kernel named {query!r} in the profile{hint}; kernels: {listing}")


def collect(frames: Iterable[VNode]) -> tuple[dict[tuple[str, int], LineStats], str]:
    """Per ``(file basename, line)`` statistics over the kernel's frames, and where they came
    from (``"line frames"``, ``"instructions"`` or ``""`` when nothing was sampled)."""
    stats: dict[tuple[str, int], LineStats] = {}
    frames = list(frames)
    src_file = _source_file(frames)
    for f in frames:
        for node, d in f.walk():
            if d == 0 or not _is_sample_frame(node):
                continue
            m = SAMPLE_FRAME.match(node.name)
            key = (os.path.basename(m.group("file")), int(m.group("line")))
            s = stats.setdefault(key, LineStats())
            s.samples += node.own.get(SAMPLES, 0) or 0
            s.stalled += node.own.get(STALLED, 0) or 0
            s.add_stalls({k: v for k, v in node.own.items() if k.startswith(STALL_PREFIX)})
    origin = "line frames" if stats else ""
    base = os.path.basename(src_file) if src_file else "?"
    for f in frames:
        for ins in (f.extra or {}).get("instructions") or ():
            line = ins.get("line")
            if not isinstance(line, int):
                continue
            n = ins.get("samples") or 0
            key = (os.path.basename(ins["file"]) if isinstance(ins.get("file"), str) else base, line)
            s = stats.setdefault(key, LineStats())
            if origin != "line frames":  # line frames already counted these samples
                s.samples += n
                stalls = ins.get("stalls") or {}
                s.add_stalls(stalls)
                s.stalled += sum(v for k, v in stalls.items() if stall_name(k) not in NOT_A_STALL
                                 and isinstance(v, (int, float)))
            if n and isinstance(ins.get("opcode"), str):
                s.opcodes[ins["opcode"]] = s.opcodes.get(ins["opcode"], 0) + n
    if not origin and any(s.samples for s in stats.values()):
        origin = "instructions"
    return stats, origin


def _source_file(frames: list[VNode]) -> str | None:
    for f in frames:
        src = (f.extra or {}).get("source")
        if isinstance(src, dict) and isinstance(src.get("file"), str):
            return src["file"]
    return None


def _top_stalls(s: LineStats) -> str:
    if not s.samples:
        return ""
    reasons = sorted(((n, r) for r, n in s.stalls.items() if r not in NOT_A_STALL), key=lambda t: (-t[0], t[1]))
    return ", ".join(f"{r} {100 * n / s.samples:.0f}%" for n, r in reasons[:TOP_STALLS])


def _hot_opcode(s: LineStats) -> str:
    if not s.opcodes:
        return ""
    op, n = max(s.opcodes.items(), key=lambda t: (t[1], t[0]))
    return f"{op} ({_num(n)})"


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:.1f}"


def source_report(profile: Profile, query: str, *, width: int, color: bool) -> list[Line]:
    """The lines of the ``--source`` view (``width`` is accepted like the other reports', but
    source lines are never shortened)."""
    ident, frames = find_kernel(profile.root, query)
    stats, origin = collect(frames)
    src = next((f.extra["source"] for f in frames
                if f.extra and isinstance(f.extra.get("source"), dict)), None)
    total = sum(s.samples for s in stats.values())
    stalled = sum(s.stalled for s in stats.values())
    out: list[Line] = []
    where = f" ({src.get('file')})" if src and src.get("file") else ""
    out.append([(f"kernel {ident}{where}", render.HEADER_STYLE)])
    distinct = sorted({f.name for f in frames})
    if len(frames) > 1:
        out.append([(f"{len(frames)} frames merged: " + "; ".join(distinct), render.DIM)])
    if total:
        pct = f" ({100 * stalled / total:.1f}%)" if total else ""
        out.append([(f"samples: {_num(total)} in total, {_num(stalled)} stalled{pct}; from {origin}", None)])
    else:
        out.append([("no instruction samples for this kernel (profile it with mode=\"pcsampling\" to get them)",
                     render.DIM)])
    show_ops = any(s.opcodes for s in stats.values())
    headers = ["line", "samples", "%", "top stalls"] + (["hot instruction"] if show_ops else [])
    src_base = os.path.basename(src["file"]) if src and isinstance(src.get("file"), str) else None

    def cells(line_no: int | str, s: LineStats | None) -> tuple[list[str], str | None]:
        if s is None or not s.samples:
            return [str(line_no), "", "", ""] + ([""] if show_ops else []), None
        frac = s.samples / total if total else None
        c = [str(line_no), _num(s.samples), f"{100 * frac:.1f}" if frac is not None else "", _top_stalls(s)]
        if show_ops:
            c.append(_hot_opcode(s))
        return c, render.share_style(frac)

    rows: list[tuple[list[str], str | None, str]] = []
    used: set[tuple[str, int]] = set()
    if src and isinstance(src.get("lines"), list):
        first = int(src.get("first_line", 1) or 1)
        own_keys = {k for k in stats if src_base is None or k[0] == src_base}
        for i, text in enumerate(src["lines"]):
            line_no = first + i
            key = next((k for k in own_keys if k[1] == line_no), None)
            if key is not None:
                used.add(key)
            c, style = cells(line_no, stats.get(key) if key else None)
            rows.append((c, style, str(text)))
    else:
        out.append([("the profile stores no source text for this kernel; listing sampled lines only",
                     render.DIM)])
    rest = sorted((k for k in stats if k not in used and stats[k].samples), key=lambda k: (k[0], k[1]))
    body = _layout_source(headers, rows)
    out.extend(body)
    if rest:
        label = "samples in other files or outside the stored source:" if rows else "sampled lines:"
        out.append([(label, render.HEADER_STYLE if not rows else None)])
        extra_rows = []
        for k in rest:
            c, style = cells(k[1], stats[k])
            c[0] = f"{k[0]}:{k[1]}"
            extra_rows.append((c, style, ""))
        out.extend(_layout_source(["file:line"] + headers[1:], extra_rows, source_header=None))
    if color and total:
        out.append(render.legend_line("samples", "share of the kernel's samples"))
    return out


def _layout_source(headers: list[str], rows: list[tuple[list[str], str | None, str]],
                   source_header: str | None = "source") -> list[Line]:
    widths = [len(h) for h in headers]
    for c, _, _ in rows:
        for i, cell in enumerate(c):
            widths[i] = max(widths[i], len(cell))
    left = {3, 4}  # text columns (stall reasons, opcode) read better left-aligned
    gap = render.COLUMN_GAP

    def just(i: int, text: str) -> str:
        return text.ljust(widths[i]) if i in left else text.rjust(widths[i])

    lines: list[Line] = []
    head: Line = []
    for i, h in enumerate(headers):
        head += [(just(i, h), render.HEADER_STYLE), (gap, None)]
    if source_header:
        head.append((source_header, render.HEADER_STYLE))
    lines.append(head)
    # Source text is never shortened: a cut line of code hides what the numbers are about.
    for c, style, text in rows:
        line: Line = []
        for i, cell in enumerate(c):
            s = style if i in (1, 2) else (render.DIM if i == 0 else None)
            line += [(just(i, cell), s), (gap, None)]
        if text:
            line.append((text, None))
        lines.append(line)
    return lines
