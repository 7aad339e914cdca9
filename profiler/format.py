"""The kprof profile file: the hatchet JSON layout that Proton writes, plus optional kprof extras.

A profile file is one JSON list ``[root_node, device_info]`` (Proton's ``.hatchet`` files have
exactly this layout, so either tool's files open in either viewer):

* a *node* is ``{"frame": {"name": str, "type": str}, "metrics": {...}, "children": [node, ...]}``.
  Metrics are **exclusive** (the node's own measurements): a kernel frame carries ``"time (ns)"``,
  ``"count"``, ``"device_id"`` (a string, e.g. ``"0"``), ``"device_type"`` (``"CUDA"``) and any
  launch-metadata numbers (``"flops16"``, ``"bytes"``, ...); scope frames usually carry nothing.
  Readers compute inclusive values by summing subtrees (Proton's viewer calls hatchet's
  ``update_inclusive_columns``; :func:`inclusive_metrics` does the same here).
* the root frame is named ``"ROOT"`` and holds a ``0`` placeholder for every summable metric that
  occurs anywhere in the tree.  Hatchet takes its list of metric columns from the root's keys, so
  a metric missing there is treated as non-summable ("exclusive") by Proton's viewer.
* ``device_info`` maps device type -> device id (string) -> ``{"arch": "90", "num_sms": 132,
  "clock_rate": kHz, "memory_clock_rate": kHz, "bus_width": bits}``.

kprof adds, and Proton files simply lack:

* an optional ``"kprof"`` dict on a node (:attr:`ProfileNode.extra`).  Kernel frames of kernelc
  kernels use ``{"kind": "kernel", "kernel": name, "cache_key": str, "source": {"file", "first_line",
  "lines"}, "instructions": [{"pc", "opcode", "line", "samples", "stalls": {reason: n}}]}``;
* per-source-line children under a sampled kernel: frame type ``"line"``, name ``"file.py:42"``,
  metrics ``num_samples``, ``num_stalled_samples`` and ``stalled_<reason>``.

Proton writes its files with 4-space indentation and sorted keys; :func:`write_profile` does too.
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
from json.decoder import scanstring
from json.encoder import encode_basestring_ascii as _encode_str
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

__all__ = [
    "ProfileNode",
    "ProfileFormatError",
    "read_profile",
    "write_profile",
    "atomic_write_text",
    "load_profile_json",
    "device_entry",
    "additive_metric_names",
    "inclusive_metrics",
    "ROOT_NAME",
    "TIME_METRIC",
    "COUNT_METRIC",
    "DEVICE_ID",
    "DEVICE_TYPE",
    "KPROF_KEY",
    "LAUNCH_METADATA_FRAME",
    "FLOP_WIDTHS",
]

ROOT_NAME = "ROOT"
TIME_METRIC = "time (ns)"
COUNT_METRIC = "count"
DEVICE_ID = "device_id"
DEVICE_TYPE = "device_type"
KPROF_KEY = "kprof"
# Proton runs a kernel's launch_metadata function inside this state; its frames are bookkeeping,
# and Proton's viewer drops them, so every reader here does as well.
LAUNCH_METADATA_FRAME = "__proton_launch_metadata"
# Widths of the width-specific flop counters that launch metadata may report (flops8 ... flops64).
FLOP_WIDTHS = (8, 16, 32, 64)

# Metric values that describe a frame rather than measure it: never summed, never placeholders.
_PROPERTY_METRICS = frozenset({DEVICE_ID, DEVICE_TYPE, "stream_id", "start_time (ns)", "end_time (ns)"})

_EXPECTED = "expected a JSON list [root_node, device_info] as written by kprof or Proton (.hatchet)"


class ProfileFormatError(ValueError):
    """A profile file could not be read.  ``str(err)`` is one line that names the file and says
    what was expected."""


@dataclass(eq=False)  # identity semantics: nodes are used as dict keys by the aggregation helpers
class ProfileNode:
    """One frame of a profile tree.

    ``metrics`` holds the frame's own (exclusive) values; ``extra`` is kprof's optional per-node
    dict, stored under the ``"kprof"`` key of the node's JSON (``None`` when absent).
    """

    name: str
    frame_type: str = "function"
    metrics: dict[str, Any] = field(default_factory=dict)
    children: list["ProfileNode"] = field(default_factory=list)
    extra: dict[str, Any] | None = None

    _index: dict[str, "ProfileNode"] | None = field(default=None, init=False, repr=False)
    _indexed: int = field(default=0, init=False, repr=False)

    def child(self, name: str, frame_type: str = "function") -> "ProfileNode":
        """Return the child called ``name``, creating it if absent (Proton merges same-named
        frames under one parent the same way).  A dict lookup: children appended to
        :attr:`children` directly are indexed on the next call (the first of a name wins)."""
        idx = self._index
        n = len(self.children)
        if idx is None or self._indexed > n:
            idx, self._indexed = {}, 0
            self._index = idx
        if self._indexed < n:
            for c in self.children[self._indexed:]:
                idx.setdefault(c.name, c)
            self._indexed = n
        c = idx.get(name)
        if c is not None and c.name == name:
            return c
        c = ProfileNode(name, frame_type)
        self.children.append(c)
        idx[name] = c
        self._indexed = n + 1
        return c

    def add_metrics(self, values: Mapping[str, Any]) -> None:
        """Accumulate ``values`` into this node: numbers add up, anything else (device ids,
        device types) is overwritten."""
        for key, value in values.items():
            old = self.metrics.get(key)
            if _is_number(value) and _is_number(old) and key not in _PROPERTY_METRICS:
                self.metrics[key] = old + value
            else:
                self.metrics[key] = value

    def walk(self, depth: int = 0) -> Iterator[tuple["ProfileNode", int]]:
        """Yield ``(node, depth)`` for this node and all descendants, parents before children."""
        stack = [(self, depth)]
        while stack:
            node, d = stack.pop()
            yield node, d
            stack.extend((c, d + 1) for c in reversed(node.children))

    def to_json(self) -> dict[str, Any]:
        """The node as the JSON object of the file layout (the whole subtree; iterative, so any
        depth works)."""
        def obj(n: "ProfileNode") -> dict[str, Any]:
            o: dict[str, Any] = {"frame": {"name": n.name, "type": n.frame_type}, "metrics": dict(n.metrics),
                                 "children": []}
            if n.extra is not None:
                o[KPROF_KEY] = n.extra
            return o

        out = obj(self)
        stack = [(self, out)]
        while stack:
            node, o = stack.pop()
            for c in node.children:
                co = obj(c)
                o["children"].append(co)
                stack.append((c, co))
        return out

    @classmethod
    def from_json(cls, obj: Any, _path: str = "") -> "ProfileNode":
        """Build a tree from a node's JSON object; raises :class:`ProfileFormatError` on a
        malformed node."""
        # Iterative, so that a deep Python-context tree cannot hit the recursion limit; a node's
        # path (for error messages) is a linked chain, spelled out only when there is an error.
        root = cls._node_from_json(obj, _path or "root node")
        stack = [(root, obj, (None, _path or root.name))]
        while stack:
            node, data, where = stack.pop()
            for i, cobj in enumerate(data.get("children") or ()):
                try:
                    child = cls._node_from_json(cobj, "")
                except _BadNode as e:
                    raise ProfileFormatError(f"{_spell(where)}/children[{i}] {e}") from None
                node.children.append(child)
                stack.append((child, cobj, (where, child.name)))
        return root

    @classmethod
    def _node_from_json(cls, obj: Any, where: str) -> "ProfileNode":
        try:
            return cls._parse_node(obj)
        except _BadNode as e:
            if where:
                raise ProfileFormatError(f"{where} {e}") from None
            raise

    @classmethod
    def _parse_node(cls, obj: Any) -> "ProfileNode":
        if not isinstance(obj, dict):
            raise _BadNode(f"is a JSON {_json_type(obj)}, expected a node object "
                           "{\"frame\", \"metrics\", \"children\"}")
        frame = obj.get("frame")
        if not isinstance(frame, dict):
            raise _BadNode("has no \"frame\" object (expected {\"name\": ..., \"type\": ...})")
        name = frame.get("name", obj.get("name"))  # hatchet also accepts a name beside the frame
        if not isinstance(name, str):
            raise _BadNode("has a frame without a string \"name\"")
        metrics = obj.get("metrics", {})
        if not isinstance(metrics, dict):
            raise _BadNode(f"({name!r}) has \"metrics\" that is not an object")
        children = obj.get("children", [])
        if not isinstance(children, list):
            raise _BadNode(f"({name!r}) has \"children\" that is not a list")
        extra = obj.get(KPROF_KEY)
        if extra is not None and not isinstance(extra, dict):
            raise _BadNode(f"({name!r}) has a \"kprof\" value that is not an object")
        return cls(name, str(frame.get("type", "function")), dict(metrics), [], extra)


class _BadNode(Exception):
    """A malformed node; the message lacks the node's path, which the caller adds."""


