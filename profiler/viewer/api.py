"""Python API for notebooks: a profile as a hatchet GraphFrame or as a pandas DataFrame.

hatchet and pandas are imported only when these functions are called, so importing the viewer
stays fast.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

from .. import format as fmt
from . import metrics as M
from . import tree


def load_graphframe(path: str | os.PathLike, *, inclusive: bool = True):
    """Load a kprof or Proton profile as a ``hatchet.GraphFrame``.

    Launch-metadata frames and empty leaves are dropped (as Proton's viewer does).  With
    ``inclusive=True`` (the default) hatchet's ``update_inclusive_columns()`` is called, so each
    summable metric ``m`` also has an ``"m (inc)"`` column, as in Proton's viewer.  kprof's per-node
    extras are not part of hatchet's model; use :func:`load_dataframe` or :mod:`profiler.format`
    for those.  Raises :class:`profiler.format.ProfileFormatError` for a bad file.
    """
    import hatchet as ht

    profile = tree.load(os.fspath(path))
    literal = [_to_literal(profile.root, profile.additive)]
    gf = ht.GraphFrame.from_literal(literal)
    if inclusive:
        gf.update_inclusive_columns()
    return gf


def _to_literal(root: tree.VNode, additive: list[str]) -> dict[str, Any]:
    def conv(node: tree.VNode) -> dict[str, Any]:
        return {"frame": {"name": node.name, "type": node.frame_type}, "metrics": dict(node.own),
                "children": [conv(c) for c in node.children]}

    out = conv(root)
    for name in additive:  # hatchet takes the metric columns from the root's keys
        out["metrics"].setdefault(name, 0)
    return out


def load_dataframe(path: str | os.PathLike, metrics: Sequence[str] | str | None = None, *,
                   frame_format: str = "full"):
    """Load a profile as a ``pandas.DataFrame``, one row per frame in tree order.

    Columns: ``name``, ``path`` (tuple of names from below the root), ``depth``, ``frame_type``,
    ``parent`` (row index of the parent, -1 for the root), ``kernel`` (kprof kernel name, else
    ``None``), every raw metric as stored (the frame's own value), ``"<m> (inc)"`` for each summable
    metric ``m`` (summed over the subtree), and one column per name in ``metrics`` (any name
    ``kprof-viewer -m`` accepts, e.g. ``["time/ms", "tflop16/s", "util"]``).

    Raises :class:`profiler.format.ProfileFormatError` for a bad file and
    :class:`profiler.viewer.metrics.MetricError` for an unknown metric.
    """
    import pandas as pd

    ff = tree.normalize_frame_format(frame_format)
    if ff is None:
        raise ValueError(f"unknown frame_format {frame_format!r}; expected one of {', '.join(tree.FRAME_FORMATS)}")
    profile = tree.load(os.fspath(path))
    tree.apply_frame_format(profile.root, ff)
    if isinstance(metrics, str):
        metrics = M.split_specs(metrics)
    cat = M.catalog(profile.raw_names, profile.additive)
    derived = M.resolve_list(metrics or [], cat, profile.raw_names)
    ctx = M.EvalContext(profile.root, profile.device_info, M.main_time_metric(profile.raw_names))

    records: list[dict[str, Any]] = []
    index: dict[int, int] = {}
    stack: list[tuple[tree.VNode, int, tuple[str, ...], int]] = [(profile.root, 0, (), -1)]
    while stack:
        node, depth, path_names, parent = stack.pop()
        row_id = len(records)
        index[id(node)] = row_id
        rec: dict[str, Any] = {
            "name": node.name,
            "path": path_names,
            "depth": depth,
            "frame_type": node.frame_type,
            "parent": parent,
            "kernel": (node.extra or {}).get("kernel") if (node.extra or {}).get("kind") == "kernel" else None,
        }
        for key in profile.raw_names + [fmt.DEVICE_ID, fmt.DEVICE_TYPE]:
            rec[key] = node.own.get(key)
        for key in profile.additive:
            rec[f"{key} (inc)"] = node.inc.get(key)
        for m in derived:
            rec[m.name] = m.value(node, ctx)
        records.append(rec)
        for c in reversed(node.children):
            stack.append((c, depth + 1, path_names + (c.name,), row_id))
    df = pd.DataFrame.from_records(records)
    df.index.name = "node"
    return df
