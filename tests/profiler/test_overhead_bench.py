"""bench/reconcile_profilers.py ``overhead`` on CPU: the statistics of :func:`summarize` on known
numbers, and one child process (pinning, cold blocks, AB/BA pairs) with kprof's cpu backend."""
import json
import os
import subprocess
import sys
import time

import pytest

from .conftest import REPO

sys.path.insert(0, REPO)
from bench import reconcile_profilers as rp  # noqa: E402


def _child(prof, warm, cold=(10.0, 10.0), unprof=None, stop=0.01):
    unprof = unprof or [10.0] * len(warm)
    return {"profiler": prof, "warm": list(warm), "cold_ms": list(cold), "unprof_ms": list(unprof),
            "prof_ms": [w * u for w, u in zip(warm, unprof)], "stop_s": [stop] * len(warm), "setup_s": 1.0,
            "steps_per_block": 10}


def test_summarize_known_numbers():
    results = [_child("none", [1.0, 1.002, 0.998]), _child("none", [1.004, 1.0, 1.002]),
               _child("floor", [1.10, 1.10, 1.10], unprof=[10.5] * 3), _child("floor", [1.10, 1.10, 1.10]),
               _child("kprof", [1.21, 1.21, 1.21]), _child("kprof", [1.21, 1.21, 1.21])]
    s = rp.summarize(results, reps=300)
    assert s["none"]["warm"] == pytest.approx(1.001, abs=1e-3)
    assert s["none"]["spread_%"] == pytest.approx(0.2, abs=1e-6)        # per-process medians 1.000 and 1.002
    assert s["none"]["warm_ci"][0] <= s["none"]["warm"] <= s["none"]["warm_ci"][1]
    assert s["floor"]["warm"] == pytest.approx(1.10)
    assert s["floor"]["residue"] == pytest.approx(1.025) and s["floor"]["residue_ci"] == [1.0, 1.05]
    assert s["kprof"]["full"] == pytest.approx(1.21)
    assert s["kprof"]["over_floor_%"] == pytest.approx(10.0) and s["kprof"]["over_floor_ci_%"] == [10.0, 10.0]
    assert "over_floor_%" not in s["none"] and "over_floor_%" not in s["floor"]


def test_child_on_cpu(tmp_path):
    spec = {"workload": "tiny", "profiler": "kprof-deferred", "device": "cpu", "out": str(tmp_path / "p"),
            "warmup": 20, "block_s": 0.02, "steps": 200, "pre": 2, "min_pairs": 2, "max_pairs": 2,
            "deadline": time.time() + 60, "cpus": sorted(os.sched_getaffinity(0))[:1], "threads": 1, "buffer": 0}
    env = dict(os.environ, PYTHONPATH=REPO, KPROF_BACKEND="cpu")
    p = subprocess.run([sys.executable, os.path.join(REPO, "bench", "reconcile_profilers.py"), "_overhead_child",
                        json.dumps(spec)], env=env, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert p.returncode == 0, p.stderr[-2000:]
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["profiler"] == "kprof-deferred" and r["steps_per_block"] == 200
    assert len(r["cold_ms"]) == 2 and len(r["prime_ms"]) == 1
    assert len(r["warm"]) == len(r["unprof_ms"]) == len(r["stop_s"]) == 2
    assert r["cpus"] == spec["cpus"] and r["threads"] == 1
    assert r["kprof_state"]["backend"] == "cpu"
    assert all(x > 0 for x in r["warm"] + r["cold_ms"])
    assert os.path.exists(str(tmp_path / "p_0.hatchet")) and os.path.exists(str(tmp_path / "p_1.hatchet"))


def test_cpu_set_option():
    avail = sorted(os.sched_getaffinity(0))
    assert rp._cpu_set("none") is None
    assert rp._cpu_set(f"{avail[0]}") == [avail[0]]
    with pytest.raises(SystemExit, match="--cpus"):
        rp._cpu_set("100000-100001")
