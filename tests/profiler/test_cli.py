"""``python -m kprof`` end to end on the cpu backend, in subprocesses: exit codes, exceptions,
sys.exit, SIGINT, SIGTERM, module targets, output formats, the fallback message, atomic output."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from profiler.format import read_profile

from .conftest import REPO, run_kprof
from .test_api import find, names

SCRIPT = textwrap.dedent("""
    import os, sys, signal, time
    import torch
    import kernelc
    import kernelc.language as kl
    import profiler

    @kernelc.jit
    def add_one(x_ptr, n, BLOCK: kl.constexpr):
        offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
        kl.store(x_ptr + offs, kl.load(x_ptr + offs, mask=offs < n) + 1.0, mask=offs < n)

    print("argv:", sys.argv[1:], flush=True)
    sid = profiler.start("ignored_under_cli")      # the CLI owns the session
    with profiler.scope("work", metrics={"flops": 5}):
        add_one[(2,)](torch.zeros(64), 64, BLOCK=32)
    profiler.finalize()                             # ignored too: the CLI writes at exit
    what = sys.argv[1] if len(sys.argv) > 1 else "ok"
    with profiler.scope("ending"):
        if what == "raise":
            raise RuntimeError("script failed")
        if what == "exit3":
            sys.exit(3)
        if what == "wait":
            print("waiting", flush=True)
            time.sleep(60)
    print("done", flush=True)
