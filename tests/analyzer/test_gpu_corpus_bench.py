"""The GPU corpus bench's CPU half (``bench/bench_analyzer_corpus.py --gpu``): a profile with one scope
per case, as the workload child writes it (here synthetic: kernel frames with sampled lines), split
per case, analysed and scored; every diagnosis on these profiles shows its evidence as numbers and
each report is ordered by estimated time saved; the --tune text parser of bench/issue22_cases.py."""
from __future__ import annotations

import functools

import pytest

from profiler.format import ProfileNode

from .corpus import MM_DIV, MM_SIG, Case, cases, mm
from .corpus_gpu import gpu_cases, mm_dot_line
from .helpers import cache_case, case, kernel_node, write

bench = pytest.importorskip("bench.bench_analyzer_corpus")

N4K = 4096
# registered diagnostics these profiles do not produce (each has its own tests); a new check must be
# added here or produced below, so that its evidence is checked
NOT_PRODUCED_HERE = {"no-tensor-cores", "low-utilisation", "low-occupancy", "unvectorised-access",
                     "latency-bound-loop", "hopper-no-tma", "fp8-upcast", "fp8-transposed-operand"}


def _args(**values):
    return {"args": [{"name": n, "kind": "int", "value": v} for n, v in values.items()]}


@functools.lru_cache(maxsize=None)
def _profile(tmp):
    """{case: (expected, line)} and the path of a profile with a scope per case."""
    cs = {c.name: c for c in cases()}
    mm32 = Case("mm_single_32x32x32", mm, "small-tiles", MM_SIG, {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32},
                lambda: (), grid=((N4K // 32) ** 2,), divisibility=MM_DIV, num_stages=3)
    root = ProfileNode("ROOT")
    plan = [
        # (case, samples {line offset from the expected line: stalls}, recorded scalars)
        (cs["aos_field"], {0: {"long_scoreboard": 600, "lg_throttle": 100, "selected": 50}, 1: {"selected": 30}},
         _args(n=1 << 23)),
        (cs["transpose_store"], {0: {"barrier": 200, "selected": 40}, -1: {"long_scoreboard": 300}},
         _args(M=N4K, N=N4K, stride_xm=N4K, stride_yn=N4K)),
        (cs["copy2d_ok"], {}, _args(M=1 << 16, N=256, stride_m=256)),
        (mm32, {0: {"mio_throttle": 400, "selected": 100}},
         _args(M=N4K, N=N4K, K=N4K, stride_am=N4K, stride_bk=N4K, stride_cm=N4K)),
        (case("register_spills"), {}, None),
        (case("barrier_reduce"), {}, None),
    ]
    expect = {}
    for c, samples, extra in plan:
        ck = cache_case(c)
        line = getattr(c, "expected_line", None) if c.expected and c is not mm32 else (mm_dot_line() if c is mm32 else None)
        expect[c.name] = (c.expected, line)
        scope = root.child("case:" + c.name)
        base = line or 0
        kernel_node(scope, c, ck, time_ns=2_000_000, count=2,
                    samples={base + off: st for off, st in samples.items()} if line else None, extra=extra)
    return expect, write(f"{tmp}/corpus.hatchet", root)


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gpucorpus")
    expect, path = _profile(str(tmp))
    paths = bench.split_profile(path, str(tmp))
    assert sorted(paths) == sorted(expect)
    return expect, {name: bench.analyse_case((p, None)) for name, p in paths.items()}


def test_each_case_is_scored_on_its_own_line(analysed):
    expect, results = analysed

    class C:
        def __init__(self, name, group="corpus"):
            self.name, self.group = name, group
            self.expected, self.line = expect[name]
    rows = [bench.score_case(C(n), results[n]) for n in expect]
    by = {r["case"]: r for r in rows}
    for n, (exp, _line) in expect.items():
        assert not by[n]["error"], by[n]
        if exp:
            assert by[n]["found"], by[n]
    assert by["copy2d_ok"]["fp_clean"] == 0
    # per access: sectors per request and the line's share of samples, as the report prints them
    aos = by["aos_field"]
    assert aos["evidence"]["sectors_per_request"] == 16.0 and aos["evidence"]["sector_efficiency"] == 0.25
    acc = aos["accesses_on_line"][0]
    assert acc["sectors_per_request"] == 16.0 and acc["line_sample_share"] == pytest.approx(750 / 780, abs=1e-3)
    assert aos["bytes_pct_of_peak"] is not None
    s = bench.gpu_summary(rows)
    assert s["recall"] == 1.0 and s["problems"] == 5 and s["clean_kernels"] == 1 and s["false_positives"] == 0
    # a finding on a clean case and one on the wrong line count against precision
    rows.append(dict(by["copy2d_ok"], case="copy2d_flagged", fp_clean=2))
    rows.append(dict(by["aos_field"], case="aos_wrong", found=False, fp_wrong_line=1))
    s = bench.gpu_summary(rows)
    assert s["false_positives"] == 3 and s["precision"] == round(5 / 8, 4) and s["missed"] == ["aos_wrong"]


def test_every_diagnosis_has_numeric_evidence_and_reports_are_ordered_by_time_saved(analysed):
    from analyzer.diagnostics import registry
    _expect, results = analysed
    seen = set()
    for name, res in results.items():
        for k in res["kernels"]:
            shares = [d["evidence"]["est_time_saved_share"] for d in k["diagnostics"]]
            assert shares == sorted(shares, reverse=True), (name, k["diagnostics"])
            for d in k["diagnostics"]:
                seen.add(d["id"])
                nums = {n: v for n, v in d["evidence"].items() if isinstance(v, (int, float))
                        and not isinstance(v, bool) and not n.startswith("est_time_saved")}
                assert nums, f"{name}: {d['id']} at line {d['line']} has no numeric evidence: {d['evidence']}"
                assert "est_time_saved_ns" in d["evidence"], d
    ids = {ident for _n, ident, _c in registry()}
    assert {"uncoalesced-access", "layout-conversion", "small-tiles", "hopper-no-wgmma", "register-spills",
            "barrier-stalls"} <= seen
    assert ids - seen - {"layout-conversion"} <= NOT_PRODUCED_HERE, sorted(ids - seen - NOT_PRODUCED_HERE)


def test_gpu_cases_cover_the_static_corpus_and_build_small_inputs():
    cs = gpu_cases()
    names = [c.name for c in cs]
    assert len(names) == len(set(names))
    assert {c.name for c in cases()} <= set(names)
    groups = {c.group for c in cs}
    assert {"planted", "corpus", "issue22", "more", "well_tuned", "unseen"} <= groups
    problems = [c for c in cs if c.expected and c.group != "unseen"]
    assert len(problems) >= 25 and len([c for c in cs if not c.expected and c.group != "unseen"]) >= 10
    # the interpreter-size inputs of a few cases launch (one program each)
    import torch
    if torch.cuda.is_available():
        return   # kernelc would launch on the GPU: the CPU tensors are for the interpreter
    for c in cs:
        if c.name in ("aos_field", "permute3d_store", "copy3d_ok"):
            c.build("cpu", small=True)()


def test_tune_text_is_parsed_back():
    from analyzer.tune import render
    from bench.issue22_cases import parse_tune_text
    res = {"rows": [{"config": {"BLOCK_M": 32}, "time_ms": 1.0, "speedup": 1.0, "status": "ok"},
                    {"config": {"BLOCK_M": 128}, "time_ms": 0.4, "speedup": 2.5, "status": "ok"},
                    {"config": {"BLOCK_M": 256}, "status": "pruned on the CPU: spills 128 bytes"}],
           "winner": {"BLOCK_M": 128}, "best_speedup": 2.5, "skipped": None,
           "autotune": '@kernelc.autotune(\n    configs=[\n        kernelc.Config({"BLOCK_M": 128}),\n    ],\n'
                       '    key=["M"],\n)'}
    text = ("report\n" + render("mm (rank 2, BLOCK_M=32, num_warps=4)", res)
            + render("transpose (rank 1, BM=64)", {"skipped": "no GPU", "rows": []}))
    got = parse_tune_text(text)
    assert got[2]["best_speedup"] == 2.5 and got[2]["autotune"] == res["autotune"] and len(got[2]["rows"]) == 2
    assert got[1]["skipped"] == "no GPU" and got[1]["best_speedup"] is None


def test_case_names_with_commas_survive_the_child_command_line():
    # the unseen examples are named like ex_permute(0,2,1)_...: the parent joins names with commas for its
    # child's --only, which must split them back to exactly the names it selected
    names = [c.name for c in gpu_cases(None)]
    assert any("," in n for n in names)
    assert bench.split_names(",".join(names)) == names
    assert bench.split_names("a, b(1,2)_c,,d") == ["a", "b(1,2)_c", "d"]
