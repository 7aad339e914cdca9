"""bench/bench_memory_bound.py on CPU: each case's inputs have the sizes its name says (a closure over the
reassigned R, C once ran every row kernel at 2048 x 4096), --variant parses, and every kernelc column compiles
into a disk cache of its own (a variant column once timed another column's build)."""
import re

import pytest

from bench import bench_memory_bound as B


def test_cases_make_inputs_of_their_named_sizes(monkeypatch):
    monkeypatch.setattr(B, "SMOKE", True)   # the small sizes, on the CPU
    monkeypatch.setattr(B, "DEV", "cpu")
    checked = 0
    for name, (make, _call, _ref, _nbytes) in B.cases().items():
        m = re.search(r"\b(\d+(?:x\d+)+)\b", name)
        if m is None:
            continue
        dims = tuple(int(d) for d in m.group(1).split("x"))
        assert tuple(make()[0].shape) == dims, name
        checked += 1
    assert checked >= 13


def test_variant_options():
    argv = ["swiglu", "--variant", "bound:KERNELC_NVJITLINK_LAUNCH_BOUND=1", "--variant",
            "auto:KERNELC_ASSEMBLER=auto,KERNELC_TMA=0"]
    assert B.parse_variants(argv) == [("bound", {"KERNELC_NVJITLINK_LAUNCH_BOUND": "1"}),
                                      ("auto", {"KERNELC_ASSEMBLER": "auto", "KERNELC_TMA": "0"})]
    assert argv == ["swiglu"]
    for bad in ("bound", "bound:", ":KERNELC_TMA=0", "x:PATH=/bin"):
        with pytest.raises(SystemExit, match="--variant"):
            B.parse_variants(["--variant", bad])


# -- every kernelc column compiles into a disk cache of its own (the --variant bug of 2026-11-27) ----------------

def _column(kernels):
    """A stand-in for a kernels module after its first calls: ``{name: (regs, cache_key, from_disk)}``."""
    from types import SimpleNamespace as NS
    mod = NS()
    for name, (regs, key, disk) in kernels.items():
        ck = NS(n_regs=regs, cache_key=key, timings={"disk_cache_load": 0.001} if disk else {"total": 1.0})
        setattr(mod, name, NS(arg_names=["x"], _cuda_state={"cache": {("spec",): NS(compiled=ck)}, "compiles": 1}))
    return mod


def test_column_env_gives_each_column_its_own_cache_and_keeps_its_knobs(tmp_path, monkeypatch):
    monkeypatch.delenv("KERNELC_OCCUPANCY_STEP", raising=False)
    a = B.column_env(str(tmp_path), "0")
    b = B.column_env(str(tmp_path), "1", {"KERNELC_OCCUPANCY_STEP": "1"})
    assert a["KERNELC_CACHE_DIR"] != b["KERNELC_CACHE_DIR"] and b["KERNELC_OCCUPANCY_STEP"] == "1"
    assert B.column_options(b)["occupancy_step"] == "all" and B.column_options(a)["occupancy_step"] == "nodots"
    assert "KERNELC_OCCUPANCY_STEP" not in __import__("os").environ   # restored after reading


def test_check_columns_records_what_each_column_built(tmp_path):
    cols = [("kernelc", _column({"k": (70, "key-a", False)}), B.column_env(str(tmp_path), "0")),
            ("kernelc[bound]", _column({"k": (104, "key-b", False)}),
             B.column_env(str(tmp_path), "1", {"KERNELC_NVJITLINK_LAUNCH_BOUND": "1"}))]
    out = B.check_columns(cols)
    assert out == {"kernelc": {"k": {"regs": 70, "cache_key": "key-a", "compiled_here": True}},
                   "kernelc[bound]": {"k": {"regs": 104, "cache_key": "key-b", "compiled_here": True}}}


