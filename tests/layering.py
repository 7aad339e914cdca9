"""The import graph of the shipped packages, built from their source with ``ast`` (imports inside functions
included), and the layering rules it must follow.  ``tests/test_layering.py`` runs the rules; ``python3 -m
tests.layering`` prints the graph's violations (and ``--cycles`` the edges of every cycle) from the repo root.

The rules (docs/architecture.md explains them):

* kernelc's layers only import downward: ``kernelc.errors``/``kernelc.options`` (leaves)
  <- ``kernelc.language`` <- ``kernelc.compiler`` <- ``kernelc.runtime``; ``kernelc.tools`` (host-side
  ``TensorDescriptor``) sits beside the compiler, on the language; ``kernelc`` (the package, and its
  top-level tools such as ``kernelc.testing``) may import all.
  The compiler never imports the runtime.
* ``cubintools`` (cubin/SASS/line-table tools) imports nothing of ours: compiler, profiler and analyzer use it.
* the profiler reaches kernelc only through ``profiler/hooks.py`` (and ``cubintools``), never a private name.
* the analyzer imports no private kernelc name (a module or name starting with ``_``).
* no shipped module imports ``examples``, ``tests`` or ``bench`` (the wheel ships none of them).
* no cycles, except the edges listed in ``tests/layering_allowlist.txt`` with a reason each; an entry whose
  edge is gone fails too, so the list only shrinks.
"""
from __future__ import annotations

import ast
import os
import sys
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Set, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("kernelc", "cubintools", "profiler", "analyzer", "kprof")
ALLOWLIST = os.path.join(ROOT, "tests", "layering_allowlist.txt")
NOT_SHIPPED = ("examples", "tests", "bench", "scripts")

# kernelc layer -> the kernelc layers it may import (besides itself)
_LEAVES = {"kernelc.errors", "kernelc.options"}
KERNELC_LAYERS: Dict[str, Set[str]] = {
    "kernelc.language": set(),
    "kernelc.compiler": {"kernelc.language"},
    "kernelc.tools": {"kernelc.language"},
    "kernelc.runtime": {"kernelc.language", "kernelc.compiler", "kernelc.tools"},
    "kernelc": {"kernelc.language", "kernelc.compiler", "kernelc.tools", "kernelc.runtime"},
}


@dataclass(frozen=True)
class Edge:
    src: str                 # importing module
    dst: str                 # imported module (ours, resolved) or the raw name (someone else's)
    file: str
    line: int
    local: bool = False      # inside a function
    names: Tuple[str, ...] = field(default=())   # ``from dst import names`` that are not modules

    def where(self) -> str:
        return f"{self.file}:{self.line}{' (in a function)' if self.local else ''}"

    def __str__(self) -> str:
        what = f" ({', '.join(self.names)})" if self.names else ""
        return f"{self.src} -> {self.dst}{what}  at {self.where()}"


def modules_under(root: str, packages: Iterable[str] = PACKAGES) -> Dict[str, str]:
    """``{dotted module name: path}`` of every ``.py`` file in ``packages`` under ``root``."""
    mods = {}
    for pkg in packages:
        for d, dirs, files in os.walk(os.path.join(root, pkg)):
            dirs[:] = sorted(x for x in dirs if x != "__pycache__")
            for f in sorted(files):
                if f.endswith(".py"):
                    path = os.path.join(d, f)
                    name = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
                    mods[name[:-len(".__init__")] if name.endswith(".__init__") else name] = path
    return mods


def _resolve(name: str, mods: Dict[str, str]) -> str:
    """The longest prefix of ``name`` that is one of our modules, else ``name`` itself."""
    probe = name
    while probe:
        if probe in mods:
            return probe
        probe = probe.rpartition(".")[0]
    return name


def _imports(tree: ast.AST):
    """``(node, inside a function)`` for every import statement."""
    stack = [(tree, False)]
    while stack:
        node, local = stack.pop()
        for child in ast.iter_child_nodes(node):
            inner = local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, local
            stack.append((child, inner))


