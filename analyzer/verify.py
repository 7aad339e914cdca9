"""``kprof-analyze --verify script.py``: re-run a script with each suggested config forced on the
kernel and report the measured kernel time of each next to the profiled config.

Each run is a subprocess with ``KERNELC_OVERRIDE='kernel:K=V,...,num_warps=..,num_stages=..'`` (the
baseline run has no override).  The kernel's GPU time is measured by, in order of preference:

1. ``python -m kprof -o DIR script.py`` when the kprof command is installed: the time of the
   kernel's frames in the profile it writes;
2. ``python -m analyzer._runner``: the script under ``torch.profiler`` (CUPTI kernel records), or,
   if that records nothing, CUDA events around each launch of the kernel (kernelc launch hooks).

The runner is a parameter (``runner(argv, env, kernel) -> RunResult``) so that the logic is tested
without a GPU.  The override applies to every launch of the kernel, so the script's grid must be
computed from the launch's META (``grid = lambda META: (cdiv(n, META["BLOCK"]),)``) when a
suggestion changes a tile size; a config the script cannot run shows up with a failed status.
"""
from __future__ import annotations

import glob
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

from .suggest import Suggestion

DEFAULT_TIMEOUT_S = 900


@dataclass
class RunResult:
    returncode: int
    times: Dict[str, Dict[str, float]] = field(default_factory=dict)   # kernel -> {"time_ns", "count"}
    method: str = ""
    log_tail: str = ""


Runner = Callable[[List[str], Dict[str, str], str], RunResult]


def _kprof_available() -> bool:
    try:
        return importlib.util.find_spec("kprof.__main__") is not None
    except (ImportError, ValueError):
        return False


def _tail(text: str, n: int = 2000) -> str:
    return text[-n:] if text else ""


def _times_from_profile(path: str) -> Dict[str, Dict[str, float]]:
    from .load import kernel_groups, read
    root, _ = read(path)
    groups, others, _ = kernel_groups(root)
    out: Dict[str, Dict[str, float]] = {}
    for g in groups:
        e = out.setdefault(g.name, {"time_ns": 0.0, "count": 0})
        e["time_ns"] += g.time_ns
        e["count"] += g.count
    for o in others:
        e = out.setdefault(o.name, {"time_ns": 0.0, "count": 0})
        e["time_ns"] += o.time_ns
        e["count"] += o.count
    return out


def kprof_runner(argv: List[str], env: Dict[str, str], kernel: str, timeout: float = DEFAULT_TIMEOUT_S) -> RunResult:
    """Run ``python -m kprof -o DIR <argv>`` and read the kernel's time from the profile."""
    with tempfile.TemporaryDirectory(prefix="kprof-verify-") as d:
        cmd = [sys.executable, "-m", "kprof", "-o", d] + list(argv)
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        files = sorted(glob.glob(os.path.join(d, "**", "*.hatchet"), recursive=True))
        times: Dict[str, Dict[str, float]] = {}
        for f in files:
            try:
                for k, v in _times_from_profile(f).items():
                    e = times.setdefault(k, {"time_ns": 0.0, "count": 0})
                    e["time_ns"] += v["time_ns"]
                    e["count"] += v["count"]
            except Exception:
                continue
        return RunResult(p.returncode, times, "kprof", _tail(p.stderr or p.stdout))


def events_runner(argv: List[str], env: Dict[str, str], kernel: str, timeout: float = DEFAULT_TIMEOUT_S) -> RunResult:
    """Run the script under ``python -m analyzer._runner`` (torch.profiler, else CUDA events)."""
    with tempfile.TemporaryDirectory(prefix="kprof-verify-") as d:
        out = os.path.join(d, "times.json")
        cmd = [sys.executable, "-m", "analyzer._runner", "--kernel", kernel, "--out", out, "--"] + list(argv)
        env = dict(env)
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        times, method = {}, "runner"
        if os.path.exists(out):
            with open(out) as f:
                data = json.load(f)
            times = data.get("times", {})
            method = data.get("method", method)
            rc = int(data.get("returncode", p.returncode))
        else:
            rc = p.returncode or 1
        return RunResult(rc, times, method, _tail(p.stderr or p.stdout))


def default_runner(argv: List[str], env: Dict[str, str], kernel: str) -> RunResult:
    if _kprof_available():
        try:
            r = kprof_runner(argv, env, kernel)
            if r.returncode == 0 and r.times.get(kernel, {}).get("count"):
                return r
        except Exception:
            pass
    return events_runner(argv, env, kernel)


def _row(kernel: str, label: str, config, override, res: Optional[RunResult], error: str = "") -> Dict[str, Any]:
    t = (res.times.get(kernel) or {}) if res else {}
    time_ns = float(t.get("time_ns") or 0.0)
    count = int(t.get("count") or 0)
    if error:
        status = error
    elif res is None:
        status = "not run"
    elif res.returncode != 0:
        status = f"script failed (exit {res.returncode})"
    elif not count:
        status = "kernel not launched"
    else:
        status = "ok"
    return {"kernel": kernel, "label": label, "config": config, "override": override, "time_ns": time_ns,
            "launches": count, "time_per_launch_ns": time_ns / count if count else None, "speedup": None,
            "status": status, "method": res.method if res else "", "log_tail": res.log_tail if res and status != "ok" else ""}


def verify(script: str, script_args: Sequence[str], kernel: str, suggestions: Sequence[Suggestion], *,
           runner: Optional[Runner] = None, env: Optional[Dict[str, str]] = None) -> List[Dict[str, Any]]:
    """Run ``script`` once as is and once per suggestion with the config forced; returns one row per
    run: ``{"kernel", "label", "config", "override", "time_ns", "launches", "time_per_launch_ns",
    "speedup" (baseline / this, per launch), "status", "method"}``."""
    runner = runner or default_runner
    base_env = dict(os.environ if env is None else env)
    base_env.pop("KERNELC_OVERRIDE", None)
    argv = [script] + list(script_args)
    rows = []
    try:
        res = runner(argv, dict(base_env), kernel)
        rows.append(_row(kernel, "profiled config", None, None, res))
    except Exception as e:
        rows.append(_row(kernel, "profiled config", None, None, None, f"runner failed: {type(e).__name__}: {e}"))
    for i, s in enumerate(suggestions, 1):
        ov = s.override(kernel)
        env_i = dict(base_env, KERNELC_OVERRIDE=ov)
        label = f"#{i} " + ",".join(f"{k}={v}" for k, v in s.changes.items())
        try:
            res = runner(argv, env_i, kernel)
            rows.append(_row(kernel, label, dict(s.config), ov, res))
        except Exception as e:
            rows.append(_row(kernel, label, dict(s.config), ov, None, f"runner failed: {type(e).__name__}: {e}"))
    base = rows[0]["time_per_launch_ns"] if rows and rows[0]["status"] == "ok" else None
    for r in rows:
        if base and r["time_per_launch_ns"]:
            r["speedup"] = round(base / r["time_per_launch_ns"], 4)
    return rows
