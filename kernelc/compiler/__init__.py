"""kernelc's compiler: source -> tile IR -> passes -> LLVM IR -> PTX -> cubin -> SASS.

``CompiledKernel`` (compiler/artifact.py) is what a compile returns; ``kernelc.compile`` compiles
without a GPU.
"""
from ..errors import CompilationError  # noqa: F401
from .artifact import CompiledKernel  # noqa: F401
