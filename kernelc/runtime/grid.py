"""Launch grids: one validation for the CUDA launcher, its fast path and the interpreter.

A grid is 1 to 3 non-negative integers (a tuple, a list, or one integer), or a function of the
launch's META dict returning one.  A zero dimension launches nothing (as in Triton); dimensions above
what CUDA allows (x < 2**31, y and z < 2**16) are errors here rather than a driver error at launch.
"""
from __future__ import annotations

import numbers
import os
import sys
from typing import Any, Tuple

MAX_GRID = (2**31 - 1, 65535, 65535)
_AXES = "xyz"


class GridError(ValueError):
    """A malformed launch grid (the message names the kernel, the dimension and the call site)."""


def call_site() -> str:
    """``" (launched at FILE:LINE)"`` for the innermost frame outside kernelc, or ``""``."""
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    f = sys._getframe(1)
    while f is not None:
        path = os.path.abspath(f.f_code.co_filename)
        if not path.startswith(pkg + os.sep) and not f.f_code.co_filename.startswith("<kernelc"):
            return f" (launched at {f.f_code.co_filename}:{f.f_lineno})"
        f = f.f_back
    return ""


def _dim(x: Any, i: int, name: str, grid: Any) -> int:
    if isinstance(x, bool) or not hasattr(x, "__index__"):
        what = f"{x!r} ({type(x).__name__})"
        hint = "; use kernelc.cdiv(n, BLOCK) or integer division" if isinstance(x, float) else ""
        raise GridError(f"grid of {name}: dimension {_AXES[i]} is {what}, not an integer{hint}{call_site()}")
    v = x.__index__()
    if v < 0:
        raise GridError(f"grid of {name}: dimension {_AXES[i]} is negative ({v}){call_site()}")
    if v > MAX_GRID[i]:
        raise GridError(f"grid of {name}: dimension {_AXES[i]} is {v}, more than CUDA allows ({MAX_GRID[i]})"
                        f"{call_site()}")
    return v


def normalize_grid(grid: Any, name: str, meta=None) -> Tuple[int, int, int]:
    """``(x, y, z)`` of a launch grid (calling it with ``meta`` if it is a function), or :class:`GridError`."""
    g = grid
    if callable(g) and not hasattr(g, "__index__"):
        g = g(meta if meta is not None else {})
        src = f"the grid function of {name} returned"
    else:
        src = f"grid of {name} is"
    if isinstance(g, numbers.Number) or hasattr(g, "__index__") and not isinstance(g, (tuple, list)):
        g = (g,)  # one dimension (a float is then named as the bad dimension)
    if not isinstance(g, (tuple, list)):
        raise GridError(f"{src} {g!r:.60} ({type(g).__name__}); it must be a tuple of 1 to 3 integers"
                        f"{call_site()}")
    if not 1 <= len(g) <= 3:
        raise GridError(f"{src} {tuple(g)!r:.60}: a grid has 1 to 3 dimensions, not {len(g)}{call_site()}")
    dims = tuple(_dim(x, i, name, grid) for i, x in enumerate(g))
    return dims + (1,) * (3 - len(dims))
