"""Issue #28, profiler side: a profile is never lost (NaN/Inf metrics, deep nesting, forked children,
two processes on one name, write failures, multiprocessing pools under ``python -m kprof``) and
finalize is linear in the number of scopes."""
import json
import os
import sys
import textwrap
import time

import pytest

import profiler
from profiler.format import read_profile

from .conftest import run_kprof
from .test_api import find


def _cpu_seconds(fn):
    t = time.process_time()
    fn()
    return time.process_time() - t


# -- non-finite metrics ----------------------------------------------------------------------------
def test_nan_and_inf_scope_metrics_do_not_lose_the_profile(tmp_path, capsys):
    sid = profiler.start(str(tmp_path / "p"))
    with profiler.scope("bad", metrics={"flops": float("nan"), "bytes": float("inf"), "ok": 3}):
        pass
    with profiler.scope("good", metrics={"flops": 7}):
        pass
    assert profiler.finalize(sid) == [str(tmp_path / "p") + ".hatchet"]
    err = capsys.readouterr().err
    assert "NaN or infinite" in err and "'flops' of 'bad' = nan" in err and "'bytes' of 'bad' = inf" in err
    root, _ = read_profile(tmp_path / "p.hatchet")
    bad = find(root, "bad")
    assert bad.metrics.get("ok") == 3 and "flops" not in bad.metrics and "bytes" not in bad.metrics
    assert bad.extra["non_finite_metrics"] == {"flops": "nan", "bytes": "inf"}
    assert find(root, "good").metrics["flops"] == 7
    # The file is standard JSON (no NaN/Infinity tokens), so any JSON reader opens it.
    json.loads((tmp_path / "p.hatchet").read_text(), parse_constant=lambda c: pytest.fail(f"JSON has {c}"))


def test_nan_launch_metadata_keeps_the_profile(tmp_path):
    import torch
    import kernelc
    import kernelc.language as kl

    import numpy as np

    def meta(grid, kernel, args):   # numpy scalars too: written as JSON numbers
        return {"flops": float("nan"), "bytes": float("-inf"), "loads": np.int64(7), "ratio": np.float32(0.5)}

    @kernelc.jit(launch_metadata=meta)
    def nan_meta_kernel(x_ptr, BLOCK: kl.constexpr):
        offs = kl.arange(0, BLOCK)
        kl.store(x_ptr + offs, kl.load(x_ptr + offs) + 1.0)

    sid = profiler.start(str(tmp_path / "m"))
    with profiler.scope("k"):
        nan_meta_kernel[(1,)](torch.zeros(16), BLOCK=16)
    profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "m.hatchet")
    k = find(root, "k", "nan_meta_kernel")
    assert k.metrics["count"] == 1
    assert k.extra["non_finite_metrics"] == {"flops": "nan", "bytes": "-inf"}
    assert k.metrics["loads"] == 7 and k.metrics["ratio"] == 0.5


# -- depth and scale --------------------------------------------------------------------------------
def test_deep_nesting_is_written_and_read(tmp_path):
    depth = 3000   # the recursive writer failed past ~490 scopes
    sid = profiler.start(str(tmp_path / "d"))
    for i in range(depth):
        profiler.enter_scope(f"s{i}", metrics={"n": 1})
    for _ in range(depth):
        profiler.exit_scope()
    profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "d.hatchet")
    deepest = max(d for _, d in root.walk())
    assert deepest == depth


def test_writer_handles_100k_nesting(tmp_path):
    from profiler.format import ProfileNode, write_profile
    root = n = ProfileNode("ROOT")
    for i in range(100_000):
        n = n.child(f"s{i}")
    n.add_metrics({"time (ns)": 1})
    write_profile(tmp_path / "deep.hatchet", root, {})
    text = (tmp_path / "deep.hatchet").read_text()
    # Linear in depth (indentation stops growing), every frame present, the list closed.
    assert len(text) < 200 * 100_000
    assert text.count('"name": "s') == 100_000 and text.rstrip().endswith("]")


def test_100k_distinct_scopes_finalize_in_seconds(tmp_path):
    sid = profiler.start(str(tmp_path / "flat"))
    for i in range(100_000):
        with profiler.scope(f"step{i}"):
            pass
    # CPU seconds, not wall time (CI machines are shared); the quadratic lookup took minutes.
    cpu = _cpu_seconds(lambda: profiler.finalize(sid))
    assert cpu < 30, f"finalize of 100k scopes took {cpu:.1f} CPU seconds"
    root, _ = read_profile(tmp_path / "flat.hatchet")
    assert len(root.children) == 100_000


