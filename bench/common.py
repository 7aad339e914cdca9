"""Shared helpers for the benchmarks: the Triton twin of a kernels module, result writing."""
from __future__ import annotations

import datetime
import importlib.util
import json
import os
import platform
import re
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def module_from_source(src: str, name: str, filename: str = None, prefix: str = "bench_src_"):
    """Import ``src`` as module ``name`` from a file of its own in a fresh temporary folder (both compilers read a
    kernel's source from its file, so a rewritten source needs one)."""
    d = tempfile.mkdtemp(prefix=prefix)
    p = os.path.join(d, filename or f"{name}.py")
    with open(p, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(name, p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def to_triton(src: str) -> str:
    """A kernelc source with its two imports swapped for Triton's."""
    return src.replace("import kernelc as triton", "import triton").replace("import kernelc.language as tl",
                                                                          "import triton.language as tl")


def triton_twin(module_name: str):
    """Import examples/kernels/<module_name>.py compiled by real Triton (imports swapped)."""
    path = os.path.join(ROOT, "examples", "kernels", f"{module_name}.py")
    return module_from_source(to_triton(open(path).read()), f"triton_{module_name}", prefix="triton_twin_")


def _commit() -> str:
    """The checkout's commit (``+dirty`` when tracked files differ), or ``unknown`` outside git."""
    import subprocess
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (head + ("+dirty" if dirty else "")) if head else "unknown"


def _version(dist: str):
    try:
        from importlib.metadata import version
        return version(dist)
    except Exception:
        return None


def environment() -> dict:
    """What every results file records next to its numbers: device, date, versions, commit."""
    import torch
    info = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "device": None, "commit": _commit(), "python": platform.python_version(),
            "torch": torch.__version__, "versions": {}}
    try:
        import triton
        info["triton"] = triton.__version__
    except Exception:
        info["triton"] = None
    import kernelc
    info["versions"] = {"kernelc": kernelc.__version__, "torch": torch.__version__, "triton": info["triton"],
                        "cuda": torch.version.cuda, "llvmlite": _version("llvmlite"),
                        "cupti-python": _version("cupti-python"), "nvidia-nvjitlink": _version("nvidia-nvjitlink")}
    if torch.cuda.is_available():
        info["device"] = torch.cuda.get_device_name()
        info["driver"] = torch.version.cuda
    return info


RESULTS = os.path.join(ROOT, "bench", "results")


def write_results(name: str, rows, extra=None, results_dir: str = RESULTS):
    """Write rows to ``results_dir``/<name>.json (default bench/results; experiments pass their own
    folder) and to $OUT/results if set, with :func:`environment`; print a table."""
    payload = {"benchmark": name, "environment": environment(), "rows": rows}
    if extra:
        payload.update(extra)
    text = json.dumps(payload, indent=2)
    os.makedirs(results_dir, exist_ok=True)
    tmp = os.path.join(results_dir, f".{name}.json.tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, os.path.join(results_dir, f"{name}.json"))
    out = os.environ.get("OUT")
    if out:
        os.makedirs(os.path.join(out, "results"), exist_ok=True)
        with open(os.path.join(out, "results", f"{name}.json"), "w") as f:
            f.write(text)
    if rows:
        cols = list(rows[0].keys())
        widths = [max(len(str(c)), *(len(_fmt(r.get(c))) for r in rows)) for c in cols]
        print("  ".join(str(c).ljust(w) for c, w in zip(cols, widths)))
        for r in rows:
            print("  ".join(_fmt(r.get(c)).ljust(w) for c, w in zip(cols, widths)))
    sys.stdout.flush()


def ab_rounds(script: str, sizes, variants, key: str, rounds: int = 2):
    """Run ``script --child n`` once per size, round and (name, env) variant, each in its own process
    (switches read at compile time), interleaved; its last stdout line is ``{entry: {metric: value}}``.
    Returns one row per entry: n, round, variant, ``key`` (the entry) and the metrics."""
    import subprocess
    rows = []
    for n in sizes:
        for rnd in range(rounds):
            for variant, env in variants:
                p = subprocess.run([sys.executable, script, "--child", str(n)], env=dict(os.environ, **env),
                                   capture_output=True, text=True, cwd=ROOT)
                if p.returncode:
                    print(p.stderr[-2000:], flush=True)
                    continue
                res = json.loads(p.stdout.strip().splitlines()[-1])
                for entry, r in res.items():
                    rows.append({"n": n, "round": rnd, "variant": variant, key: entry, **r})
                print(n, rnd, variant, {k: round(v["tflops"]) for k, v in res.items()}, flush=True)
    return rows


def _fmt(v):
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 100 else f"{v:.1f}"
    return str(v)


class env_vars:
    """Environment variables set for the duration of a ``with`` block (kernelc reads its knobs at compile time, so an
    A/B compiles each entry's kernel copy inside one of these), restored on exit."""

    def __init__(self, env):
        self.env, self.saved = dict(env), {}

    def __enter__(self):
        self.saved = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)
        return self

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