def test_check_columns_stops_on_a_build_from_disk_or_a_key_shared_across_options(tmp_path):
    env0 = B.column_env(str(tmp_path), "0")
    env_occ = B.column_env(str(tmp_path), "1", {"KERNELC_OCCUPANCY_STEP": "1"})
    with pytest.raises(RuntimeError, match=r"kernelc\[occ\]: k was loaded from the disk cache"):
        B.check_columns([("kernelc[occ]", _column({"k": (104, "key-b", True)}), env_occ)])
    # run 3's kernelc[occ]: the registers and cache key of another column compiled under other options
    with pytest.raises(RuntimeError, match=r"kernelc\[occ\]: k has the cache key of kernelc\[bound\]"):
        B.check_columns([("kernelc[bound]", _column({"k": (104, "key-b", False)}),
                          B.column_env(str(tmp_path), "2", {"KERNELC_NVJITLINK_LAUNCH_BOUND": "1"})),
                         ("kernelc[occ]", _column({"k": (104, "key-b", False)}), env_occ)])
    # the same options (a column that repeats the default): one key is right
    B.check_columns([("kernelc", _column({"k": (70, "key-a", False)}), env0),
                     ("kernelc[again]", _column({"k": (70, "key-a", False)}), B.column_env(str(tmp_path), "3"))])


def test_a_column_never_times_an_entry_left_in_the_ambient_cache(tmp_path, monkeypatch):
    """bench_memory_bound.run() down the CUDA launch path on this CPU machine (compiles for sm_90, launches
    nothing): an entry in KERNELC_CACHE_DIR under a column's key with other registers -- as an older tree or
    another process may leave -- is neither loaded nor timed; the row names it (``ambient_regs``)."""
    import json
    import torch
    import kernelc.runtime.device as dev
    import kernelc.runtime.driver as drv
    import kernelc.runtime.fastpath as fp
    from kernelc.runtime.jit import JITFunction
    ambient = tmp_path / "ambient"
    monkeypatch.setenv("KERNELC_CACHE_DIR", str(ambient))
    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: 0, raising=False)
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda d: 0, raising=False)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(dev, "cuda_available", lambda: True)
    monkeypatch.setattr(drv, "device_properties", lambda device=0: {"major": 9, "minor": 0, "max_shared_optin": 232448,
                                                                    "max_regs_per_block": 65536})

    class Loaded:
        def __init__(self, cubin, name, shared, num_warps, n_regs, device=0, total_shared=None):
            self.name, self.threads, self.shared, self.handle, self.function = name, 32 * num_warps, shared, 0, None
    monkeypatch.setattr(drv, "LoadedFunction", Loaded)
    monkeypatch.setattr(fp, "make_launch", lambda ent, fn, cmask: (lambda *a: None))
    monkeypatch.setattr(JITFunction, "_use_interpreter", lambda self, values: False)
    # the fast path's "is there a GPU" answer is cached per process: restored after this test (a later CPU test
    # would otherwise get generated binders, e.g. compat/test_host_api's warmed launch)
    import kernelc.runtime.jit as jit_mod
    monkeypatch.setattr(jit_mod, "_fast_enabled", None)
    monkeypatch.setattr(B, "SMOKE", True)
    monkeypatch.setattr(B, "DEV", "cpu")
    monkeypatch.setattr(B, "_time", lambda fn: (fn(), 1.0)[1])
    monkeypatch.setattr(B, "triton_twin", lambda name: (_ for _ in ()).throw(RuntimeError("no Triton here")))
    rows = []
    monkeypatch.setattr(B, "write_results", lambda name, r, meta: rows.extend(r))
    variants = [("bound", {"KERNELC_NVJITLINK_LAUNCH_BOUND": "1"})]
    # first, columns that compile into the ambient cache (as every column did before the fix) ...
    own_cache = B.column_env
    monkeypatch.setattr(B, "column_env", lambda root, column, env=None: dict(env or {}))
    B.run(["rms_norm"], 1, variants)
    first = rows.pop()["kernels"]
    # ... whose entries then hold other registers than this tree compiles under their keys
    for col in first.values():
        meta = ambient / col["rms_norm_bwd_kernel"]["cache_key"][:2] / col["rms_norm_bwd_kernel"]["cache_key"] / "meta.json"
        m = json.loads(meta.read_text())
        m["n_regs"] = 200
        meta.write_text(json.dumps(m))
    monkeypatch.setattr(B, "column_env", own_cache)   # the bench as it is
    B.run(["rms_norm"], 1, variants)
    row = rows.pop()
    assert "error" not in row, row
    for name, col in row["kernels"].items():
        k = col["rms_norm_bwd_kernel"]
        assert k["compiled_here"] and k["regs"] == first[name]["rms_norm_bwd_kernel"]["regs"] != 200, (name, k)
        assert k["cache_key"] == first[name]["rms_norm_bwd_kernel"]["cache_key"] and k["ambient_regs"] == 200
    assert row["kernels"]["kernelc"]["rms_norm_bwd_kernel"]["cache_key"] != \
        row["kernels"]["kernelc[bound]"]["rms_norm_bwd_kernel"]["cache_key"]


