"""The viewer's reports: the frame tree, the flat hottest-first list, the metric list and the diff.

Each report function returns laid-out lines (see :mod:`.render`); the CLI only prints them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from .. import format as fmt
from . import metrics as M
from . import peaks, render
from .render import Line, RowSpec
from .tree import Profile, VNode

TREE_BRANCH, TREE_LAST, TREE_PIPE, TREE_SPACE = "├─ ", "└─ ", "│  ", "   "


def context(profile: Profile, root: VNode | None = None) -> M.EvalContext:
    """Evaluation context of a profile (total = the root after filtering)."""
    return M.EvalContext(root if root is not None else profile.root, profile.device_info,
                         M.main_time_metric(profile.raw_names))


def _first_fraction(metric: M.Metric, value: float | None, total: float | None, largest: float | None) -> float | None:
    """How "hot" a first-metric value is: share of the total for summable metrics and shares,
    else relative to the largest value shown."""
    if value is None:
        return None
    if metric.kind == "share":
        return value / 100.0
    if metric.additive:
        return value / total if total else None
    return value / largest if largest else None


def relative_to(metric: M.Metric) -> str:
    return "share of the total" if metric.additive or metric.kind == "share" else "relative to the largest value"


# --- the tree -----------------------------------------------------------------------------------


@dataclass(eq=False)
class _Shown:
    node: Any
    values: list[float | None]
    children: list["_Shown"] = field(default_factory=list)
    name: str = ""
    suffix: str = ""
    name_style: str | None = None


def _select(root: Any, children_of: Callable[[Any], list[Any]], values_of: Callable[[Any], list[float | None]],
            *, depth: int, threshold: float | None, key: Callable[[float | None], float | None],
            name_of: Callable[[Any], tuple[str, str, str | None]]) -> _Shown:
    """Which frames to show: a frame is kept if it has a value and passes ``-t`` on the first
    metric, or if a descendant is kept; the root always is; ``-d`` cuts below ``depth``.
    Siblings are ordered hottest first by ``key(first value)`` (frames without a value last)."""

    def visit(node: Any, d: int) -> _Shown | None:
        vals = values_of(node)
        kids = [k for k in (visit(c, d + 1) for c in children_of(node)) if k is not None]
        has_value = any(v is not None for v in vals)
        k0 = key(vals[0]) if vals else None
        passes = has_value and (threshold is None or (k0 is not None and k0 >= threshold))
        if d > 0 and not passes and not kids:
            return None
        kids.sort(key=lambda s: (key(s.values[0]) is None, -(key(s.values[0]) or 0.0)))
        if d >= depth:
            kids = []
        name, suffix, style = name_of(node)
        return _Shown(node, vals, kids, name, suffix, style)

    shown = visit(root, 0)
    assert shown is not None
    return shown


def _rows_from_shown(shown: _Shown, fmt_cells: Callable[[list[float | None]], tuple[list[str], str | None]]) -> list[RowSpec]:
    rows: list[RowSpec] = []

    def emit(s: _Shown, prefix: str, child_prefix: str) -> None:
        cells, style = fmt_cells(s.values)
        rows.append(RowSpec(cells, s.name, prefix, style, s.name_style, s.suffix))
        for i, c in enumerate(s.children):
            last = i == len(s.children) - 1
            emit(c, child_prefix + (TREE_LAST if last else TREE_BRANCH),
                 child_prefix + (TREE_SPACE if last else TREE_PIPE))

    emit(shown, "", "")
    return rows


def tree_report(profile: Profile, metrics: Sequence[M.Metric], *, depth: int, threshold: float | None,
                width: int, color: bool) -> list[Line]:
    """The frame tree with one column per metric (first metric coloured by its share)."""
    ctx = context(profile)
    values_of = lambda n: [m.value(n, ctx) for m in metrics]  # noqa: E731
    shown = _select(profile.root, lambda n: n.children, values_of, depth=depth, threshold=threshold,
                    key=lambda v: v, name_of=lambda n: (n.name, "", None))
    first = metrics[0]
    total = first.value(profile.root, ctx)
    largest = _largest(shown)

    def fmt_cells(vals: list[float | None]) -> tuple[list[str], str | None]:
        cells = [render.format_value(v, m.kind) for v, m in zip(vals, metrics)]
        return cells, render.share_style(_first_fraction(first, vals[0], total, largest))

    lines = render.layout([m.name for m in metrics], _rows_from_shown(shown, fmt_cells), width=width)
    if color:
        lines.append(render.legend_line(first.name, relative_to(first)))
    return lines


def _largest(shown: _Shown) -> float | None:
    vals = []
    stack = [shown]
    while stack:
        s = stack.pop()
        if s.values and s.values[0] is not None:
            vals.append(s.values[0])
        stack.extend(s.children)
    return max(vals) if vals else None


# --- the flat list ------------------------------------------------------------------------------


@dataclass
class FlatRow:
    """Frames of one name (and device) added together: what ``--print-sorted`` lists."""

    name: str
    inc: dict[str, float] = field(default_factory=dict)
    own: dict[str, Any] = field(default_factory=dict)
    frames: int = 0


def flat_rows(profile: Profile, root: VNode | None = None) -> list[FlatRow]:
    """Every frame that measured something itself, merged by (name, device); summable metrics
    are the frames' own values (not subtree sums), so nothing is counted twice."""
    root = root if root is not None else profile.root
    summed = set(profile.additive)
    rows: dict[tuple[str, str | None], FlatRow] = {}
    for node, d in root.walk():
        if d == 0:
            continue
        own_numbers = {k: v for k, v in node.own.items() if k in summed and M._is_number(v)}
        if not own_numbers:
            continue
        did = node.own.get(fmt.DEVICE_ID)
        key = (node.name, None if did is None else str(did))
        row = rows.get(key)
        if row is None:
            row = rows[key] = FlatRow(node.name)
            for prop in (fmt.DEVICE_ID, fmt.DEVICE_TYPE):
                if prop in node.own:
                    row.own[prop] = node.own[prop]
        for k, v in own_numbers.items():
            row.inc[k] = row.inc.get(k, 0) + v
        for k, v in node.own.items():  # per-frame (non-summed) raw metrics: keep the first seen
            if k not in summed and k not in row.own:
                row.own[k] = v
        row.frames += 1
    return list(rows.values())


