"""bench/experiments/tutorial_gaps/reuse_sync_ab.py's verdict (issue 20): the median's order-statistic interval and
the per-case and overall verdicts, on made-up rounds. CPU only; nothing here launches a kernel."""
import importlib.util
import math
import os
import random

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location(
    "reuse_sync_ab", os.path.join(ROOT, "bench", "experiments", "tutorial_gaps", "reuse_sync_ab.py"))
ab = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ab)


def test_median_interval_holds_the_median_at_95_percent():
    xs = list(range(1, 101))
    med, lo, hi = ab.median_interval(xs)
    assert med == 50.5
    # n = 100: the 95% order statistics are the 40th and the 61st (1-based)
    assert (lo, hi) == (40, 61)
    # the coverage it claims: P(Binom(100, 1/2) in [40, 60]) >= 0.95
    cover = sum(math.comb(100, i) for i in range(40, 61)) / 2 ** 100
    assert cover >= 0.95
    assert ab.median_interval([3.0, 1.0, 2.0])[1:] == (1.0, 3.0)   # too few values: the whole range


def _run(case_ratio, rounds=40, seed=1):
    """Rounds all/needed/needed/all where all = needed * ratio, with 1% noise on every reading."""
    rng = random.Random(seed)
    out = {"cases": list(case_ratio), "rounds": []}
    for _ in range(rounds):
        rnd = []
        for case, ratio in case_ratio.items():
            for v in ab.ORDER:
                base = 6.0 * (ratio if v == "all" else 1.0)
                rnd.append({"case": case, "variant": v, "busy_us": base * (1 + rng.gauss(0, 0.01)), "covered": True})
        out["rounds"].append(rnd)
    return out


def test_verdicts_faster_slower_and_not_shown():
    s = ab.summarize(_run({"a": 1.05, "b": 1.0}))
    assert s["cases"]["a"]["needed"] == "faster" and s["cases"]["b"]["needed"] == "not shown"
    assert s["overall"] == "faster"
    assert abs(s["cases"]["a"]["all_over_needed_median"] - 1.05) < 0.01
    assert s["cases"]["a"]["covered_share"] == 1.0
    s = ab.summarize(_run({"a": 1.05, "b": 0.95}))
    assert s["cases"]["b"]["needed"] == "slower" and s["overall"] == "slower"   # slower anywhere: not faster
    assert ab.summarize(_run({"a": 1.0, "b": 1.0}))["overall"] == "not shown"
    assert ab.summarize({"cases": ["a"], "rounds": []})["overall"] == "no data"


def test_verdict_names_the_two_values_of_any_knob():
    out = _run({"a": 0.95})
    for rnd in out["rounds"]:   # the same readings under another knob's values
        for x in rnd:
            x["variant"] = {"all": "tid", "needed": "elect"}[x["variant"]]
    out["values"] = ["tid", "elect"]
    s = ab.summarize(out)
    assert s["cases"]["a"]["elect"] == "slower" == s["cases"]["a"]["verdict"] and s["overall"] == "slower"
    assert abs(s["cases"]["a"]["tid_over_elect_median"] - 0.95) < 0.01 and s["values"] == ["tid", "elect"]
    assert ab.order(("tid", "elect")) == ("tid", "elect", "elect", "tid")
    assert ab.knob_env("TMA_ELECT") == "KERNELC_TMA_ELECT" == ab.knob_env("KERNELC_TMA_ELECT")


def _request_cases(var):
    path = os.path.join(ROOT, "bench", "experiments", "tutorial_gaps", "request_s26_knob_ab.sh")
    line = next(ln for ln in open(path) if ln.startswith(var + '="'))
    return line.split('"')[1].split()


def test_the_requests_cases_name_one_compile_job_each():
    """Each case of next session's request is held to one config that commit_compare's jobs know (the CPU check
    compiles exactly the kernels the case times)."""
    want = {"m03": {"matmul_kernel"}, "g08": {"grouped_matmul_kernel"}, "b06": {"_attn_bwd", "_attn_bwd_preprocess"}}
    reuse = _request_cases("REUSE_CASES")
    assert {c.split(":")[0] for c in reuse} == {"m03", "g08", "b06", "p09"}
    for case in reuse:
        fns = {j["fn"] for j in ab.cpu_jobs(case)}
        kind, *a = case.split(":")
        assert fns == (want[kind] if kind != "p09" else {ab.P09_KERNELS[a[0]]}), case
    elect = _request_cases("ELECT_CASES")
    assert elect
    for case in elect:
        (j,) = ab.cpu_jobs(case)
        assert j["fn"] == "matmul_kernel_descriptor_persistent"
        assert j["cx"]["FLATTEN"] is True and j["cx"]["WARP_SPECIALIZE"] is False
        assert j["cx"]["EPILOGUE_SUBTILE"] is False
    import pytest
    with pytest.raises(ValueError):   # a spec naming no config is an error, not an empty case
        ab.cpu_jobs("m03:512:fp16:BLOCK_SIZE_M=7")


def test_cpu_ptx_sees_what_the_knob_changes_and_what_it_does_not():
    """The CPU check on examples/kernels/matmul.py's matmul_kernel (tutorial 03's signature) at one config: the
    REUSE_SYNC values differ (``needed`` drops the epilogue's wait_all), the TMA_ELECT values do not (no TMA)."""
    import sys
    sys.path.insert(0, ROOT)
    from examples.kernels import matmul
    case = "m03:512:fp16:BLOCK_SIZE_M=64/BLOCK_SIZE_N=32/BLOCK_SIZE_K=32/GROUP_SIZE_M=8/w=2/s=5"
    before = os.environ.get("KERNELC_REUSE_SYNC")
    r = ab.cpu_ptx(None, [case], "KERNELC_REUSE_SYNC", ("all", "needed"), modules={"03": matmul})
    assert os.environ.get("KERNELC_REUSE_SYNC") == before   # the knob is put back
    tot = {v: ab._total(r[case][v]) for v in ("all", "needed")}
    assert tot["all"]["cp.async.wait_all"] > 0 and tot["needed"]["cp.async.wait_all"] == 0
    assert ab.differ({case: tot}, ("all", "needed")) == {case: True}
    r = ab.cpu_ptx(None, [case], "TMA_ELECT", ("tid", "elect"), modules={"03": matmul})
    tot = {v: ab._total(r[case][v]) for v in ("tid", "elect")}
    assert ab.differ({case: tot}, ("tid", "elect")) == {case: False}


def test_each_value_loads_its_own_copy_of_a_tutorial(tmp_path):
    import sys
    sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "tutorial_gaps"))
    import host_gpu_split as hg
    (tmp_path / "t.py").write_text("X = []\n")
    orig = hg._load
    with ab._tagged_loads(hg, "ab_a"):
        ma = hg._load(str(tmp_path / "t.py"), "tut", stop_at="never")
    with ab._tagged_loads(hg, "ab_b"):
        mb = hg._load(str(tmp_path / "t.py"), "tut", stop_at="never")
    assert hg._load is orig
    assert (ma.__name__, mb.__name__) == ("tut_ab_a", "tut_ab_b") and ma.X is not mb.X
