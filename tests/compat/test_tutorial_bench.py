"""bench/triton_tutorials.py's comparison of the two runs' tables and first calls (no GPU needed)."""
import math

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
