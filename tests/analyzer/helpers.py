"""Shared helpers for the analyzer tests: cached CPU compiles of the planted kernels and fixture
profiles built with :mod:`profiler.format` the way kprof writes them."""
from __future__ import annotations

import functools
import inspect
import os
from typing import Any, Dict, Optional

from analyzer.facts import _literal
from profiler.format import ProfileNode, device_entry, write_profile

from .planted import BY_NAME, PLANTED, well_tuned

H100 = {"CUDA": {"0": device_entry("90", 132, 1980000, 2619000, 5120)}}


def grid_of(case, **overrides):
    meta = dict(case.constexprs, **overrides)
    g = case.grid(meta) if callable(case.grid) else case.grid
    return tuple(g) + (1,) * (3 - len(g))


@functools.lru_cache(maxsize=None)
def _compile(name: str, target: str, items: tuple):
    case = BY_NAME[name] if name in BY_NAME else {w.name: w for w in well_tuned()}[name]
    return case.compile(target=target, **dict(items)) if items else case.compile(target=target)


def compiled(name: str, target: str = "sm_90a", **overrides):
    return _compile(name, target, tuple(sorted(overrides.items())))


def case(name: str):
    return BY_NAME[name] if name in BY_NAME else {w.name: w for w in well_tuned()}[name]


@functools.lru_cache(maxsize=None)
def static_kernel_report(name: str, validate: bool = False):
    """The analyzer's KernelReport for a planted / well-tuned case compiled on the CPU (no profile)."""
    import analyzer
    c = case(name)
    ck = compiled(name)
    grid = grid_of(c) if c.grid is not None else None
    rep = analyzer.analyze_compiled(ck, grid=grid, function=c.kernel, validate=validate)
    return rep.kernels[0]


def source_record(kernel) -> Dict[str, Any]:
    """The ``source`` record kprof stores for a @jit function."""
    fn = kernel.fn
    lines, first = inspect.getsourcelines(fn)
    return {"file": os.path.abspath(fn.__code__.co_filename), "first_line": first,
            "lines": [ln.rstrip("\n") for ln in lines]}


def cache_case(c, target: str = "sm_90a", **overrides):
    """Compile a case through the kernelc disk cache (KERNELC_CACHE_DIR): returns the CompiledKernel
    with its cache key."""
    from kernelc.compiler.backend import parse_target
    from kernelc.runtime.cache import cached_compile
    cx = dict(c.constexprs)
    nw, ns = c.num_warps, c.num_stages
    for k, v in overrides.items():
        if k == "num_warps":
            nw = v
        elif k == "num_stages":
            ns = v
        else:
            cx[k] = v
    div = dict(c.divisibility)
    for p, t in c.signature.items():
        if t.startswith("*"):
            div.setdefault(p, 16)
    base = c.kernel
    return cached_compile(base, dict(c.signature), cx, div, tuple(c.equal_to_1), nw, ns, parse_target(target))


def kernel_node(parent: ProfileNode, c, ck, *, time_ns: int = 1_000_000, count: int = 10, grid=None,
                cache_key: Optional[str] = "from-ck", with_source: bool = True, samples: Optional[dict] = None,
                instructions=None, extra: Optional[dict] = None) -> ProfileNode:
    """A kprof kernel frame for a compiled case, with optional sampled line children.

    ``samples``: ``{line: {reason: n}}`` (absolute line numbers in the kernel's file); ``"selected"``
    samples are issuing, the rest stalled."""
    grid = tuple(grid or grid_of(c))
    name = f"{ck.name} [grid {'x'.join(map(str, grid))}, warps {ck.num_warps}, stages {ck.num_stages}, " \
           f"smem {ck.shared // 1024}KiB]"
    node = parent.child(name)
    node.add_metrics({"time (ns)": time_ns, "count": count, "device_id": "0", "device_type": "CUDA"})
    node.extra = {"kind": "kernel", "kernel": ck.name,
                  "cache_key": ck.cache_key if cache_key == "from-ck" else cache_key,
                  "signature": dict(c.signature), "constexprs": {k: _literal(v) for k, v in ck.constexprs.items()},
                  "num_warps": ck.num_warps, "num_stages": ck.num_stages,
                  "target": ck.target.arch, "grid": list(grid)}
    if node.extra["cache_key"] is None:
        del node.extra["cache_key"]
    if with_source:
        node.extra["source"] = source_record(c.kernel)
    if instructions is not None:
        node.extra["instructions"] = instructions
    if extra:
        node.extra.update(extra)
    file = os.path.basename(c.kernel.fn.__code__.co_filename)
    for line, stalls in sorted((samples or {}).items()):
        n = sum(stalls.values())
        child = node.child(f"{file}:{line}", "line")
        m = {"num_samples": n, "num_stalled_samples": n - stalls.get("selected", 0)}
        m.update({f"stalled_{r}": v for r, v in stalls.items()})
        child.add_metrics(m)
    return node


def write(path, root: ProfileNode, device_info=None) -> str:
    write_profile(str(path), root, H100 if device_info is None else device_info)
    return str(path)


def line_of(kernel, text: str, nth: int = 0) -> int:
    """Absolute line number of the ``nth`` line of ``kernel``'s source containing ``text``."""
    lines, first = inspect.getsourcelines(kernel.fn)
    hits = [first + i for i, ln in enumerate(lines) if text in ln]
    return hits[nth]


__all__ = ["PLANTED", "BY_NAME", "well_tuned", "compiled", "case", "static_kernel_report", "cache_case",
           "kernel_node", "write", "line_of", "grid_of", "H100", "ProfileNode"]
