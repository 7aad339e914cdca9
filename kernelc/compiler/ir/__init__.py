"""The typed tile IR: SSA values with shapes and dtypes, structured control flow, source locations."""
from .core import Argument, Block, Function, Loc, Module, Op, Value  # noqa: F401
from .ops import OPS, OpDef  # noqa: F401
from .printer import print_function  # noqa: F401
from .verifier import VerificationError, verify  # noqa: F401