def scan(root: str = ROOT, packages: Iterable[str] = PACKAGES) -> Tuple[Dict[str, str], List[Edge]]:
    """Our modules and every import edge out of them."""
    mods = modules_under(root, packages)
    edges = []
    for mod, path in sorted(mods.items()):
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        rel = os.path.relpath(path, root)
        is_pkg = path.endswith("__init__.py")
        for node, local in _imports(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    edges.append(Edge(mod, _resolve(a.name, mods), rel, node.lineno, local))
                continue
            if node.level:
                parts = mod.split(".") if is_pkg else mod.split(".")[:-1]
                parts = parts[:len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            plain = []
            for a in node.names:
                sub = f"{base}.{a.name}"
                if sub in mods:
                    edges.append(Edge(mod, sub, rel, node.lineno, local))
                else:
                    plain.append(a.name)
            if plain:
                edges.append(Edge(mod, _resolve(base, mods), rel, node.lineno, local, tuple(plain)))
    return mods, [e for e in edges if e.dst != e.src]


# -- rules ------------------------------------------------------------------------------------------

def top(name: str) -> str:
    return name.split(".", 1)[0]


def kernelc_layer(name: str) -> Optional[str]:
    if top(name) != "kernelc":
        return None
    if name == "kernelc" or name.count(".") == 0:
        return "kernelc"
    second = ".".join(name.split(".")[:2])
    if second in _LEAVES:
        return "leaf"
    return second if second in KERNELC_LAYERS else "kernelc"


def _private(edge: Edge) -> List[str]:
    return [p for p in edge.dst.split(".") + list(edge.names) if p.startswith("_") and not p.startswith("__")]


def layer_violations(edges: Iterable[Edge]) -> List[str]:
    """Every edge that breaks a layering rule, with why."""
    out = []
    for e in edges:
        s, d = top(e.src), top(e.dst)
        if s in PACKAGES and d in NOT_SHIPPED:
            out.append(f"{e}: shipped code imports {d}/, which the wheel does not ship")
        if s == "kernelc" and d in ("profiler", "analyzer", "kprof"):
            out.append(f"{e}: kernelc sits below the profiler and analyzer")
        if s == "kernelc" and d == "kernelc":
            ls, ld = kernelc_layer(e.src), kernelc_layer(e.dst)
            if ls == "leaf" and ld != "leaf":
                out.append(f"{e}: {e.src} is a leaf of kernelc and imports nothing of it")
            elif ls != ld and ld != "leaf" and ld not in KERNELC_LAYERS.get(ls, set()):
                out.append(f"{e}: {ls} may not import {ld} (upward or sideways edge)")
        if s == "cubintools" and d in ("kernelc", "profiler", "analyzer", "kprof"):
            out.append(f"{e}: cubintools imports none of kernelc/profiler/analyzer")
        if s == "profiler" and d == "kernelc":
            if e.src != "profiler.hooks":
                out.append(f"{e}: the profiler reaches kernelc only through profiler/hooks.py")
            elif _private(e):
                out.append(f"{e}: private kernelc name {', '.join(_private(e))}")
        if s == "analyzer" and d == "kernelc" and _private(e):
            out.append(f"{e}: the analyzer uses public kernelc APIs only, not {', '.join(_private(e))}")
    return out


def read_allowlist(path: str = ALLOWLIST) -> Dict[Tuple[str, str], str]:
    """``{(src, dst): reason}``; lines ``src -> dst  # reason``."""
    out = {}
    if not os.path.exists(path):
        return out
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            edge, _, reason = line.partition("#")
            src, arrow, dst = edge.partition("->")
            if not arrow or not reason.strip():
                raise ValueError(f"{path}:{n}: expected 'src -> dst  # reason', got {line!r}")
            out[(src.strip(), dst.strip())] = reason.strip()
    return out


def strongly_connected(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """Components of more than one module (Tarjan, iterative)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    on, stack, comps = set(), [], []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))
    return comps


def cycle_violations(mods: Dict[str, str], edges: Iterable[Edge],
                     allow: Dict[Tuple[str, str], str]) -> List[str]:
    """Cycles left after removing the allow-listed edges (each printed with its edges), and allow-list
    entries whose edge no longer exists."""
    edges = [e for e in edges if e.dst in mods]
    graph: Dict[str, Set[str]] = {m: set() for m in mods}
    seen = set()
    for e in edges:
        seen.add((e.src, e.dst))
        if (e.src, e.dst) not in allow:
            graph[e.src].add(e.dst)
    out = []
    for comp in strongly_connected(graph):
        members = set(comp)
        inside = sorted({str(e) for e in edges if e.src in members and e.dst in members
                         and (e.src, e.dst) not in allow})
        out.append(f"import cycle through {len(comp)} modules ({', '.join(comp)}); its edges:\n    "
                   + "\n    ".join(inside))
    for (src, dst), reason in sorted(allow.items()):
        if (src, dst) not in seen:
            out.append(f"allow-listed edge {src} -> {dst} no longer exists: remove it from "
                       f"{os.path.relpath(ALLOWLIST, ROOT)}")
    return out


def demanglers(mods: Dict[str, str]) -> List[str]:
    """Modules that call ``__cxa_demangle`` themselves."""
    out = []
    for mod, path in sorted(mods.items()):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if "__cxa_demangle" not in text:
            continue
        tree = ast.parse(text, path)
        if any(isinstance(n, ast.Attribute) and n.attr == "__cxa_demangle" for n in ast.walk(tree)):
            out.append(mod)
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    mods, edges = scan()
    problems = layer_violations(edges) + cycle_violations(mods, edges, read_allowlist())
    if "--cycles" in argv:
        problems += cycle_violations(mods, edges, {})
    for p in problems:
        print(p)
    print(f"{len(mods)} modules, {len(edges)} import edges, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
