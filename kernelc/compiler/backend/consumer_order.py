"""Order a kernel's pure instructions by their consumers before LLVM emits PTX (``"kernelc.order"="consumers"``).

Code generation lowers one tile op at a time over all of a thread's elements, so the LLVM IR, and the PTX that
LLVM's NVPTX back end prints in source order, is op-major: the first op for all 32 elements, then the second.
ptxas schedules from that order. For a streaming kernel it then waits on every element of a load before the
first result is ready: geglu's backward row (12 128-bit loads a thread) kept 1.15 global loads in flight a
thread in ptxas 13's schedule, where Triton's PTX of the same source, whose arithmetic runs element by element
between the loads and the stores, keeps 4.28 (the same ptxas; docs/performance.md, "Instruction order").

This pass rewrites each basic block so that every side-effecting instruction (loads, stores, inline asm with
side effects, calls that touch memory, barriers) keeps its place relative to the others, and each pure
instruction comes just before the first instruction that needs it, depth first: the dependence cone of the
first store is computed, then the next one's. Only pure instructions move, and only later (past side-effecting
ones) or among themselves, so the data flow and the memory order are the block's own.

The tile IR decides which kernels get it (``passes/instruction_order.py`` writes ``instruction_order``; code
generation writes it as the LLVM function attribute); this module only carries it out on the optimised IR text.
A block with a construct it does not know (switch, debug records, multi-line instructions) is left as it was.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Set

ATTRIBUTE = '"kernelc.order"="consumers"'

_LOCAL = re.compile(r"%(?:[-a-zA-Z$._0-9]+|\"[^\"]*\")")
_STRING = re.compile(r'c?"(?:[^"\\]|\\.)*"')
_DEF = re.compile(r"^\s+(%(?:[-a-zA-Z$._0-9]+|\"[^\"]*\")) = (.*)$")
_LABEL = re.compile(r"^(?:[-a-zA-Z$._0-9]+|\"[^\"]*\"):")
_CALLEE = re.compile(r"@([-a-zA-Z$._0-9]+)\(")
_DECL = re.compile(r"^declare .*@([-a-zA-Z$._0-9]+)\(.*\)(?: [^#]*)?((?: #\d+)*)\s*$")
_ATTRS = re.compile(r"^attributes (#\d+) = \{(.*)\}\s*$")

# Opcodes without side effects: moving one within its block (later, or among others like it) keeps the program.
_PURE = frozenset("""
fneg add fadd sub fsub mul fmul udiv sdiv fdiv urem srem frem shl lshr ashr and or xor extractelement
insertelement shufflevector extractvalue insertvalue getelementptr trunc zext sext fptrunc fpext fptoui fptosi
uitofp sitofp ptrtoint inttoptr bitcast addrspacecast icmp fcmp select freeze
""".split())
_TERMINATORS = ("br ", "ret", "unreachable", "switch ", "indirectbr ", "resume ", "callbr ", "invoke ")


def _pure_callees(text: str) -> Set[str]:
    """Functions declared ``memory(none)`` (the attribute group of their declaration): calls to them are pure."""
    groups = {m.group(1): m.group(2) for m in map(_ATTRS.match, text.splitlines()) if m}
    pure = set()
    for line in text.splitlines():
        m = _DECL.match(line)
        if m and any("memory(none)" in groups.get(g, "") for g in m.group(2).split()):
            pure.add(m.group(1))
    return pure


def _is_pure(rhs: str, pure_callees: Set[str]) -> bool:
    words = rhs.split()
    if not words:
        return False
    if words[0] in _PURE:
        return True
    if "call" not in words[:3]:
        return False
    if " asm " in rhs:
        # inline asm without sideeffect or a memory clobber is readnone to LLVM too
        return " asm sideeffect " not in rhs and "~{memory}" not in rhs
    m = _CALLEE.search(rhs)
    return bool(m) and m.group(1) in pure_callees


def _operands(rhs: str, defs: Dict[str, int]) -> List[str]:
    rhs = rhs.split(", !")[0]           # metadata attachments (!dbg) name no values
    return [n for n in _LOCAL.findall(_STRING.sub('""', rhs)) if n in defs]


def _order_block(lines: List[str], pure_callees: Set[str]) -> Optional[List[str]]:
    """The block's instructions in consumer order, or None to leave the block as it is."""
    if any(not ln.startswith("  ") or ln.startswith("   ") for ln in lines):
        return None                     # debug records, continuation lines: not ours to move
    body = list(lines)
    term = body.pop() if body and body[-1].strip().startswith(_TERMINATORS) else None
    if any(ln.strip().startswith(_TERMINATORS) for ln in body):
        return None
    phis = [ln for ln in body if " = phi " in ln]
    body = [ln for ln in body if " = phi " not in ln]
    defs: Dict[str, int] = {}
    rhs_of: List[str] = []
    for i, ln in enumerate(body):
        m = _DEF.match(ln)
        if m:
            defs[m.group(1)] = i
            rhs_of.append(m.group(2))
        else:
            rhs_of.append(ln.strip())
    pure = [bool(_DEF.match(ln)) and _is_pure(rhs_of[i], pure_callees) for i, ln in enumerate(body)]
    done = [False] * len(body)
    out: List[str] = []

    def emit(root: int) -> None:
        stack = [(root, False)]
        while stack:
            i, ready = stack.pop()
            if done[i]:
                continue
            if ready:
                done[i] = True
                out.append(body[i])
                continue
            stack.append((i, True))
            for name in reversed(_operands(rhs_of[i], defs)):
                j = defs[name]
                if not done[j] and j < i:
                    stack.append((j, False))

    for i in range(len(body)):
        if not pure[i]:
            emit(i)
    for i in range(len(body)):          # values only the terminator (or nothing) reads, in their old order
        if not done[i]:
            emit(i)
    return phis + out + ([term] if term is not None else [])


