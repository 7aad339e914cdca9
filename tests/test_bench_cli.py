"""bench/: one CLI over the maintained benchmarks, one results layout (device, date, versions, commit)."""
import json
import os

from bench import __main__ as cli
from bench import common

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_listed_benchmark_exists_and_lists(capsys):
    for name, (module, _results, _what) in cli.BENCHMARKS.items():
        assert os.path.isfile(os.path.join(ROOT, "bench", module + ".py")), name
    assert cli.main(["--list"]) == 0
    out = capsys.readouterr().out
    assert all(f"  {name} " in out for name in cli.BENCHMARKS)
    assert cli.main(["no_such_benchmark"]) == 2
    assert "expected one of" in capsys.readouterr().err


def test_experiments_are_not_in_bench_root():
    scripts = {f[:-3] for f in os.listdir(os.path.join(ROOT, "bench")) if f.endswith(".py")}
    maintained = {m for m, _, _ in cli.BENCHMARKS.values()}
    helpers = {"__init__", "__main__", "common", "cupti_floor", "interleaved", "tutorial_runner", "tutorial_dryrun"}
    assert scripts - maintained - helpers == set(), "one-off scripts belong in bench/experiments/<topic>/"
    for topic in os.listdir(os.path.join(ROOT, "bench", "experiments")):
        assert os.path.isdir(os.path.join(ROOT, "bench", "experiments", topic, "results")), topic


def test_results_record_device_date_versions_commit(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("OUT", raising=False)
    common.write_results("probe", [{"benchmark": "x", "value": 1.5}], {"note": "n"}, results_dir=str(tmp_path))
    data = json.loads((tmp_path / "probe.json").read_text())
    env = data["environment"]
    assert {"date", "device", "commit", "versions"} <= set(env)
    assert env["versions"]["kernelc"] and env["versions"]["torch"]
    assert len(env["commit"].split("+")[0]) == 40
    assert data["rows"] == [{"benchmark": "x", "value": 1.5}] and data["note"] == "n"
    assert "1.5" in capsys.readouterr().out
    assert os.listdir(tmp_path) == ["probe.json"]  # written atomically, no temporary left
