"""Tile-IR data structures: SSA values, ops with regions, blocks, functions.

Structured control flow (``scf.for``/``scf.if``/``scf.while``) keeps loops visible to the pipeliner
and makes lowering a walk. Every op carries its source location (file, line, col) so each LLVM
instruction and SASS pc can be traced back to a kernel line.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple

from ...language.dtypes import base_type

_ids = itertools.count()


@dataclass(frozen=True)
class Loc:
    file: str
    line: int
    col: int = 0
    function: str = ""

    def __str__(self):
        return f"{self.file}:{self.line}:{self.col}"


UNKNOWN_LOC = Loc("<unknown>", 0, 0)


class Value:
    """An SSA value: the result of an op or an argument of a block."""

    __slots__ = ("id", "type", "owner", "index", "name")

    def __init__(self, type: Optional[base_type], owner=None, index: int = 0, name: str = ""):
        self.id = next(_ids)
        self.type = type
        self.owner = owner  # Op or Block
        self.index = index
        self.name = name

    @property
    def op(self) -> Optional["Op"]:
        return self.owner if isinstance(self.owner, Op) else None

    def __repr__(self):
        return f"%{self.name or self.id}: {self.type}"


class Block:
    """A list of ops with block arguments (loop induction variables, carried values)."""

    def __init__(self, arg_types=(), arg_names=()):
        self.args: List[Value] = [Value(t, self, i, n) for i, (t, n) in
                                  enumerate(itertools.zip_longest(arg_types, arg_names, fillvalue=""))]
        self.ops: List[Op] = []
        self.parent: Optional[Op] = None

    def add_arg(self, ty, name="") -> Value:
        v = Value(ty, self, len(self.args), name)
        self.args.append(v)
        return v

    def append(self, op: "Op") -> "Op":
        op.block = self
        self.ops.append(op)
        return op

    @property
    def terminator(self) -> Optional["Op"]:
        from .ops import TERMINATORS
        return self.ops[-1] if self.ops and self.ops[-1].name in TERMINATORS else None


class Op:
    """One tile-IR operation."""

    __slots__ = ("name", "operands", "results", "attrs", "regions", "loc", "block")

    def __init__(self, name: str, operands: List[Value], result_types: List[base_type],
                 attrs: Optional[Dict[str, Any]] = None, regions: Optional[List[Block]] = None,
                 loc: Loc = UNKNOWN_LOC):
        self.name = name
        self.operands = list(operands)
        self.results = [Value(t, self, i) for i, t in enumerate(result_types)]
        self.attrs = dict(attrs or {})
        self.regions = list(regions or [])
        for r in self.regions:
            r.parent = self
        self.loc = loc
        self.block: Optional[Block] = None

    @property
    def result(self) -> Value:
        if len(self.results) != 1:
            raise ValueError(f"{self.name} has {len(self.results)} results")
        return self.results[0]

    def walk(self) -> Iterator["Op"]:
        """This op and every op nested in its regions, in program order (pre-order)."""
        yield self
        if self.regions:
            yield from _walk_regions(self.regions)

    def __repr__(self):
        return f"<Op {self.name} at {self.loc}>"


@dataclass
class Argument:
    name: str
    type: base_type
    divisibility: int = 1  # known alignment in bytes for pointers / divisor for ints (16-byte specialisation)
    equal_to_1: bool = False


class Function:
    """A kernel: typed arguments, a body block, and the constexpr values it was specialised on."""

    def __init__(self, name: str, args: List[Argument], file: str = "", line: int = 0,
                 constexprs: Optional[Dict[str, Any]] = None):
        self.name = name
        self.arguments = args
        self.body = Block([a.type for a in args], [a.name for a in args])
        self.file = file
        self.line = line
        self.constexprs = dict(constexprs or {})
        self.attrs: Dict[str, Any] = {}

    def walk(self) -> Iterator[Op]:
        return _walk_regions([self.body])

    def __str__(self):
        from .printer import print_function
        return print_function(self)


def _walk_regions(regions: List[Block]) -> Iterator[Op]:
    """Every op of ``regions`` and nested in them, pre-order, as ``Op.walk`` defines it, with one explicit stack
    instead of a generator per op (walks are most of the tile passes' time: 460k generator frames for one
    compile of tutorial 06's backward). Iterators over the live lists: an op a caller inserts behind the
    walk's position is visited, as with nested ``for`` loops."""
    stack = [(iter(regions), None)]
    while stack:
        blocks, ops = stack[-1]
        if ops is not None:
            for op in ops:
                yield op
                if op.regions:
                    stack.append((iter(op.regions), None))
                    break
            else:
                stack[-1] = (blocks, None)
            continue
        block = next(blocks, None)
        if block is None:
            stack.pop()
        else:
            stack[-1] = (blocks, iter(block.ops))
    return


class Module:
    """A compilation unit: one kernel function (device functions are inlined)."""

    def __init__(self, function: Function):
        self.function = function

    def __str__(self):
        return str(self.function)


def defining_op(v: Value) -> Optional[Op]:
    return v.owner if isinstance(v.owner, Op) else None


def clone_op(op: Op, operands: List[Value]) -> Op:
    """A copy of ``op`` (name, result types, attributes, location) reading ``operands``; its results are new."""
    return Op(op.name, list(operands), [r.type for r in op.results], dict(op.attrs), loc=op.loc)


def clone_deep(op: Op, env: Dict[int, Value]) -> Op:
    """A copy of ``op`` and of its regions reading ``env``'s values (value id -> value; others are kept); the
    copy's results and its regions' arguments are entered in ``env``."""
    regions = []
    for r in op.regions:
        nb = Block([a.type for a in r.args], [a.name for a in r.args])
        for a, na in zip(r.args, nb.args):
            env[a.id] = na
        for o in r.ops:
            nb.append(clone_deep(o, env))
        regions.append(nb)
    new = Op(op.name, [env.get(v.id, v) for v in op.operands], [r.type for r in op.results], dict(op.attrs),
             regions=regions, loc=op.loc)
    for r, nr in zip(op.results, new.results):
        env[r.id] = nr
    return new


def replace_all_uses(root: Block, old: Value, new: Value) -> None:
    """Point every operand that reads ``old`` at ``new`` (within ``root`` and nested regions)."""
    for top in _walk_regions([root]):
        operands = top.operands
        if old in operands:   # Value has no __eq__: identity
            top.operands = [new if o is old else o for o in operands]


def users(root: Block) -> Dict[int, List[Op]]:
    """Map value id -> ops that read it (in ``root`` and nested regions)."""
    out: Dict[int, List[Op]] = {}
    for top in _walk_regions([root]):
        for o in top.operands:
            out.setdefault(o.id, []).append(top)
    return out


Shape = Tuple[int, ...]
