"""What a kernel's build read from the Python world, recorded by the frontend while it traces.

The frontend folds global values (numbers, strings, and elements of lists, tuples, dicts and sets,
nested) and runs plain (non-``@jit``) Python helpers on its tiles; the build depends on them just as
on the kernel's source.  :class:`Dependencies` records each one with a snapshot (a canonical text of
the value, or a fingerprint of the helper's code and of everything it reads); the disk cache stores
the record next to the build and :func:`stale_reason` checks it against the running program before
the build is reused.
"""
from __future__ import annotations

import hashlib
import marshal
import sys
import types
from typing import Any, Dict, List, Optional, Tuple

from ...language.core import constexpr

_MAX_DEPTH = 16


def canonical(v: Any, _depth: int = 0) -> Optional[str]:
    """A deterministic text of plain data (None for anything else, e.g. objects with an id-based repr)."""
    if _depth > _MAX_DEPTH:
        return None
    if v is None or isinstance(v, (bool, int, float, complex, str, bytes)):
        return f"{type(v).__name__}:{v!r}"
    if isinstance(v, (list, tuple)):
        parts = [canonical(x, _depth + 1) for x in v]
        return None if None in parts else f"{type(v).__name__}[{','.join(parts)}]"
    if isinstance(v, (set, frozenset)):
        parts = [canonical(x, _depth + 1) for x in v]
        return None if None in parts else f"{type(v).__name__}{{{','.join(sorted(parts))}}}"
    if isinstance(v, dict):
        items = [(canonical(k, _depth + 1), canonical(x, _depth + 1)) for k, x in v.items()]
        if any(k is None or x is None for k, x in items):
            return None
        return "dict{" + ",".join(f"{k}:{x}" for k, x in items) + "}"
    if isinstance(v, constexpr):
        return canonical(v.value, _depth + 1)
    return None


def _code_names(code):
    yield from code.co_names
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _code_names(c)


def function_fingerprint(f, _seen=None) -> str:
    """Hash of a plain Python function's code, its defaults and closure values, and (transitively) the
    functions and plain values its code names, also through module attributes (``helpers.f``)."""
    seen = _seen if _seen is not None else {}
    f = getattr(f, "fn", f)  # a @jit function: its Python function
    if id(f) in seen:
        return seen[id(f)]
    seen[id(f)] = "cycle"
    code = getattr(f, "__code__", None)
    if code is None:
        return "opaque"
    h = hashlib.sha256(marshal.dumps(code))
    h.update(repr(canonical(f.__defaults__)).encode())
    for cell in f.__closure__ or ():
        try:
            h.update(repr(canonical(cell.cell_contents)).encode())
        except ValueError:  # an empty cell
            pass
    g = getattr(f, "__globals__", {})
    names = sorted(set(_code_names(code)))
    modules = [g[n] for n in names if isinstance(g.get(n), types.ModuleType)]
    for name in names:
        cands = [g[name]] if name in g else [getattr(m, name) for m in modules if hasattr(m, name)]
        for v in cands:
            if isinstance(v, types.FunctionType) or isinstance(getattr(v, "fn", None), types.FunctionType):
                if _in_kernelc(v):
                    # the compiler's own functions (``tl.dot`` named through ``tl``): COMPILER_VERSION in the cache
                    # key stands for them, as for the passes; following them read ~130 functions of kernelc and
                    # whatever they name at every cache hit (16 of 23 ms of one of tutorial 06's)
                    h.update(f"{name}:kernelc".encode())
                else:
                    h.update(f"{name}:{function_fingerprint(v, seen)}".encode())
            else:
                c = canonical(v)
                if c is not None:
                    h.update(f"{name}={c}".encode())
    out = h.hexdigest()
    seen[id(f)] = out
    return out


def _in_kernelc(f) -> bool:
    f = getattr(f, "fn", f)
    return (getattr(f, "__module__", None) or "").startswith("kernelc.")


def is_user_function(fn) -> bool:
    """A plain Python function outside kernelc (run by the frontend, so part of the build)."""
    return isinstance(fn, types.FunctionType) and not (fn.__module__ or "").startswith("kernelc.")


class Dependencies:
    """``(kind, module, name) -> snapshot``: ``global`` values folded, ``function`` helpers run."""

    def __init__(self):
        self.items: Dict[Tuple[str, str, str], str] = {}

    def add_global(self, module: Optional[str], name: str, value: Any) -> None:
        c = canonical(value)
        if module and c is not None:
            self.items[("global", module, name)] = c

    def add_function(self, fn) -> None:
        """A plain helper run, or a ``@jit`` function inlined, with the fingerprint of its code."""
        key = ("function", fn.__module__, fn.__qualname__)
        if fn.__module__ and "<locals>" not in fn.__qualname__ and key not in self.items:
            self.items[key] = function_fingerprint(fn)

    def to_list(self) -> List[List[str]]:
        return [[k, m, n, s] for (k, m, n), s in sorted(self.items.items())]


def _resolve(module: str, name: str, namespaces: Dict[str, dict]):
    ns = namespaces.get(module)
    if ns is None:
        mod = sys.modules.get(module)  # never imported here: resolving must not run code
        if mod is None:
            raise LookupError(f"module {module} is not loaded")
        ns = vars(mod)
    first, *rest = name.split(".")
    if first not in ns:
        raise LookupError(f"{module} has no {first}")
    obj = ns[first]
    for part in rest:
        obj = getattr(obj, part)
    return obj


def stale_reason(record: Any, kernel=None) -> Optional[str]:
    """Why a stored dependency record no longer matches the running program (None: it matches).
    Names in ``kernel``'s own module resolve through its globals (a module loaded from a path need not
    be in ``sys.modules``)."""
    if not isinstance(record, list):
        return "no dependency record"
    namespaces: Dict[str, dict] = {}
    g = getattr(getattr(kernel, "fn", kernel), "__globals__", None)
    if isinstance(g, dict) and isinstance(g.get("__name__"), str):
        namespaces[g["__name__"]] = g
    for item in record:
        if not (isinstance(item, list) and len(item) == 4 and all(isinstance(x, str) for x in item)):
            return f"malformed dependency record {item!r}"
        kind, module, name, snap = item
        try:
            obj = _resolve(module, name, namespaces)
        except (LookupError, AttributeError) as e:
            return f"{module}.{name} is gone ({e})"
        now = canonical(obj) if kind == "global" else function_fingerprint(obj) if kind == "function" else None
        if now != snap:
            return f"{module}.{name} changed"
    return None