def _spell(where: Any, keep: int = 6) -> str:
    from .textsafe import term_escape
    names: list[str] = []
    while where is not None:
        where, name = where
        names.append(term_escape(name))
    names.reverse()
    if len(names) > keep:
        names = names[:1] + [f"...({len(names) - keep} frames)..."] + names[-(keep - 1):]
    return "/".join(names)


def device_entry(arch: str | int, num_sms: int, clock_rate: int, memory_clock_rate: int,
                 bus_width: int) -> dict[str, Any]:
    """One ``device_info`` entry in Proton's units: ``arch`` as a string such as ``"90"``, clock
    rates in kHz (what ``cuDeviceGetAttribute`` reports), ``bus_width`` in bits."""
    return {
        "arch": str(arch),
        "num_sms": int(num_sms),
        "clock_rate": int(clock_rate),
        "memory_clock_rate": int(memory_clock_rate),
        "bus_width": int(bus_width),
    }


def additive_metric_names(root: ProfileNode) -> list[str]:
    """Names of the summable metrics of a tree.

    Proton's rule: the numbers the root carries (its placeholders define hatchet's metric
    columns; a metric missing there, such as a Proton ``"(exc)"`` metric, is per-frame only).  A
    root without any number (a hand-made file) makes every numeric metric summable, in
    first-seen order.  Frame properties (device id/type) are never summed.
    """
    at_root = [k for k, v in root.metrics.items() if _is_number(v) and k not in _PROPERTY_METRICS]
    return at_root if at_root else _numeric_metric_names(root)


