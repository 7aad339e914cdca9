"""Fixture profiles (built with profiler.format as kprof writes them): artifacts through the cache
key, recompilation when the cache is gone, --arch, hot lines, and the sample-based diagnostics
(4 lg_throttle, 6 long_scoreboard in a shallow dot loop, 7 barrier stalls) from synthetic stalls."""
import os

import pytest

import analyzer
from analyzer import AnalyzerError

from .helpers import ProfileNode, cache_case, case, kernel_node, line_of, write


def _report(path, **kw):
    kw.setdefault("validate", False)
    return analyzer.analyze(path, **kw)


def test_artifacts_from_the_cache_key_and_samples_on_the_strided_load(tmp_path):
    c = case("strided_load")
    ck = cache_case(c)
    load_line = line_of(c.kernel, "kl.load(")
    store_line = line_of(c.kernel, "kl.store(")
    root = ProfileNode("ROOT")
    kernel_node(root.child("step"), c, ck, time_ns=5_000_000, count=10, samples={
        load_line: {"lg_throttle": 420, "long_scoreboard": 300, "selected": 80},
        store_line: {"long_scoreboard": 150, "selected": 50}})
    rep = _report(write(tmp_path / "p.hatchet", root))
    k = rep.kernel("strided_gather")
    assert k.facts.artifact_origin == "cache"
    assert k.facts.cache_key == ck.cache_key
    # hottest lines: share, stall reasons and the source text
    h = k.hot_lines[0]
    assert h.line == load_line and h.samples == 800 and h.share == pytest.approx(0.8)
    assert h.top_stalls[0][0] == "lg_throttle" and h.top_stalls[0][1] == pytest.approx(420 / 800)
    assert "kl.load(x_ptr + offs * STRIDE" in h.text
    d = next(d for d in k.findings if d.id == "uncoalesced-access")
    assert d.line == load_line and d.basis == "static+samples"
    assert d.evidence["lg_throttle_share_of_line"] == pytest.approx(420 / 800, abs=1e-3)
    assert "80% of the kernel's samples" in d.message


def test_cache_gone_recompiles_from_the_recorded_source(tmp_path):
    c = case("few_programs")
    ck = cache_case(c)
    root = ProfileNode("ROOT")
    kernel_node(root, c, ck, cache_key="0" * 40)
    rep = _report(write(tmp_path / "p.hatchet", root))
    k = rep.kernels[0]
    assert k.facts.artifact_origin == "recompiled"
    assert any("not found" in n and "recompiled" in n for n in k.facts.notes)
    assert "low-utilisation" in k.ids()


def test_no_cache_and_no_source_analyses_the_samples_alone(tmp_path):
    c = case("strided_load")
    ck = cache_case(c)
    root = ProfileNode("ROOT")
    line = line_of(c.kernel, "kl.load(")
    kernel_node(root, c, ck, cache_key="1" * 40, with_source=False,
                extra={"source": {"file": "/nonexistent/kern.py", "first_line": 1, "lines": []}},
                samples={line: {"lg_throttle": 900, "selected": 100}})
    k = _report(write(tmp_path / "p.hatchet", root)).kernels[0]
    assert k.facts.artifact_origin == "none" and k.facts.compiled is None
    assert any("no artifacts" in n for n in k.facts.notes)
    # without SASS or compiler reports nothing static is claimed, but the hot lines are still listed
    assert k.hot_lines and k.hot_lines[0].line == line and k.hot_lines[0].share == pytest.approx(1.0)
    assert not [d for d in k.diagnostics if d.basis != "samples"]


def test_arch_flag_recompiles_for_another_target(tmp_path):
    c = case("hmma_on_hopper")
    ck = cache_case(c)
    root = ProfileNode("ROOT")
    kernel_node(root, c, ck)
    path = write(tmp_path / "p.hatchet", root)
    k90 = _report(path).kernels[0]
    assert "hopper-no-wgmma" in k90.ids()
    k80 = _report(path, arch="sm_80").kernels[0]
    assert k80.facts.artifact_origin == "recompiled"
    assert k80.facts.compiled.target.arch == "sm_80"
    assert k80.facts.device.num_sms == 108 and k80.facts.device.source == "assumed"
    assert "hopper-no-wgmma" not in k80.ids()


