"""Terminal rendering: aligned metric columns, then the frame tree; colour with rich or plain text.

Every line is first laid out as a list of ``(text, style)`` segments, so the plain text and the
coloured output have the same layout character for character (plain output is what tests and
pipes see; rich only adds the styles).
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from typing import IO, Iterable, Sequence

from ..textsafe import encodable, term_escape

Segment = tuple[str, "str | None"]
Line = list[Segment]

# Share bands for the first metric: (lower bound of the fraction, rich style, legend label).
SHARE_BANDS: tuple[tuple[float, str, str], ...] = (
    (0.50, "bold red", ">= 50%"),
    (0.20, "yellow", "20-50%"),
    (0.05, "green", "5-20%"),
    (0.00, "cyan", "< 5%"),
)
# Diff colouring by sign: this profile has more (+) or less (-) than the other one.
DIFF_STYLES = {"+": "red", "-": "green"}
DIM = "dim"
HEADER_STYLE = "bold"
ELLIPSIS = "…"
COLUMN_GAP = "  "
DEFAULT_WIDTH = 160  # when stdout is not a terminal, so piped output does not depend on it
MIN_NAME_WIDTH = 24


@dataclass
class RowSpec:
    """One output row: metric cells, then a tree prefix and a name (shortened to fit)."""

    cells: list[str]
    name: str
    prefix: str = ""
    first_style: str | None = None
    name_style: str | None = None
    suffix: str = ""  # e.g. " (only in other)", dimmed, never shortened
    cell_styles: list[str | None] = field(default_factory=list)


def format_value(value: float | None, kind: str, *, signed: bool = False) -> str:
    """Fixed, readable number formatting: integers stay integers, shares get one decimal, other
    floats three decimals, very large/small ones scientific."""
    if value is None:
        return ""
    sign = "+" if signed and value != 0 else ""  # an unchanged value reads "0", not "+0"
    if kind == "share":
        return f"{value:{sign}.1f}"
    if isinstance(value, int) or (kind in ("raw", "own") and float(value).is_integer() and abs(value) < 1e15):
        return f"{int(value):{sign}d}"
    a = abs(value)
    if a != 0 and (a >= 1e6 or a < 1e-3):
        return f"{value:{sign}.3e}"
    return f"{value:{sign}.3f}"


def share_style(fraction: float | None) -> str | None:
    """Rich style of a value that is ``fraction`` of the total (or of the largest value)."""
    if fraction is None:
        return None
    for lower, style, _ in SHARE_BANDS:
        if fraction >= lower:
            return style
    return SHARE_BANDS[-1][1]


def diff_style(value: float | None) -> str | None:
    if not value:
        return None
    return DIFF_STYLES["+" if value > 0 else "-"]


def shorten_middle(text: str, width: int) -> str:
    """``"abcdefghij"`` -> ``"abcd…ghij"``: long kernel names keep their start and their end."""
    if width <= 0 or len(text) <= width:
        return text
    if width == 1:
        return ELLIPSIS
    head = (width - 1 + 1) // 2
    tail = width - 1 - head
    return text[:head] + ELLIPSIS + (text[-tail:] if tail else "")


def layout(headers: Sequence[str], rows: Sequence[RowSpec], *, width: int, name_header: str = "name") -> list[Line]:
    """Lay the rows out: right-aligned metric columns, then prefix + name within ``width``.
    Headers, cells and names come from the profile: they are escaped (:func:`term_escape`) before
    they are measured, so a hostile name is shown visibly and the columns stay aligned."""
    headers = [term_escape(h) for h in headers]
    name_header = term_escape(name_header)
    rows = [_escaped_row(r) for r in rows]
    widths = [len(h) for h in headers]
    for r in rows:
        for i, c in enumerate(r.cells):
            widths[i] = max(widths[i], len(c))
    metric_block = sum(widths) + len(COLUMN_GAP) * len(widths)
    lines: list[Line] = []
    header: Line = []
    for h, w in zip(headers, widths):
        header.append((h.rjust(w), HEADER_STYLE))
        header.append((COLUMN_GAP, None))
    header.append((name_header, HEADER_STYLE))
    lines.append(header)
    for r in rows:
        line: Line = []
        for i, (c, w) in enumerate(zip(r.cells, widths)):
            style = r.first_style if i == 0 else (r.cell_styles[i] if i < len(r.cell_styles) else None)
            line.append((c.rjust(w), style))
            line.append((COLUMN_GAP, None))
        room = max(MIN_NAME_WIDTH, width - metric_block - len(r.prefix) - len(r.suffix))
        if r.prefix:
            line.append((r.prefix, DIM))
        line.append((shorten_middle(r.name, room), r.name_style))
        if r.suffix:
            line.append((r.suffix, DIM))
        lines.append(line)
    return lines


def _escaped_row(r: RowSpec) -> RowSpec:
    return RowSpec([term_escape(c) for c in r.cells], term_escape(r.name), term_escape(r.prefix), r.first_style,
                   r.name_style, term_escape(r.suffix), r.cell_styles)


def plain(line: Line) -> str:
    """The line as text; every segment escaped for the terminal (a no-op on escaped text)."""
    return "".join(term_escape(text) for text, _ in line).rstrip()


def legend_line(metric_name: str, relative_to: str) -> Line:
    """``colour of time/ms (share of the total): ■ >= 50%  ■ 20-50% ...``"""
    line: Line = [(f"colour of {metric_name} ({relative_to}): ", DIM)]
    for i, (_, style, label) in enumerate(SHARE_BANDS):
        line.append(("■ " + label, style))
        if i < len(SHARE_BANDS) - 1:
            line.append(("  ", None))
    return line


def diff_legend_line() -> Line:
    return [("colour: ", DIM), ("+ this profile has more", DIFF_STYLES["+"]), ("  ", None),
            ("- this profile has less", DIFF_STYLES["-"])]


class Output:
    """Writes laid-out lines either as plain text or through a rich console."""

    def __init__(self, *, color: bool, width: int, file: IO[str] | None = None):
        self.color = color
        self.width = width
        self.file = file if file is not None else sys.stdout
        self._console = None
        if color:
            from rich.console import Console  # imported only when colour is on

            self._console = Console(file=self.file, force_terminal=True, highlight=False,
                                    soft_wrap=True, width=max(width, 40), emoji=False,
                                    markup=False)

    def lines(self, lines: Iterable[Line]) -> None:
        for line in lines:
            self.line(line)

    def line(self, line: Line) -> None:
        # Every line passes through term_escape here, whatever built it: nothing from a profile
        # reaches the terminal raw.  Characters the stream's encoding lacks become escapes too.
        enc = getattr(self.file, "encoding", None)
        if self._console is None:
            self.file.write(encodable(plain(line), enc) + "\n")
            return
        from rich.text import Text

        text = Text()
        for chunk, style in line:
            text.append(encodable(term_escape(chunk), enc), style=style or "")
        text.rstrip()
        self._console.print(text)

    def text(self, s: str, style: str | None = None) -> None:
        self.line([(s, style)])


def want_color(no_color_flag: bool, stream: IO[str] | None = None) -> bool:
    """Colour when writing to a terminal, unless ``--no-color`` or ``NO_COLOR`` is set;
    ``FORCE_COLOR`` forces it (as rich and many tools do)."""
    if no_color_flag or os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    stream = stream if stream is not None else sys.stdout
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def output_width(requested: int | None, stream: IO[str] | None = None) -> int:
    """``--width`` if given; the terminal's width on a terminal; else :data:`DEFAULT_WIDTH`."""
    if requested:
        return max(requested, 40)
    stream = stream if stream is not None else sys.stdout
    try:
        if stream.isatty():
            return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
    except (AttributeError, ValueError):
        pass
    return DEFAULT_WIDTH
