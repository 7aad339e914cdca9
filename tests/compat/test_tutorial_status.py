"""Issue 20's status table (bench/experiments/tutorial_gaps/status_table.py) reads the tables the tutorials print
(``Mark.run(print_data=True)``) from processes alternated between the runtimes; these check that reading."""
import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location(
    "status_table", os.path.join(ROOT, "bench", "experiments", "tutorial_gaps", "status_table.py"))
status_table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(status_table)

# as tutorial 08 prints under each runtime (pandas; Triton's run prints float x values)
KERNELC_LOG = """some warning
group-gemm-performance:
      N  cuBLAS (runtime(ms))  Triton (runtime(ms))  Triton + TMA (runtime(ms))
0   128              {c}              {t}                    0.009216
1   256              0.017952              0.009216                    0.010368
kernelc autotune grouped_matmul_tma_kernel: [####   ] 4/16
vector-add-performance:
       size  Triton (GB/s)  Torch (GB/s)
0    4096.0      8.000000      9.000000
"""
TRITON_LOG = """group-gemm-performance:
        N  cuBLAS (runtime(ms))  Triton (runtime(ms))  Triton + TMA (runtime(ms))
0   128.0              0.016000              0.008000                    0.009600
1   256.0              0.018000              0.009000                    0.010800
vector-add-performance:
       size  Triton (GB/s)  Torch (GB/s)
0    4096.0      10.000000      9.000000
"""


def test_printed_tables_reads_names_units_and_rows(tmp_path):
    p = tmp_path / "p1.kernelc.log"
    p.write_text(KERNELC_LOG.format(c="0.028544", t="0.008640"))
    t = status_table.printed_tables(str(p))
    assert set(t) == {"group-gemm-performance", "vector-add-performance"}
    g = t["group-gemm-performance"]
    assert g["columns"] == ["cuBLAS (runtime(ms))", "Triton (runtime(ms))", "Triton + TMA (runtime(ms))"]
    assert g["rows"] == [[128.0, 0.028544, 0.00864, 0.009216], [256.0, 0.017952, 0.009216, 0.010368]]
    assert t["vector-add-performance"]["rows"] == [[4096.0, 8.0, 9.0]]


def test_alternated_tables_take_medians_and_orient_ratios(tmp_path):
    # two kernelc processes (one slow first point), two Triton ones: medians per runtime, then the ratio oriented so
    # that above 1 means kernelc is faster (time columns: Triton's time over kernelc's; GB/s: kernelc over Triton)
    (tmp_path / "p1.kernelc.log").write_text(KERNELC_LOG.format(c="0.030000", t="0.008000"))
    (tmp_path / "p4.kernelc.log").write_text(KERNELC_LOG.format(c="0.016000", t="0.008400"))
    (tmp_path / "p2.triton.log").write_text(TRITON_LOG)
    (tmp_path / "p3.triton.log").write_text(TRITON_LOG.replace("0.008000", "0.008400"))
    rows = {(r["table"], r["column"]): r for r in status_table.alternated_tables(str(tmp_path), "call", "08")}
    tri = rows[("group-gemm-performance", "Triton (runtime(ms))")]
    assert tri["x"] == [128.0, 256.0] and not tri["control"]
    assert abs(tri["ratio"][0] - 0.0082 / 0.0082) < 1e-9  # medians 0.0082 both
    assert abs(tri["ratio"][1] - 0.009 / 0.009216) < 1e-9
    cub = rows[("group-gemm-performance", "cuBLAS (runtime(ms))")]
    assert cub["control"] and abs(cub["ratio"][0] - 0.016 / 0.023) < 1e-9
    assert abs(cub["spread"][0] - 0.030 / 0.016) < 1e-9
    vec = rows[("vector-add-performance", "Triton (GB/s)")]
    assert abs(vec["ratio"][0] - 0.8) < 1e-9  # GB/s: kernelc's 8 over Triton's 10


_spec2 = importlib.util.spec_from_file_location(
    "host_gpu_split", os.path.join(ROOT, "bench", "experiments", "tutorial_gaps", "host_gpu_split.py"))
host_gpu_split = importlib.util.module_from_spec(_spec2)
_spec2.loader.exec_module(host_gpu_split)


