"""Sectors per request (analyzer/sectors.py) against a brute-force count from the interpreter's
addresses, and the uncoalesced-access diagnosis on the memory-access corpus (tests/analyzer/corpus.py)."""
from __future__ import annotations

import functools

import pytest

import analyzer
from analyzer.sectors import model_access

from .corpus import cases
from .sector_oracle import brute_force, record_accesses

CASES = {c.name: c for c in cases()}


@functools.lru_cache(maxsize=None)
def _compiled(name):
    return CASES[name].compile()


@pytest.mark.parametrize("name", sorted(CASES))
def test_sector_model_matches_interpreter_addresses(name):
    c = CASES[name]
    ck = _compiled(name)
    seen = record_accesses(c.run_program0)
    checked = 0
    for a in ck.reports["memory_accesses"]:
        m = model_access(a, arg_values=c.scalar_args(), divisibility=c.divisibility)
        if name == "gather" and a["kind"] == "load" and a["line"] == c.expected_line:
            assert m is None and a["address"] == {"affine": False}   # loaded indices: no static address
            continue
        assert m is not None, f"{name}: no sector model for {a['kind']} at line {a['line']}"
        key = ("load" if a["kind"].startswith("load") else "store", a["line"])
        offsets = seen[key][0]
        instr, secs, mins, lines = brute_force(a["layout"], offsets, a["elem_bytes"], a["vector_elems"])
        assert (m.instructions, m.sectors, m.min_sectors, m.lines) == (instr, secs, mins, lines), (name, key)
        checked += 1
    assert checked >= 1


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_diagnosis(name):
    c = CASES[name]
    rep = analyzer.analyze_compiled(_compiled(name), grid=c.grid, validate=False)
    found = [d for d in rep.kernels[0].diagnostics if d.is_finding]
    if c.expected is None:
        assert not found, [(d.id, d.line, d.message) for d in found]
        return
    if c.expected == "layout-conversion":   # the compiler fixed it: an info, and no finding on the line
        hits = [d for d in rep.kernels[0].diagnostics if d.id == c.expected and d.line == c.expected_line]
        assert hits and not [d for d in found if d.line == c.expected_line], \
            [(d.id, d.line) for d in rep.kernels[0].diagnostics]
        return
    hits = [d for d in found if d.id == c.expected and d.line == c.expected_line]
    assert hits, [(d.id, d.line) for d in found]
    ev = hits[0].evidence
    if name == "gather":
        assert ev["contiguity"] == [1]
        return
    assert ev["sector_efficiency"] < 0.5
    assert ev["sectors_per_request"] > ev["min_sectors_per_request"]


def test_transpose_store_is_converted_by_the_compiler_and_the_report_says_so():
    # passes/coalesce.py converts the transposed store's layout: the analyzer reports the conversion (an
    # info with what it costs and buys), not an uncoalesced access
    rep = analyzer.analyze_compiled(_compiled("transpose_store"), grid=(64, 64), validate=False)
    diags = rep.kernels[0].diagnostics
    assert not [d for d in diags if d.id == "uncoalesced-access"]
    d = next(d for d in diags if d.id == "layout-conversion")
    ev = d.evidence
    assert d.severity == "info" and ev["contiguous_dim"] == 0 and ev["layout_fastest_dim"] == 0
    assert ev["sector_efficiency"] == 1.0 and ev["conversion_shared_bytes"] > 0


def test_column_walk_fix_is_a_code_change():
    rep = analyzer.analyze_compiled(_compiled("column_walk"), grid=(8192,), validate=False)
    d = next(d for d in rep.kernels[0].diagnostics if d.id == "uncoalesced-access")
    assert d.evidence["fix_by"] == "code" and d.evidence["contiguous_dim"] is None
    assert d.evidence["sectors_per_request"] == 32.0 and d.evidence["min_sectors_per_request"] == 4.0


def test_unrecorded_stride_is_named_as_assumed():
    ck = _compiled("transpose_store")
    a = next(a for a in ck.reports["memory_accesses"] if a["kind"] == "store")
    m = model_access(a, divisibility={"stride_yn": 16})
    assert m.assumed == {"stride_yn": 4096}
    assert m.strides[1] == 4096 * 4


def test_a_compiler_layout_conversion_is_reported_with_its_cost():
    # the coalescing pass (branch h21) inserts convert_layout ops before such accesses; a conversion op
    # on the line of an efficient access gets an info with the shared memory it costs
    from analyzer.diagnostics.sectors import check
    from analyzer.facts import facts_from_compiled
    from analyzer.tir import TirOp
    ck = _compiled("copy2d_ok")
    facts = facts_from_compiled(ck, grid=(4096,))
    store = next(a for a in facts.memory_accesses if a["kind"] == "store")
    facts.tir.ops.append(TirOp("convert_layout", store["file"], store["line"], ["%9"], "<16x256xfp32>", (), ""))
    d = next(d for d in check(facts) if d.id == "layout-conversion")
    assert d.severity == "info" and d.line == store["line"]
    assert d.evidence["conversion_shared_bytes"] == 16 * 256 * 4 and d.evidence["sector_efficiency"] == 1.0
