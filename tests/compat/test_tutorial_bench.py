"""bench/triton_tutorials.py's comparison of the two runs' tables and first calls (no GPU needed)."""
import math
import os

from bench.triton_tutorials import compare, first_calls


def _run(rows, ylabel="GB/s", calls=()):
    return {"benchmarks": [{"plot_name": "p", "x_names": ["N"], "ylabel": ylabel,
                            "columns": ["N", "Triton (x)", "Torch (x)"], "rows": rows}],
            "first_calls": list(calls)}


def test_ratios_higher_is_better_and_time_columns_inverted():
    tri = _run([[1, 100.0, 50.0], [2, 200.0, 50.0]])
    kc = _run([[1, 110.0, 50.0], [2, 180.0, 50.0]])
    col = compare(tri, kc)[0]["columns"]["Triton (x)"]
    assert col["ratio"] == [1.1, 0.9] and col["min_ratio"] == 0.9
    assert math.isclose(col["geomean_ratio"], math.sqrt(1.1 * 0.9))
    t = compare(_run([[1, 2.0, 1.0]], "runtime(ms)"), _run([[1, 1.0, 1.0]], "runtime(ms)"))[0]
    assert t["columns"]["Triton (x)"]["ratio"] == [2.0]  # half the time: twice as good


def test_missing_table_and_first_calls():
    tri = _run([[1, 1.0, 1.0]], calls=[{"kernel": "k", "depth": 0, "first_call_s": 2.0},
                                      {"kernel": "k", "depth": 1, "first_call_s": 1.5}])
    kc = {"benchmarks": [], "first_calls": [{"kernel": "k", "depth": 0, "first_call_s": 1.0}]}
    assert compare(tri, kc)[0]["error"] == "kernelc produced no table of this name"
    assert first_calls(tri, kc) == [{"kernel": "k", "triton_s": 2.0, "kernelc_s": 1.0, "kernelc_over_triton": 0.5}]


def test_merge_keeps_best_per_point_and_spread():
    from bench.triton_tutorials import merge_runs
    a = dict(_run([[1, 100.0, 50.0], [2, 150.0, 40.0]], calls=[{"kernel": "k", "depth": 0, "first_call_s": 3.0}]),
             rc=0, seconds=1.0)
    b = dict(_run([[1, 80.0, 55.0], [2, 200.0, 20.0]], calls=[{"kernel": "k", "depth": 0, "first_call_s": 1.0}]),
             rc=0, seconds=2.0)
    c = dict(_run([[1, 90.0, 45.0], [2, 100.0, 30.0]], calls=[{"kernel": "k", "depth": 0, "first_call_s": 2.0}]),
             rc=0, seconds=3.0)
    m = merge_runs([a, b, c])
    assert m["benchmarks"][0]["rows"] == [[1, 100.0, 55.0], [2, 200.0, 40.0]]
    assert m["benchmarks"][0]["spread"]["Triton (x)"] == [100.0 / 80.0, 2.0]
    assert m["first_calls"] == [{"kernel": "k", "depth": 0, "first_call_s": 2.0}]  # the median
    assert m["rc"] == 0 and m["repeats"] == 3 and m["seconds"] == 6.0
    t = merge_runs([dict(_run([[1, 2.0, 1.0]], "runtime(ms)"), rc=0), dict(_run([[1, 3.0, 0.5]], "runtime(ms)"), rc=1)])
    assert t["benchmarks"][0]["rows"] == [[1, 2.0, 0.5]] and t["rc"] == 1  # times: the least; status: the worst


def test_noise_floor_from_control_columns():
    from bench.triton_tutorials import noise_floor
    tri = _run([[1, 100.0, 100.0], [2, 100.0, 100.0]])
    kc = _run([[1, 95.0, 110.0], [2, 70.0, 100.0]])
    t = noise_floor(compare(tri, kc)[0])
    assert t["noise_floor"]["control_columns"] == ["Torch (x)"]
    assert t["noise_floor"]["per_point"] == [1.1, 1.0] and t["noise_floor"]["table"] == 1.1
    col = t["columns"]["Triton (x)"]
    assert col["verdict"] == ["within noise", "slower"]  # 0.95 is inside x1.1; 0.70 is outside x1.0
    assert col["geomean_verdict"] == "slower"  # sqrt(0.95 * 0.7) = 0.815 < 1/1.1
    assert "verdict" not in t["columns"]["Torch (x)"]


