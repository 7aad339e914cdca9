"""Finding the kernel source line that is executing (for errors raised by the interpreter).

A frame is *kernel code* when its code object is the kernel's (or a combine function's the builder
called), or when it was entered through ``DeviceFunction.__call__`` (a ``@jit`` device function
called from a kernel). The innermost such frame is the line to report: language internals
(``kl.load`` -> ``semantic.load`` -> builder) are skipped that way.
"""
from __future__ import annotations

import sys
from typing import Optional, Tuple

from ...language.core import DeviceFunction

Location = Tuple[str, int, Optional[int], str]  # file, line, 0-based column or None, function name


def is_kernel_frame(frame, known_codes) -> bool:
    code = frame.f_code
    if code in known_codes:
        return True
    back = frame.f_back
    if back is None or back.f_code.co_name != "__call__":
        return False
    owner = back.f_locals.get("self")
    return isinstance(owner, DeviceFunction) and getattr(owner.fn, "__code__", None) is code


def _column(code, lasti: int, line: int) -> Optional[int]:
    try:
        positions = list(code.co_positions())
        ln, _, col, _ = positions[lasti // 2]
    except (IndexError, ValueError, AttributeError):
        return None
    if ln != line or col is None:
        return None
    return col


def frame_location(frame, lasti=None, line=None) -> Location:
    code = frame.f_code
    lasti = frame.f_lasti if lasti is None else lasti
    line = frame.f_lineno if line is None else line
    return code.co_filename, line, _column(code, lasti, line), code.co_name


def current_location(known_codes) -> Optional[Location]:
    """Location of the innermost kernel frame on the current stack."""
    f = sys._getframe(1)
    while f is not None:
        if is_kernel_frame(f, known_codes):
            return frame_location(f)
        f = f.f_back
    return None


def traceback_location(tb, known_codes) -> Optional[Location]:
    """Location of the innermost kernel frame in a traceback (where the exception passed)."""
    found = None
    while tb is not None:
        if is_kernel_frame(tb.tb_frame, known_codes):
            found = frame_location(tb.tb_frame, tb.tb_lasti, tb.tb_lineno)
        tb = tb.tb_next
    return found


def raised_in_language(tb) -> bool:
    """Whether the innermost traceback frame belongs to kernelc's own code (not the user's)."""
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    if last is None:
        return False
    mod = last.tb_frame.f_globals.get("__name__", "")
    return mod.startswith("kernelc.")
