"""The viewer's working tree: a profile loaded, cleaned, filtered and summed.

Filtering follows Proton's viewer: ``-i`` keeps the paths that pass through a matching frame,
``-e`` removes matching frames with their subtrees, and both re-total the tree over what is kept
(inclusive values are recomputed from the frames' own values after filtering).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Iterator

from .. import format as fmt

# Python frames (Proton's and kprof's "python" context) are named "<file>:<line>@<function>".
PY_FRAME = re.compile(r"^(?P<path>.*?):(?P<line>\d+)@(?P<func>.+)$")

# -f choices; aliases with ':' or '-' for '_' are accepted too.
FRAME_FORMATS = ("full", "file_function_line", "function_line", "file_function")


@dataclass(eq=False)
class VNode:
    """A frame as the viewer sees it: ``own`` are the frame's raw metrics, ``inc`` the summable
    metrics summed over the subtree (filled by :func:`compute_inclusive`)."""

    name: str
    frame_type: str
    own: dict[str, Any]
    children: list["VNode"] = field(default_factory=list)
    extra: dict[str, Any] | None = None
    inc: dict[str, float] = field(default_factory=dict)

    def walk(self, depth: int = 0) -> Iterator[tuple["VNode", int]]:
        stack = [(self, depth)]
        while stack:
            node, d = stack.pop()
            yield node, d
            stack.extend((c, d + 1) for c in reversed(node.children))

    def copy_shallow(self, children: list["VNode"]) -> "VNode":
        return VNode(self.name, self.frame_type, self.own, children, self.extra)


@dataclass
class Profile:
    """A loaded profile: tree, devices and the metric names it holds."""

    path: str
    root: VNode
    device_info: dict[str, Any]
    raw_names: list[str]  # every numeric metric name in the file, first-seen order
    additive: list[str]  # the summable ones among them

    @property
    def label(self) -> str:
        return os.path.basename(self.path)


def load(path: str) -> Profile:
    """Read ``path`` (kprof or Proton) into a :class:`Profile` with inclusive values computed."""
    root_pn, device_info = fmt.read_profile(path)
    additive = fmt.additive_metric_names(root_pn)
    root = _convert(root_pn)
    raw: dict[str, None] = {}
    for node, _ in root.walk():
        for key, value in node.own.items():
            if key not in (fmt.DEVICE_ID, fmt.DEVICE_TYPE) and _is_number(value):
                raw[key] = None
    # Root placeholders for metrics no frame actually has still count as present (Proton's view).
    for key in additive:
        raw.setdefault(key, None)
    profile = Profile(os.fspath(path), root, device_info, order_metric_names(raw), additive)
    compute_inclusive(profile.root, profile.additive)
    return profile


def ranks_of(profile: Profile) -> list[int]:
    """The ranks whose per-rank columns (``<metric>:rank<r>``) a merged profile holds."""
    from ..merge import split_rank_name
    return sorted({s[1] for s in map(split_rank_name, profile.raw_names) if s is not None})


def select_rank(profile: Profile, rank: int) -> Profile:
    """One rank of a merged profile, as that rank's own profile: each frame keeps the rank's
    per-rank columns under their plain names (``time (ns):rank1`` -> ``time (ns)``); frames the rank
    never reached are dropped.  Raises ``ValueError`` for a profile without that rank."""
    from ..merge import split_rank_name
    ranks = ranks_of(profile)
    if not ranks:
        raise ValueError(f"{profile.label} has no per-rank metrics; --rank needs a merged profile "
                         "(NAME.merged.hatchet, written by rank 0 under torchrun)")
    if rank not in ranks:
        missing = ((profile.root.extra or {}).get("distributed") or {}).get("missing") or []
        why = " (its profile was missing when the merge was written)" if rank in missing else ""
        raise ValueError(f"rank {rank} is not in {profile.label}{why}; ranks: {', '.join(map(str, ranks))}")
    additive: dict[str, None] = {}
    for node, _ in profile.root.walk():
        own: dict[str, Any] = {}
        for key, value in node.own.items():
            split = split_rank_name(key)
            if split is not None and split[1] == rank:
                own[split[0]] = value
                additive[split[0]] = None
        if own:
            own.update({k: node.own[k] for k in (fmt.DEVICE_ID, fmt.DEVICE_TYPE) if k in node.own})
        node.own = own
    order = [n for n, _ in profile.root.walk()]
    for node in reversed(order):
        node.children = [c for c in node.children if c.children or c.own]
    names = order_metric_names(additive)
    out = Profile(profile.path, profile.root, profile.device_info, names, names)
    compute_inclusive(out.root, out.additive)
    return out


def order_metric_names(names) -> list[str]:
    """Headline metrics first (time, count, flop counters, bytes, samples), PC-sampling stall
    counters last, others in file order: the order of -l, messages and defaults."""
    names = list(names)

    def rank(name: str) -> tuple[int, int]:
        low = name.lower()
        if low.startswith("time"):
            r = 0
        elif low == fmt.COUNT_METRIC:
            r = 1
        elif low.startswith("flops"):
            r = 2
        elif low == "bytes":
            r = 3
        elif low.startswith("stalled_") or low == "num_stalled_samples":
            r = 6
        elif low == "num_samples":
            r = 5
        else:
            r = 4
        return r, names.index(name)

    return sorted(names, key=rank)


def _convert(pn: fmt.ProfileNode) -> VNode:
    """ProfileNode tree -> VNode tree without Proton's launch-metadata frames and without empty
    leaves (frames that carry nothing), as Proton's viewer does."""
    out = VNode(pn.name, pn.frame_type, pn.metrics, [], pn.extra)
    stack = [(pn, out)]
    while stack:
        src, dst = stack.pop()
        for c in src.children:
            if c.name == fmt.LAUNCH_METADATA_FRAME:
                continue
            v = VNode(c.name, c.frame_type, c.metrics, [], c.extra)
            dst.children.append(v)
            stack.append((c, v))
    _prune_empty(out)
    return out