def test_points_spread_and_tree_layout(tmp_path):
    import os
    from bench.triton_tutorials import LIBDEVICE_IN_TREE, stage_tutorials
    from bench.tutorial_runner import pick_points
    xs = list(range(2, 100))
    assert pick_points(xs, 4) == [2, 3, 4, 5]
    assert pick_points(xs, 4, spread=True) == [2, 34, 67, 99]
    assert pick_points(xs, 0, spread=True) == xs and pick_points(xs[:3], 5, spread=True) == xs[:3]
    (tmp_path / "07-extern-functions.py").write_text("print('hi')\n")
    lib = tmp_path / "libdevice.10.bc"
    lib.write_bytes(b"BC")
    tut = stage_tutorials(str(tmp_path), str(lib))
    assert os.path.isfile(os.path.join(tut, "07-extern-functions.py"))
    # 07 reads Path(__file__).parent.parent.parent / third_party/nvidia/backend/lib/libdevice.10.bc
    assert open(os.path.join(tut, "..", "..", LIBDEVICE_IN_TREE), "rb").read() == b"BC"


def test_main_alternates_and_writes_floor(tmp_path, monkeypatch):
    import json
    import bench.triton_tutorials as tt
    src = tmp_path / "src"
    src.mkdir()
    (src / "01-vector-add.py").write_text("")
    calls = []

    def fake_run_one(path, impl, points, timeout, site, spread=False, warm=None, **kw):
        calls.append(impl)
        v = 100.0 if impl == "triton" else 90.0
        return dict(_run([[1, v, 100.0 + len(calls)]]), rc=0, seconds=0.1)
    monkeypatch.setattr(tt, "run_one", fake_run_one)
    monkeypatch.setattr(tt, "environment", lambda: {})  # (imports torch: seconds, and not under test)
    out = tmp_path / "r.json"
    assert tt.main(["--tutorials", str(src), "--only", "01", "--repeats", "3", "--libdevice", str(src / "01-vector-add.py"),
                    "--out", str(out)]) == 0
    assert calls == ["triton", "kernelc", "kernelc", "triton", "triton", "kernelc"]
    rep = json.load(open(out))
    t = rep["tutorials"]["01-vector-add"]["tables"][0]
    assert rep["repeats"] == 3 and rep["tutorials"]["01-vector-add"]["kernelc"]["repeats"] == 3
    # Torch best: triton runs 101/104/105 -> 105, kernelc runs 102/103/106 -> 106
    assert t["noise_floor"]["table"] == 106.0 / 105.0
    assert t["columns"]["Triton (x)"]["geomean_verdict"] == "slower"


def _hatchet(path, kernel_ns, blas_ns):
    import json
    node = lambda name, ns, n, kids=(): {"frame": {"name": name, "type": "function"},
                                         "metrics": {"time (ns)": ns, "count": n} if ns else {}, "children": list(kids)}
    root = {"frame": {"name": "ROOT"}, "metrics": {}, "children": [
        node("cuBLAS [M=8, N=8, K=8]", 0, 0, [node("gemm_sm90", blas_ns, 10)]),
        node("matmul_kernel [M=8, N=8, K=8]", 0, 0, [node("matmul_kernel", kernel_ns, 10)]),
        node("only_here", 5, 1)]}
    path.write_text(json.dumps([root, {"CUDA": {}}]))