def _numeric_metric_names(root: ProfileNode) -> list[str]:
    names: dict[str, None] = {}
    for node, _ in root.walk():
        for key, value in node.metrics.items():
            if key not in names and _is_number(value) and key not in _PROPERTY_METRICS:
                names[key] = None
    return list(names)


def inclusive_metrics(root: ProfileNode, names: list[str] | None = None) -> dict[ProfileNode, dict[str, float]]:
    """Inclusive values: for every node, each summable metric summed over its subtree.

    Returns ``{node: {metric: value}}`` (keyed by node identity).  A metric that is absent from a
    whole subtree is absent from that subtree root's dict, so "no data" and "zero" stay distinct.
    """
    if names is None:
        names = additive_metric_names(root)
    wanted = set(names)
    result: dict[ProfileNode, dict[str, float]] = {}
    order = [n for n, _ in root.walk()]
    for node in reversed(order):  # children before parents
        acc: dict[str, float] = {}
        for key, value in node.metrics.items():
            if key in wanted and _is_number(value):
                acc[key] = value
        for c in node.children:
            for key, value in result[c].items():
                acc[key] = acc.get(key, 0) + value
        result[node] = acc
    return result


def _add_root_placeholders(root: ProfileNode) -> None:
    # Hatchet (and so Proton's viewer) only treats a metric as a column if the root has it.
    for name in _numeric_metric_names(root):
        root.metrics.setdefault(name, 0)


