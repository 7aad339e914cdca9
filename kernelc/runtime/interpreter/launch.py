"""``launch``: run a kernel over its whole grid on the CPU.

The user's Python function itself runs once per program (x fastest, then y, then z) with the
:class:`InterpreterBuilder` active, so breakpoints, ``print(tile)`` and stepping through device
functions work. Errors from the language layer become :class:`~kernelc.errors.CompilationError`
pointing at the kernel line; memory and assertion failures are
:class:`~kernelc.errors.InterpreterError` naming the program id.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ...errors import CompilationError, KernelError
from ...language import syntax
from ...language.core import DeviceFunction, builder_scope
from ..grid import normalize_grid
from .args import ArgumentError, wrap_arg
from .builder import InterpreterBuilder
from .locate import raised_in_language, traceback_location
from .memory import Memory

# Python exceptions that, raised while a kernel body runs, mean "this kernel is wrong" (the compiler
# would reject it): they are reported as CompilationErrors at the kernel line.
_COMPILE_ERRORS = (TypeError, ValueError, NotImplementedError, NameError, AttributeError, IndexError)


def _param_location(fn, name):
    f = getattr(fn, "fn", fn)
    file, line, col = f.__code__.co_filename, f.__code__.co_firstlineno, None
    try:
        fdef = fn.parse()
        line, col = fdef.lineno, fdef.col_offset
        for a in fdef.args.posonlyargs + fdef.args.args + fdef.args.kwonlyargs:
            if a.arg == name:
                line, col = a.lineno, a.col_offset
    except Exception:
        pass
    return file, line, col


def launch(fn, grid, args: Sequence, *, arg_names: Sequence[str], constexpr_mask: Sequence[bool],
           kernel_name: str, num_warps: int = 4) -> None:
    """Run ``fn`` (a DeviceFunction) on the CPU for every program of ``grid``.

    ``args`` are the bound argument values in parameter order; constexpr values (``constexpr_mask``)
    are passed through unchanged, the others are wrapped (arrays/tensors -> pointers, Python numbers ->
    scalar tiles). Results are written back into the caller's arrays/tensors after the launch.
    """
    kernel_name = kernel_name or getattr(fn, "__name__", "kernel")
    gx, gy, gz = normalize_grid(grid, kernel_name)
    if isinstance(fn, DeviceFunction):
        syntax.check(fn)  # what the compiler would reject, rejected here with the same error
    pyfn = getattr(fn, "fn", fn)
    memory = Memory()
    kernel_name = kernel_name or getattr(fn, "__name__", "kernel")
    wrapped = []
    for name, value, cx in zip(arg_names, args, constexpr_mask):
        if cx:
            wrapped.append(value)
            continue
        try:
            wrapped.append(wrap_arg(value, name, memory))
        except ArgumentError as e:
            file, line, col = _param_location(fn, name)
            raise CompilationError(str(e), file, line, col, kernel_name) from None
    builder = InterpreterBuilder(fn, (gx, gy, gz), memory, kernel_name)
    builder.num_warps = int(num_warps)  # kl.extra.cuda.num_warps()
    try:
        with builder_scope(builder), np.errstate(all="ignore"):
            for z in range(gz):
                for y in range(gy):
                    for x in range(gx):
                        builder.pid = (x, y, z)
                        _run_program(builder, pyfn, wrapped, fn)
    finally:
        memory.write_back()


def _run_program(builder, pyfn, wrapped, fn=None):
    try:
        ret = pyfn(*wrapped)
    except KernelError:
        raise
    except AssertionError as e:
        loc = traceback_location(e.__traceback__, builder.known_codes)
        if loc is None:
            raise
        if raised_in_language(e.__traceback__):  # kl.static_assert
            err = CompilationError(str(e), *loc)
        else:  # a Python `assert` in the kernel body: a runtime check, like device_assert
            err = builder.error("assertion failed", str(e) or "assert statement failed", loc=loc)
        err.original = e
        raise err from None
    except _COMPILE_ERRORS as e:
        loc = traceback_location(e.__traceback__, builder.known_codes)
        if loc is None:
            raise
        err = CompilationError(str(e), *loc)
        err.original = e
        raise err from None
    if ret is not None and isinstance(fn, DeviceFunction):
        raise CompilationError(syntax.RETURN_VALUE, fn.file, fn.first_line, None, fn.__name__)