def flat_report(profile: Profile, metrics: Sequence[M.Metric], *, threshold: float | None, width: int,
                color: bool) -> list[Line]:
    """``--print-sorted``: one row per kernel (frame name), hottest first by the first metric."""
    ctx = context(profile)
    first = metrics[0]
    scored = []
    for row in flat_rows(profile):
        vals = [m.value(row, ctx) for m in metrics]
        if vals[0] is None or (threshold is not None and vals[0] < threshold):
            continue
        scored.append((vals, row))
    scored.sort(key=lambda t: -t[0][0])
    total = first.value(profile.root, ctx)
    largest = scored[0][0][0] if scored else None
    specs = []
    for vals, row in scored:
        cells = [render.format_value(v, m.kind) for v, m in zip(vals, metrics)]
        suffix = f" (x{row.frames} frames)" if row.frames > 1 else ""
        specs.append(RowSpec(cells, row.name, "", render.share_style(_first_fraction(first, vals[0], total, largest)),
                             None, suffix))
    lines = render.layout([m.name for m in metrics], specs, width=width)
    if color:
        lines.append(render.legend_line(first.name, relative_to(first)))
    return lines


# --- -l -----------------------------------------------------------------------------------------

_KIND_ORDER = ("time", "avg_time", "rate", "util", "share", "rank_stat", "imbalance")


def list_report(profile: Profile) -> list[Line]:
    """``-l``: raw metrics, derivable metrics (only those this profile supports) and devices."""
    cat = M.catalog(profile.raw_names, profile.additive)
    out: list[Line] = [[(f"metrics of {profile.label}", render.HEADER_STYLE)]]
    summed = [n for n in profile.raw_names if n in profile.additive]
    own = [n for n in profile.raw_names if n not in profile.additive]
    out.append([("raw, summed over subtrees:", None)])
    out.extend(_wrap(summed))
    if own:
        out.append([("raw, per frame (not summed):", None)])
        out.extend(_wrap(own))
    out.append([("derived (-m accepts these; names and units are case-insensitive):", None)])
    usable, note = M.util_note(profile.device_info)
    for kind in _KIND_ORDER:
        names = [m.name for m in cat.values() if m.kind == kind]
        if kind == "rate" and "flops" in cat:
            names = ["flops"] + names  # the all-widths counter, listed with the rates it feeds
        if kind == "util" and names and not usable:
            continue
        if kind == "share":  # one per summed metric: list the headline ones, say the rule
            names = [n for n in names if not n.startswith(("stalled_", "num_stalled_samples"))]
            names.append("<any summed metric>/%")
        if names:
            out.extend(_wrap(names, label=M.KIND_DOC[kind]))
    if note:
        out.append([(f"note: {note}", render.DIM)])
    out.append([("devices:", None)])
    devices = list(peaks.iter_devices(profile.device_info))
    if not devices:
        out.append([("  (none recorded)", None)])
    for dtype, did, entry in devices:
        out.append([("  " + peaks.describe_device(dtype, did, entry), None)])
    return out


