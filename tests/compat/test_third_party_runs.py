"""Running a third-party Triton library's own test suite on kernelc: `python -m kernelc.run -m pytest ...`
passes every argument after the module to it, and `pytest -p kernelc.compat.pytest_plugin` installs the
alias in each pytest process (xdist workers are fresh interpreters that `kernelc.run` never reaches)."""
import subprocess
import sys
import textwrap

from .conftest import subprocess_env

LIB = """
import triton
import triton.language as tl


@triton.jit
def _scale(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m) * 3, mask=m)


def scale(x):
    o = x.new_empty(x.shape)
    _scale[(triton.cdiv(x.numel(), 64),)](x, o, x.numel(), BLOCK=64)
    return o
"""

TEST = """
import sys
import torch
import triton
from mylib import scale


def test_scale_on_kernelc():
    assert "kernelc" in triton.__file__
    x = torch.arange(100, dtype=torch.float32)
    assert torch.equal(scale(x), x * 3)


def test_fails_on_purpose():
    assert scale(torch.ones(3)).sum().item() == 0.0
"""


def _project(tmp_path):
    (tmp_path / "mylib.py").write_text(textwrap.dedent(LIB))
    (tmp_path / "test_mylib.py").write_text(textwrap.dedent(TEST))
    return subprocess_env(KERNELC_INTERPRET="1", PYTHONPATH=str(tmp_path) + ":" + subprocess_env()["PYTHONPATH"])


def test_kernelc_run_m_pytest_passes_its_options_through(tmp_path):
    env = _project(tmp_path)
    r = subprocess.run([sys.executable, "-m", "kernelc.run", "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider",
                        "test_mylib.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    # -q and -rf reached pytest (the short summary names the failure)
    assert "1 failed, 1 passed" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    assert "FAILED test_mylib.py::test_fails_on_purpose" in r.stdout
    assert r.returncode == 1   # pytest's exit status is the program's


def test_kernelc_run_still_parses_its_own_options_before_the_module(monkeypatch):
    import os
    from kernelc import run, testing
    seen = []
    monkeypatch.setattr(run, "run_module", lambda module, argv: seen.append((module, list(argv))))
    monkeypatch.setattr(run, "run_path", lambda path, argv: seen.append((path, list(argv))))
    monkeypatch.setattr(testing, "bench_points", None)
    monkeypatch.delenv("KERNELC_INTERPRET", raising=False)
    assert run.main(["--interpret", "--bench-points", "2", "-m", "pytest", "-q", "-x", "--bench-points", "5"]) == 0
    assert seen[-1] == ("pytest", ["-q", "-x", "--bench-points", "5"])   # everything after the module is its own
    assert testing.bench_points == 2 and os.environ["KERNELC_INTERPRET"] == "1"
    assert run.main(["-mpytest", "-q"]) == 0 and seen[-1] == ("pytest", ["-q"])
    assert run.main([__file__, "-m", "x", "--interpret"]) == 0
    assert seen[-1] == (__file__, ["-m", "x", "--interpret"])   # a script's arguments are the script's


def test_pytest_plugin_installs_the_alias_in_xdist_workers(tmp_path):
    env = _project(tmp_path)
    r = subprocess.run([sys.executable, "-m", "pytest", "-n", "1", "-p", "kernelc.compat.pytest_plugin",
                        "-p", "no:cacheprovider", "-k", "on_kernelc", "test_mylib.py"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert "1 passed" in r.stdout and "created: 1/1 worker" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    assert "kernelc: `triton` is kernelc's" in r.stdout and "standing in for Triton 3.6.0" in r.stdout
