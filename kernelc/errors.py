"""Errors that point at the kernel source: file, line and a caret under the column."""
from __future__ import annotations

import linecache
from typing import Optional


def format_source_snippet(file: str, line: int, col: Optional[int] = None) -> str:
    """The source line at ``file:line`` with a caret under ``col`` (0-based), or '' if unreadable."""
    text = linecache.getline(file, line) if file and line else ""
    if not text:
        return ""
    text = text.rstrip("\n")
    out = f"    {text}"
    if col is not None and col >= 0:
        out += "\n    " + " " * col + "^"
    return out


class KernelError(Exception):
    """Base of kernelc's user-facing errors."""


class CompilationError(KernelError):
    """A kernel could not be compiled: says where (file:line with a caret) and what is wrong.

    Example::

        kernelc.CompilationError: at /home/me/add.py:12:20 in add_kernel:
            y = kl.load(y_ptr + offs, mask=mask, oter=0.0)
                                                 ^
        load() got an unexpected keyword argument 'oter'
    """

    def __init__(self, message: str, file: str = "", line: int = 0, col: Optional[int] = None,
                 function: str = ""):
        self.message = message
        self.file = file
        self.line = line
        self.col = col
        self.function = function
        super().__init__(self._render())

    def _render(self) -> str:
        if not self.file:
            return self.message
        where = f"{self.file}:{self.line}" + (f":{self.col + 1}" if self.col is not None else "")
        head = f"at {where}" + (f" in {self.function}" if self.function else "") + ":"
        snippet = format_source_snippet(self.file, self.line, self.col)
        return "\n".join(x for x in (head, snippet, self.message) if x)


class InterpreterError(KernelError):
    """A kernel failed while running in the CPU interpreter (e.g. an out-of-bounds access)."""


class OutOfResources(KernelError):
    """A kernel needs more shared memory or registers than the device has."""

    def __init__(self, required: int, limit: int, name: str, kernel: str = ""):
        self.required, self.limit, self.name, self.kernel = required, limit, name, kernel
        who = f"kernel {kernel} " if kernel else ""
        super().__init__(f"{who}needs {required} bytes of {name} but the device allows {limit}; "
                         f"reduce the block sizes or num_stages")
