"""``--format chrome``: a Chrome trace-event JSON file (``NAME.trace.json``) that Perfetto
(https://ui.perfetto.dev) and ``chrome://tracing`` open.

Layout: ``{"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}`` with one complete
event (``"ph": "X"``, ``ts``/``dur`` in microseconds from the first event) per kernel, memcpy,
memset and scope instance:

* GPU work: process ``GPU <device>``, thread ``stream <id>``, ``cat`` ``kernel`` or ``memory``;
* interpreted kernelc kernels: process ``CPU 0``, thread ``interpreter``;
* scopes (host clock, converted to CUPTI's clock on the cupti backend): process ``host``, thread
  ``thread <ident>``, ``cat`` ``scope``.

Every event's ``args`` hold ``path`` (its frames in the profile tree, joined by `` / ``) and, for
GPU work, the CUPTI ``correlation`` id.  Process and thread names come as metadata events
(``"ph": "M"``).  The file is written atomically.
"""
from __future__ import annotations

import json
from typing import Any, Dict, List

from .format import atomic_write_text

__all__ = ["trace_events", "write_trace"]


def trace_events(session) -> Dict[str, Any]:
    from . import context
    from cubintools.demangle import demangle
    events = list(session.data.events or ())
    out: List[Dict[str, Any]] = []
    pids: Dict[str, int] = {}
    tids: Dict[tuple, int] = {}
    paths: Dict[Any, str] = {}
    t0 = min((e[2] for e in events), default=0)
    for name, cat, start, end, pid, tid, ctx, args in sorted(events, key=lambda e: e[2]):
        p = pids.get(pid)
        if p is None:
            p = pids[pid] = len(pids) + 1
            out.append({"name": "process_name", "ph": "M", "pid": p, "tid": 0, "args": {"name": pid}})
            out.append({"name": "process_sort_index", "ph": "M", "pid": p, "tid": 0, "args": {"sort_index": p}})
        t = tids.get((pid, tid))
        if t is None:
            t = tids[(pid, tid)] = len(tids) + 1
            out.append({"name": "thread_name", "ph": "M", "pid": p, "tid": t, "args": {"name": str(tid)}})
        a = dict(args or {})
        if ctx is not None:
            path = paths.get(ctx)
            if path is None:
                path = paths[ctx] = " / ".join(context.names_of(ctx)) or "ROOT"
            a["path"] = path
        out.append({"name": demangle(name), "cat": cat, "ph": "X", "pid": p, "tid": t,
                    "ts": round((start - t0) / 1000.0, 3), "dur": round(max(0, end - start) / 1000.0, 3),
                    "args": a})
    return {"traceEvents": out, "displayTimeUnit": "ns",
            "otherData": {"tool": "kprof", "session": session.name, "backend": session.backend_name,
                          "context": session.context}}


def write_trace(path: str, session, root=None) -> None:
    """Write ``session``'s trace to ``path`` atomically."""
    atomic_write_text(path, json.dumps(trace_events(session), separators=(",", ":")) + "\n")