def test_profiles_compared_per_scope_with_blas_as_control(tmp_path):
    from bench.triton_tutorials import compare_profiles, merge_runs, noise_floor
    from bench.tutorial_runner import read_hatchet
    _hatchet(tmp_path / "t.hatchet", kernel_ns=1000.0, blas_ns=2000.0)
    _hatchet(tmp_path / "k1.hatchet", kernel_ns=1250.0, blas_ns=2100.0)
    _hatchet(tmp_path / "k2.hatchet", kernel_ns=1100.0, blas_ns=2200.0)
    t = read_hatchet(str(tmp_path / "t.hatchet"))
    m = t["matmul_kernel [M=8, N=8, K=8]"]
    assert (m["time_ns"], m["count"], m["tflops"]) == (1000.0, 10.0, None)  # summed over the subtree; no flops
    tri = {"profiles": {"matmul.hatchet": t}}
    kc = merge_runs([{"benchmarks": [], "first_calls": [], "rc": 0,
                      "profiles": {"matmul.hatchet": read_hatchet(str(tmp_path / f))}} for f in ("k1.hatchet", "k2.hatchet")])
    (entry,) = compare_profiles(tri, kc)
    noise_floor(entry)
    col = entry["columns"]["matmul_kernel [M=8, N=8, K=8]"]
    # best over the repeats: 110 ns a launch against Triton's 100
    assert math.isclose(col["ratio"][0], 100 / 110) and math.isclose(col["kernelc"][0], 110e-6)
    assert entry["noise_floor"]["control_columns"] == ["cuBLAS [M=8, N=8, K=8]"]
    assert math.isclose(entry["noise_floor"]["table"], 210 / 200)  # cuBLAS: best kernelc-run 2100 vs 2000
    assert col["geomean_verdict"] == "slower"  # 0.909 is below the floor's 1/1.05


def test_tuning_timings_reports_each_candidate_of_the_last_tuning():
    from bench.tutorial_runner import _tuning_timings

    class Tuner:  # Triton's tuners keep per-config lists (quantiles), kernelc's a float
        pass
    a, b, c = Tuner(), Tuner(), Tuner()
    a.__name__, a.configs_timings = "ka", {"BLOCK: 64": 0.02, "BLOCK: 128": float("inf")}
    b.base_fn = type("F", (), {"__name__": "kb"})()
    b.configs_timings = {"BLOCK: 32": (0.5, 0.4, 0.6)}
    c.__name__ = "never_tuned"
    out = _tuning_timings([a, b, c])
    assert out == {"ka": {"BLOCK: 64": 0.02, "BLOCK: 128": float("inf")}, "kb": {"BLOCK: 32": [0.5, 0.4, 0.6]}}


def test_first_call_of_a_warmed_up_kernel_counts_its_warmup_and_load():
    """Tutorial 02 compiles with ``warmup``, loads with ``_init_handles`` and launches the compiled object:
    its first call is the sum of those, the same accounting for both runtimes; later calls add nothing."""
    import time
    from bench import tutorial_runner
    from bench.triton_tutorials import _outer_first_calls

    class Compiled:
        name = "softmax_kernel"

        def _init_handles(self):
            time.sleep(0.02)

        def __getitem__(self, grid):
            return lambda *a: None

    class JIT:
        __name__ = "softmax_kernel"

        def warmup(self, *a, **k):  # both runtimes return the object they compiled the first time
            if not hasattr(self, "k"):
                time.sleep(0.05)
                self.k = Compiled()
            return self.k

    rec = []
    tutorial_runner._wrap_first_calls([Compiled], rec, direct=[(JIT, "warmup"), (Compiled, "_init_handles")])
    fn = JIT()
    for _ in range(3):  # the tutorial warms up, loads and launches on every call
        k = fn.warmup(1, grid=(1,))
        k._init_handles()
        k[(4, 1, 1)](1)
    kinds = sorted(r["kind"] for r in rec)
    assert kinds == ["Compiled", "Compiled._init_handles", "JIT.warmup"]
    assert all(r["depth"] == 0 and r["kernel"] == "softmax_kernel" for r in rec)
    total = _outer_first_calls({"first_calls": rec})["softmax_kernel"]
    assert 0.07 <= total < 0.5