""")


@pytest.fixture
def script(tmp_path):
    p = tmp_path / "prog.py"
    p.write_text(SCRIPT)
    return p


def check_profile(path, expect_ending=True):
    root, dev = read_profile(path)
    k = find(root, "work", "add_one")
    assert k.metrics["count"] == 1
    assert find(root, "work").metrics["flops"] == 5
    if expect_ending:
        find(root, "ending")
    return root


def test_success(script, tmp_path):
    r = run_kprof(["-o", "out", str(script), "a", "--flag"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "argv: ['a', '--flag']" in r.stdout and "done" in r.stdout
    assert "kprof: wrote out/kprof.hatchet" in r.stderr
    check_profile(tmp_path / "out" / "kprof.hatchet")
    assert os.listdir(tmp_path / "out") == ["kprof.hatchet"]   # no temporary file left


def test_exception_exit_code_and_traceback(script, tmp_path):
    r = run_kprof(["-n", "exc", str(script), "raise"], cwd=tmp_path)
    assert r.returncode == 1
    assert "RuntimeError: script failed" in r.stderr
    tb = r.stderr[r.stderr.index("Traceback"):]
    assert "prog.py" in tb and "runpy" not in tb and "profiler/cli.py" not in tb   # as python would show it
    check_profile(tmp_path / "exc.hatchet")


def test_sys_exit_code(script, tmp_path):
    r = run_kprof(["-n", "ex3", str(script), "exit3"], cwd=tmp_path)
    assert r.returncode == 3, r.stderr
    check_profile(tmp_path / "ex3.hatchet")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signals_write_profile_and_die_of_the_signal(script, tmp_path, sig):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("KPROF_BACKEND", None)
    p = subprocess.Popen([sys.executable, "-m", "kprof", "-n", "sig", str(script), "wait"], cwd=tmp_path, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    line = ""
    while "waiting" not in line and time.time() < deadline:
        line = p.stdout.readline()
        if not line and p.poll() is not None:
            break
    assert "waiting" in line, p.stderr.read()
    p.send_signal(sig)
    out, err = p.communicate(timeout=60)
    assert p.returncode == -sig, (p.returncode, err)        # died of the signal, as without kprof
    assert "kprof: wrote sig.hatchet" in err
    if sig == signal.SIGINT:
        assert "KeyboardInterrupt" in err
    root = check_profile(tmp_path / "sig.hatchet")
    assert find(root, "ending").metrics["time (ns)"] > 0
    assert sorted(os.listdir(tmp_path)) == ["prog.py", "sig.hatchet"]


def test_sigterm_handler_restored(tmp_path):
    (tmp_path / "h.py").write_text(textwrap.dedent("""
        import signal
        print("handler:", signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
    """))
    (tmp_path / "check.py").write_text(textwrap.dedent(f"""
        import signal, sys
        sys.path.insert(0, {REPO!r})
        from profiler.cli import main
        before = signal.getsignal(signal.SIGTERM)
        code = main(["-n", "h", "h.py"])
        print("restored:", signal.getsignal(signal.SIGTERM) is before, "code:", code)
    """))
    r = subprocess.run([sys.executable, "check.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert "handler: False" in r.stdout          # kprof's own handler while the script runs
    assert "restored: True code: 0" in r.stdout, r.stderr


def test_module_target(tmp_path):
    (tmp_path / "mymod.py").write_text(textwrap.dedent("""
        import sys, profiler
        with profiler.scope("from_module"):
            pass
        print("module argv:", sys.argv[1:])
        sys.exit(int(sys.argv[1]))
    """))
    r = run_kprof(["-n", "mod", "-m", "mymod", "7", "-q"], cwd=tmp_path)
    assert r.returncode == 7, r.stderr
    assert "module argv: ['7', '-q']" in r.stdout
    root, _ = read_profile(tmp_path / "mod.hatchet")
    assert names(root) == ["from_module"]


def test_mode_vs_module_rule(tmp_path):
    from profiler.cli import split_argv
    assert split_argv(["-m", "pcsampling", "t.py", "x"]) == (["-m", "pcsampling"], "t.py", None, ["x"])
    assert split_argv(["-m", "pcsampling:period=9", "t.py"]) == (["-m", "pcsampling:period=9"], "t.py", None, [])
    assert split_argv(["-n", "a", "-m", "pytest", "-q", "tests"]) == (["-n", "a"], None, "pytest", ["-q", "tests"])
    assert split_argv(["-mpytest", "-x"]) == ([], None, "pytest", ["-x"])
    assert split_argv(["--mode", "pcsampling", "t.py"]) == (["--mode", "pcsampling"], "t.py", None, [])
    assert split_argv(["-c", "python", "--", "-weird.py"]) == (["-c", "python"], "-weird.py", None, [])
    assert split_argv(["t.py", "-m", "x"]) == ([], "t.py", None, ["-m", "x"])


@pytest.mark.pcsampling_device
def test_pcsampling_mode_without_integration(script, tmp_path):
    r = run_kprof(["-m", "pcsampling:period=10", "-n", "pc", str(script)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    check_profile(tmp_path / "pc.hatchet")
    try:
        import profiler.pcsampling  # noqa: F401
    except ImportError:
        assert "mode pcsampling is not available" in r.stderr


def test_help_and_errors(tmp_path):
    r = run_kprof(["--help"], cwd=tmp_path)
    assert r.returncode == 0
    assert "-m MODULE" in r.stdout and "pcsampling" in r.stdout and "-m pytest" in r.stdout
    r = run_kprof(["missing.py"], cwd=tmp_path)
    assert r.returncode == 2 and "can't open file" in r.stderr
    r = run_kprof(["-c", "stack", "x.py"], cwd=tmp_path)
    assert r.returncode == 2 and "invalid choice" in r.stderr
    r = run_kprof([], cwd=tmp_path)
    assert r.returncode == 2 and "no script" in r.stderr
    r = run_kprof(["--format", "csv", "x.py"], cwd=tmp_path)
    assert r.returncode == 2 and "unknown output format" in r.stderr


def test_chrome_format(script, tmp_path):
    r = run_kprof(["-n", "tr", "--format", "chrome", str(script)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "kprof: wrote tr.trace.json" in r.stderr and not os.path.exists(tmp_path / "tr.hatchet")
    data = json.load(open(tmp_path / "tr.trace.json"))
    assert data["displayTimeUnit"] == "ns" and data["otherData"]["tool"] == "kprof"
    ev = data["traceEvents"]
    complete = [e for e in ev if e["ph"] == "X"]
    for e in complete:
        assert {"name", "cat", "ph", "ts", "dur", "pid", "tid"} <= set(e) and e["dur"] >= 0
    by = {e["name"]: e for e in complete}
    assert by["work"]["cat"] == "scope" and by["ending"]["cat"] == "scope"
    k = by["add_one [grid 2x1x1, warps 4, stages 3]"]
    assert k["cat"] == "kernel" and k["args"]["path"] == "work"
    w = by["work"]
    assert w["ts"] <= k["ts"] and k["ts"] + k["dur"] <= w["ts"] + w["dur"] + 1e-3   # nested in time
    meta = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    assert meta == {"host", "CPU 0"}


def test_both_formats(script, tmp_path):
    r = run_kprof(["-n", "both", "-f", "hatchet,chrome", str(script)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    check_profile(tmp_path / "both.hatchet")
    json.load(open(tmp_path / "both.trace.json"))


def test_fallback_message_printed_once(tmp_path):
    # A cupti package that cannot be imported, so this holds on any machine.
    stub = tmp_path / "stub" / "cupti"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("raise ImportError('stub: no cupti here')\n")
    (tmp_path / "two.py").write_text(textwrap.dedent("""
        import profiler
        a = profiler.start("a", backend="cupti")
        b = profiler.start("b")
        print(profiler.finalize())
    """))
    env = {"PYTHONPATH": f"{tmp_path / 'stub'}{os.pathsep}{REPO}"}
    r = subprocess.run([sys.executable, "two.py"], cwd=tmp_path, env=dict(os.environ, **env), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.startswith("kprof:")]
    assert len(lines) == 1, r.stderr
    assert "cupti-python is not usable" in lines[0] and "using the cpu backend" in lines[0]
    assert "['a.hatchet', 'b.hatchet']" in r.stdout


def test_no_gpu_message(script, tmp_path):
    try:
        from kernelc.runtime.device import cuda_available
        if cuda_available():
            pytest.skip("this machine has a GPU")
    except Exception:
        pass
    r = run_kprof(["-n", "nogpu", str(script)], cwd=tmp_path)
    lines = [line for line in r.stderr.splitlines() if line.startswith("kprof:") and "cpu backend" in line]
    assert len(lines) == 1 and ("no CUDA" in lines[0] or "cupti" in lines[0].lower()), r.stderr


def test_api_session_written_at_exit(tmp_path):
    (tmp_path / "forgot.py").write_text("import profiler\nprofiler.start('late')\nwith profiler.scope('s'):\n    pass\n")
    r = subprocess.run([sys.executable, "forgot.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=REPO, KPROF_BACKEND="cpu"))
    assert r.returncode == 0 and "wrote late.hatchet at exit" in r.stderr
    root, _ = read_profile(tmp_path / "late.hatchet")
    assert names(root) == ["s"]


def test_train_example_end_to_end(tmp_path):
    """README's main command on CPU: kprof examples/train.py, then the viewer."""
    r = run_kprof(["-n", "train", os.path.join(REPO, "examples", "train.py"), "--steps", "2"], cwd=tmp_path,
                  timeout=300)
    assert r.returncode == 0, r.stderr
    assert "loss" in r.stdout
    root, dev = read_profile(tmp_path / "train.hatchet")
    step = find(root, "train_step")
    assert set(names(step)) >= {"forward", "backward", "optimizer"}
    attn = find(root, "train_step", "forward", "attn")
    kernels = [n for n, _ in attn.walk() if n.extra and n.extra.get("kind") == "kernel"]
    assert {k.extra["kernel"] for k in kernels} == {"attn_fwd_kernel", "layer_norm_fwd_kernel"}
    assert all(k.metrics["time (ns)"] > 0 for k in kernels)
    assert attn.metrics["flops"] > 0
    find(root, "train_step", "forward", "loss", "softmax_kernel")
    v = subprocess.run([sys.executable, "-m", "profiler.viewer", "-m", "time/ms,count", "train.hatchet"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=REPO))
    assert v.returncode == 0 and "attn_fwd_kernel [grid" in v.stdout and "train_step" in v.stdout, v.stderr
