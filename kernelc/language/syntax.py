"""What Python a kernelc kernel may contain: one checker shared by the compiler and the interpreter.

The compiler's frontend and the CPU interpreter both run :func:`check` on every kernel and device
function before anything else, so a construct the compiler cannot lower (``break``, ``try``,
``lambda``, comprehensions, ``for ... else``, a ``return`` inside a loop, ...) is rejected by both,
with the same message, file, line and caret.  The rules that depend on values (a kernel returning a
value, calls nesting deeper than :data:`MAX_INLINE_DEPTH`) share their messages from here too.
"""
from __future__ import annotations

import ast
from typing import Iterator, Optional, Tuple

from ..errors import CompilationError

# Statements and expressions the frontend lowers (its ``visit_*`` methods; a test keeps the two equal).
SUPPORTED = (
    ast.Pass, ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Return, ast.Assert, ast.If, ast.For, ast.While,
    ast.Constant, ast.Name, ast.Tuple, ast.List, ast.JoinedStr, ast.FormattedValue, ast.Attribute, ast.Subscript,
    ast.Slice, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Call,
)
_NAMES = {
    ast.Break: "`break`", ast.Continue: "`continue`", ast.Try: "`try`", ast.With: "`with`", ast.Raise: "`raise`",
    ast.Global: "`global`", ast.Nonlocal: "`nonlocal`", ast.Delete: "`del`", ast.ClassDef: "class definitions",
    ast.Import: "`import`", ast.ImportFrom: "`import`", ast.FunctionDef: "nested function definitions",
    ast.AsyncFunctionDef: "async functions", ast.AsyncFor: "`async for`", ast.AsyncWith: "`async with`",
    ast.Lambda: "`lambda`", ast.ListComp: "list comprehensions", ast.SetComp: "set comprehensions",
    ast.DictComp: "dict comprehensions", ast.GeneratorExp: "generator expressions", ast.Dict: "dict literals",
    ast.Set: "set literals", ast.NamedExpr: "`:=`", ast.Await: "`await`", ast.Yield: "`yield`",
    ast.YieldFrom: "`yield from`", ast.Starred: "`*` unpacking outside a call", ast.Match: "`match`",
}
if hasattr(ast, "TryStar"):
    _NAMES[ast.TryStar] = "`try`"
MAX_INLINE_DEPTH = 32
RETURN_VALUE = "a kernel cannot return a value; store results to memory"
TOO_DEEP = f"calls nest deeper than {MAX_INLINE_DEPTH} (recursion is not supported)"
RETURN_IN_LOOP = "`return` inside a loop is not supported; set a flag or restructure the loop"
SUBSCRIPT_ASSIGN = "assigning into a tile element is not supported; build the tile with kl.where or store to memory"
MATMUL = "`@` is not supported; use kl.dot(a, b)"


def unsupported(node: ast.AST) -> str:
    return f"{_NAMES.get(type(node)) or f'`{type(node).__name__}`'} is not supported in kernelc kernels"


def _contains_return(stmts) -> bool:
    return any(isinstance(n, ast.Return) for s in stmts for n in ast.walk(s))


def _target_problem(t: ast.AST) -> Optional[Tuple[ast.AST, str]]:
    if isinstance(t, ast.Name):
        return None
    if isinstance(t, (ast.Tuple, ast.List)):
        for e in t.elts:
            p = _target_problem(e)
            if p:
                return p
        return None
    if isinstance(t, ast.Subscript):
        return t, SUBSCRIPT_ASSIGN
    return t, f"cannot assign to {type(t).__name__}"


def problems(body) -> Iterator[Tuple[ast.AST, str]]:
    """``(node, message)`` for each construct in ``body`` (statements) the compiler rejects, in source order."""
    def walk(node, parent_field=None):
        if isinstance(node, (ast.stmt, ast.expr)):
            if isinstance(node, ast.Starred) and parent_field == "call-arg":
                pass
            elif not isinstance(node, SUPPORTED):
                yield node, unsupported(node)
                return
            if isinstance(node, (ast.For, ast.While)):
                if node.orelse:
                    yield node, f"`{'for' if isinstance(node, ast.For) else 'while'} ... else` is not supported"
                if _contains_return(node.body):
                    yield node, RETURN_IN_LOOP
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    p = _target_problem(t)
                    if p:
                        yield p
            elif isinstance(node, ast.AugAssign):
                if not isinstance(node.target, ast.Name):
                    yield node, "augmented assignment is only supported on plain names"
                if isinstance(node.op, ast.MatMult):
                    yield node, MATMUL
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                yield node, MATMUL
        for name, value in ast.iter_fields(node):
            if isinstance(node, ast.AnnAssign) and name == "annotation":
                continue  # annotations are read leniently (kl.constexpr, or anything else)
            if isinstance(node, (ast.Assign, ast.AugAssign)) and name in ("targets", "target"):
                continue  # checked above, as the frontend does
            items = value if isinstance(value, list) else [value]
            for v in items:
                if isinstance(v, ast.AST):
                    yield from walk(v, "call-arg" if isinstance(node, ast.Call) and name == "args" else None)
    for stmt in body:
        yield from walk(stmt)


def check(fn) -> None:
    """Raise :class:`CompilationError` at the first construct of ``fn`` (a DeviceFunction) that kernelc
    kernels may not contain. The result is remembered on ``fn``."""
    if getattr(fn, "_syntax_checked", False):
        return
    try:
        fdef = fn.parse()
    except (OSError, TypeError, SyntaxError):  # no source (exec'd, REPL): nothing to check; the compiler says so
        return
    for node, msg in problems(fdef.body):
        raise CompilationError(msg, fn.file, getattr(node, "lineno", 0), getattr(node, "col_offset", None),
                               fn.__name__)
    fn._syntax_checked = True
