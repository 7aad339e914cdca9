"""The focused re-measurement harness of issue 20 (bench/experiments/tutorial_gaps/host_gpu_split.py and its summary):
holding an autotuner to one config by a spec, the tutorial loader's skipped range, and the summary's verdict over
process pairings. CPU only; nothing here launches a kernel."""
import importlib.util
import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GAPS = os.path.join(ROOT, "bench", "experiments", "tutorial_gaps")


def _module(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(GAPS, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


hgs = _module("host_gpu_split")
summary = _module("host_gpu_summary")


class _Tuner:
    def __init__(self, configs):
        self.configs = list(configs)
        self.cache = {}


def _configs():
    from kernelc import Config
    return [Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 32}, num_warps=4, num_stages=4),
            Config({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128}, num_warps=4, num_stages=4),
            Config({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128}, num_warps=8, num_stages=3)]


def test_restrict_spec_holds_one_config_and_keeps_each_specs_picks():
    t = _Tuner(_configs())
    spec = "BLOCK_SIZE_M=64/BLOCK_SIZE_N=128/w=8/s=3"
    kept = hgs._restrict_spec(t, spec)
    assert kept == [t.configs[0]] and hgs.config_spec(kept[0]) == spec
    t.cache["key"] = kept[0]  # a pick made while held
    hgs._restrict_spec(t, "tuned")
    assert len(t.configs) == 3 and "key" not in t.cache  # the tuned case does not see the held case's pick
    t.cache["key"] = "tuned pick"
    hgs._restrict_spec(t, spec)
    assert t.cache["key"] is kept[0]
    hgs._restrict_spec(t, "tuned")
    assert t.cache["key"] == "tuned pick"  # tuned once per process, not again after every held case
    with pytest.raises(ValueError):
        hgs._restrict_spec(t, "BLOCK_SIZE_M=64/BLOCK_SIZE_N=128")  # names two configs
    with pytest.raises(ValueError):
        hgs._restrict_spec(t, "BLOCK_SIZE_M=256/w=4/s=4")  # names none


def test_load_skips_a_range_and_keeps_line_numbers(tmp_path):
    p = tmp_path / "tut.py"
    p.write_text("a = 1\ncheck = 1 / 0\nmore = 2\ndef f():\n    raise ValueError('x')\nbench()\n")
    mod = hgs._load(str(p), "t06s24_test_skip", stop_at="bench()", skip=("check = ", "def f"))
    assert mod.a == 1 and not hasattr(mod, "more")
    with pytest.raises(ValueError) as e:
        mod.f()
    assert e.traceback[-1].lineno + 1 == 5  # the file's own line number


def _proc(tmp_path, i, impl, ms, busy):
    rows = [{"case": "c", "repeat": r, "ms": ms, "busy_ms": busy, "host_us": 20.0, "covered": True} for r in range(2)]
    (tmp_path / f"p{i}.{impl}.json").write_text(json.dumps({"impl": impl, "rows": rows}))


@pytest.mark.parametrize("k_ms,want", [((1.00, 1.02), "at or above 0.95"), ((1.10, 1.12), "below 0.95"),
                                       ((1.00, 1.10), "undecided")])
def test_summary_verdict_uses_every_process_pairing(tmp_path, k_ms, want):
    _proc(tmp_path, 1, "kernelc", k_ms[0], 1.0)
    _proc(tmp_path, 2, "triton", 1.0, 1.0)
    _proc(tmp_path, 3, "triton", 1.0, 1.0)
    _proc(tmp_path, 4, "kernelc", k_ms[1], 1.0)
    (row,) = summary.summarise([str(p) for p in tmp_path.glob("*.json")])
    lo, hi = row["range"]["ms"]
    assert lo == pytest.approx(1.0 / max(k_ms)) and hi == pytest.approx(1.0 / min(k_ms))
    assert row["verdict"]["ms"] == want and row["verdict"]["busy_ms"] == "at or above 0.95"


def test_sweeps_rank_each_tuners_pick_by_gpu_time(tmp_path):
    d = {"impl": "kernelc", "rows": [],
         "tunings": {"m03:256:fp8:tuned": {"A": 0.010, "B": 0.012, "C": float("inf")}},
         "sweep": {"m03:256:fp8": {"A": {"busy_ms": 0.006, "ms": 0.01, "host_us": 9.0},
                                   "B": {"busy_ms": 0.005, "ms": 0.012, "host_us": 9.0}, "C": {"error": "smem"}}}}
    p = tmp_path / "p1.kernelc.json"
    p.write_text(json.dumps(d))
    s = summary.sweeps([str(p)])["m03:256:fp8"]["kernelc"]
    assert s["picks"] == ["A"] and s["gpu_rank"] == ["B", "A"] and s["pick_ranks"] == [2]


def test_status_table_names_and_covers_the_s24_cases():
    st = _module("status_table")
    assert st._case_tutorial("m03:256:fp8:tuned") == "03-matrix-multiplication"
    assert st._case_tutorial("l05:15872:triton") == "05-layer-norm"
    assert "fp8 M=N=K=256" in st._case_name("m03:256:fp8:tuned")
    assert "held to" in st._case_name("g08:128:triton:BLOCK_SIZE_M=128/w=4/s=3")
    focused = [{"case": "m03:256:fp8:tuned", "ratio": 1.0}, {"case": "l05:15872:triton", "ratio": 1.0}]
    t = {"tutorial": "03-matrix-multiplication", "table": "matmul-performance-fp8", "column": "Triton (TFLOPS)"}
    assert st._covering(t, st._xkey([256.0, 256.0, 256.0]), focused, [])["case"] == "m03:256:fp8:tuned"
    t = {"tutorial": "05-layer-norm", "table": "layer-norm-backward", "column": "Triton (GB/s)"}
    assert st._covering(t, st._xkey([15872.0]), focused, [])["case"] == "l05:15872:triton"
    t = {"tutorial": "08-grouped-gemm", "table": "group-gemm-performance", "column": "Triton + TMA (runtime(ms))"}
    assert st._covering(t, st._xkey([128.0]), focused, []) is None


def test_sweeps_break_a_triton_median_tie_as_triton_does(tmp_path):
    d = {"impl": "triton", "rows": [], "sweep": {},
         "tunings": {"m03:256:fp8:tuned": {"A": [0.0065, 0.0064, 0.0070], "B": [0.0065, 0.0062, 0.0071]}}}
    p = tmp_path / "p2.triton.json"
    p.write_text(json.dumps(d))
    assert summary.sweeps([str(p)])["m03:256:fp8"]["triton"]["picks"] == ["B"]
