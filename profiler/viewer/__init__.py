"""kprof-viewer: terminal viewer and notebook API for kprof and Proton profiles.

* CLI: ``kprof-viewer`` / ``python -m profiler.viewer`` (:func:`profiler.viewer.cli.main`).
* API: :func:`load_graphframe` (hatchet GraphFrame) and :func:`load_dataframe` (pandas), both
  imported lazily so that ``import profiler.viewer`` does not pull in hatchet or pandas.
* The file format itself lives in :mod:`profiler.format`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["load_graphframe", "load_dataframe", "main"]


def __getattr__(name: str) -> Any:
    # Lazy: the CLI must start fast, and hatchet alone takes ~0.4 s to import.
    if name in ("load_graphframe", "load_dataframe"):
        from . import api

        return getattr(api, name)
    if name == "main":
        from .cli import main

        return main
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