_NUMBERED = re.compile(r"%(\d+)\b")
_NUMBERED_LABEL = re.compile(r"^(\d+):")


def _name_numbered(line: str) -> str:
    """``%7`` -> ``%_7`` (and a label ``7:``) outside string literals: LLVM wants numbered values in text order,
    which a reordered block no longer has; names have no order."""
    parts = _STRING.split(line)
    strings = _STRING.findall(line)
    parts = [_NUMBERED.sub(r"%_\1", p) for p in parts]
    parts[0] = _NUMBERED_LABEL.sub(r"_\1:", parts[0])
    return "".join(p + (strings[k] if k < len(strings) else "") for k, p in enumerate(parts))


def order_by_consumers(llir: str) -> str:
    """``llir`` with every function that carries :data:`ATTRIBUTE` reordered block by block (see the module doc);
    other functions and unknown constructs are left as they are."""
    if ATTRIBUTE not in llir:
        return llir
    lines = llir.split("\n")
    groups = {m.group(1) for m in map(_ATTRS.match, lines) if m and ATTRIBUTE in m.group(2)}
    pure_callees = _pure_callees(llir)
    out: List[str] = []
    i = 0
    while i < len(lines):
        ln = lines[i]
        out.append(ln)
        i += 1
        if not (ln.startswith("define ") and ln.rstrip().endswith("{")):
            continue
        head = ln.split(")")[-1] if ")" in ln else ""
        ordered = any(g in head.split() for g in groups) or ATTRIBUTE in head
        if ordered:
            out[-1] = _name_numbered(ln)
        block: List[str] = []
        while i < len(lines) and lines[i] != "}":
            cur = _name_numbered(lines[i]) if ordered else lines[i]
            if _LABEL.match(cur) or cur.strip() == "" or cur.lstrip().startswith(";"):
                out.extend((_order_block(block, pure_callees) if ordered and block else None) or block)
                block = []
                out.append(cur)
            else:
                block.append(cur)
            i += 1
        out.extend((_order_block(block, pure_callees) if ordered and block else None) or block)
    return "\n".join(out)