def test_per_tutorial_points_and_x_values():
    import bench.triton_tutorials as tt
    from bench.tutorial_runner import keep_x_values
    per = tt.parse_points(["06=x:2048,16384", "03=2"])
    assert tt.points_for("06-fused-attention", 4, per) == (None, "2048,16384")
    assert tt.points_for("03-matrix-multiplication", 4, per) == (2, None)
    assert tt.points_for("01-vector-add", 4, per) == (4, None)
    assert keep_x_values([1024, 2048, 4096, 8192, 16384], ["2048", "16384"]) == [2048, 16384]
    assert keep_x_values([128, 256], ["2048"]) == [128]  # a table without them keeps its first
    assert tt._prefixed(tt.TUTORIALS, "06,09") == ["06-fused-attention", "09-persistent-matmul"]
    assert tt._prefixed(tt.TUTORIALS, "all") == tt.TUTORIALS and tt._prefixed(tt.TUTORIALS, None) == []


def test_suite_warms_06_and_09_at_once_and_times_06s_first_call_cold(tmp_path, monkeypatch):
    import json
    import bench.triton_tutorials as tt
    src = tmp_path / "src"
    src.mkdir()
    for n in tt.TUTORIALS:
        (src / f"{n}.py").write_text("")
    warmed, ran, pts = [], [], {}

    def fake_warm(path, impl, cache, points, spread, jobs, timeout, site, tutorial_args=(), x_values=None):
        warmed.append((os.path.basename(path)[:2], impl, x_values))
        return {"jobs": jobs, "rc": [0] * jobs, "compile": {}, "wall_s": 1.0}

    def fake_run_one(path, impl, points, timeout, site, spread=False, warm=None, x_values=None,
                     stop_after_first_calls=None, **kw):
        ran.append((os.path.basename(path)[:2], impl, bool(warm), x_values, stop_after_first_calls))
        pts[os.path.basename(path)[:2]] = points
        s = 10.0 if stop_after_first_calls else 1.0
        return dict(_run([[1, 100.0, 100.0]], calls=[{"kernel": "k", "depth": 0, "first_call_s": s}]),
                    rc=0, seconds=0.1)
    monkeypatch.setattr(tt, "warm_caches", fake_warm)
    monkeypatch.setattr(tt, "run_one", fake_run_one)
    monkeypatch.setattr(tt, "environment", lambda: {})
    out = tmp_path / "r.json"
    assert tt.main(["--suite", "--tutorials", str(src), "--libdevice", str(src / "01-vector-add.py"),
                    "--out", str(out)]) == 0
    assert sorted(warmed) == [("06", "kernelc", "2048"), ("06", "triton", "2048"), ("09", "kernelc", None),
                              ("09", "triton", None)]
    assert [r[0] for r in ran] == ["01", "01", "02", "02", "03", "03", "04", "04", "05", "05", "07", "07", "08", "08",
                                   "06", "06", "09", "09", "06", "06"]  # 06's runs from empty caches last
    assert [r[1] for r in ran[:4]] == ["triton", "kernelc", "kernelc", "triton"]  # alternating over tutorials
    assert ran[14:16] == [("06", "kernelc", True, "2048", None), ("06", "triton", True, "2048", None)]
    assert ran[18:] == [("06", "triton", False, "2048", 1), ("06", "kernelc", False, "2048", 1)]
    assert pts["03"] == pts["08"] == 2 and pts["01"] == 4 and ran[4][3] is None  # 03 and 08 at 2 points
    rep = json.load(open(out))
    t06 = rep["tutorials"]["06-fused-attention"]
    assert t06["caches"] == "warm" and rep["tutorials"]["01-vector-add"]["caches"] == "cold"
    assert t06["first_calls_cold"][0]["triton_s"] == 10.0 and t06["first_calls"][0]["triton_s"] == 1.0


def test_deadline_skips_what_does_not_fit(tmp_path, monkeypatch):
    import json
    import bench.triton_tutorials as tt
    src = tmp_path / "src"
    src.mkdir()
    for n in ("01-vector-add", "02-fused-softmax"):
        (src / f"{n}.py").write_text("")
    clock = [0.0]
    monkeypatch.setattr(tt.time, "perf_counter", lambda: clock[0])

    def fake_run_one(path, impl, points, timeout, site, spread=False, warm=None, **kw):
        clock[0] += 30.0  # each run takes 30 s
        return dict(_run([[1, 100.0, 100.0]]), rc=0, seconds=30.0)
    monkeypatch.setattr(tt, "run_one", fake_run_one)
    monkeypatch.setattr(tt, "environment", lambda: {})
    out = tmp_path / "r.json"
    assert tt.main(["--tutorials", str(src), "--only", "01,02", "--repeats", "1", "--deadline", "70",
                    "--min-run", "15", "--libdevice", str(src / "01-vector-add.py"), "--out", str(out)]) == 0
    rep = json.load(open(out))
    assert "passed" in rep["tutorials"]["01-vector-add"]
    assert rep["tutorials"]["02-fused-softmax"]["skipped"] == "deadline"