def test_round_robin_visits_every_case_each_repeat_until_the_budget():
    rows = []
    assert host_gpu_split.round_robin(["a", "b"], 2, lambda: False, lambda c, r: (c, r), rows) == ""
    assert rows == [("a", 0), ("b", 0), ("a", 1), ("b", 1)]
    rows, budget = [], iter([False, False, False, True])
    why = host_gpu_split.round_robin(["a", "b"], 3, lambda: next(budget), lambda c, r: (c, r), rows)
    assert rows == [("a", 0), ("b", 0), ("a", 1)] and why == "budget reached before repeat 1 of b"


def test_reading_is_the_tutorials_statistic_with_the_slow_samples_counted():
    r = host_gpu_split.reading([1.0, 1.0, 1.0, 5.0], None)  # 02 and 06 read do_bench's mean
    assert r["ms"] == r["ms_mean"] == 2.0 and r["ms_median"] == 1.0 and r["n_slow"] == 1 and r["ms_max"] == 5.0
    assert host_gpu_split.reading([1.0, 1.0, 1.0, 5.0], [0.5, 0.2, 0.8])["ms"] == 1.0  # 01 and 08: the median


def test_gc_watch_counts_the_collections_run_inside_it():
    import gc
    with host_gpu_split.GcWatch() as w:
        gc.collect(1)
        gc.collect()
    s = w.summary()
    assert s["runs"]["1"]["n"] == 1 and s["runs"]["2"]["n"] == 1 and s["max_s"] >= 0
    gc.collect()  # outside: not counted
    assert w.summary() == s


def test_one_run_table_uses_that_run_alone_with_earlier_readings_beside(tmp_path):
    import json

    def col(x, ratios):
        return {"x": [[v] for v in x], "ratio": ratios, "geomean_ratio": 1.0, "min_ratio": min(ratios)}
    run = {"suite": True, "seconds": 400.0, "tutorials": {
        "01-vector-add": {"passed": {"triton": True, "kernelc": True}, "caches": "cold",
                          "tables": [{"plot_name": "vector-add-performance",
                                      "noise_floor": {"control_columns": ["Torch (GB/s)"], "per_point": [1.08, 1.01]},
                                      "columns": {"Triton (GB/s)": col([4096.0, 8192.0], [0.93, 0.9]),
                                                  "Torch (GB/s)": col([4096.0, 8192.0], [1.0, 1.0])}}],
                          "first_calls": [{"kernel": "add_kernel", "triton_s": 1.0, "kernelc_s": 0.5,
                                           "kernelc_over_triton": 0.5}]},
        "06-fused-attention": {"passed": {"triton": True, "kernelc": True}, "caches": "warm", "tables": [],
                               "first_calls": [{"kernel": "_attn_fwd", "triton_s": 0.2, "kernelc_s": 0.3,
                                                "kernelc_over_triton": 1.5},
                                               {"kernel": "_attn_bwd", "triton_s": 0.1, "kernelc_s": 0.2,
                                                "kernelc_over_triton": 2.0}],
                               "first_calls_cold": [{"kernel": "_attn_fwd", "triton_s": 10.0, "kernelc_s": 4.0,
                                                     "kernelc_over_triton": 0.4}]},
        "09-persistent-matmul": {"skipped": "deadline"}}}
    earlier = {"points": [{"tutorial": "01-vector-add", "table": "vector-add-performance", "column": "Triton (GB/s)",
                           "x": 4096.0, "ratio": 0.955, "from": "s20 R3 (details)"}],
               "first_calls": [{"tutorial": "01-vector-add", "kernel": "add_kernel", "triton_s": 1.3, "kernelc_s": 0.6,
                                "call": "s18 T18A (details)"}]}
    rp, ep = tmp_path / "run.json", tmp_path / "early.json"
    rp.write_text(json.dumps(run))
    ep.write_text(json.dumps(earlier))
    s = status_table.one_run(str(rp), str(ep))
    pts = {q["x"]: q for q in s["points"]}
    assert [q["column"] for q in s["points"]] == ["Triton (GB/s)"] * 2  # controls are not points
    assert pts[4096.0]["verdict"].startswith("below 0.95, inside its control's spread")  # 0.93 * 1.08 >= 0.95
    assert pts[8192.0]["verdict"] == "below 0.95" and pts[4096.0]["earlier"] == 0.955
    assert pts[4096.0]["earlier_from"] == "s20 R3" and pts[8192.0]["earlier"] is None
    fc = {f["kernel"]: f for f in s["first_calls"]}
    assert fc["_attn_fwd"]["triton_s"] == 10.0 and fc["_attn_fwd"]["caches"].startswith("cold")
    assert fc["_attn_bwd"]["caches"] == "warm"
    assert s["first_calls_slower"] == []  # the warm-cache first call is not judged
    assert {"tutorial": "09-persistent-matmul", "why": "deadline"} in s["missing"]
    assert {"tutorial": "02-fused-softmax", "why": "not in the run"} in s["missing"]
    md = status_table.one_run_markdown(s)
    assert "0.900 at 8192 **(below 0.95)** (2)" in md and "[0.955, s20 R3]" not in md.split("8192")[0].split("|")[-1]
    assert "_attn_bwd 0.10 / 0.20 (warm caches)" in md and "| 09-persistent-matmul | not run (deadline)" in md