def test_shallow_pipeline_with_long_scoreboard_samples_is_latency_bound(tmp_path):
    c = case("unpipelined_dot")
    k = c.kernel
    la, lb, ld = line_of(k, "a = kl.load("), line_of(k, "b = kl.load("), line_of(k, "kl.dot(")
    samples = {la: {"long_scoreboard": 300, "selected": 20}, lb: {"long_scoreboard": 280, "selected": 20},
               ld: {"math_pipe_throttle": 200, "wait": 100, "selected": 80}}
    found = {}
    for stages in (2, 3):
        ck = cache_case(c, num_stages=stages)
        root = ProfileNode("ROOT")
        kernel_node(root, c, ck, samples=samples)
        rep = _report(write(tmp_path / f"p{stages}.hatchet", root))
        found[stages] = [d for d in rep.kernels[0].findings if d.id == "latency-bound-loop"]
    d = found[2][0]
    assert d.basis == "samples" and d.evidence["long_scoreboard_share_of_kernel"] == pytest.approx(580 / 1000)
    assert d.changes[0] == {"num_stages": 3}
    assert not found[3]


def _softmax_samples(kernel, stalls):
    return {line_of(kernel, "tl.max("): dict(stalls), line_of(kernel, "tl.sum("): dict(stalls),
            line_of(kernel, "tl.load("): {"long_scoreboard": 100, "selected": 20}}


def test_barrier_dominated_samples_are_reported_with_the_line(tmp_path):
    c = case("softmax[1024]")
    ck = cache_case(c)
    root = ProfileNode("ROOT")
    kernel_node(root, c, ck, grid=(528, 1, 1),
                samples=_softmax_samples(c.kernel, {"barrier": 300, "short_scoreboard": 100, "selected": 40}))
    k = _report(write(tmp_path / "p.hatchet", root)).kernels[0]
    d = next(d for d in k.findings if d.id == "barrier-stalls")
    assert d.basis == "samples" and d.line in (line_of(c.kernel, "tl.max("), line_of(c.kernel, "tl.sum("))
    assert d.evidence["barrier_smem_share_of_stalled"] > 0.4
    assert "barrier" in d.message


def test_well_tuned_softmax_with_memory_bound_samples_has_no_findings(tmp_path):
    c = case("softmax[1024]")
    ck = cache_case(c)
    root = ProfileNode("ROOT")
    kernel_node(root, c, ck, grid=(528, 1, 1),
                samples=_softmax_samples(c.kernel, {"long_scoreboard": 80, "wait": 30, "barrier": 20, "selected": 40}))
    k = _report(write(tmp_path / "p.hatchet", root)).kernels[0]
    assert not k.findings, [(d.id, d.message) for d in k.findings]


def test_ranking_kernel_filter_top_and_other_kernels(tmp_path):
    root = ProfileNode("ROOT")
    step = root.child("train_step")
    for name, t in (("few_programs", 3_000_000), ("barrier_reduce", 9_000_000), ("strided_load", 1_000_000)):
        c = case(name)
        kernel_node(step, c, cache_case(c), time_ns=t)
    torch_k = step.child("sm90_xmma_gemm_f16f16_cublas")
    torch_k.add_metrics({"time (ns)": 2_000_000, "count": 10, "device_id": "0", "device_type": "CUDA"})
    path = write(tmp_path / "p.hatchet", root)
    rep = _report(path)
    assert [k.name for k in rep.kernels] == ["barrier_rowsum", "few_programs_scale", "strided_gather"]
    assert rep.kernels[0].facts.share == pytest.approx(9 / 15)
    assert rep.total_time_ns == 15_000_000
    assert [o.name for o in rep.other_kernels] == ["sm90_xmma_gemm_f16f16_cublas"]
    assert [k.name for k in _report(path, kernel="FEW|strided").kernels] == ["few_programs_scale", "strided_gather"]
    rep2 = _report(path, top=1)
    assert len(rep2.kernels) == 1 and any("--top" in n for n in rep2.notes)
    with pytest.raises(AnalyzerError, match="matches none"):
        _report(path, kernel="nope")
    with pytest.raises(AnalyzerError, match="not a valid regular expression"):
        _report(path, kernel="(")


def test_same_kernel_from_two_scopes_is_one_entry(tmp_path):
    c = case("few_programs")
    ck = cache_case(c)
    root = ProfileNode("ROOT")
    kernel_node(root.child("a"), c, ck, time_ns=1_000_000, count=5)
    kernel_node(root.child("b"), c, ck, time_ns=2_000_000, count=7)
    rep = _report(write(tmp_path / "p.hatchet", root))
    assert len(rep.kernels) == 1 and rep.kernels[0].facts.count == 12 and rep.kernels[0].facts.time_ns == 3_000_000