def test_runner_stops_after_the_first_calls():
    import pytest
    from bench.tutorial_runner import StopAfterFirstCalls, _wrap_first_calls

    class K:
        def __init__(self, name):
            self.__name__ = name

        def __getitem__(self, grid):
            return lambda *a: None
    rec = []
    _wrap_first_calls([K], rec, stop_after=2)
    a, b = K("a"), K("b")
    a[1]()
    a[1]()  # not a first call
    with pytest.raises(StopAfterFirstCalls):
        b[1]()  # the second first call: stop
    assert [(r["kernel"], r["depth"]) for r in rec] == [("a", 0), ("b", 0)]


def test_a_direct_method_is_timed_where_a_base_class_defines_it():
    """Triton 3.6's JITFunction inherits ``warmup`` from KernelInterface: its first call (the compile) is timed too."""
    from bench.tutorial_runner import _wrap_first_calls

    class Base:
        def warmup(self, *a, **kw):
            return "compiled"

    class Fn(Base):
        __name__ = "softmax_kernel"
    rec = []
    _wrap_first_calls([], rec, direct=[(Fn, "warmup")])
    f = Fn()
    assert f.warmup(1, grid=(1,)) == "compiled" and f.warmup(1, grid=(1,)) == "compiled"
    assert [(r["kernel"], r["kind"], r["depth"]) for r in rec] == [("softmax_kernel", "Base.warmup", 0)]


def test_gc_log_names_the_collections_inside_a_tables_do_bench_and_skips_an_autotuners():
    import gc
    import types
    from bench.tutorial_runner import GcLog
    tuning = [False]
    testing = types.SimpleNamespace(do_bench=lambda fn, **kw: fn())
    log = GcLog()
    log.install()
    try:
        log.wrap_do_bench(testing, lambda: tuning[0])
        log.LONG_S = 0.0  # every run counts as long here
        log.table = "softmax-performance"
        gc.collect()  # outside do_bench: counted, not named
        testing.do_bench(lambda: None)  # call 0
        testing.do_bench(lambda: gc.collect())  # call 1: a full collection inside the timed function
        tuning[0] = True
        testing.do_bench(lambda: gc.collect())  # an autotuner's: not a table's call
    finally:
        gc.callbacks.remove(log._cb)
    s = log.summary()
    assert [(r["table"], r["call"], r["generation"]) for r in s["in_do_bench"]] == [("softmax-performance", 1, 2)]
    assert s["runs"]["2"]["n"] == 3 and s["max_s"] >= 0


def test_repeats_give_median_ratios_and_a_verdict_over_every_pairing():
    from bench.triton_tutorials import merge_runs
    runs = lambda *vals: merge_runs([dict(_run([[1, v, 1.0]], "runtime(ms)"), rc=0) for v in vals])  # noqa: E731
    col = compare(runs(1.0, 1.0, 1.1), runs(1.0, 1.02, 1.04))[0]["columns"]["Triton (x)"]
    assert col["median_ratio"] == [1.0 / 1.02] and col["repeats"] == [3]
    lo, hi = col["pair_range"][0]
    assert math.isclose(lo, 1.0 / 1.04) and math.isclose(hi, 1.1 / 1.0)
    assert col["pair_verdict"] == ["at or above 0.95"]
    col = compare(runs(1.0, 1.0), runs(1.2, 1.3))[0]["columns"]["Triton (x)"]
    assert col["pair_verdict"] == ["below 0.95"] and col["ratio"] == [1.0 / 1.2]  # the best of each, as before
    col = compare(runs(1.0, 1.0), runs(1.0, 1.2))[0]["columns"]["Triton (x)"]
    assert col["pair_verdict"] == ["undecided"]