def test_a_ratio_is_called_only_outside_the_control_columns_spread():
    from bench.bench_memory_bound import verdict
    assert verdict(1.004, 0.995) == "within noise"      # the control moved 0.5%: a 0.4% ratio says nothing
    assert verdict(0.985, 1.003) == "slower"
    assert verdict(1.015, 0.997) == "faster"
    assert verdict(0.997, 1.004) == "within noise"


def test_the_rounds_must_agree_for_a_verdict():
    """H10b's per-round times (ms): transpose slower than the control in all 9 rounds, rms_norm bwd in 4 of 9."""
    from bench.bench_memory_bound import sign_p, verdict
    assert sign_p(9, 0) == 2 / 512 and sign_p(0, 8) == 2 / 256 and sign_p(4, 5) == 1.0
    assert abs(sign_p(8, 1) - 20 / 512) < 1e-12 and sign_p(7, 2) > 0.05
    tr_k = [0.188736, 0.189104, 0.189056, 0.1888, 0.189184, 0.189056, 0.1888, 0.1888, 0.1888]
    tr_c = [0.187712, 0.187648, 0.187952, 0.188, 0.1879, 0.187968, 0.1879, 0.1879, 0.187648]
    assert verdict(0.9956, 1.0003, tr_k, tr_c) == "slower"
    rms_k = [1.0, 0.99, 1.01, 1.0, 1.02, 1.0, 0.99, 1.02, 0.99]          # 4 rounds slower, 5 faster
    rms_c = [0.99, 1.0, 1.0, 1.01, 1.0, 1.01, 0.98, 1.0, 1.0]
    assert verdict(0.9952, 0.9994, rms_k, rms_c) == "within noise"
    assert verdict(0.9952, 0.9994, rms_k[:5], rms_c[:5]) == "slower"     # too few rounds: the medians decide
    # a median that says faster while the rounds say slower: no verdict
    assert verdict(1.01, 1.0, [1.0] * 8 + [0.5], [0.9] * 9) == "within noise"


def test_paired_ratio_interval_from_the_rounds():
    from bench.bench_memory_bound import paired_ratio_ci
    # x 1% slower than Triton in every round while all columns drift together by 3%: drift cancels in the pairs
    tri = [1.00, 1.03, 0.99, 1.02, 1.01]
    x = [t * 1.01 for t in tri]
    ratio, lo, hi = paired_ratio_ci(x, tri, tri)
    assert abs(ratio - 1 / 1.01) < 1e-9 and abs(lo - ratio) < 1e-9 and abs(hi - ratio) < 1e-9
    # scatter of +-1% around parity over 6 rounds: an interval that holds 1 and is wider than 0.5%
    x = [t * f for t, f in zip(tri + [1.0], [1.01, 0.99, 1.01, 0.99, 1.0, 1.0])]
    ratio, lo, hi = paired_ratio_ci(x, tri + [1.0])
    assert lo < 1 < hi and hi - lo > 0.005
    assert paired_ratio_ci([1.0, 1.0], [1.0, 1.0]) is None


