"""A session's measurements, aggregated as they arrive, and the profile tree built from them.

Measurements are keyed by *context key* (a scope id or a Python call path, see
:mod:`profiler.context`); keys become frame paths only once, when the tree is built.  Kernel
frames are children of their context's frame, named by the kernel, with Proton's metrics
(``time (ns)``, ``count``, ``device_id``, ``device_type``) plus launch-metadata numbers.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Dict, List, Optional

from .format import COUNT_METRIC, DEVICE_ID, DEVICE_TYPE, ProfileNode, ROOT_NAME, TIME_METRIC

__all__ = ["ProfileData", "build_tree"]


class ProfileData:
    """Thread-safe accumulator of one session's measurements.

    * kernels: ``(ctx, name, device_type, device_id) -> [time_ns | None, count, metrics, extra]``
    * frames: ``ctx -> {metric: value}`` (scope metrics; host self time of scopes on the cpu backend)
    * events: trace events ``(name, cat, start_ns, end_ns, pid, tid, ctx, args)`` when tracing.
    """

    def __init__(self, trace: bool = False):
        self.lock = threading.Lock()
        self.kernels: Dict[tuple, list] = {}
        self.frames: Dict[Any, Dict[str, Any]] = {}
        self.events: Optional[list] = [] if trace else None
        self.devices: set = set()  # (device_type, device_id) seen

    def add_kernel(self, ctx, name: str, device_type: str, device_id: int, time_ns: Optional[int],
                   metrics: Optional[Dict[str, Any]] = None, extra: Optional[Dict[str, Any]] = None,
                   count: int = 1) -> None:
        key = (ctx, name, device_type, device_id)
        with self.lock:
            st = self.kernels.get(key)
            if st is None:
                self.kernels[key] = st = [None, 0, None, extra]
                self.devices.add((device_type, device_id))
            if time_ns is not None:
                st[0] = time_ns if st[0] is None else st[0] + time_ns
            st[1] += count
            if metrics:
                m = st[2]
                if m is None:
                    st[2] = m = {}
                for k, v in metrics.items():
                    m[k] = m.get(k, 0) + v
            if extra is not None and st[3] is not extra:
                _merge_extra(st, extra)

    def add_frame(self, ctx, metrics: Dict[str, Any]) -> None:
        with self.lock:
            m = self.frames.get(ctx)
            if m is None:
                self.frames[ctx] = m = {}
            for k, v in metrics.items():
                m[k] = m.get(k, 0) + v

    def add_event(self, name: str, cat: str, start_ns: int, end_ns: int, pid: str, tid: Any, ctx=None,
                  args: Optional[Dict[str, Any]] = None) -> None:
        if self.events is not None:
            self.events.append((name, cat, start_ns, end_ns, pid, tid, ctx, args))

    def is_empty(self) -> bool:
        return not self.kernels and not self.frames and not self.events


def _merge_extra(st: list, extra: Dict[str, Any]) -> None:
    # Two specialisations with the same display name: keep the first, remember the other keys.
    old = st[3]
    if old is None:
        st[3] = extra
        return
    ck = extra.get("cache_key")
    if ck and ck != old.get("cache_key"):
        others = old.setdefault("other_cache_keys", [])
        if ck not in others:
            others.append(ck)


def build_tree(data: ProfileData, names_of: Callable[[Any], List[str]],
               kernel_name: Callable[[str], str] = lambda n: n,
               nodes: Optional[Dict[tuple, ProfileNode]] = None,
               link_of: Optional[Callable[[Any], Optional[tuple]]] = None) -> ProfileNode:
    """The profile tree of ``data``: ``names_of(ctx)`` gives a context's frame path (outermost
    first), ``kernel_name`` turns a recorded kernel name into its frame name (demangling).
    ``nodes``, if given, receives ``(ctx, name, device_type, device_id) -> kernel frame``.
    ``link_of(ctx)``, if given, is ``(parent ctx, name)`` for a context that has a parent context
    (scope ids) and ``None`` otherwise: such contexts are placed from their parent's frame, so the
    build is linear in the number of contexts however deep they nest."""
    root = ProfileNode(ROOT_NAME)
    frames: Dict[Any, ProfileNode] = {}

    def node_for(ctx) -> ProfileNode:
        n = frames.get(ctx)
        if n is not None:
            return n
        if link_of is not None and link_of(ctx) is not None:
            chain = []
            c = ctx
            while c not in frames:
                link = link_of(c)
                if link is None:
                    break
                chain.append((c, link[1]))
                c = link[0]
            n = frames.get(c)
            if n is None:  # reached a context without a parent context: the root's path
                n = root
                for name in names_of(c):
                    n = n.child(name)
            for c, name in reversed(chain):
                n = n.child(name)
                frames[c] = n
            return n
        n = root
        for name in names_of(ctx):
            n = n.child(name)
        frames[ctx] = n
        return n

    for ctx, metrics in data.frames.items():
        node_for(ctx).add_metrics(metrics)
    # Same kernel on several devices under one frame: one frame per device, named apart.
    devices_per: Dict[tuple, set] = {}
    for (ctx, name, dtype, did) in data.kernels:
        devices_per.setdefault((ctx, name), set()).add((dtype, did))
    for (ctx, name, dtype, did), (time_ns, count, metrics, extra) in data.kernels.items():
        parent = node_for(ctx)
        fname = kernel_name(name)
        if len(devices_per[(ctx, name)]) > 1:
            fname = f"{fname} ({dtype} {did})"
        node = parent.child(fname)
        if nodes is not None:
            nodes[(ctx, name, dtype, did)] = node
        values: Dict[str, Any] = {COUNT_METRIC: count, DEVICE_ID: str(did), DEVICE_TYPE: dtype}
        if time_ns is not None:
            values[TIME_METRIC] = time_ns
        if metrics:
            values.update(metrics)
        node.add_metrics(values)
        if extra is not None and node.extra is None:
            node.extra = extra
    return root