def test_proton_style_sample_frames_without_artifacts(tmp_path):
    root = ProfileNode("ROOT")
    k = root.child("matmul_512x512x512")
    k.add_metrics({"time (ns)": 58_112, "count": 5, "device_id": "0", "device_type": "CUDA"})
    for line, n in ((40, 70), (41, 30)):
        ch = k.child(f"/tmp/t.py:{line}@matmul_kernel")
        ch.add_metrics({"num_samples": n, "stalled_Long_Scoreboard": n - 5, "stalled_Selected": 5})
    rep = _report(write(tmp_path / "p.hatchet", root))
    kr = rep.kernels[0]
    assert kr.facts.artifact_origin == "none"
    assert [h.line for h in kr.hot_lines] == [40, 41]
    assert kr.hot_lines[0].top_stalls[0][0] == "long_scoreboard"


def test_bad_profiles_raise_one_line_errors(tmp_path):
    with pytest.raises(AnalyzerError, match="no such file"):
        analyzer.analyze(str(tmp_path / "missing.hatchet"))
    p = tmp_path / "bad.hatchet"
    p.write_text("[1, 2")
    with pytest.raises(AnalyzerError, match="truncated JSON"):
        analyzer.analyze(str(p))
    root = ProfileNode("ROOT")
    path = write(tmp_path / "empty.hatchet", root)
    with pytest.raises(AnalyzerError, match="--arch"):
        analyzer.analyze(path, arch="gfx90a")
    rep = analyzer.analyze(path)
    assert rep.kernels == [] and any("no kernelc kernel" in n for n in rep.notes)


def test_viewer_fixture_profile_is_readable():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rep = _report(os.path.join(here, "viewer", "data", "kprof_small.hatchet"))
    names = [k.name for k in rep.kernels]
    assert "matmul_kernel" in names
    mm = [k for k in rep.kernels if k.name == "matmul_kernel" and k.facts.total_samples][0]
    assert mm.hot_lines[0].line == 27 and mm.hot_lines[0].text.strip() == "acc += kl.dot(a, b)"
    # the well-tuned fixture matmul (pipelined, HMMA) is not flagged from its samples
    assert not [d for d in mm.findings if d.id in ("latency-bound-loop", "barrier-stalls")]


def test_barrier_samples_in_library_code_point_at_the_kernel_line(tmp_path):
    # the softmax's BARs carry the line of kernelc's combine function (standard.py): the diagnostic
    # names the kernel line that inlines it
    from analyzer import tir
    c = case("softmax[1024]")
    ck = cache_case(c)
    lib = next(o for o in tir.parse(ck.asm["tir"]).ops if not o.file.endswith("softmax.py"))
    bar_file, bar_line = lib.file, lib.line
    root = ProfileNode("ROOT")
    node = kernel_node(root, c, ck, grid=(528, 1, 1))
    ch = node.child(f"{os.path.basename(bar_file)}:{bar_line}", "line")
    ch.add_metrics({"num_samples": 500, "num_stalled_samples": 480, "stalled_barrier": 400,
                    "stalled_short_scoreboard": 80, "stalled_selected": 20})
    k = _report(write(tmp_path / "p.hatchet", root)).kernels[0]
    d = next(d for d in k.findings if d.id == "barrier-stalls")
    reduce_lines = {line_of(c.kernel, "tl.max("), line_of(c.kernel, "tl.sum(")}
    assert d.line in reduce_lines and d.file.endswith("softmax.py")
    assert "inlined into line" in d.message and d.source and "tl." in d.source
    assert k.hot_lines[0].via and k.hot_lines[0].via[0][1] in reduce_lines
    assert k.to_json()["hot_lines"][0]["inlined_into"][0]["line"] in reduce_lines


def test_recorded_sizes_pin_the_grid_constexprs(tmp_path):
    c = case("softmax[1024]")
    root = ProfileNode("ROOT")
    kernel_node(root, c, cache_case(c), grid=(528, 1, 1),
                extra={"args": [{"name": "n_rows", "kind": "int", "value": 8192},
                                {"name": "n_cols", "kind": "int", "value": 1000}]})
    k = _report(write(tmp_path / "p.hatchet", root)).kernels[0]
    d = next(d for d in k.diagnostics if d.id == "low-utilisation")
    assert d.severity == "info" and d.changes == []      # a persistent grid: no tile constexpr sets it