def _prune_empty(root: VNode) -> None:
    order = [n for n, _ in root.walk()]
    for node in reversed(order):
        node.children = [c for c in node.children if c.children or c.own or c.extra]


def compute_inclusive(root: VNode, additive: list[str]) -> None:
    """Fill ``inc`` on every node: each summable metric summed over the subtree."""
    wanted = set(additive)
    order = [n for n, _ in root.walk()]
    for node in reversed(order):
        acc: dict[str, float] = {}
        for key, value in node.own.items():
            if key in wanted and _is_number(value):
                acc[key] = value
        for c in node.children:
            for key, value in c.inc.items():
                acc[key] = acc.get(key, 0) + value
        node.inc = acc


def normalize_frame_format(name: str) -> str | None:
    """``"file:function:line"`` -> ``"file_function_line"``; ``None`` if not a known format."""
    key = re.sub(r"[:\-\s]+", "_", name.strip().lower())
    return key if key in FRAME_FORMATS else None


def format_name(name: str, frame_format: str) -> str:
    """Shorten a Python frame name ``/path/file.py:12@func`` like Proton's ``-f`` does; other
    names (kernels, scopes) are left alone."""
    if frame_format == "full":
        return name
    m = PY_FRAME.match(name)
    if not m:
        return name
    base = m.group("path").rsplit("/", 1)[-1]
    line, func = m.group("line"), m.group("func")
    if frame_format == "file_function_line":
        return f"{base}:{line}@{func}"
    if frame_format == "function_line":
        return f"{line}@{func}"
    return f"{base}@{func}"  # file_function


def apply_frame_format(root: VNode, frame_format: str) -> None:
    """Rename frames in place; siblings that become equal are kept apart (no merging)."""
    if frame_format == "full":
        return
    for node, _ in root.walk():
        node.name = format_name(node.name, frame_format)


def include(root: VNode, pattern: re.Pattern[str]) -> VNode:
    """Keep the frames on paths through a frame whose name matches: the matching frames, their
    ancestors and their descendants.  The root is always kept."""

    def keep(node: VNode) -> VNode | None:
        if pattern.search(node.name):
            return node  # the whole subtree passes through this frame
        kids = [k for k in (keep(c) for c in node.children) if k is not None]
        return node.copy_shallow(kids) if kids else None

    kids = [k for k in (keep(c) for c in root.children) if k is not None]
    return root.copy_shallow(kids)


def exclude(root: VNode, pattern: re.Pattern[str]) -> VNode:
    """Drop every frame whose name matches, with its subtree.  The root is always kept."""

    def keep(node: VNode) -> VNode:
        return node.copy_shallow([keep(c) for c in node.children if not pattern.search(c.name)])

    return keep(root)


def path_index(root: VNode) -> dict[tuple[str, ...], VNode]:
    """``{(name, child name, ...): node}`` for matching frames between two profiles; the root's
    own name is left out of the key so that roots always match."""
    out: dict[tuple[str, ...], VNode] = {}
    stack: list[tuple[VNode, tuple[str, ...]]] = [(root, ())]
    while stack:
        node, key = stack.pop()
        out.setdefault(key, node)
        for c in node.children:
            stack.append((c, key + (c.name,)))
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