# Key, under a node's "kprof" dict, of the metrics whose values were NaN or infinite.
NON_FINITE_KEY = "non_finite_metrics"
# Proton's indented layout down to this JSON nesting level; deeper nodes are written on one line
# each, so that a very deep tree gives a file that grows linearly (not quadratically) with depth.
MAX_INDENT_LEVELS = 48


def _move_non_finite(root: ProfileNode) -> list[tuple[str, str, str]]:
    """Move NaN/infinite metric values out of ``metrics`` into the node's ``"kprof"`` dict under
    ``"non_finite_metrics"`` as the strings ``"nan"``, ``"inf"``, ``"-inf"`` (JSON has no such
    numbers; readers that sum metrics never see them).  Returns ``(frame, metric, value)``."""
    moved: list[tuple[str, str, str]] = []
    for node, _ in root.walk():
        bad = [k for k, v in node.metrics.items() if isinstance(v, float) and not math.isfinite(v)]
        if not bad:
            continue
        extra = dict(node.extra) if node.extra is not None else {}
        kept = dict(extra.get(NON_FINITE_KEY) or {})
        for k in bad:
            v = node.metrics.pop(k)
            text = "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
            kept[str(k)] = text
            moved.append((node.name, str(k), text))
        extra[NON_FINITE_KEY] = kept
        node.extra = extra
    return moved


def _json_default(o: Any) -> Any:
    # numpy/torch scalars and other number-like values from launch metadata; anything else as text.
    if hasattr(o, "__index__"):
        return int(o.__index__())
    if hasattr(o, "__float__"):
        v = float(o)
        return v if math.isfinite(v) else repr(v)
    return str(o)


def _finite(o: Any) -> Any:
    """``o`` with NaN/infinite floats (at any depth of dicts and lists) as strings."""
    if isinstance(o, float) and not math.isfinite(o):
        return repr(o)
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    return o


def _scalar(v: Any) -> str | None:
    """JSON text of a plain scalar exactly as json.dumps writes it, or None for anything else."""
    t = type(v)
    if t is str:
        return _encode_str(v)
    if t is int:
        return int.__repr__(v)
    if t is float:
        return float.__repr__(v) if math.isfinite(v) else None
    if t is bool:
        return "true" if v else "false"
    if v is None:
        return "null"
    return None


def _dumps_value(value: Any, level: int) -> str:
    """One non-node value (frame, metrics, kprof dict, device info) in Proton's layout, indented
    for nesting ``level``."""
    if type(value) is dict:
        # The common case, a flat dict of scalars with string keys, written directly (the json
        # module's indented encoder is pure Python and dominated the time of large profiles).
        if not value:
            return "{}"
        items = []
        for k in value:
            if type(k) is not str:
                break
            text = _scalar(value[k])
            if text is None:
                break
            items.append((k, text))
        else:
            items.sort()
            if level < MAX_INDENT_LEVELS:
                inner = "\n" + _indent(level + 1)
                return ("{" + inner + ("," + inner).join(f"{_encode_str(k)}: {t}" for k, t in items)
                        + "\n" + _indent(level) + "}")
            return "{" + ", ".join(f"{_encode_str(k)}: {t}" for k, t in items) + "}"
    indent = 4 if level < MAX_INDENT_LEVELS else None
    try:
        text = json.dumps(value, indent=indent, sort_keys=True, allow_nan=False, default=_json_default)
    except ValueError:  # NaN/inf inside a kprof dict or device info
        text = json.dumps(_finite(value), indent=indent, sort_keys=True, allow_nan=False, default=_json_default)
    if indent is not None and "\n" in text:
        text = text.replace("\n", "\n" + _indent(level))
    return text


def _indent(level: int) -> str:
    return "    " * level if level <= MAX_INDENT_LEVELS else ""


def _nl(level: int) -> str:
    return "\n" if level <= MAX_INDENT_LEVELS else ""


