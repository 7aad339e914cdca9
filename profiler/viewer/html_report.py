"""``--html FILE``: one self-contained HTML report of a profile (no network, nothing to install).

The page is ``html/report.html`` with ``html/report.css`` and ``html/report.js`` inlined and the
profile's data embedded as one JSON block.  Everything the page shows is computed here with the
terminal viewer's own code: metric values with :mod:`.metrics`, filters with :mod:`.tree`, diffs
with :mod:`.report`, per-line samples with :mod:`.source_view`.  The page only lays out and draws.

Data layout (``schema: "kprof-html/1"``), kept flat so a 100k-frame profile stays small and parses
fast:

* ``tree``: ``names`` (distinct frame names), per frame in pre-order ``name`` (index into
  ``names``), ``parent`` (-1 for the root), ``kernel`` (index into ``kernels`` or -1) and, in a
  diff, ``side`` (0 both, 1 only in this profile, 2 only in the other);
* ``metrics``: ``[{"name", "kind", "additive", "values": [...]}]`` (``null`` = no value), or in a
  diff ``"a"``, ``"b"`` and ``"d"`` (this minus other) instead of ``values``;
* ``kernels``: one page per kernel with its source, per-line samples, instructions and build facts,
  plus whatever the caller adds under ``analysis`` (``kprof-analyze --html``: diagnostics, full
  SASS, occupancy, the ``@autotune`` block).

The JSON is escaped so that no frame name can end the ``<script>`` block, the page puts text on
screen only through ``textContent`` and the canvas, and a Content-Security-Policy allows the page's
own script (by hash) and nothing else: no request can leave the page.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import math
import os
from typing import Any, Iterable, Mapping, Sequence

from .. import format as fmt
from . import metrics as M
from . import report as R
from .source_view import collect, kernel_frames, kernel_identity, stall_name
from .tree import Profile, VNode

SCHEMA = "kprof-html/1"

# The metrics a page offers when the user names none (those the profile can derive, in this order),
# after which every other summable raw metric except the per-reason stall counters.
DEFAULT_PAGE_METRICS = ("time/ms", "avg_time/us", "count", "flops", "tflop/s", "tflop8/s", "tflop16/s",
                        "tflop32/s", "tflop64/s", "bytes", "gbyte/s", "util", "num_samples", "num_stalled_samples")


class HtmlReportError(ValueError):
    """The report cannot be written (e.g. the output directory does not exist); one line."""


# --- numbers ------------------------------------------------------------------------------------


def _num(v: Any) -> float | int | None:
    """A JSON-safe number with 7 significant digits (the page shows 4), ``None`` for no value."""
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, int):
        return v
    if not math.isfinite(v):
        return None
    if v.is_integer() and abs(v) < 1e15:
        return int(v)
    return float(f"{v:.7g}")


def _column(values: list[Any]) -> list[Any]:
    """:func:`_num` over a whole column at once (numpy: a 100k-frame profile has millions of values)."""
    import numpy as np

    arr = np.array([v if isinstance(v, (int, float)) and not isinstance(v, bool) else np.nan for v in values],
                   dtype=np.float64)
    ok = np.isfinite(arr)
    mag = np.zeros_like(arr)
    nz = ok & (arr != 0)
    mag[nz] = np.floor(np.log10(np.abs(arr[nz])))
    scale = np.power(10.0, 6 - mag)
    with np.errstate(over="ignore", invalid="ignore"):
        rounded = np.where(ok, np.round(arr * scale) / scale, np.nan)
    exact_int = ok & (np.abs(arr) < 1e15) & (arr == np.floor(arr))
    out: list[Any] = rounded.tolist()
    for i in np.flatnonzero(~ok):
        out[i] = None
    for i in np.flatnonzero(exact_int):
        out[i] = int(arr[i])
    return out


# --- packing for the page -----------------------------------------------------------------------
# A metric column of fractional numbers is embedded as little-endian float32 in base64 (7 digits,
# the page shows 4): a fifth of the text and no number parsing; integer columns stay JSON lists.
# Instruction lists become a column table (no repeated keys): 50k SASS lines stay a few MB.

_INS_COLS = ("pc", "text", "file", "line", "samples", "stalls")


def pack_column(values: list[Any]) -> Any:
    import numpy as np

    if all(v is None or isinstance(v, int) for v in values):
        return values
    arr = np.array([np.nan if v is None else v for v in values], dtype="<f4")
    return {"f32": base64.b64encode(arr.tobytes()).decode("ascii")}


def unpack_column(col: Any) -> list[Any]:
    """The inverse of :func:`pack_column` (to float32 precision)."""
    import numpy as np

    if isinstance(col, list):
        return col
    arr = np.frombuffer(base64.b64decode(col["f32"]), dtype="<f4").astype(np.float64)
    return [None if math.isnan(v) else v for v in arr.tolist()]


def pack_instructions(rows: list[dict]) -> dict:
    files: list[str | None] = []
    index: dict[str | None, int] = {}
    out = []
    for r in rows:
        f = r.get("file")
        if f not in index:
            index[f] = len(files)
            files.append(f)
        out.append([r.get("pc"), r.get("text"), index[f], r.get("line"), r.get("samples") or 0, r.get("stalls") or 0])
    return {"cols": list(_INS_COLS), "files": files, "rows": out}


def unpack_instructions(table: dict) -> list[dict]:
    return [{"pc": pc, "text": text, "file": table["files"][f], "line": line, "samples": n, "stalls": st or {}}
            for pc, text, f, line, n, st in table["rows"]]


def pack(data: Mapping[str, Any]) -> dict:
    """The page's embedded form of :func:`build_data`'s dict."""
    out = dict(data)
    kern = data["tree"]["kernel"]  # mostly -1: stored as (frame, page) pairs
    out["tree"] = dict(data["tree"], kernel={"n": len(kern), "pairs": [[i, k] for i, k in enumerate(kern) if k >= 0]})
    out["metrics"] = [{k: (pack_column(v) if k in ("values", "a", "b", "d") else v) for k, v in m.items()}
                      for m in data["metrics"]]
    kernels = []
    for k in data["kernels"]:
        k = dict(k, instructions=pack_instructions(k["instructions"]))
        k["analysis"] = [dict(a, sass=pack_instructions(a.get("sass") or [])) for a in k["analysis"]]
        kernels.append(k)
    out["kernels"] = kernels
    return out


def unpack(data: Mapping[str, Any]) -> dict:
    """The inverse of :func:`pack` (for tests and scripts that read a report back)."""
    out = dict(data)
    kern = [-1] * data["tree"]["kernel"]["n"]
    for i, k in data["tree"]["kernel"]["pairs"]:
        kern[i] = k
    out["tree"] = dict(data["tree"], kernel=kern)
    out["metrics"] = [{k: (unpack_column(v) if k in ("values", "a", "b", "d") else v) for k, v in m.items()}
                      for m in data["metrics"]]
    kernels = []
    for k in data["kernels"]:
        k = dict(k, instructions=unpack_instructions(k["instructions"]))
        k["analysis"] = [dict(a, sass=unpack_instructions(a["sass"])) for a in k["analysis"]]
        kernels.append(k)
    out["kernels"] = kernels
    return out


# --- the tree -----------------------------------------------------------------------------------


class _Table:
    """Frame names stored once each (profiles repeat the same kernel and scope names a lot)."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._index: dict[str, int] = {}

    def __call__(self, name: str) -> int:
        i = self._index.get(name)
        if i is None:
            i = self._index[name] = len(self.names)
            self.names.append(name)
        return i


