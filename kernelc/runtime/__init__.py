"""kernelc runtime: the @jit kernel object, launch hooks, autotuning, the CPU interpreter.

The names below are also Triton's ``triton.runtime`` names; ``driver.active`` is the active driver
(``runtime/active.py``).
"""
from ..errors import InterpreterError, OutOfResources  # noqa: F401
from .autotuner import Autotuner, Config, Heuristics, autotune, heuristics  # noqa: F401
from .jit import JITFunction, KernelInterface  # noqa: F401
from . import driver  # noqa: F401