def _wrap(names: list[str], *, label: str | None = None, width: int = 100) -> list[Line]:
    lines: list[Line] = []
    cur = "  "
    for n in names:
        piece = n + "  "
        if len(cur) + len(piece) > width and cur.strip():
            lines.append([(cur.rstrip(), None)])
            cur = "  "
        cur += piece
    if label:
        cur = cur.rstrip() + f"   ({label})"
    if cur.strip():
        lines.append([(cur.rstrip(), None)])
    return lines


# --- diff ---------------------------------------------------------------------------------------


@dataclass(eq=False)
class DiffNode:
    name: str
    a: VNode | None
    b: VNode | None
    children: list["DiffNode"] = field(default_factory=list)


def merge_trees(a: VNode, b: VNode) -> DiffNode:
    """Match frames of two trees by their path of names (roots always match)."""

    def merge(x: VNode | None, y: VNode | None) -> DiffNode:
        node = DiffNode((x or y).name, x, y)
        order: list[str] = []
        xs = {c.name: c for c in (x.children if x else [])}
        ys = {c.name: c for c in (y.children if y else [])}
        for c in (x.children if x else []):
            order.append(c.name)
        for c in (y.children if y else []):
            if c.name not in xs:
                order.append(c.name)
        node.children = [merge(xs.get(n), ys.get(n)) for n in dict.fromkeys(order)]
        return node

    return merge(a, b)


def diff_metric_value(m_a: M.Metric, m_b: M.Metric, node: Any, ctx_a: M.EvalContext, ctx_b: M.EvalContext) -> float | None:
    """This minus other for one metric.  For summable metrics a frame (or value) missing on one
    side counts as 0; rates, averages and util need both sides."""
    va = m_a.value(node.a, ctx_a) if node.a is not None else None
    vb = m_b.value(node.b, ctx_b) if node.b is not None else None
    if m_a.additive or m_a.kind == "share":
        if va is None and vb is None:
            return None
        return (va or 0) - (vb or 0)
    if va is None or vb is None:
        return None
    return va - vb


def diff_report(a: Profile, b: Profile, pairs: Sequence[tuple[M.Metric, M.Metric]], *, depth: int,
                threshold: float | None, width: int, color: bool, sorted_flat: bool) -> list[Line]:
    """The tree (or flat list) of differences, this profile minus the other."""
    ctx_a, ctx_b = context(a), context(b)
    header: list[Line] = [[(f"diff: {a.label} minus {b.label} (+: {a.label} has more)", render.HEADER_STYLE)]]
    names = [ma.name for ma, _ in pairs]

    def fmt_cells(vals: list[float | None]) -> tuple[list[str], str | None]:
        cells = [render.format_value(v, ma.kind, signed=True) for v, (ma, _) in zip(vals, pairs)]
        return cells, render.diff_style(vals[0])

    if sorted_flat:
        root = _flat_diff_root(a, b)
    else:
        root = merge_trees(a.root, b.root)

    def values_of(n: DiffNode) -> list[float | None]:
        return [diff_metric_value(ma, mb, n, ctx_a, ctx_b) for ma, mb in pairs]

    def name_of(n: DiffNode) -> tuple[str, str, str | None]:
        if n.a is None:
            return n.name, f" (only in {b.label})", render.DIM
        if n.b is None:
            return n.name, f" (only in {a.label})", None
        return n.name, "", None

    absolute = lambda v: None if v is None else abs(v)  # noqa: E731 - -t and ordering use |diff|
    shown = _select(root, lambda n: n.children, values_of, depth=1 if sorted_flat else depth,
                    threshold=threshold, key=absolute, name_of=name_of)
    if sorted_flat:
        rows = []
        for s in shown.children:
            cells, style = fmt_cells(s.values)
            rows.append(RowSpec(cells, s.name, "", style, s.name_style, s.suffix))
    else:
        rows = _rows_from_shown(shown, fmt_cells)
    lines = header + render.layout(names, rows, width=width)
    if color:
        lines.append(render.diff_legend_line())
    return lines


def _flat_diff_root(a: Profile, b: Profile) -> DiffNode:
    """A one-level DiffNode tree of flat rows (merged by name) for ``--print-sorted`` diffs."""
    fa, fb = _by_name(flat_rows(a)), _by_name(flat_rows(b))
    root = DiffNode(a.root.name, a.root, b.root)
    for name in dict.fromkeys(list(fa) + list(fb)):
        root.children.append(DiffNode(name, fa.get(name), fb.get(name)))
    return root


def _by_name(rows: list[FlatRow]) -> dict[str, FlatRow]:
    """Merge flat rows of the same name (one per device) for a diff, where devices need not match."""
    out: dict[str, FlatRow] = {}
    for r in rows:
        m = out.get(r.name)
        if m is None:
            out[r.name] = FlatRow(r.name, dict(r.inc), dict(r.own), r.frames)
            continue
        for k, v in r.inc.items():
            m.inc[k] = m.inc.get(k, 0) + v
        m.frames += r.frames
    return out