def test_one_run_shows_the_focused_re_measurement_beside_a_point_below(tmp_path):
    import json
    if not os.path.exists(os.path.join(status_table.GAPS, "host_gpu_split_s22_R2_h200", "summary.json")):
        import pytest
        pytest.skip("session 22's R2 results are not in this tree")

    def col(x, ratios):
        return {"x": [[v] for v in x], "ratio": ratios, "geomean_ratio": 1.0, "min_ratio": min(ratios)}
    run = {"suite": True, "tutorials": {
        "02-fused-softmax": {"passed": {"triton": True, "kernelc": True}, "caches": "cold",
                             "tables": [{"plot_name": "softmax-performance", "noise_floor": {},
                                         "columns": {"Triton (GB/s)": col([256.0, 4352.0], [0.49, 1.0])}}]},
        "08-grouped-gemm": {"passed": {"triton": True, "kernelc": True}, "caches": "cold", "tables": [
            {"plot_name": "group-gemm-performance", "noise_floor": {},
             "columns": {"Triton + TMA (runtime(ms))": col([128.0, 1024.0], [1.0, 0.64])}},
            {"plot_name": "group-gemm-performance-m-8192-k-8192", "noise_floor": {},
             "columns": {"Triton + TMA (runtime(ms))": col([128.0, 1024.0], [1.0, 0.9])}}]}}}
    rp = tmp_path / "run.json"
    rp.write_text(json.dumps(run))
    s = status_table.one_run(str(rp), None)
    pts = {(q["table"], q["x"]): q for q in s["points"]}
    rm = pts[("softmax-performance", 256.0)]["re_measured"]
    assert rm["case"] == "s02:256:triton" and rm["call"].startswith(("s22 R", "s23 R")) and rm["ratio_gpu"] > 1.0
    assert pts[("softmax-performance", 256.0)]["verdict"] == "below 0.95"  # the run's own reading is not replaced
    assert pts[("group-gemm-performance", 1024.0)]["re_measured"]["case"] == "g08:1024:triton-tma"
    # the M=8192 table's x=1024 is another call: not covered by the small table's case
    assert "re_measured" not in pts[("group-gemm-performance-m-8192-k-8192", 1024.0)]
    md = status_table.one_run_markdown(s)
    assert "0.490 at 256 **(below 0.95)** (2) {re-measured: do_bench " in md and ", GPU only " in md


def test_one_run_takes_an_earlier_status_made_from_one_run(tmp_path):
    import json

    def col(x, ratios):
        return {"x": [[v] for v in x], "ratio": ratios, "geomean_ratio": 1.0, "min_ratio": min(ratios)}
    run = {"suite": True, "tutorials": {
        "01-vector-add": {"passed": {"triton": True, "kernelc": True}, "caches": "cold",
                          "tables": [{"plot_name": "vector-add-performance", "noise_floor": {},
                                      "columns": {"Triton (GB/s)": col([8192.0], [0.9])}}],
                          "first_calls": [{"kernel": "add_kernel", "triton_s": 1.0, "kernelc_s": 0.5,
                                           "kernelc_over_triton": 0.5}]}}}
    rp, ep = tmp_path / "run.json", tmp_path / "early.json"
    rp.write_text(json.dumps(run))
    ep.write_text(json.dumps(status_table.one_run(str(rp), None)))  # an earlier status from one run: no "from"/"call"
    s = status_table.one_run(str(rp), str(ep))
    assert s["points"][0]["earlier"] == 0.9 and s["points"][0]["earlier_from"] == "run.json"
    assert s["first_calls"][0]["earlier"] == (1.0, 0.5) and s["first_calls"][0]["earlier_from"] == "run.json"