def page_metrics(profile: Profile, specs: Sequence[str] | None) -> list[M.Metric]:
    """The metrics the page offers: ``specs`` (``-m``) if given, else :data:`DEFAULT_PAGE_METRICS`
    that this profile can derive, then its other summable raw metrics.  ``util`` only where a
    device has a peak table."""
    cat = M.catalog(profile.raw_names, profile.additive)
    if specs:
        metrics = M.resolve_list(specs, cat, profile.raw_names)
    else:
        metrics = []
        for spec in DEFAULT_PAGE_METRICS:
            try:
                metrics.append(M.resolve(spec, cat, profile.raw_names))
            except M.MetricError:
                continue
        time_raw = M.main_time_metric(profile.raw_names)
        for name in profile.additive:
            if name == time_raw or name.startswith(("stalled_",)):
                continue
            m = cat.get(name.lower())
            if m is not None:
                metrics.append(m)
        # one column per distinct derivation: with only fp16 flops, flops16 is flops and
        # tflop16/s is tflop/s
        same: set[tuple] = set()
        distinct = []
        for m in metrics:
            key = (m.kind, m.sources, m.factor, m.base.name if m.base else None)
            if key not in same:
                same.add(key)
                distinct.append(m)
        metrics = distinct
    usable, _ = M.util_note(profile.device_info)
    out: list[M.Metric] = []
    for m in metrics:
        if (m.kind == "util" and not usable) or any(m.name == o.name for o in out):
            continue
        out.append(m)
    return out


