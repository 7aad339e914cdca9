"""Proton's API (``triton.profiler``) on kprof: code instrumented for Proton profiles with kprof.

Under ``python -m kernelc.run`` ``import triton.profiler as proton`` is this module. Every call maps
onto kprof's public API (:mod:`profiler`); the profile is kprof's ``NAME.hatchet``, the layout Proton
writes, so ``proton-viewer`` and ``kprof-viewer`` read it alike.

Differences from Proton: ``backend`` is ``None``/``"cupti"``/``"cpu"`` (no ``roctracer`` or
``instrumentation``); ``data="trace"`` writes kprof's Chrome trace; ``state``/``enter_state`` name
scopes (kprof has no separate state column).

Example::

    import triton.profiler as proton
    proton.start("matmul", hook="triton")
    with proton.scope("cublas", {"flops": 2 * M * N * K}):
        torch.matmul(a, b)
    proton.finalize()          # matmul.hatchet
"""
from __future__ import annotations

import functools
import time
from typing import Any, Callable, Dict, List, Optional

import profiler as _kprof
from profiler import context as _context
from profiler import session as _session

DEFAULT_PROFILE_NAME = "proton"
_BACKENDS = (None, "cupti", "cpu")
_HOOKS = {None: None, "triton": "kernelc", "launch": "kernelc"}
_DATA = {None: "hatchet", "tree": "hatchet", "trace": "chrome"}
_entered_ids: List[int] = []


def start(name: Optional[str] = None, *, context: Optional[str] = "shadow", data: Optional[str] = "tree",
          backend: Optional[str] = None, mode: Optional[str] = None, hook: Optional[str] = None) -> Optional[int]:
    """Start a session (Proton's arguments); returns its id. ``hook="triton"`` evaluates kernels'
    ``launch_metadata`` (``flops``, ``bytes``, names) as Proton does."""
    if backend not in _BACKENDS:
        raise ValueError(f"proton.start(backend={backend!r}): kprof implements {_BACKENDS[1:]} (and None: automatic); "
                         "roctracer and instrumentation are Proton-only")
    if hook not in _HOOKS:
        raise ValueError(f"proton.start(hook={hook!r}): expected None or 'triton'")
    if data not in _DATA:
        raise ValueError(f"proton.start(data={data!r}): expected 'tree' or 'trace'")
    if mode is not None and not isinstance(mode, str):
        mode = str(mode)
    return _kprof.start(name or DEFAULT_PROFILE_NAME, context=context or "shadow", mode=mode, hook=_HOOKS[hook],
                        backend=backend, format=_DATA[data])


def activate(session: Optional[int] = None) -> None:
    """Resume recording (all sessions by default)."""
    _kprof.activate(session)


def deactivate(session: Optional[int] = None) -> None:
    """Pause recording (all sessions by default)."""
    _kprof.deactivate(session)


def finalize(session: Optional[int] = None, output_format: Optional[str] = "") -> None:
    """Write the profile(s) and end the session(s). ``output_format``: "hatchet" or "chrome_trace"."""
    fmt = {"": None, None: None, "hatchet": "hatchet", "chrome_trace": "chrome"}.get(output_format, output_format)
    _kprof.finalize(session, fmt)


def profile(func: Optional[Callable] = None, *, name: Optional[str] = None, context: Optional[str] = "shadow",
            data: Optional[str] = "tree", backend: Optional[str] = None, mode: Optional[str] = None,
            hook: Optional[str] = None):
    """Decorator: profile each call in a session that is deactivated (not written) when it returns,
    as Proton's ``@proton.profile``; ``finalize()`` writes it."""
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            sid = start(name or fn.__name__, context=context, data=data, backend=backend, mode=mode, hook=hook)
            try:
                return fn(*args, **kwargs)
            finally:
                deactivate(sid)
        return wrapper
    return decorate(func) if func is not None else decorate


class scope(_kprof.scope):
    """``with proton.scope(name, metrics)`` / ``@proton.scope(name)``: kprof's scope."""

    __slots__ = ()

    def __init__(self, name: str, metrics: Optional[Dict[str, Any]] = None):
        super().__init__(name, metrics)


class cpu_timed_scope(_kprof.scope):
    """A scope that also records its host time as the ``cpu_time (ns)`` metric."""

    __slots__ = ("_t0", "_node", "_pykey")

    def __init__(self, name: str, metrics: Optional[Dict[str, Any]] = None):
        super().__init__(name, metrics)

    def __enter__(self):
        super().__enter__()
        self._node = _context.local.ctx.node
        self._pykey = _context.python_key_here(1) if _session.python_ctx else None
        self._t0 = time.perf_counter_ns()
        return self

    def __exit__(self, exc_type, exc, tb):
        dt = time.perf_counter_ns() - self._t0
        if _session.active and type(self._node) is int:
            _session.scope_metrics(self.name, self._node, {"cpu_time (ns)": dt}, self._pykey)
        return super().__exit__(exc_type, exc, tb)

    def __call__(self, fn):
        name, metrics = self.name, self.metrics

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with cpu_timed_scope(name, metrics):
                return fn(*args, **kwargs)
        return wrapper


def enter_scope(name: str, *, triton_op: bool = False, metrics: Optional[Dict[str, Any]] = None) -> Optional[int]:
    """Enter a scope without a ``with`` block; returns an id (Proton returns the scope id)."""
    _kprof.enter_scope(name, metrics)
    sid = len(_entered_ids)
    _entered_ids.append(sid)
    return sid


def exit_scope(name: Optional[str] = None, *, triton_op: bool = False,
               metrics: Optional[Dict[str, Any]] = None) -> Optional[int]:
    """Leave the innermost scope entered with :func:`enter_scope`."""
    _kprof.exit_scope()
    return _entered_ids.pop() if _entered_ids else None


class state(_kprof.scope):
    """Proton's ``state``: kernels launched inside are attributed to a frame named ``name`` (a scope
    in kprof)."""

    __slots__ = ()

    def __init__(self, name: str):
        super().__init__(name, None)


def enter_state(name: str) -> None:
    _kprof.enter_scope(name)


def exit_state() -> None:
    _kprof.exit_scope()


from . import context  # noqa: E402,F401  (Proton's proton.context.depth)

__all__ = ["start", "activate", "deactivate", "finalize", "profile", "scope", "cpu_timed_scope", "enter_scope",
           "exit_scope", "state", "enter_state", "exit_state", "DEFAULT_PROFILE_NAME"]