def test_a_real_kprof_cpu_profile_of_an_interpreted_launch(tmp_path):
    # kprof's CPU backend times interpreted launches and records the kernel (no cache key there):
    # the analyzer recompiles it from the recorded source for sm_90a
    profiler = pytest.importorskip("profiler")
    if not hasattr(profiler, "start"):
        pytest.skip("profiler.start not available")
    import torch
    c = case("strided_load")
    x, y = torch.randn(4096 * 16), torch.empty(4096)
    sid = profiler.start(str(tmp_path / "kp"), backend="cpu")
    try:
        c.kernel[(4,)](x, y, 4096, STRIDE=16, BLOCK=1024)
    finally:
        paths = profiler.finalize(sid)
    path = next(p for p in paths if p.endswith(".hatchet"))
    k = analyzer.analyze(path, validate=False).kernel("strided_gather")
    assert k.facts.artifact_origin == "recompiled"
    assert k.facts.device.num_sms == 132 and k.facts.grid == (4, 1, 1)
    assert {"uncoalesced-access", "low-utilisation"} <= set(k.ids())


@pytest.mark.parametrize("sampler", [None, {"warnings": []}, {"warnings": [
    "the hardware sample buffer overflowed and samples were lost: use a larger period"]}])
def test_a_kernel_without_samples_says_why(tmp_path, sampler):
    # a sampled profile (kprof -m pcsampling records its sampler on the root) in which a kernel got no samples must
    # not tell the user to run with pcsampling; a timing-only profile still does (s28: N 16384 attention kernels
    # lost their samples to the hardware buffer)
    c = case("few_programs")
    ck = cache_case(c)
    root = ProfileNode("ROOT")
    if sampler is not None:
        root.extra = {"pcsampling": dict(sampler, collection="kernel-serialized", samples=10)}
    kernel_node(root, c, ck)
    rep = _report(write(tmp_path / "p.hatchet", root))
    k = rep.kernels[0]
    notes = [n for n in k.facts.notes if "was sampled" in n]
    text = rep.render(color=False, width=200)
    if sampler is None:
        assert not notes and "run with kprof -m pcsampling" in text
    else:
        assert len(notes) == 1 and "run with kprof -m pcsampling" not in text
        assert ("buffer overflowed" in notes[0]) == bool(sampler["warnings"])


def test_a_sampled_kernel_without_a_line_table_says_so(tmp_path):
    # samples on the kernel frame and none on lines (cuDNN's kernels in s29's A29 profile, 257957 samples): the note
    # must give the kernel's samples and say why they are not on lines, not that the kernel got none
    c = case("few_programs")
    ck = cache_case(c)
    root = ProfileNode("ROOT")
    root.extra = {"pcsampling": {"warnings": [], "collection": "kernel-serialized", "samples": 1000}}
    node = kernel_node(root, c, ck)
    node.add_metrics({"num_samples": 1000, "num_stalled_samples": 800, "stalled_barrier": 500,
                      "stalled_wait": 300, "stalled_selected": 200})
    k = _report(write(tmp_path / "p.hatchet", root)).kernels[0]
    notes = [n for n in k.facts.notes if "was sampled" in n]
    assert len(notes) == 1 and "no samples" not in notes[0]
    assert "1000 samples, 80% stalled" in notes[0] and "barrier 50%" in notes[0] and "no line table" in notes[0]


def test_a_sampled_library_kernel_is_not_taken_for_a_kernelc_kernel(tmp_path):
    # the sampler marks every sampled kernel "kind": "kernel" (s29 A29: cuDNN's kernels were then recompiled "from
    # source" and shown with the defaults "warps 4, stages 3"); without the hook's launch record it is a library
    # kernel: no recompiling, no invented launch config
    root = ProfileNode("ROOT")
    root.extra = {"pcsampling": {"warnings": [], "collection": "kernel-serialized", "samples": 100}}
    node = root.child("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_kernel0_0")
    node.add_metrics({"time (ns)": 2_000_000, "count": 2, "device_id": "0", "device_type": "CUDA",
                      "num_samples": 100, "num_stalled_samples": 60, "stalled_wait": 60, "stalled_selected": 40})
    node.extra = {"kind": "kernel", "kernel": "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_kernel0_0",
                  "instructions": [{"pc": 16, "samples": 100, "file": None, "line": None, "opcode": None,
                                    "stalls": {"wait": 60, "selected": 40}}]}
    rep = _report(write(tmp_path / "p.hatchet", root))
    k = rep.kernels[0]
    assert any("not a kernelc kernel" in n for n in k.facts.notes)
    assert not any("recompil" in n for n in k.facts.notes)
    text = rep.render(color=False, width=200)
    assert "warps" not in text and "stages" not in text
    j = k.to_json()
    assert j["num_warps"] is None and j["num_stages"] is None
    from analyzer.html import kernel_entry
    e = kernel_entry(k)
    assert e["facts"]["num_warps"] is None and "occupancy" not in e["facts"]
