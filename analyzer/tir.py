"""Facts read back from a kernel's tile IR text (``compiled.asm["tir"]``, also kept in the disk cache).

The printed IR gives every op its source location (``# file.py:42``), nests loop bodies by
indentation, and its header records the specialisation the kernel was compiled for
(``%stride: i32 {div=16}``, ``{equal_to_1}``).  From it the analyzer learns which source lines sit in
which loop, the shapes reduced by each ``reduce``, and the divisibility/equal-to-1 facts needed to
recompile the same specialisation.  Parsing is lenient: a line it does not understand is skipped.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

_LOC = re.compile(r"#\s*(?P<file>[^\s#]+):(?P<line>\d+)\s*$")
_SOURCE = re.compile(r"source='(?P<file>[^']+):(?P<line>\d+):\d+'")
_OP = re.compile(r"^(?P<indent>\s*)(?:(?P<results>%[\w.]+(?:\s*,\s*%[\w.]+)*)\s*=\s*)?(?P<op>[A-Za-z_][\w.]*)"
                 r"(?P<rest>.*)$")
_BLOCK_ARGS = re.compile(r"^\s*\^\w+\((?P<args>.*)\)\s*:?\s*$")
_ARG = re.compile(r"(%[\w.]+)\s*:\s*([^,{}()]+?)(?:\s*\{([^}]*)\})?\s*(?:,|$)")
# the function's own attributes (``attributes {registers='fill_step'}``) sit between the arguments and the body
_HEADER = re.compile(r"^kernel\s+(?P<name>\w+)\((?P<args>.*)\)(?:\s+attributes\s+\{[^}]*\})?\s*\{")
_SHAPE = re.compile(r"^<(?P<dims>(?:\d+x)+)(?P<elt>\*?\w+)>$")


def shape_of(ty: str) -> Tuple[int, ...]:
    """``<128x32xfp16>`` -> ``(128, 32)``; a scalar type -> ``()``."""
    m = _SHAPE.match(ty.strip())
    if not m:
        return ()
    return tuple(int(d) for d in m.group("dims").rstrip("x").split("x"))


@dataclass
class Loop:
    file: str
    line: int
    kind: str                 # "scf.for" | "scf.while"
    body_lines: set = field(default_factory=set)   # (basename, line) of the ops in the body
    num_stages: Optional[int] = None


@dataclass
class TirOp:
    op: str
    file: str
    line: int
    operands: List[str]
    result_type: str
    loops: Tuple[int, ...]    # indices into TirFacts.loops of the enclosing loops, outermost first
    attrs: str
    parent: Optional[int] = None   # index (in TirFacts.ops) of the op whose region holds this one


@dataclass
class TirFacts:
    name: str = ""
    arg_types: Dict[str, str] = field(default_factory=dict)
    divisibility: Dict[str, int] = field(default_factory=dict)
    equal_to_1: List[str] = field(default_factory=list)
    loops: List[Loop] = field(default_factory=list)
    ops: List[TirOp] = field(default_factory=list)
    types: Dict[str, str] = field(default_factory=dict)

    def ops_named(self, name: str) -> List[TirOp]:
        return [o for o in self.ops if o.op == name]

    def loops_of_line(self, file: str, line: int) -> List[Loop]:
        key = (_base(file), line)
        return [lp for lp in self.loops if key in lp.body_lines]

    def user_lines(self, file: str, line: int, kernel_file: Optional[str] = None) -> List[Tuple[str, int]]:
        """The kernel-file lines whose ops contain ``file:line`` (a line of inlined library code such
        as a reduction's combine function): e.g. ``standard.py:288`` -> ``[("softmax.py", 19)]``."""
        kf = _base(kernel_file) if kernel_file else self.main_file()
        key = (_base(file), line)
        if key[0] == kf:
            return [key]
        out: List[Tuple[str, int]] = []
        for op in self.ops:
            if (_base(op.file), op.line) != key:
                continue
            p = op.parent
            while p is not None and _base(self.ops[p].file) != kf:
                p = self.ops[p].parent
            if p is not None:
                u = (_base(self.ops[p].file), self.ops[p].line)
                if u not in out:
                    out.append(u)
        return sorted(out, key=lambda x: x[1])

    def main_file(self) -> Optional[str]:
        files = [_base(o.file) for o in self.ops]
        return max(set(files), key=files.count) if files else None

    def operand_shape(self, op: TirOp, i: int = 0) -> Tuple[int, ...]:
        if i >= len(op.operands):
            return ()
        return shape_of(self.types.get(op.operands[i], ""))


def _base(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def parse(text: Optional[str]) -> TirFacts:
    facts = TirFacts()
    if not text:
        return facts
    stack: List[Tuple[int, int]] = []   # (indent of the loop op, loop index)
    parents: List[Tuple[int, int]] = []  # (indent of an op, its index in facts.ops)
    for raw in text.splitlines():
        if not raw.strip():
            continue
        h = _HEADER.match(raw)
        if h:
            facts.name = h.group("name")
            for m in _ARG.finditer(h.group("args")):
                name, ty, attrs = m.group(1)[1:], m.group(2).strip(), m.group(3) or ""
                facts.arg_types[name] = ty
                facts.types[m.group(1)] = ty
                d = re.search(r"div\s*=\s*(\d+)", attrs)
                if d:
                    facts.divisibility[name] = int(d.group(1))
                if "equal_to_1" in attrs:
                    facts.equal_to_1.append(name)
            continue
        b = _BLOCK_ARGS.match(raw)
        if b:
            for m in _ARG.finditer(b.group("args")):
                facts.types[m.group(1)] = m.group(2).strip()
            continue
        loc = _LOC.search(raw)
        if not loc:
            continue
        body = raw[: loc.start()].rstrip()
        m = _OP.match(body)
        if not m:
            continue
        indent = len(m.group("indent"))
        while stack and indent <= stack[-1][0]:
            stack.pop()
        while parents and indent <= parents[-1][0]:
            parents.pop()
        file, line = loc.group("file"), int(loc.group("line"))
        op = m.group("op")
        rest = m.group("rest")
        # type after the last " : " (attributes may contain ':' only inside quotes/braces)
        rtype = ""
        attrs = ""
        rest_noattr = rest
        am = re.search(r"\{[^{}]*\}", rest)
        if am:
            attrs = am.group(0)
            rest_noattr = rest[: am.start()] + rest[am.end():]
        if " : " in rest_noattr:
            head, rtype = rest_noattr.rsplit(" : ", 1)
        else:
            head = rest_noattr
        operands = re.findall(r"%[\w.]+", head)
        results = re.findall(r"%[\w.]+", m.group("results") or "")
        rtypes = [t.strip() for t in _split_types(rtype)] if rtype else []
        for i, r in enumerate(results):
            if i < len(rtypes):
                facts.types[r] = rtypes[i]
        enclosing = tuple(i for _, i in stack)
        key = (_base(file), line)
        # a ring op in the body stands for the load it replaced (source='file:line:col', passes/rings.py)
        src = _SOURCE.search(attrs)
        keys = [key] + ([(_base(src.group("file")), int(src.group("line")))] if src else [])
        for _, i in stack:
            facts.loops[i].body_lines.update(keys)
        facts.ops.append(TirOp(op, file, line, operands, rtypes[0] if rtypes else "", enclosing, attrs,
                               parents[-1][1] if parents else None))
        parents.append((indent, len(facts.ops) - 1))
        if op in ("scf.for", "scf.while"):
            ns = re.search(r"num_stages\s*=\s*(\d+)", attrs)
            facts.loops.append(Loop(file, line, op, set(), int(ns.group(1)) if ns else None))
            stack.append((indent, len(facts.loops) - 1))
    return facts


def _split_types(text: str) -> List[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return out
