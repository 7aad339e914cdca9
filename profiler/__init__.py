"""kprof: a GPU profiler in the spirit of Proton.

    import profiler

    profiler.start("train")                     # -> session id; backend: cupti (GPU) or cpu
    with profiler.scope("attn", metrics={"flops": 2 * n * n * d}):
        ...                                     # every kernel launched here is attributed to "attn"
    profiler.finalize()                         # writes train.hatchet (view: kprof-viewer train.hatchet)

or, without touching the program: ``python -m kprof train.py`` (``kprof --help``).

API: :func:`start`, :func:`finalize`, :func:`activate`, :func:`deactivate`, :func:`profile`
(decorator), :class:`scope` (context manager and decorator), :func:`enter_scope` /
:func:`exit_scope`.  Backends: :mod:`profiler.backends`; file format: :mod:`profiler.format`;
terminal viewer: :mod:`profiler.viewer` (``kprof-viewer``).
"""
from __future__ import annotations

import functools
from typing import Callable, Optional

from .scopes import enter_scope, exit_scope, scope
from .session import activate, deactivate, finalize, start

__all__ = ["start", "finalize", "activate", "deactivate", "profile", "scope", "enter_scope", "exit_scope"]


def profile(func: Optional[Callable] = None, *, name: Optional[str] = None, context: str = "shadow",
            mode: Optional[str] = None, hook: Optional[str] = "kernelc", backend: Optional[str] = None,
            output_dir: Optional[str] = None, format="hatchet"):
    """Decorator: profile each call of the function in its own session and write the profile when
    the call returns (or raises).  ``@profiler.profile`` or ``@profiler.profile(name="step", ...)``;
    the default name is the function's name."""

    def decorate(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            sid = start(name or fn.__name__, context=context, mode=mode, hook=hook, backend=backend,
                        output_dir=output_dir, format=format)
            try:
                return fn(*args, **kwargs)
            finally:
                finalize(sid)

        return wrapper

    return decorate(func) if func is not None else decorate
