"""--verify: each suggested config forced through KERNELC_OVERRIDE, times compared with a fake runner;
the real runner subprocess on CPU (no kernel time, but the script runs and its exit code is kept)."""
import json
import os

from analyzer import cli, verify as V
from analyzer.suggest import Suggestion
from kernelc.runtime.override import parse

from .helpers import ProfileNode, cache_case, case, kernel_node, write


def fake_runner(times_by_warps, fail_warps=()):
    calls = []

    def run(argv, env, kernel):
        ov = env.get("KERNELC_OVERRIDE")
        calls.append((list(argv), ov))
        warps = parse(ov)[kernel]["num_warps"] if ov else 1
        if warps in fail_warps:
            return V.RunResult(3, {}, "fake", "Traceback: boom")
        t = times_by_warps[warps]
        return V.RunResult(0, {kernel: {"time_ns": t * 4, "count": 4}, "other": {"time_ns": 1, "count": 1}}, "fake")
    return run, calls


def test_verify_rows_and_speedups():
    sugg = [Suggestion({"BLOCK": 2048, "num_warps": 4, "num_stages": 1}, {"num_warps": 4}, ["low-occupancy"]),
            Suggestion({"BLOCK": 2048, "num_warps": 8, "num_stages": 1}, {"num_warps": 8}, ["low-occupancy"]),
            Suggestion({"BLOCK": 2048, "num_warps": 16, "num_stages": 1}, {"num_warps": 16}, [])]
    run, calls = fake_runner({1: 100_000, 4: 50_000, 8: 40_000}, fail_warps=(16,))
    rows = V.verify("s.py", ["--n", "3"], "k", sugg, runner=run, env={"KERNELC_OVERRIDE": "stale:A=1", "X": "1"})
    assert [r["status"] for r in rows] == ["ok", "ok", "ok", "script failed (exit 3)"]
    assert [r["speedup"] for r in rows] == [1.0, 2.0, 2.5, None]
    assert rows[1]["time_per_launch_ns"] == 50_000 and rows[1]["launches"] == 4
    assert rows[0]["override"] is None and calls[0] == (["s.py", "--n", "3"], None)   # stale override removed
    assert parse(rows[2]["override"]) == {"k": {"BLOCK": 2048, "num_warps": 8, "num_stages": 1}}
    assert rows[3]["log_tail"] == "Traceback: boom"
    assert rows[1]["label"] == "#1 num_warps=4"


def test_verify_when_the_kernel_is_not_launched():
    def run(argv, env, kernel):
        return V.RunResult(0, {}, "fake")
    rows = V.verify("s.py", [], "k", [Suggestion({"num_warps": 4, "num_stages": 3}, {"num_warps": 4})], runner=run)
    assert [r["status"] for r in rows] == ["kernel not launched"] * 2 and rows[1]["speedup"] is None


def test_cli_verify_uses_the_runner_and_reports_the_table(tmp_path, monkeypatch, capsys):
    c = case("register_occupancy")
    root = ProfileNode("ROOT")
    kernel_node(root, c, cache_case(c))
    prof = write(tmp_path / "p.hatchet", root)
    script = tmp_path / "script.py"
    script.write_text("print('hi')\n")
    seen = []

    def run(argv, env, kernel):
        seen.append((argv, env.get("KERNELC_OVERRIDE")))
        ov = env.get("KERNELC_OVERRIDE")
        w = parse(ov)[kernel]["num_warps"] if ov else 1
        return V.RunResult(0, {kernel: {"time_ns": 1000.0 * 8 / w, "count": 1}}, "fake")
    monkeypatch.setattr(V, "default_runner", run)
    assert cli.main([prof, "--verify", str(script), "--", "--size", "7"]) == 0
    out = capsys.readouterr().out
    assert "verification" in out and "reg_heavy_add" in out and "profiled config" in out
    assert seen[0] == ([str(script), "--size", "7"], None) and all(ov for _, ov in seen[1:])
    assert cli.main([prof, "--json", "--verify", str(script)]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = data["verification"]
    assert rows[0]["speedup"] == 1.0 and all(r["speedup"] > 1 for r in rows[1:])


def test_events_runner_runs_the_script_in_a_subprocess(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("import sys\nprint('args', sys.argv[1:])\nsys.exit(3)\n")
    res = V.events_runner([str(script), "a"], dict(os.environ), "some_kernel")
    assert res.returncode == 3
    assert res.times == {}


VERIFY_SCRIPT = '''\
import os, sys
sys.path.insert(0, {root!r})
import torch
from kernelc.runtime import hooks
from tests.analyzer.planted import strided_gather
seen = []
hooks.register(enter=lambda rec: seen.append((rec.constexprs["BLOCK"], rec.num_warps)))
x, y = torch.randn(4096 * 16), torch.empty(4096)
for _ in range(2):
    strided_gather[lambda META: (4096 // META["BLOCK"],)](x, y, 4096, STRIDE=16, BLOCK=1024)
assert torch.equal(y, x[::16] * 2.0)
with open(os.environ["SEEN_FILE"], "a") as f:
    f.write(repr(seen) + "\\n")
'''


def test_verify_end_to_end_on_cpu_with_the_default_runner(tmp_path):
    # kprof's CPU backend when `python -m kprof` is there, else the events runner (no GPU: no time)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    script = tmp_path / "run.py"
    script.write_text(VERIFY_SCRIPT.format(root=root))
    seen = tmp_path / "seen.txt"
    env = dict(os.environ, SEEN_FILE=str(seen))
    sugg = [Suggestion({"BLOCK": 512, "STRIDE": 16, "num_warps": 2, "num_stages": 3}, {"BLOCK": 512, "num_warps": 2})]
    rows = V.verify(str(script), [], "strided_gather", sugg, env=env)
    runs = [eval(line) for line in seen.read_text().splitlines()]
    assert runs == [[(1024, 4)] * 2, [(512, 2)] * 2]          # the override reached every launch
    if V._kprof_available():
        assert [r["status"] for r in rows] == ["ok", "ok"] and rows[0]["method"] == "kprof"
        assert rows[0]["launches"] == 2 and rows[1]["speedup"] is not None