def profile_text(root: ProfileNode, device_info: Mapping[str, Any] | None = None) -> str:
    """The file text of ``[root, device_info]``: what ``json.dumps(..., indent=4, sort_keys=True)``
    writes (Proton's layout), produced without recursion so that any nesting depth works
    (indentation stops growing after :data:`MAX_INDENT_LEVELS`)."""
    out: list[str] = ["\n[\n", _indent(1)]
    work: list[Any] = ["\n]\n", _indent(1) + _dumps_value(dict(device_info or {}), 1), ",\n", (root, 1)]
    while work:
        item = work.pop()
        if isinstance(item, str):
            out.append(item)
            continue
        node, level = item
        inner, nl1, nl2 = _indent(level + 1), _nl(level + 1), _nl(level + 2)
        sep = ",\n" if nl1 else ", "
        parts: list[Any] = ["{" + nl1, inner, '"children": ']
        if node.children:
            parts.append("[" + nl2)
            last = len(node.children) - 1
            for i, c in enumerate(node.children):
                parts.append(_indent(level + 2))
                parts.append((c, level + 2))
                parts.append((",\n" if nl2 else ", ") if i < last else nl2)
            parts.append(inner + "]")
        else:
            parts.append("[]")
        parts.append(sep + inner + '"frame": ' + _dumps_value({"name": node.name, "type": node.frame_type},
                                                               level + 1))
        if node.extra is not None:
            parts.append(sep + inner + '"kprof": ' + _dumps_value(node.extra, level + 1))
        parts.append(sep + inner + '"metrics": ' + _dumps_value(node.metrics, level + 1))
        parts.append(nl1 + _indent(level) + "}")
        work.extend(reversed(parts))
    return "".join(out)


