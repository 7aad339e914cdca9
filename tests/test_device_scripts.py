"""scripts/device/: the GPU-call tooling, run on CPU against stand-in requests (no GPU, no device)."""
import os
import shutil
import subprocess
import tarfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.skipif(shutil.which("git") is None or shutil.which("bash") is None, reason="needs git and bash")


def _tree(tmp_path):
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copytree(os.path.join(ROOT, "scripts", "device"), repo / "scripts" / "device")
    shutil.copy(os.path.join(ROOT, "scripts", "gpu_env.sh"), repo / "scripts" / "gpu_env.sh")
    (repo / "a.txt").write_text("one\n")
    return repo


def _git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def test_call_runs_each_request_under_its_limit_and_returns_one_archive_each(tmp_path):
    repo = _tree(tmp_path)
    req = repo / ".ext" / "gpu" / "req"
    req.mkdir(parents=True)
    (req / "hello.sh").write_text('echo "kc=$KERNELC_CACHE_DIR"; echo made > $OUT/x.txt; echo hello-done\n')
    (req / "slow.sh").write_text("sleep 30\n")
    br = repo / ".ext" / "br" / "b1"
    br.mkdir(parents=True)
    # a helper's diff: a.txt one -> two; its run.sh reads the patched tree
    (br / "patch").write_text("--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+two\n")
    (br / "run.sh").write_text('cat a.txt; echo "cache=$KERNELC_CACHE_DIR"; ls $OUT\n')
    out = tmp_path / "out"
    env = dict(os.environ, OUT=str(out))
    r = subprocess.run(["bash", "scripts/device/call.sh", "T", "hello:20", "b1:20", "slow:1", "nope:5"], cwd=repo,
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "== hello rc=0" in r.stdout and "hello-done" in r.stdout
    assert "== b1 rc=0" in r.stdout and "\ntwo\n" in r.stdout and "cache=/tmp/kc_b1" in r.stdout
    assert "== slow rc=124" in r.stdout          # killed at its own limit, the call goes on
    assert "== nope rc=99" in r.stdout
    assert (repo / "a.txt").read_text() == "one\n"   # the patch went to a copy
    files = sorted(os.listdir(out))
    assert files == ["b1.tgz", "hello.tgz", "nope.tgz", "slow.tgz"]   # one file a request: under the 8-file limit
    with tarfile.open(out / "hello.tgz") as t:
        names = t.getnames()
        assert "hello/x.txt" in names and "hello/log.txt" in names
        assert t.extractfile("hello/x.txt").read() == b"made\n"


def test_round_turns_a_helper_commit_into_a_checked_patch(tmp_path):
    repo = _tree(tmp_path)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "-c", "user.email=a@b", "-c", "user.name=t", "add", "-A")
    _git(repo, "-c", "user.email=a@b", "-c", "user.name=t", "commit", "-qm", "base")
    _git(repo, "checkout", "-q", "-b", "helper")
    (repo / "a.txt").write_text("two\n")
    (repo / "docs").mkdir()
    (repo / "docs" / "x.md").write_text("left out\n")
    _git(repo, "-c", "user.email=a@b", "-c", "user.name=t", "commit", "-qam", "change")
    _git(repo, "add", "docs")
    _git(repo, "-c", "user.email=a@b", "-c", "user.name=t", "commit", "-qm", "docs")
    head = _git(repo, "rev-parse", "HEAD").strip()
    _git(repo, "checkout", "-q", "main")
    req = tmp_path / "req"
    req.mkdir()
    (req / "h_r1.sh").write_text("cat a.txt\n")
    (req / "h_r1.commit").write_text(head + "\n")
    (req / "h_r1.max").write_text("77\n")
    (req / "g_r1.sh").write_text("true\n")   # no .commit: skipped with a message
    r = subprocess.run(["bash", "scripts/device/round.sh", "r1", str(req)], cwd=repo, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["h_r1:77"]
    assert "g_r1: no .commit file" in r.stderr
    patch = (repo / ".ext" / "br" / "h_r1" / "patch").read_text()
    assert "+two" in patch and "docs/x.md" not in patch
    assert (repo / ".ext" / "br" / "h_r1" / "run.sh").read_text() == "cat a.txt\n"


def test_lanes_run_one_lane_per_gpu_in_parallel(tmp_path):
    repo = _tree(tmp_path)
    req = repo / ".ext" / "gpu" / "req"
    req.mkdir(parents=True)
    for n in ("a", "b"):   # each waits for the other's start: they only both finish if the lanes run at once
        other = "b" if n == "a" else "a"
        (req / f"{n}.sh").write_text(f'touch {tmp_path}/{n}.started; echo "gpu=$CUDA_VISIBLE_DEVICES"\n'
                                     f'for i in $(seq 100); do [ -f {tmp_path}/{other}.started ] && exit 0; sleep 0.1; done; exit 3\n')
    out = tmp_path / "out"
    r = subprocess.run(["bash", "scripts/device/lanes.sh", "L", "a:20", "b:20"], cwd=repo,
                       env=dict(os.environ, OUT=str(out)), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "######## lane 0 (GPU 0): a:20" in r.stdout and "######## lane 1 (GPU 1): b:20" in r.stdout
    assert "== a rc=0" in r.stdout and "== b rc=0" in r.stdout
    assert "gpu=0" in r.stdout and "gpu=1" in r.stdout
    assert sorted(os.listdir(out)) == ["a.tgz", "b.tgz", "lanes_L.txt"]