def _kernel_pages(profile: Profile) -> tuple[dict[str, list[VNode]], dict[int, str]]:
    """Kernel frames grouped by kernel identity, and frame id -> identity."""
    groups: dict[str, list[VNode]] = {}
    of: dict[int, str] = {}
    for f in kernel_frames(profile.root):
        ident = kernel_identity(f)
        groups.setdefault(ident, []).append(f)
        of[id(f)] = ident
    return groups, of


def _wants_page(frames: list[VNode], analysis: Mapping[str, Any] | None, ident: str) -> bool:
    """A kernel gets a page when there is something to show besides its time: samples, source,
    instructions or an analysis."""
    if analysis and ident in analysis:
        return True
    for f in frames:
        ex = f.extra or {}
        if ex.get("source") or ex.get("instructions") or ex.get("kind") == "kernel":
            return True
        if any(c.own.get("num_samples") for c in f.children):
            return True
    return False


def tree_data(profile: Profile, metrics: Sequence[M.Metric], kernel_index: Mapping[int, int]) -> tuple[dict, list[dict]]:
    """``(tree, metrics)`` blocks for one profile (see the module docstring)."""
    ctx = R.context(profile)
    table = _Table()
    names: list[int] = []
    parents: list[int] = []
    kernels: list[int] = []
    cols: list[list[Any]] = [[] for _ in metrics]
    stack: list[tuple[VNode, int]] = [(profile.root, -1)]
    while stack:
        node, parent = stack.pop()
        i = len(names)
        names.append(table(node.name))
        parents.append(parent)
        kernels.append(kernel_index.get(id(node), -1))
        for col, m in zip(cols, metrics):
            col.append(m.value(node, ctx))
        for c in reversed(node.children):
            stack.append((c, i))
    tree = {"names": table.names, "name": names, "parent": parents, "kernel": kernels}
    mblocks = [{"name": m.name, "kind": m.kind, "additive": bool(m.additive), "values": _column(col)}
               for m, col in zip(metrics, cols)]
    return tree, mblocks


def diff_tree_data(a: Profile, b: Profile, pairs: Sequence[tuple[M.Metric, M.Metric]],
                   kernel_index: Mapping[int, int]) -> tuple[dict, list[dict]]:
    """The merged tree of two profiles (frames matched by their path of names, as ``--diff-profile``
    in the terminal) with each metric on both sides and their difference."""
    ctx_a, ctx_b = R.context(a), R.context(b)
    root = R.merge_trees(a.root, b.root)
    table = _Table()
    names, parents, kernels, sides = [], [], [], []
    cols = [([], [], []) for _ in pairs]
    stack: list[tuple[R.DiffNode, int]] = [(root, -1)]
    while stack:
        node, parent = stack.pop()
        i = len(names)
        names.append(table(node.name))
        parents.append(parent)
        kernels.append(kernel_index.get(id(node.a), -1) if node.a is not None else -1)
        sides.append(0 if node.a is not None and node.b is not None else (1 if node.a is not None else 2))
        for (ca, cb, cd), (ma, mb) in zip(cols, pairs):
            ca.append(ma.value(node.a, ctx_a) if node.a is not None else None)
            cb.append(mb.value(node.b, ctx_b) if node.b is not None else None)
            cd.append(R.diff_metric_value(ma, mb, node, ctx_a, ctx_b))
        for c in reversed(node.children):
            stack.append((c, i))
    tree = {"names": table.names, "name": names, "parent": parents, "kernel": kernels, "side": sides}
    mblocks = [{"name": ma.name, "kind": ma.kind, "additive": bool(ma.additive or ma.kind == "share"),
                "a": _column(ca), "b": _column(cb), "d": _column(cd)} for (ma, _), (ca, cb, cd) in zip(pairs, cols)]
    return tree, mblocks


# --- kernel pages -------------------------------------------------------------------------------


