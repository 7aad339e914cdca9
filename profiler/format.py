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
import secrets
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

    def child(self, name: str, frame_type: str = "function") -> "ProfileNode":
        """Return the child called ``name``, creating it if absent (Proton merges same-named
        frames under one parent the same way)."""
        for c in self.children:
            if c.name == name:
                return c
        c = ProfileNode(name, frame_type)
        self.children.append(c)
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
        """The node as the JSON object of the file layout (recursively)."""
        out: dict[str, Any] = {
            "frame": {"name": self.name, "type": self.frame_type},
            "metrics": dict(self.metrics),
            "children": [c.to_json() for c in self.children],
        }
        if self.extra is not None:
            out[KPROF_KEY] = self.extra
        return out

    @classmethod
    def from_json(cls, obj: Any, _path: str = "") -> "ProfileNode":
        """Build a tree from a node's JSON object; raises :class:`ProfileFormatError` on a
        malformed node."""
        # Iterative, so that a deep Python-context tree cannot hit the recursion limit.
        root = cls._node_from_json(obj, _path or "root node")
        stack = [(root, obj, _path or root.name)]
        while stack:
            node, data, where = stack.pop()
            for i, cobj in enumerate(data.get("children") or ()):
                cwhere = f"{where}/children[{i}]"
                child = cls._node_from_json(cobj, cwhere)
                node.children.append(child)
                stack.append((child, cobj, f"{where}/{child.name}"))
        return root

    @classmethod
    def _node_from_json(cls, obj: Any, where: str) -> "ProfileNode":
        if not isinstance(obj, dict):
            raise ProfileFormatError(f"{where} is a JSON {_json_type(obj)}, expected a node object "
                                     "{\"frame\", \"metrics\", \"children\"}")
        frame = obj.get("frame")
        if not isinstance(frame, dict):
            raise ProfileFormatError(f"{where} has no \"frame\" object (expected {{\"name\": ..., "
                                     "\"type\": ...}})")
        name = frame.get("name", obj.get("name"))  # hatchet also accepts a name beside the frame
        if not isinstance(name, str):
            raise ProfileFormatError(f"{where} has a frame without a string \"name\"")
        metrics = obj.get("metrics", {})
        if not isinstance(metrics, dict):
            raise ProfileFormatError(f"{where} ({name!r}) has \"metrics\" that is not an object")
        children = obj.get("children", [])
        if not isinstance(children, list):
            raise ProfileFormatError(f"{where} ({name!r}) has \"children\" that is not a list")
        extra = obj.get(KPROF_KEY)
        if extra is not None and not isinstance(extra, dict):
            raise ProfileFormatError(f"{where} ({name!r}) has a \"kprof\" value that is not an object")
        return cls(name, str(frame.get("type", "function")), dict(metrics), [], extra)


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


def write_profile(path: str | os.PathLike, root: ProfileNode, device_info: Mapping[str, Any] | None = None) -> None:
    """Write ``[root, device_info]`` to ``path`` atomically.

    The file is written to a temporary file in the same directory, flushed and fsynced, then
    renamed over ``path``: a reader (or a crash) never sees half a profile.  Zero placeholders are
    added to the root for every summable metric (see the module docstring).  Raises ``ValueError``
    for NaN/infinite values, which JSON cannot represent.
    """
    path = os.fspath(path)
    _add_root_placeholders(root)
    for node, _ in root.walk():
        for key, value in node.metrics.items():
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"metric {key!r} of frame {node.name!r} is {value}; profiles hold finite numbers only")
    data = [root.to_json(), dict(device_info or {})]
    text = "\n" + json.dumps(data, indent=4, sort_keys=True, allow_nan=False) + "\n"
    atomic_write_text(path, text)


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


def load_profile_json(path: str | os.PathLike) -> tuple[dict[str, Any], dict[str, Any]]:
    """Read and validate the top level of a profile file: returns ``(root_json, device_info)``.

    Raises :class:`ProfileFormatError` with a one-line message for a missing/unreadable file,
    truncated or invalid JSON, or a file of another format.
    """
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise ProfileFormatError(f"{path}: no such file; {_EXPECTED}") from None
    except IsADirectoryError:
        raise ProfileFormatError(f"{path}: is a directory; {_EXPECTED}") from None
    except OSError as e:
        raise ProfileFormatError(f"{path}: cannot read ({e.strerror}); {_EXPECTED}") from None
    if not raw.strip():
        raise ProfileFormatError(f"{path}: file is empty; {_EXPECTED}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ProfileFormatError(f"{path}: binary data, not JSON (a msgpack or other binary profile?); "
                                 f"{_EXPECTED}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        truncated = e.pos >= len(text.rstrip())
        what = "truncated JSON (the file ends early)" if truncated else "invalid JSON"
        raise ProfileFormatError(f"{path}: {what} at line {e.lineno} column {e.colno}: {e.msg}; "
                                 f"{_EXPECTED}") from None
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


def read_profile(path: str | os.PathLike) -> tuple[ProfileNode, dict[str, Any]]:
    """Read a kprof or Proton profile: returns ``(root, device_info)``.

    Every error is a :class:`ProfileFormatError` whose message is one line naming the file and
    what was expected.
    """
    root_json, device_info = load_profile_json(path)
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
