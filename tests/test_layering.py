"""The import graph of kernelc, cubintools, profiler, analyzer and kprof follows the layering rules
(tests/layering.py; docs/architecture.md), and the rules catch the edges they are meant to catch."""
import textwrap

import pytest

from tests import layering as L


@pytest.fixture(scope="module")
def graph():
    return L.scan()


def test_layers_hold(graph):
    mods, edges = graph
    assert len(mods) > 100 and len(edges) > 500  # the scan saw the code
    bad = L.layer_violations(edges)
    assert not bad, "layering violations:\n" + "\n".join(bad)


def test_no_cycles_beyond_the_allow_list(graph):
    mods, edges = graph
    bad = L.cycle_violations(mods, edges, L.read_allowlist())
    assert not bad, "\n".join(bad)


def test_one_demangler(graph):
    mods, _ = graph
    assert L.demanglers(mods) == ["cubintools.demangle"]


def E(src, dst, *names, local=True):
    return L.Edge(src, dst, "x.py", 1, local, tuple(names))


@pytest.mark.parametrize("edge, why", [
    (E("kernelc.compiler.abi", "kernelc.runtime.tensor_map"), "kernelc.compiler may not import kernelc.runtime"),
    (E("kernelc.compiler.codegen.elementwise", "kernelc.runtime.interpreter.fp8"), "may not import kernelc.runtime"),
    (E("kernelc.language.core", "kernelc.compiler.ir"), "kernelc.language may not import kernelc.compiler"),
    (E("kernelc.tools.tensor_descriptor", "kernelc.runtime.interpreter.args"), "kernelc.tools may not import"),
    (E("kernelc.errors", "kernelc.language"), "is a leaf"),
    (E("kernelc.runtime.jit", "profiler.session"), "below the profiler"),
    (E("cubintools.sass", "kernelc.errors"), "cubintools imports none"),
    (E("profiler.pcsampling.sampler", "kernelc.runtime.driver", "ensure_context"), "only through profiler/hooks.py"),
    (E("profiler.pcsampling.attribution", "kernelc.compiler.backend", "instructions"), "only through profiler/hooks"),
    (E("profiler.hooks", "kernelc.runtime.cache", "_load"), "private kernelc name _load"),
    (E("analyzer.load", "kernelc.runtime.cache", "_load"), "not _load"),
    (E("analyzer.load", "kernelc.runtime._private"), "not _private"),
    (E("profiler.pcsampling.workloads", "examples.kernels.matmul"), "does not ship"),
    (E("analyzer.cli", "tests.helpers"), "does not ship"),
])
def test_rules_catch_the_edges_they_forbid(edge, why):
    bad = L.layer_violations([edge])
    assert len(bad) == 1 and why in bad[0], bad
    assert "x.py:1 (in a function)" in bad[0]  # the message says where


@pytest.mark.parametrize("edge", [
    E("kernelc.runtime.cache", "kernelc.compiler.artifact"), E("kernelc.compiler.abi", "kernelc.language.dtypes"),
    E("kernelc.runtime.launcher", "kernelc.language.host_types", "kl_dtype_of"), E("kernelc", "kernelc.runtime.jit"),
    E("kernelc.compiler.backend", "cubintools.target"), E("profiler.hooks", "kernelc.runtime.hooks"),
    E("profiler.pcsampling.attribution", "cubintools.sass"), E("analyzer.load", "kernelc.runtime.cache", "load_entry"),
    E("kernelc.compiler.codegen.dot", "kernelc.options"), E("kernelc.testing", "kernelc.runtime.timing", "do_bench"),
])
def test_rules_allow_downward_edges(edge):
    assert L.layer_violations([edge]) == []


def test_cycles_are_reported_with_their_edges_and_stale_entries_fail():
    mods = {"p.a": "", "p.b": "", "p.c": ""}
    edges = [E("p.a", "p.b", local=False), E("p.b", "p.c"), E("p.c", "p.a")]
    bad = L.cycle_violations(mods, edges, {})
    assert len(bad) == 1 and "3 modules" in bad[0] and "p.c -> p.a  at x.py:1 (in a function)" in bad[0]
    assert L.cycle_violations(mods, edges, {("p.c", "p.a"): "why"}) == []
    stale = L.cycle_violations(mods, edges[:2], {("p.c", "p.a"): "why"})
    assert len(stale) == 1 and "no longer exists" in stale[0]


def test_scan_sees_function_local_relative_and_from_imports(tmp_path):
    pkg = tmp_path / "kernelc"
    (pkg / "compiler").mkdir(parents=True)
    (pkg / "runtime").mkdir()
    for p in ("__init__.py", "compiler/__init__.py", "runtime/__init__.py", "runtime/driver.py"):
        (pkg / p).write_text("")
    (pkg / "compiler" / "abi.py").write_text(textwrap.dedent("""
        import os
        from . import __name__ as _n

        def f():
            from ..runtime import driver
            from ..runtime.driver import ensure_context as _e
            import examples.kernels
            return driver
    """))
    mods, edges = L.scan(str(tmp_path), ("kernelc",))
    got = {(e.src, e.dst, e.line, e.local, e.names) for e in edges}
    assert ("kernelc.compiler.abi", "kernelc.runtime.driver", 6, True, ()) in got
    assert ("kernelc.compiler.abi", "kernelc.runtime.driver", 7, True, ("ensure_context",)) in got
    assert ("kernelc.compiler.abi", "examples.kernels", 8, True, ()) in got
    assert ("kernelc.compiler.abi", "os", 2, False, ()) in got
    bad = L.layer_violations(edges)
    assert sum("kernelc.compiler may not import kernelc.runtime" in b for b in bad) == 2
    assert any("does not ship" in b for b in bad)