def test_several_runs_each_tutorial_row_from_the_latest_run_that_measured_it(tmp_path):
    import json

    def col(x, ratios):
        return {"x": [[v] for v in x], "ratio": ratios, "geomean_ratio": 1.0, "min_ratio": min(ratios)}

    def tut(ratio, triton_s):
        return {"passed": {"triton": True, "kernelc": True}, "caches": "cold",
                "tables": [{"plot_name": "vector-add-performance", "noise_floor": {},
                            "columns": {"Triton (GB/s)": col([4096.0], [ratio])}}],
                "first_calls": [{"kernel": "add_kernel", "triton_s": triton_s, "kernelc_s": 0.5,
                                 "kernelc_over_triton": 0.5 / triton_s}]}
    suite = {"suite": True, "tutorials": {"01-vector-add": tut(0.9, 1.0), "02-fused-softmax": tut(1.2, 2.0),
                                          "09-persistent-matmul": {"skipped": "deadline"}}}
    alone = {"suite": True, "tutorials": {"01-vector-add": tut(1.01, 3.0),
                                          "09-persistent-matmul": {"passed": {"triton": True, "kernelc": False},
                                                                   "caches": "warm", "tables": []}}}
    a, b = tmp_path / "suite.json", tmp_path / "alone.json"
    a.write_text(json.dumps(suite))
    b.write_text(json.dumps(alone))
    s = status_table.one_run(["S22=" + str(a), str(b)], None)
    checks = {c["tutorial"]: c for c in s["checks"]}
    assert checks["01-vector-add"]["run"] == "alone.json" and checks["02-fused-softmax"]["run"] == "S22"
    assert checks["09-persistent-matmul"]["run"] == "alone.json"
    assert checks["09-persistent-matmul"]["passed"]["kernelc"] is False  # a failed check is a reading too
    by = {(q["tutorial"], q["run"]): q["ratio"] for q in s["points"]}
    assert by == {("01-vector-add", "alone.json"): 1.01, ("02-fused-softmax", "S22"): 1.2}  # 01's row is not mixed
    assert [f["triton_s"] for f in s["first_calls"] if f["tutorial"] == "01-vector-add"] == [3.0]
    assert "09-persistent-matmul" not in {m["tutorial"] for m in s["missing"]}
    assert [r["label"] for r in s["runs"]] == ["S22", "alone.json"]
    md = status_table.one_run_markdown(s)
    assert "| 01-vector-add [alone.json] |" in md and "| 02-fused-softmax [S22] |" in md
    assert "| 03-matrix-multiplication | not run (not in the run)" in md
    # one run alone: the rows name no run, as before
    assert "[suite.json]" not in status_table.one_run_markdown(status_table.one_run(str(a), None))


def test_09_frames_take_their_own_back_to_back_re_measurement():
    if not os.path.isdir(os.path.join(status_table.GAPS, "t09_b2b_s23_R2_h200")):
        import pytest
        pytest.skip("session 23's R2 results are not in this tree")
    focused = [f for f in status_table.focused_rows() if f.get("case")]
    cols = {c: status_table._covering({"tutorial": "09-persistent-matmul", "table": "profile matmul.hatchet",
                                       "column": f"{c} [M=8192, N=8192, K=512]"}, None, focused, [])
            for c in ("matmul_kernel_tma", "matmul_kernel_tma_persistent", "matmul_kernel_descriptor_persistent",
                      "matmul_kernel_descriptor_persistent_ws", "matmul_kernel")}
    assert cols["matmul_kernel_tma"]["case"] == "b2b09:matmul_kernel_tma"  # not the _persistent kernel's row
    assert cols["matmul_kernel_tma_persistent"]["case"] == "b2b09:matmul_kernel_tma_persistent"
    assert cols["matmul_kernel_descriptor_persistent"]["case"] == "b2b09:matmul_kernel_descriptor_persistent"
    assert cols["matmul_kernel_descriptor_persistent_ws"]["case"] == "b2b09:matmul_kernel_descriptor_persistent_ws"
    assert cols["matmul_kernel"] is None
    row = cols["matmul_kernel_tma_persistent"]
    assert row["labels"] == ["back to back", "flushed"] and 0.5 < row["ratio"] < 2 and row["call"].startswith("s23 R2")


