"""kernelc: write GPU kernels in Python with tiles (Triton-compatible surface).

``import kernelc as triton; import kernelc.language as tl`` runs Triton kernels unchanged.
"""
from . import language  # noqa: F401
from .errors import CompilationError, InterpreterError, OutOfResources  # noqa: F401
from .language.core import constexpr  # noqa: F401
from .runtime.autotuner import Config, autotune, heuristics  # noqa: F401
from .runtime.jit import JITFunction, KernelInterface, jit  # noqa: F401
from .runtime.scratch import set_allocator  # noqa: F401
from .tools.tensor_descriptor import TensorDescriptor  # noqa: F401
from . import testing  # noqa: F401
from . import runtime, tools  # noqa: F401

__version__ = "0.1.0"


def cdiv(x: int, y: int) -> int:
    """Ceiling division of integers (host side), e.g. for grids."""
    return (x + y - 1) // y


def next_power_of_2(n: int) -> int:
    """Smallest power of two >= n (1 for n <= 1)."""
    n = int(n)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def compile(kernel, signature, constexprs=None, target=None, num_warps=4, num_stages=3, **kw):
    """Compile a kernel without a GPU (``target`` default: the current GPU's, else sm_90a); see
    :func:`kernelc.compiler.compiler.compile`."""
    from .compiler.compiler import compile as _compile
    if target is None:
        from .runtime.device import default_target
        target = default_target()
    return _compile(kernel, signature, constexprs, target, num_warps, num_stages, **kw)
