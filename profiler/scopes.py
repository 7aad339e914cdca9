"""``profiler.scope``: name a region of the program; nested scopes form the profile tree.

    with profiler.scope("attn", metrics={"flops": 2 * B * H * T * T * D}):
        ...

    @profiler.scope("optimizer")
    def step(): ...

Kernels launched inside a scope (on the same thread) become its children (``context="shadow"``).
``metrics`` are user numbers added to the scope's frame at entry; readers sum them up the tree.
Scopes are per thread; a scope costs a dict lookup and two list operations when no session needs
host timestamps (the ``cupti`` backend without a trace).
"""
from __future__ import annotations

import functools
import threading
import time
from typing import Any, Callable, Mapping, Optional

from . import _native, context, options
from . import session as _session
from .context import _kids, fast as _fast

__all__ = ["scope", "enter_scope", "exit_scope"]


class _PyScope:
    """A named region, as a context manager or a decorator.  ``metrics``: numbers such as
    ``{"flops": ..., "bytes": ...}`` credited to this scope's frame each time it is entered.
    (The Python methods; :data:`scope` is this class or, with ``native_scopes``, the C entry and exit
    of ``_kscope.c``, which hands every case but the common one back to these methods.)"""

    __slots__ = ("name", "metrics")

    def __init__(self, name: str, metrics: Optional[Mapping[str, Any]] = None):
        if not isinstance(name, str) or not name:
            raise TypeError(f"scope name must be a non-empty string, got {name!r}")
        self.name = name
        self.metrics = metrics

    def __enter__(self) -> "scope":
        # context.push, inlined (a Python call less per entry), the thread's context read from the plain
        # threading.local and the child's id from its parent's dict (no key tuple)
        try:
            c = _fast.ctx
        except AttributeError:
            c = context.ctx_slow()
        parent = c.node
        if type(parent) is not int:  # a kernelc launch that raised before its exit hook
            parent = c.kprev
        name = self.name
        nid = _kids[parent].get(name)
        if nid is None:
            nid = context.intern(parent, name)
        c.stack.append(parent)
        c.node = nid
        clock = context._clock
        if clock is not None:
            if context._ext is None:
                c.times.append(clock())
                c.nodes.append(nid)
            else:
                context._ext_changed(c)
        # Only sessions that time scopes on the host (or metrics) need more than the push: kprof's
        # cupti backend without a trace places kernels by the timeline alone, and queues metrics.
        if _session.timing:
            _session.scope_entered(self.name, nid, self.metrics)
        elif self.metrics and _session.active:
            if _session.python_ctx:
                _session.scope_entered(self.name, nid, self.metrics)
            else:
                _session.queue_metrics(nid, self.name, self.metrics)
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if _session.timing:
            _session.scope_exiting(self.name)
        try:  # context.pop, inlined
            c = _fast.ctx
        except AttributeError:
            c = context.ctx_slow()
        st = c.stack
        c.node = n = st.pop() if st else 0
        clock = context._clock
        if clock is not None:
            if context._ext is None:
                c.times.append(clock())
                c.nodes.append(n)
            else:
                context._ext_changed(c)
        return False

    def __call__(self, fn: Callable) -> Callable:
        name, metrics = self.name, self.metrics

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            # A fresh object per call: the decorated function may recurse or run on several threads.
            with scope(name, metrics):
                return fn(*args, **kwargs)

        return wrapper

    def __repr__(self):
        return f"profiler.scope({self.name!r})"


def _slow_exit(s) -> bool:
    return _PyScope.__exit__(s, None, None, None)


scope = _PyScope
_kscope = _native.load(options.get("native_scopes"))
if _kscope is not None:
    try:   # never break `import profiler`: a setup the C code refuses (say, an unexpected slot layout) runs Python's
        _kscope.setup(context, _session, _PyScope.__enter__, _slow_exit, _PyScope.__call__, _PyScope.__repr__,
                      time.time_ns)
        scope = _kscope.Scope
    except Exception as e:
        _native.status = f"python (setup failed: {type(e).__name__}: {e})"
        _native._module = None


class _Open(threading.local):
    def __init__(self):
        self.stack = []


_open = _Open()


def enter_scope(name: str, metrics: Optional[Mapping[str, Any]] = None) -> None:
    """Enter a scope without a ``with`` block (pair with :func:`exit_scope` on the same thread)."""
    s = scope(name, metrics)
    s.__enter__()
    _open.stack.append(s)


def exit_scope() -> None:
    """Leave the innermost scope entered with :func:`enter_scope` on this thread."""
    if _open.stack:
        _open.stack.pop().__exit__(None, None, None)