def write_profile(path: str | os.PathLike, root: ProfileNode,
                  device_info: Mapping[str, Any] | None = None) -> list[tuple[str, str, str]]:
    """Write ``[root, device_info]`` to ``path`` atomically.

    The file is written to a temporary file in the same directory, flushed and fsynced, then
    renamed over ``path``: a reader (or a crash) never sees half a profile.  Zero placeholders are
    added to the root for every summable metric (see the module docstring).  NaN and infinite
    metric values, which JSON cannot hold, are kept as text under the node's ``"kprof"`` dict
    (``{"non_finite_metrics": {"flops": "nan"}}``) and left out of ``metrics``; the moved values are
    returned as ``(frame name, metric, "nan"|"inf"|"-inf")`` so that the caller can warn.  The
    writer is iterative: any nesting depth is written.
    """
    path = os.fspath(path)
    moved = _move_non_finite(root)
    _add_root_placeholders(root)
    atomic_write_text(path, profile_text(root, device_info))
    return moved


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` atomically: a temporary file in the same directory, flushed and
    fsynced, then renamed over ``path``.  On any failure the old file stays as it was and no
    temporary file is left behind.  (Used for profiles and for kprof's Chrome traces.)"""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    # The name ends in ".<file>.tmp" so that the repository's "*.hatchet.tmp" ignore rule covers
    # it.  os.open with O_EXCL and mode 0o666 (not mkstemp's 0o600): the profile gets the usual
    # umask-derived permissions.
    tmp = os.path.join(directory, f".kprof-{secrets.token_hex(6)}.{os.path.basename(path)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:  # make the rename itself durable; not possible on every platform/filesystem
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


_READ_CHUNK = 1 << 20
_JSON_START = frozenset(b'[{"-0123456789tfnNI')


def _read_bounded(path: str, max_bytes: int) -> bytes:
    """The file's bytes, refusing one larger than ``max_bytes`` (before reading it when its size is
    known, after ``max_bytes + 1`` bytes otherwise: a pipe or a device) and data that cannot start a
    JSON profile (``/dev/zero``, binary files) as soon as its first chunk is seen."""
    limit_hint = (f"the limit is {max_bytes} bytes; raise it with --max-size or "
                  "KPROF_MAX_PROFILE_SIZE (e.g. 4G)")
    with open(path, "rb") as f:
        try:
            size = os.fstat(f.fileno()).st_size
        except OSError:
            size = 0
        if size > max_bytes:
            raise ProfileFormatError(f"{path}: file is {size} bytes, too large to load; {limit_hint}")
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = f.read(_READ_CHUNK)
            if not chunk:
                break
            if not chunks:
                head = chunk.lstrip()
                if head and head[0] not in _JSON_START:
                    raise ProfileFormatError(f"{path}: binary data, not JSON (starts with byte "
                                             f"{head[:1]!r}); {_EXPECTED}")
            total += len(chunk)
            if total > max_bytes:
                raise ProfileFormatError(f"{path}: more than {max_bytes} bytes, too large to load; {limit_hint}")
            chunks.append(chunk)
    return b"".join(chunks)


def load_profile_json(path: str | os.PathLike, *, max_bytes: int | None = None,
                      max_depth: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Read and validate the top level of a profile file: returns ``(root_json, device_info)``.

    Raises :class:`ProfileFormatError` with a one-line message for a missing/unreadable file,
    truncated or invalid JSON, a file of another format, a file larger than ``max_bytes`` or
    nested deeper than ``max_depth`` frames (defaults: :mod:`profiler.options`,
    ``KPROF_MAX_PROFILE_SIZE`` and ``KPROF_MAX_PROFILE_DEPTH``).
    """
    from . import options
    path = os.fspath(path)
    try:
        if max_bytes is None:
            max_bytes = options.get("max_profile_bytes")
        if max_depth is None:
            max_depth = options.get("max_profile_depth")
    except options.OptionError as e:
        raise ProfileFormatError(f"{path}: {e}") from None
    try:
        raw = _read_bounded(path, max_bytes)
    except FileNotFoundError:
        raise ProfileFormatError(f"{path}: no such file; {_EXPECTED}") from None
    except IsADirectoryError:
        raise ProfileFormatError(f"{path}: is a directory; {_EXPECTED}") from None
    except OSError as e:
        raise ProfileFormatError(f"{path}: cannot read ({e.strerror or e}); {_EXPECTED}") from None
    except MemoryError:
        raise ProfileFormatError(f"{path}: out of memory while reading; {_EXPECTED}") from None
    if not raw.strip():
        raise ProfileFormatError(f"{path}: file is empty; {_EXPECTED}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ProfileFormatError(f"{path}: binary data, not JSON (a msgpack or other binary profile?); "
                                 f"{_EXPECTED}") from None
    del raw
    try:
        data = _loads(text, 2 * max_depth + 8)
    except json.JSONDecodeError as e:
        truncated = e.pos >= len(text.rstrip())
        what = "truncated JSON (the file ends early)" if truncated else "invalid JSON"
        raise ProfileFormatError(f"{path}: {what} at line {e.lineno} column {e.colno}: {e.msg}; "
                                 f"{_EXPECTED}") from None
    except _TooDeep:
        raise ProfileFormatError(f"{path}: nested deeper than {max_depth} frames; raise the limit with "
                                 "KPROF_MAX_PROFILE_DEPTH") from None
    except MemoryError:
        raise ProfileFormatError(f"{path}: out of memory while parsing; {_EXPECTED}") from None
    except ValueError as e:  # e.g. an integer of more digits than Python converts
        raise ProfileFormatError(f"{path}: unreadable JSON value ({e}); {_EXPECTED}") from None
    if isinstance(data, dict):
        hint = ""
        if "traceEvents" in data:
            hint = " (a Chrome/Perfetto trace?)"
        raise ProfileFormatError(f"{path}: top level is a JSON object{hint}; {_EXPECTED}")
    if not isinstance(data, list):
        raise ProfileFormatError(f"{path}: top level is a JSON {_json_type(data)}; {_EXPECTED}")
    if len(data) != 2:
        raise ProfileFormatError(f"{path}: top level is a list of {len(data)} items; {_EXPECTED}")
    root, device_info = data
    if not isinstance(root, dict) or "frame" not in root:
        raise ProfileFormatError(f"{path}: first item is not a frame node (no \"frame\" key); {_EXPECTED}")
    if not isinstance(device_info, dict):
        raise ProfileFormatError(f"{path}: second item is a JSON {_json_type(device_info)}, expected the "
                                 "device_info object {device_type: {device_id: {...}}}")
    return root, device_info


class _TooDeep(Exception):
    pass


def _loads(text: str, max_json_depth: int) -> Any:
    """``json.loads``, and for a document too deep for its recursion an iterative parser of the
    same grammar (with ``NaN``/``Infinity``, as Python's json reads them)."""
    try:
        return json.loads(text)
    except RecursionError:
        return _loads_iterative(text, max_json_depth)


_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"(-?(?:0|[1-9]\d*))(\.\d+)?([eE][-+]?\d+)?")
_CONSTANTS = (("null", None), ("true", True), ("false", False), ("NaN", math.nan),
              ("Infinity", math.inf), ("-Infinity", -math.inf))


def _loads_iterative(s: str, max_depth: int) -> Any:
    err = json.JSONDecodeError
    n = len(s)

    def skip(i: int) -> int:
        return _WS.match(s, i).end()

    def key_at(i: int) -> tuple[str, int]:
        if s.startswith('"', i):
            k, i = scanstring(s, i + 1)
            i = skip(i)
            if s.startswith(":", i):
                return k, skip(i + 1)
            raise err("Expecting ':' delimiter", s, i)
        raise err("Expecting property name enclosed in double quotes", s, i)

    stack: list[list[Any]] = []   # [container, key or None]
    pos = skip(0)
    while True:
        c = s[pos:pos + 1]
        if c == "{" or c == "[":
            pos = skip(pos + 1)
            close = "}" if c == "{" else "]"
            if s.startswith(close, pos):
                value: Any = {} if c == "{" else []
                pos += 1
            else:
                if len(stack) >= max_depth:
                    raise _TooDeep()
                if c == "{":
                    k, pos = key_at(pos)
                    stack.append([{}, k])
                else:
                    stack.append([[], None])
                continue
        elif c == '"':
            value, pos = scanstring(s, pos + 1)
        else:
            for word, const in _CONSTANTS:
                if s.startswith(word, pos):
                    value, pos = const, pos + len(word)
                    break
            else:
                m = _NUMBER.match(s, pos)
                if m is None or m.end() == pos:
                    raise err("Expecting value", s, pos)
                whole, frac, exp = m.groups()
                value = float(whole + (frac or "") + (exp or "")) if frac or exp else int(whole)
                pos = m.end()
        # A value is complete: store it, closing every container that ends here.
        while True:
            pos = skip(pos)
            if not stack:
                if pos != n:
                    raise err("Extra data", s, pos)
                return value
            top = stack[-1]
            cont = top[0]
            if isinstance(cont, list):
                cont.append(value)
            else:
                cont[top[1]] = value
            ch = s[pos:pos + 1]
            if ch == ",":
                pos = skip(pos + 1)
                if not isinstance(cont, list):
                    top[1], pos = key_at(pos)
                break
            if ch == ("]" if isinstance(cont, list) else "}"):
                pos += 1
                value = cont
                stack.pop()
                continue
            raise err("Expecting ',' delimiter", s, pos)


def read_profile(path: str | os.PathLike, *, max_bytes: int | None = None,
                 max_depth: int | None = None) -> tuple[ProfileNode, dict[str, Any]]:
    """Read a kprof or Proton profile: returns ``(root, device_info)``.

    Every error is a :class:`ProfileFormatError` whose message is one line naming the file and
    what was expected.  ``max_bytes``/``max_depth`` bound what is loaded (see
    :func:`load_profile_json`).
    """
    root_json, device_info = load_profile_json(path, max_bytes=max_bytes, max_depth=max_depth)
    try:
        root = ProfileNode.from_json(root_json)
    except ProfileFormatError as e:
        raise ProfileFormatError(f"{os.fspath(path)}: {e}; {_EXPECTED}") from None
    return root, device_info


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _json_type(value: Any) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number")
