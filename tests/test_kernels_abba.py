"""bench/experiments/ab_pinned: kernels_abba.py's A B B A processes and comparison, and warm_run.py, on CPU with
a stand-in tree whose bench_kernels.py writes a fixed figure per tree."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AB = os.path.join(ROOT, "bench", "experiments", "ab_pinned")
sys.path.insert(0, AB)

FAKE = '''import json, os, sys
names = sys.argv[1:]
fig = float(open(os.path.join(os.path.dirname(__file__), "figure")).read())
os.makedirs(os.path.join(os.path.dirname(__file__), "results"), exist_ok=True)
rows = [{"benchmark": n, "kernelc/triton": fig, "triton": 1.0} for n in names]
with open(os.path.join(os.path.dirname(__file__), "results", os.environ["BENCH_RESULTS_NAME"] + ".json"), "w") as f:
    json.dump({"rows": rows, "argv0": __name__}, f)
'''


def _tree(path, figure):
    os.makedirs(path / "bench")
    (path / "bench" / "bench_kernels.py").write_text(FAKE)
    (path / "bench" / "figure").write_text(str(figure))
    return str(path)


def test_abba_runs_four_processes_and_compares_per_row(tmp_path):
    a, b = _tree(tmp_path / "a", 0.8), _tree(tmp_path / "b", 1.0)
    out = tmp_path / "out"
    subprocess.run([sys.executable, os.path.join(AB, "kernels_abba.py"), "--a", f"old={a}", "--b", f"new={b}",
                    "--group", "r1,r2", "--budget", "60", "--out", str(out)], check=True, capture_output=True)
    res = json.load(open(out / "abba.json"))
    (g,) = res["groups"]
    assert sorted(g["seconds"]) == ["new_1", "new_2", "old_1", "old_2"]
    for r in g["rows"]:
        assert abs(r["b_over_a"] - 1.25) < 1e-9 and r["spread_a2_over_a1"] == r["spread_b2_over_b1"] == 1.0


def test_warmup_goes_through_warm_run_in_the_same_process(tmp_path):
    from kernels_abba import command
    assert command("/t", ["x"]) == [sys.executable, "/t/bench/bench_kernels.py", "x"]
    cmd = command("/t", ["x", "y"], warmup=1.5)
    assert cmd[1].endswith("warm_run.py") and cmd[2:] == ["1.5", "/t/bench/bench_kernels.py", "x", "y"]
    # warm_run runs the script as __main__ with the script's own argv (0 s: no GPU work, no torch import)
    tree = _tree(tmp_path / "w", 0.5)
    env = dict(os.environ, BENCH_RESULTS_NAME="w")
    p = subprocess.run([sys.executable, os.path.join(AB, "warm_run.py"), "0", os.path.join(tree, "bench",
                        "bench_kernels.py"), "r"], env=env, capture_output=True, text=True, check=True)
    assert "warm_run: 0 GEMMs" in p.stdout
    d = json.load(open(os.path.join(tree, "bench", "results", "w.json")))
    assert d["argv0"] == "__main__" and [r["benchmark"] for r in d["rows"]] == ["r"]
