"""Python AST -> tile IR."""
from .codegen import CodeGenerator, generate_ir  # noqa: F401
