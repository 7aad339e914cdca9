"""Small Triton top-level helpers that kernelc's language gets for free."""
from __future__ import annotations


def constexpr_function(fn):
    """Triton marks plain Python functions callable from kernels on constant arguments; kernelc calls
    any plain Python function found in a kernel at compile time, so this returns ``fn`` unchanged."""
    return fn


def must_use_result(x, s=True):
    """Triton's marker for builtins whose result must be used; kernelc has no such check (a no-op
    decorator, also usable as ``@must_use_result("message")``)."""
    if callable(x):
        return x
    return lambda fn: fn