def _stalls(d: Mapping[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for k, v in d.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v:
            key = stall_name(k)
            out[key] = out.get(key, 0) + v
    return {k: _num(v) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}


def _profile_instructions(frames: Iterable[VNode]) -> list[dict]:
    """The profile's sampled instructions of a kernel, merged by pc over its frames."""
    by_pc: dict[int, dict] = {}
    for f in frames:
        for ins in (f.extra or {}).get("instructions") or ():
            if not isinstance(ins, dict) or not isinstance(ins.get("pc"), int):
                continue
            cur = by_pc.setdefault(ins["pc"], {"pc": ins["pc"], "text": str(ins.get("opcode") or "?"),
                                               "file": ins.get("file") if isinstance(ins.get("file"), str) else None,
                                               "line": ins.get("line") if isinstance(ins.get("line"), int) else None,
                                               "samples": 0, "stalls": {}})
            cur["samples"] += ins.get("samples") or 0
            for k, v in (ins.get("stalls") or {}).items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    cur["stalls"][k] = cur["stalls"].get(k, 0) + v
    out = []
    for pc in sorted(by_pc):
        ins = by_pc[pc]
        ins["samples"] = _num(ins["samples"])
        ins["stalls"] = _stalls(ins["stalls"])
        out.append(ins)
    return out


def _build_facts(frames: list[VNode]) -> dict[str, Any]:
    """What the profile itself says about the build and launch (kprof's ``kprof`` record)."""
    out: dict[str, Any] = {}
    for f in frames:
        ex = f.extra or {}
        for key in ("n_regs", "n_spills", "shared", "num_warps", "num_stages", "target", "grid", "cache_key",
                    "constexprs"):
            if key in ex and key not in out and ex[key] is not None:
                out[key] = ex[key]
    return out


def kernel_page(ident: str, frames: list[VNode]) -> dict[str, Any]:
    """One kernel's page data from the profile alone."""
    stats, origin = collect(frames)
    src = next((f.extra["source"] for f in frames if f.extra and isinstance(f.extra.get("source"), dict)), None)
    lines = []
    for (file, line), s in sorted(stats.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        if not s.samples and not s.opcodes:
            continue
        lines.append({"file": file, "line": line, "samples": _num(s.samples), "stalled": _num(s.stalled),
                      "stalls": _stalls(s.stalls),
                      "opcodes": {k: _num(v) for k, v in sorted(s.opcodes.items(), key=lambda kv: -kv[1])}})
    source = None
    if src and isinstance(src.get("lines"), list):
        source = {"file": str(src.get("file") or ""), "first_line": int(src.get("first_line") or 1),
                  "lines": [str(x) for x in src["lines"]]}
    ctx_time = sum(f.inc.get(fmt.TIME_METRIC, 0) or 0 for f in frames)
    count = sum(f.inc.get(fmt.COUNT_METRIC, 0) or 0 for f in frames)
    return {"name": ident, "frames": sorted({f.name for f in frames}), "source": source, "lines": lines,
            "samples": _num(sum(s.samples for s in stats.values())),
            "stalled": _num(sum(s.stalled for s in stats.values())), "origin": origin,
            "instructions": _profile_instructions(frames), "sass_origin": "profile",
            "time_ns": _num(ctx_time), "count": _num(count), "facts": _build_facts(frames), "analysis": []}


def _reason_table(pages: list[dict]) -> dict[str, dict[str, str]]:
    """Titles and meanings of the stall reasons that appear (from kprof's stall-reason table)."""
    seen: dict[str, None] = {}
    for p in pages:
        for ln in p["lines"]:
            seen.update(dict.fromkeys(ln["stalls"]))
        for ins in p["instructions"]:
            seen.update(dict.fromkeys(ins.get("stalls") or {}))
    try:
        from ..pcsampling.stall_reasons import describe
    except Exception:  # pragma: no cover - the table ships with kprof; a page without it still works
        return {}
    out = {}
    for r in seen:
        d = describe(r)
        out[r] = {"title": d.title, "meaning": d.meaning, "advice": d.advice}
    return out


# --- the page -----------------------------------------------------------------------------------


def build_data(profile: Profile, *, specs: Sequence[str] | None = None, other: Profile | None = None,
               pairs: Sequence[tuple[M.Metric, M.Metric]] | None = None,
               analysis: Mapping[str, list[dict]] | None = None, tool: str = "kprof-viewer",
               notes: Sequence[str] = ()) -> dict[str, Any]:
    """Everything the page shows, as one JSON-able dict.

    ``other`` and ``pairs`` make a diff (``pairs`` as the terminal viewer's ``--diff-profile``
    resolves them); ``analysis`` maps kernel names to analyzer entries (``kprof-analyze --html``).
    """
    groups, of = _kernel_pages(profile)
    pages: list[dict] = []
    page_of: dict[str, int] = {}
    for ident, frames in groups.items():
        if _wants_page(frames, analysis, ident):
            page_of[ident] = len(pages)
            page = kernel_page(ident, frames)
            page["analysis"] = list((analysis or {}).get(ident, []))
            pages.append(page)
    for ident, entries in (analysis or {}).items():  # analysed kernels without a frame of that name
        if ident not in page_of:
            page_of[ident] = len(pages)
            page = {"name": ident, "frames": [], "source": None, "lines": [], "samples": 0, "stalled": 0,
                    "origin": "", "instructions": [], "sass_origin": "profile", "time_ns": None, "count": None,
                    "facts": {}, "analysis": list(entries)}
            pages.append(page)
    for page in pages:
        _merge_samples(page)
    kernel_index = {fid: page_of[ident] for fid, ident in of.items() if ident in page_of}
    if other is not None:
        tree, mblocks = diff_tree_data(profile, other, pairs or [], kernel_index)
    else:
        tree, mblocks = tree_data(profile, page_metrics(profile, specs), kernel_index)
    if not mblocks:
        raise HtmlReportError(f"{profile.path}: the profile has no metrics to show")
    return {"schema": SCHEMA, "tool": tool, "profile": profile.label,
            "other": other.label if other is not None else None,
            "devices": [f"{t} {i}: arch {e.get('arch', '?')}, {e.get('num_sms', '?')} SMs"
                        for t, devs in sorted(profile.device_info.items()) if isinstance(devs, dict)
                        for i, e in sorted(devs.items()) if isinstance(e, dict)],
            "tree": tree, "metrics": mblocks, "kernels": pages, "reasons": _reason_table(pages),
            "notes": list(notes)}


def _merge_samples(page: dict) -> None:
    """An analysis' full SASS listing gets the profile's per-instruction samples (matched by pc)."""
    by_pc = {ins["pc"]: ins for ins in page["instructions"]}
    for entry in page["analysis"]:
        for ins in entry.get("sass") or ():
            got = by_pc.get(ins.get("pc"))
            if got is not None and not ins.get("samples"):
                ins["samples"], ins["stalls"] = got["samples"], got["stalls"]


def write_report(path: str, profile: Profile, **kw: Any) -> str:
    """:func:`build_data` then :func:`write_html`; returns the path written."""
    return write_html(path, build_data(profile, **kw))


def _asset(name: str) -> str:
    from importlib import resources  # only when a page is written: the terminal viewer starts fast

    return resources.files(__package__).joinpath("html", name).read_text(encoding="utf-8")


def embed_json(data: Any) -> str:
    """JSON that is safe inside ``<script type="application/json">``: no ``<``, ``>`` or ``&`` (so
    no ``</script>`` or ``<!--``), ASCII only (so no U+2028/U+2029 or control characters)."""
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"), allow_nan=False, default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_html(data: Mapping[str, Any]) -> str:
    """The page: template + CSS + JS + data, one string."""
    js = _asset("report.js")
    css = _asset("report.css")
    digest = base64.b64encode(hashlib.sha256(js.encode("utf-8")).digest()).decode("ascii")
    style_digest = base64.b64encode(hashlib.sha256(css.encode("utf-8")).digest()).decode("ascii")
    # Nothing may be fetched: the page's own script (by hash) and style (by hash) run, nothing else.
    csp = (f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'sha256-{style_digest}'; "
           "img-src data:; base-uri 'none'; form-action 'none'")
    title = f"kprof: {data.get('profile', '')}"
    if data.get("other"):
        title += f" minus {data['other']}"
    page = _asset("report.html")
    # str.replace, not format(): the CSS and JS have braces of their own
    for key, value in (("{{CSP}}", html.escape(csp, quote=True)), ("{{TITLE}}", html.escape(title)),
                       ("{{CSS}}", css), ("{{DATA}}", embed_json(pack(data))), ("{{JS}}", js)):
        page = page.replace(key, value, 1)
    return page


def write_html(path: str, data: Mapping[str, Any]) -> str:
    """Write the page atomically (as profiles are: a temporary file, then a rename); returns the
    path.  Raises :class:`HtmlReportError` when the file cannot be written."""
    text = render_html(data)
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise HtmlReportError(f"--html {path}: directory {folder} does not exist")
    try:
        fmt.atomic_write_text(path, text)
    except OSError as e:
        raise HtmlReportError(f"--html {path}: cannot write it: {e.strerror or e}") from None
    return path