def test_interleaved_round_cancels_a_level_shared_by_the_columns(monkeypatch):
    """Repetitions that jump between two levels 0.6% apart, the same for every column in a repetition (what an
    H200 did between do_bench calls): the paired per-repetition log ratio sees none of it. Triton against its
    control reads exactly 1 (the A/A); a column 0.3% slower than Triton reads 0.3% whatever the mix of levels;
    the reference time of a repetition is the mean of Triton's two columns."""
    import math
    from bench import interleaved as I
    levels = [1.0, 1.006, 1.006, 1.0, 1.006, 1.0, 1.0, 1.0, 1.006]
    fake = {"triton": [0.1 * v for v in levels], B.CONTROL: [0.1 * v for v in levels],
            "kernelc": [0.1003 * v for v in levels]}
    monkeypatch.setattr(I, "interleaved", lambda fns: {n: fake[n] for n in fns})
    rd = B.interleaved_round({n: None for n in ("kernelc", "triton", B.CONTROL)}, B.CONTROL)
    assert rd["n"] == len(levels)
    assert rd["log"][B.CONTROL] == 0.0 and rd["mlog"][B.CONTROL] == 0.0
    assert math.exp(rd["log"]["kernelc"]) == pytest.approx(1 / 1.003, rel=1e-9)
    assert math.exp(rd["mlog"]["kernelc"]) == pytest.approx(1 / 1.003, rel=1e-9)
    assert rd["ms"]["triton"] == pytest.approx(0.1, rel=1e-9)   # the median of the mixture: more low than high
    assert "triton" not in rd["log"]
    # across rounds: the interval of identical per-round ratios has no width
    ci = B.log_ratio_ci([rd["log"]["kernelc"]] * 4)
    assert ci[1] == pytest.approx(ci[0]) == pytest.approx(ci[2]) == pytest.approx(1 / 1.003)
    assert B.log_ratio_ci([0.0, 0.0]) is None



def test_median_interval_drops_one_disturbed_round_per_side():
    """Nine rounds at -0.5% but one where everything ran 20% slow and the ratio moved by +20%: the t interval
    spans the outlier, the median's order-statistic interval (2nd to 8th of 9, 96% coverage) does not."""
    import math
    logs = [math.log(0.995)] * 4 + [math.log(0.9948), math.log(0.9952)] + [math.log(0.995)] * 2 + [math.log(1.2)]
    med, lo, hi = B.median_ci(logs)
    assert med == pytest.approx(0.995) and lo == pytest.approx(0.995) and hi == pytest.approx(0.9952)
    t = B.log_ratio_ci(logs)
    assert t[2] > 1.0   # the mean's interval is pulled over 1 by the one round
    assert B.median_ci(logs[:5]) is None


def test_the_rounds_figure_is_a_mean_not_a_median_of_a_mixture():
    """R1b's softmax fwd: each launch lands on one of two levels (here 67 and 68.7 us), independently per column.
    Triton lands low in 3 of 5 repetitions, kernelc in 2 of 5 but its low level is 1.5% lower: the median of the
    per-repetition ratios and the mean disagree; the mean is the total time's ratio. A 2% trim leaves out one wild
    repetition in fifty."""
    import math
    from bench.interleaved import paired_log_ratio, paired_log_ratio_mean
    t = [67.0, 68.7, 67.0, 68.7, 67.0] * 10
    k = [68.7, 66.0, 68.7, 68.7, 66.0] * 10
    want = sum(math.log(a / b) for a, b in zip(t, k)) / len(t)
    assert paired_log_ratio_mean(t, k, trim=0) == pytest.approx(want)
    assert paired_log_ratio(t, k) == 0.0 and want > 0.0009   # the median says equal, the mean 0.1%
    wild = list(k)
    wild[7] = 200.0
    assert abs(paired_log_ratio_mean(t, wild) - want) < 0.005 < abs(paired_log_ratio_mean(t, wild, trim=0) - want)
