"""``kl.extra.libdevice``: NVIDIA libdevice's math functions under Triton 3.6's names and signatures.

Each function calls the libdevice symbol (``__nv_*``) that matches its argument types, one call per
element; the compiler links ``libdevice.10.bc`` into kernels that use one, and the interpreter
computes the same function with numpy (``kernelc/runtime/interpreter/libdevice.py``).

Argument types must match one of a function's signatures exactly, as in Triton (Python numbers are
int32/fp32); cast first otherwise, e.g. ``libdevice.exp(x.to(kl.float32))``.

Example::

    from kernelc.language.extra import libdevice

    @kernelc.jit
    def asin_kernel(x_ptr, y_ptr, n, BLOCK: kl.constexpr):
        offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
        x = kl.load(x_ptr + offs, mask=offs < n)
        kl.store(y_ptr + offs, libdevice.asin(x), mask=offs < n)
"""
from __future__ import annotations

import inspect

from .. import semantic
from ..core import _unwrap
from .libdevice_abi import SYMBOLS, TABLE  # noqa: F401 (SYMBOLS: used by kernelc's interpreter and kl.core)

# Functions whose libdevice result is an int32 flag that Triton turns into a boolean.
_BOOLEAN = frozenset({"isnan", "isinf", "finitef", "isfinited"})


def _make(name, rows):
    nargs = len(next(iter(rows)))

    def fn(*args):
        if len(args) != nargs:
            raise TypeError(f"libdevice.{name}() takes {nargs} argument{'s' * (nargs > 1)}, got {len(args)}")
        out = semantic.extern_elementwise(f"libdevice.{name}", [_unwrap(a) for a in args], rows)
        if name in _BOOLEAN:
            out = semantic.cast(out, "int1")
        return out

    fn.__name__ = fn.__qualname__ = name
    fn.__signature__ = inspect.Signature(
        [inspect.Parameter(f"arg{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD) for i in range(nargs)])
    sigs = ", ".join("(" + ", ".join(k) + ") -> " + r for k, (_, r) in rows.items())
    fn.__doc__ = f"libdevice {name}: {sigs}."
    return fn


for _name, _rows in TABLE.items():
    globals()[_name] = _make(_name, _rows)
del _name, _rows


def fast_tanhf(arg0):
    """Fast fp32 tanh (``tanh.approx.f32``); Triton lists it, CUDA's libdevice has no such symbol."""
    x = semantic.to_tensor(_unwrap(arg0))
    if x.dtype.name != "fp32":
        raise TypeError(f"libdevice.fast_tanhf() has no version for argument types ({x.dtype}); it takes (fp32)")
    return semantic.float_math("tanh", x)


__all__ = sorted(TABLE) + ["fast_tanhf"]
