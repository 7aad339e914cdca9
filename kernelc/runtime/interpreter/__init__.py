"""The CPU interpreter: runs kernelc kernels with numpy (``KERNELC_INTERPRET=1`` or ``@jit(interpret=True)``).

``launch(fn, grid, args, *, arg_names, constexpr_mask, kernel_name)`` runs the user's Python function
once per program with :class:`InterpreterBuilder` active; see ``launch.py``, ``builder.py``,
``memory.py`` (virtual address space, bounds checks) and ``numerics.py`` (GPU arithmetic rules).
"""
from .builder import InterpreterBuilder  # noqa: F401
from .launch import launch  # noqa: F401

__all__ = ["launch", "InterpreterBuilder"]