# -- one file per process ---------------------------------------------------------------------------
def test_a_live_process_keeps_its_file_another_gets_a_pid_name(tmp_path, capsys):
    import subprocess
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        claim = tmp_path / ".p.hatchet.kprof-owner"
        claim.write_text(str(holder.pid))   # as a running kprof process with this name leaves it
        sid = profiler.start(str(tmp_path / "p"))
        with profiler.scope("mine"):
            pass
        written = profiler.finalize(sid)
    finally:
        holder.kill()
        holder.wait()
    assert written == [str(tmp_path / f"p.pid{os.getpid()}.hatchet")]
    assert "belongs to another running process" in capsys.readouterr().err
    assert not (tmp_path / "p.hatchet").exists()
    assert claim.read_text() == str(holder.pid)   # the other process's claim is left alone
    # A claim whose process is gone is taken over, and released after the write.
    sid = profiler.start(str(tmp_path / "p"))
    assert profiler.finalize(sid) == [str(tmp_path / "p.hatchet")]
    assert not claim.exists()


FORK_SCRIPT = textwrap.dedent("""
    import os, sys, time
    import profiler
    sid = profiler.start(sys.argv[1])
    with profiler.scope("parent_work"):
        pass
    pid = os.fork()
    if pid == 0:
        with profiler.scope("child_work"):
            pass
        sys.exit(0)           # the child's normal exit: atexit must not write the parent's file
    os.waitpid(pid, 0)
    profiler.finalize(sid)
    {after}
""")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.parametrize("under_cli", [False, True])
def test_forked_child_does_not_write_the_parents_profile(tmp_path, under_cli):
    # The child exits first; with the old code its exit path wrote "prof.hatchet" with its copy of
    # the parent's data (and, under the CLI, the parent's file was then written twice).  A marker
    # written by the parent after the child has exited shows whose file it is.
    script = tmp_path / "forker.py"
    after = "" if under_cli else "open(sys.argv[1] + '.parent_done', 'w').close()"
    script.write_text(FORK_SCRIPT.replace("{after}", after))
    out = str(tmp_path / "prof")
    if under_cli:
        r = run_kprof(["-n", out, str(script), out], cwd=tmp_path, timeout=120)
        assert r.returncode == 0, r.stderr
        assert r.stderr.count("kprof: wrote") == 1, r.stderr
    else:
        import subprocess
        env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        r = subprocess.run([sys.executable, str(script), out], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        assert "not finalized" not in r.stderr, r.stderr
    root, _ = read_profile(out + ".hatchet")
    names = [c.name for c in root.children]
    assert "parent_work" in names and "child_work" not in names
    assert sorted(os.listdir(tmp_path)) == sorted(["forker.py", "prof.hatchet"] + ([] if under_cli else ["prof.parent_done"]))


# -- write failures -----------------------------------------------------------------------------------
def test_kprof_exits_nonzero_when_the_profile_cannot_be_written(tmp_path):
    script = tmp_path / "ok.py"
    script.write_text("import profiler\nwith profiler.scope('x'):\n    pass\nprint('script ran')\n")
    blocker = tmp_path / "notadir"
    blocker.write_text("a file where the output directory should be")
    r = run_kprof(["-o", str(blocker / "sub"), str(script)], cwd=tmp_path)
    assert "script ran" in r.stdout
    assert r.returncode == 3, (r.returncode, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if "could not write" in ln]
    assert len(lines) == 1 and lines[0].startswith("kprof: could not write the profile: ") and "notadir" in lines[0]
    assert "Traceback" not in r.stderr, r.stderr
    # sys.exit(5): the program's own failure status is kept.
    script.write_text("import sys\nsys.exit(5)\n")
    assert run_kprof(["-o", str(blocker / "sub"), str(script)], cwd=tmp_path).returncode == 5


# -- multiprocessing pools under python -m kprof ------------------------------------------------------
POOL_SCRIPT = textwrap.dedent("""
    import multiprocessing as mp, sys
    import profiler

    def square(x):
        return x * x

    if __name__ == "__main__":
        ctx = mp.get_context(sys.argv[1])
        with profiler.scope("pool"):
            with ctx.Pool(2) as pool:          # leaving the block calls pool.terminate(): SIGTERM
                print(sum(pool.map(square, range(50))), flush=True)
""")


@pytest.mark.parametrize("method,runs", [("fork", 4), ("spawn", 1), ("forkserver", 1)])
def test_multiprocessing_pool_under_kprof_never_hangs_or_prints_tracebacks(tmp_path, method, runs):
    import multiprocessing as mp
    if method not in mp.get_all_start_methods():
        pytest.skip(f"no {method} start method here")
    script = tmp_path / "pool.py"
    script.write_text(POOL_SCRIPT)
    for i in range(runs):
        r = run_kprof(["-n", f"run{i}", str(script), method], cwd=tmp_path, timeout=60)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == str(sum(x * x for x in range(50)))
        assert "Traceback" not in r.stderr and "_Terminated" not in r.stderr, r.stderr
        assert r.stderr.count("kprof: wrote") == 1, r.stderr
        root, _ = read_profile(tmp_path / f"run{i}.hatchet")
        assert [c.name for c in root.children] == ["pool"]