def test_one_run_with_repeats_shows_the_median_and_the_verdict_over_every_pairing(tmp_path):
    import json
    col = {"x": [[128.0], [1024.0]], "ratio": [0.94, 1.0], "geomean_ratio": 0.97, "min_ratio": 0.94,
           "median_ratio": [0.99, 1.0], "pair_range": [[0.93, 1.05], [0.98, 1.02]],
           "pair_verdict": ["undecided", "at or above 0.95"], "repeats": [3, 3]}
    run = {"suite": True, "tutorials": {"08-grouped-gemm": {
        "passed": {"triton": True, "kernelc": True}, "caches": "cold",
        "tables": [{"plot_name": "group-gemm-performance-x", "noise_floor": {}, "columns": {"Triton (ms)": col}}]}}}
    rp = tmp_path / "run.json"
    rp.write_text(json.dumps(run))
    s = status_table.one_run(str(rp), None)
    q = {p["x"]: p for p in s["points"]}
    assert q[128.0]["pair_verdict"] == "undecided" and q[128.0]["median_ratio"] == 0.99 and q[128.0]["repeats"] == 3
    assert "median of 3 repeats 0.990, pairings [0.930, 1.050]: undecided" in status_table.one_run_markdown(s)


def test_on_medians_judges_each_point_by_its_repeats_median_and_lists_single_pairings_below(tmp_path):
    import json

    def col(x, ratios, med=None, rng=None, reps=None):
        c = {"x": [[v] for v in x], "ratio": ratios, "geomean_ratio": 1.0, "min_ratio": min(ratios)}
        if med:
            c.update(median_ratio=med, pair_range=rng, repeats=reps,
                     pair_verdict=["undecided" if r[0] < 0.95 <= r[1] else "x" for r in rng])
        return c
    x = [4096.0, 8192.0, 16384.0]
    run = {"suite": True, "tutorials": {"01-vector-add": {
        "passed": {"triton": True, "kernelc": True}, "caches": "cold", "first_calls": [],
        "tables": [{"plot_name": "vector-add-performance",
                    "noise_floor": {"control_columns": ["Torch (GB/s)"], "per_point": [1.12, 1.01, 1.0]},
                    "columns": {"Triton (GB/s)": col(x, [0.90, 0.96, 0.97], [1.05, 0.96, 0.94],
                                                     [[0.87, 1.3], [0.955, 0.97], [0.93, 0.95]], [2, 2, 2]),
                                "Torch (GB/s)": col(x, [1.12, 1.01, 1.0], [1.0, 1.0, 1.0],
                                                    [[0.8, 1.1], [0.99, 1.02], [1.0, 1.0]], [2, 2, 2])}}]}}}
    rp = tmp_path / "run.json"
    rp.write_text(json.dumps(run))
    s = status_table.one_run(str(rp), None)
    pts = {q["x"]: q for q in s["points"]}
    # the table reading 0.90 at 4096 is below, its median 1.05 is not; 16384's median 0.94 is
    assert pts[4096.0]["median_verdict"] == "within 5% or better" and pts[16384.0]["median_verdict"] == "below 0.95"
    assert abs(pts[4096.0]["control_pair_spread"] - 1.25) < 1e-9   # 1 / 0.8
    om = s["on_medians"]
    assert om["met"] is False and [q["x"] for q in om["below"]] == [16384.0]
    assert [q["x"] for q in om["lowest"]][:2] == [16384.0, 8192.0]
    assert [q["x"] for q in om["single_readings_below"]] == [4096.0, 16384.0]   # 8192's pairings all >= 0.95
    md = status_table.medians_markdown(s)
    assert "**not met** at 3 points" in md and "| 01 | vector-add-performance Triton | 4096 | 1.050 (2) |" in md
