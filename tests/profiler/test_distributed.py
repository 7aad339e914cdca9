"""kprof under torchrun / any RANK+WORLD_SIZE launcher: per-rank profiles, the rank-0 merge (bounded
wait, missing and stale ranks), the collective wait/transfer estimate, the viewer's per-rank
metrics and ``--rank``, and kprof-analyze's straggler report.  Unit tests on hand-built trees; two
end-to-end runs with gloo on the CPU (3 ranks under torchrun, 2 ranks under a plain launcher)."""
import io
import json
import os
import subprocess
import sys
import threading
import time

import pytest

from profiler import distributed, merge
from profiler.format import ProfileNode, read_profile, write_profile

from .conftest import REPO

NS = 1_000_000  # 1 ms


def rank_tree(rank, world, forward_ms, sync_calls_ms, *, kernel_ms=None, run_id="run-a"):
    """A per-rank profile: step/forward (a kernel inside when kernel_ms), step/sync/all_reduce with
    one instance per call."""
    root = ProfileNode("ROOT")
    step = root.child("step")
    fwd = step.child("forward")
    fwd.metrics["time (ns)"] = forward_ms * NS
    if kernel_ms is not None:
        k = fwd.child("gemm_kernel")
        k.metrics.update({"time (ns)": kernel_ms * NS, "count": 2, "device_id": str(rank), "device_type": "CUDA",
                          "flops16": 1000})
    ar = step.child("sync").child("all_reduce")
    ar.metrics.update({"time (ns)": sum(sync_calls_ms) * NS, "count": len(sync_calls_ms), "device_id": "0",
                       "device_type": "host"})
    ar.extra = {"kind": "collective", "op": "all_reduce", "collective": True,
                "instances_ns": [int(x * NS) for x in sync_calls_ms]}
    root.extra = {"distributed": {"rank": rank, "world_size": world, "local_rank": rank, "host": "h",
                                  "run_id": run_id, "devices": [f"CUDA {rank}"]}}
    return root


def write_rank(tmp_path, base, rank, root):
    write_profile(str(tmp_path / f"{base}.rank{rank}.hatchet"), root, {"CUDA": {str(rank): {"arch": "90"}}})


def straggler_profiles(tmp_path, base="t"):
    # rank 1 computes 30 ms longer per step; ranks 0 and 2 wait for it in all_reduce
    write_rank(tmp_path, base, 0, rank_tree(0, 3, 10, [32, 31], kernel_ms=8))
    write_rank(tmp_path, base, 1, rank_tree(1, 3, 70, [2, 1], kernel_ms=68))
    write_rank(tmp_path, base, 2, rank_tree(2, 3, 12, [30, 29, 5], kernel_ms=9))
    return [merge.read_rank_file(str(tmp_path / f"{base}.rank{r}.hatchet")) for r in range(3)]


def node_at(root, *names):
    n = root
    for name in names:
        n = next(c for c in n.children if c.name == name)
    return n


# -- merge --------------------------------------------------------------------------------------
def test_merge_sums_per_rank_columns_and_splits_collective_time(tmp_path):
    root, devinfo = merge.merge_profiles(straggler_profiles(tmp_path), 3)
    fwd = node_at(root, "step", "forward")
    assert fwd.metrics["time (ns)"] == (10 + 70 + 12) * NS
    assert [fwd.metrics[f"time (ns):rank{r}"] for r in range(3)] == [10 * NS, 70 * NS, 12 * NS]
    k = node_at(root, "step", "forward", "gemm_kernel")
    assert k.metrics["count:rank1"] == 2 and k.metrics["count"] == 6 and k.metrics["flops16:rank2"] == 1000
    ar = node_at(root, "step", "sync", "all_reduce")
    # call 0: 32, 2, 30 -> fastest 2; call 1: 31, 1, 29 -> fastest 1; rank 2's third call has no partner
    assert ar.metrics["wait (ns):rank0"] == (30 + 30) * NS
    assert ar.metrics["wait (ns):rank1"] == 0
    assert ar.metrics["wait (ns):rank2"] == (28 + 28) * NS
    assert ar.metrics["transfer (ns):rank2"] == (2 + 1 + 5) * NS
    for r in range(3):
        assert ar.metrics[f"wait (ns):rank{r}"] + ar.metrics[f"transfer (ns):rank{r}"] == ar.metrics[f"time (ns):rank{r}"]
    assert ar.extra["wait_estimate"]["matched_calls"] == 2
    assert ar.extra["wait_estimate"]["unmatched_calls"] == {"2": 1}
    assert "instances_ns" not in ar.extra
    d = root.extra["distributed"]
    assert d["merged"] and d["ranks"] == [0, 1, 2] and d["world_size"] == 3 and d["run_id"] == "run-a"
    assert d["per_rank"]["1"]["devices"] == ["CUDA 1"]
    assert sorted(devinfo["CUDA"]) == ["0", "1", "2"]


def test_merge_cli_names_missing_ranks_and_rejects_non_rank_files(tmp_path):
    straggler_profiles(tmp_path)
    os.remove(tmp_path / "t.rank2.hatchet")
    err = io.StringIO()
    out = str(tmp_path / "m.hatchet")
    sys_stderr = sys.stderr
    sys.stderr = err
    try:
        assert merge.main([str(tmp_path / "t.rank*.hatchet"), "-o", out]) == 0
        write_profile(str(tmp_path / "plain.hatchet"), ProfileNode("ROOT"))
        assert merge.main([str(tmp_path / "plain.hatchet"), "-o", out + "2"]) == 1
    finally:
        sys.stderr = sys_stderr
    assert "missing rank(s): 2" in err.getvalue()
    assert "not a per-rank profile" in err.getvalue()
    root, _ = read_profile(out)
    assert root.extra["distributed"]["missing"] == [2] and root.extra["distributed"]["ranks"] == [0, 1]


def test_gather_waits_bounded_then_merges_what_exists(tmp_path):
    straggler_profiles(tmp_path)
    os.remove(tmp_path / "t.rank1.hatchet")
    # a stale rank-2 file from another run is not taken
    write_rank(tmp_path, "t", 2, rank_tree(2, 3, 1, [1], run_id="run-old"))
    info = distributed.RankInfo(0, 3, 0, "run-a")
    said = []
    t0 = time.monotonic()
    path = merge.gather_and_merge(str(tmp_path / "t"), info, wall_start=time.time(), timeout=0.6, poll=0.05,
                                  say=said.append)
    assert 0.5 <= time.monotonic() - t0 < 5
    root, _ = read_profile(path)
    d = root.extra["distributed"]
    assert d["ranks"] == [0] and d["missing"] == [1, 2]
    assert "another run" in d["missing_reasons"]["2"] and d["missing_reasons"]["1"] == "no profile"
    assert any("without rank(s) 1, 2" in s for s in said)


def test_gather_picks_up_a_late_rank_and_stops_when_interrupted(tmp_path):
    straggler_profiles(tmp_path)
    late = read_profile(str(tmp_path / "t.rank2.hatchet"))[0]
    os.remove(tmp_path / "t.rank2.hatchet")
    timer = threading.Timer(0.3, lambda: write_rank(tmp_path, "t", 2, late))
    timer.start()
    info = distributed.RankInfo(0, 3, 0, "run-a")
    path = merge.gather_and_merge(str(tmp_path / "t"), info, wall_start=time.time(), timeout=30, poll=0.05,
                                  say=lambda m: None)
    timer.join()
    assert read_profile(path)[0].extra["distributed"]["missing"] == []
    # a SIGTERM/Ctrl-C during the wait (the CLI sets the event) ends it at once
    os.remove(tmp_path / "t.rank2.hatchet")
    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    t0 = time.monotonic()
    merge.gather_and_merge(str(tmp_path / "t"), info, wall_start=time.time(), timeout=60, poll=0.05, stop=stop,
                           say=lambda m: None)
    assert time.monotonic() - t0 < 5


def test_rank_naming_only_under_a_launcher(tmp_path, monkeypatch):
    import profiler
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert distributed.rank_info() is None
    sid = profiler.start(str(tmp_path / "plain"))
    assert profiler.finalize(sid) == [str(tmp_path / "plain.hatchet")]
    assert (read_profile(str(tmp_path / "plain.hatchet"))[0].extra or {}).get("distributed") is None

    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "abc")
    monkeypatch.setattr(distributed, "options", distributed.Options(host_collectives=False))
    sid = profiler.start(str(tmp_path / "train"))
    with profiler.scope("step"):
        time.sleep(0.001)
    assert profiler.finalize(sid) == [str(tmp_path / "train.rank1.hatchet")]  # rank 1 does not merge
    meta = read_profile(str(tmp_path / "train.rank1.hatchet"))[0].extra["distributed"]
    assert (meta["rank"], meta["world_size"], meta["local_rank"], meta["run_id"]) == (1, 2, 1, "abc")
    assert meta["host"] and meta["pid"] == os.getpid() and meta["backend"] == "cpu"
    monkeypatch.setenv("RANK", "5")  # not below WORLD_SIZE: not a launcher's environment
    assert distributed.rank_info() is None


def test_cli_merge_options(tmp_path, monkeypatch, capsys):
    from profiler import cli
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    monkeypatch.setattr(distributed, "options", distributed.Options(host_collectives=False))
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    script = tmp_path / "job.py"
    script.write_text("import profiler\nwith profiler.scope('s'):\n    pass\n")
    assert cli.main(["--no-merge", "-n", str(tmp_path / "a"), str(script)]) == 0
    assert sorted(p.name for p in tmp_path.glob("a.*")) == ["a.rank0.hatchet"]
    t0 = time.monotonic()
    assert cli.main(["--merge-timeout", "0.3", "-n", str(tmp_path / "b"), str(script)]) == 0
    assert time.monotonic() - t0 < 10
    err = capsys.readouterr().err
    assert "merging without rank(s) 1" in err and "wrote " + str(tmp_path / "b.merged.hatchet") in err
    assert read_profile(str(tmp_path / "b.merged.hatchet"))[0].extra["distributed"]["missing"] == [1]
    with pytest.raises(SystemExit):
        cli.main(["--merge-timeout", "-1", str(script)])
    assert "--merge-timeout must be 0 or more" in capsys.readouterr().err


def test_nccl_kernel_records_keep_per_call_durations(tmp_path, monkeypatch):
    """The path CUPTI records take (Session.add_gpu_record), fed by hand: NCCL kernels, mangled or
    not, keep each call's duration; other kernels do not."""
    import profiler
    from profiler import context, session
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setattr(distributed, "options", distributed.Options(host_collectives=False))
    sid = profiler.start(str(tmp_path / "g"))
    s = session.get(sid)
    node = context.intern(context.ROOT, "backward")
    nccl = "_Z33ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE"
    for i, dur in enumerate((5, 7, 6)):
        s.add_gpu_record(node, nccl, True, 0, 1000 * i, 1000 * i + dur, None, 7, i)
    s.add_gpu_record(node, "ampere_sgemm_128x64_nn", True, 0, 0, 50, None, 7, 9)
    paths = profiler.finalize(sid)
    assert paths == [str(tmp_path / "g.rank0.hatchet"), str(tmp_path / "g.merged.hatchet")]
    root, _ = read_profile(paths[0])
    kids = {c.name: c for c in node_at(root, "backward").children}
    [k] = [c for name, c in kids.items() if "ncclDevKernel_AllReduce" in name]
    assert k.extra["instances_ns"] == [5, 7, 6] and k.metrics["count"] == 3
    assert "instances_ns" not in (kids["ampere_sgemm_128x64_nn"].extra or {})
    merged, _ = read_profile(paths[1])
    [m] = [c for c in node_at(merged, "backward").children if "ncclDevKernel" in c.name]
    assert (m.metrics["wait (ns):rank0"], m.metrics["transfer (ns)"]) == (0, 18)


# -- viewer -------------------------------------------------------------------------------------
def viewer(*args):
    from profiler.viewer.cli import main
    out, err = io.StringIO(), io.StringIO()
    rc = main(list(args) + ["--no-color", "-w", "200"], stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue()


def table(out):
    """``{frame name: [column values]}`` of a viewer tree (the tree glyphs left out)."""
    rows = {}
    for line in out.splitlines()[1:]:
        toks = line.split()
        rows[toks[-1]] = [t for t in toks[:-1] if not set(t) <= set("│├└─")]
    return rows


def test_viewer_rank_metrics_and_single_rank_view(tmp_path):
    root, devinfo = merge.merge_profiles(straggler_profiles(tmp_path), 3)
    path = str(tmp_path / "t.merged.hatchet")
    write_profile(path, root, devinfo)
    rc, out, err = viewer(path, "-m", "time/ms:min,time/ms:median,time/ms:max,imbalance,time/ms:rank1,wait/ms:max")
    assert rc == 0, err
    lines = table(out)
    fwd = [float(x) for x in lines["forward"][:5]]
    # forward inclusive (with its kernel): rank0 18, rank1 138, rank2 21 ms
    assert fwd == [18.0, 21.0, 138.0, pytest.approx(138 / 21, abs=1e-3), 138.0]
    assert float(lines["all_reduce"][5]) == 60.0
    rc, out, _ = viewer(path)  # the default columns of a merged profile show the spread
    assert out.split()[:4] == ["time/ms:min", "time/ms:median", "time/ms:max", "imbalance"]
    rc, out, err = viewer(path, "--rank", "1", "-m", "time/ms,count")
    assert rc == 0, err
    lines = table(out)
    assert lines["forward"] == ["138.000", "2"] and lines["gemm_kernel"] == ["68.000", "2"]
    rc, _, err = viewer(path, "--rank", "7")
    assert rc == 1 and "rank 7 is not in t.merged.hatchet; ranks: 0, 1, 2" in err
    rc, _, err = viewer(str(tmp_path / "t.rank0.hatchet"), "--rank", "0")
    assert rc == 1 and "needs a merged profile" in err
    rc, out, _ = viewer(str(tmp_path / "t.rank0.hatchet"), "-m", "time")  # plain profiles are as before
    assert rc == 0 and "time (ns)" in out


# -- analyzer -----------------------------------------------------------------------------------
def test_straggler_diagnostic_names_rank_scope_kernel_collective(tmp_path):
    from analyzer.diagnostics import run_profile
    root, _ = merge.merge_profiles(straggler_profiles(tmp_path), 3)
    [d] = run_profile(root)
    assert (d.id, d.severity) == ("straggler-rank", "error")
    ev = d.evidence
    assert ev["slow_rank"] == 1 and ev["scope"] == "step/forward"
    assert [k["name"] for k in ev["kernels"]] == ["gemm_kernel"]
    assert ev["collective"]["path"] == "step/sync/all_reduce"
    assert "rank 1 is the straggler" in d.message and "step/sync/all_reduce" in d.message

    balanced = [merge.RankProfile(r, rank_tree(r, 2, 10, [5, 5]), {}, {"rank": r}) for r in range(2)]
    [d] = run_profile(merge.merge_profiles(balanced, 2)[0])
    assert (d.severity, d.title) == ("info", "ranks balanced")
    assert run_profile(rank_tree(0, 1, 10, [1])) == []  # a per-rank profile: nothing to compare


# -- end to end with gloo -----------------------------------------------------------------------
TRAIN = """
import os, time, torch, torch.distributed as dist, profiler
dist.init_process_group("gloo")
r, slow = dist.get_rank(), int(os.environ["SLOW_RANK"])
t = torch.ones(256)
for step in range(3):
    with profiler.scope("step"):
        with profiler.scope("forward"):
            (t * 2).sum()
            if r == slow:
                with profiler.scope("data_stall"):
                    time.sleep(0.08)
        with profiler.scope("sync"):
            dist.all_reduce(t)
dist.barrier()
dist.destroy_process_group()
"""


def check_run(tmp_path, world, slow, stderr):
    for r in range(world):
        meta = read_profile(str(tmp_path / f"train.rank{r}.hatchet"))[0].extra["distributed"]
        assert (meta["rank"], meta["world_size"], meta["backend"]) == (r, world, "cpu"), stderr
    root, _ = read_profile(str(tmp_path / "train.merged.hatchet"))
    d = root.extra["distributed"]
    assert d["ranks"] == list(range(world)) and d["missing"] == [], stderr
    ar = node_at(root, "step", "sync", "all_reduce")
    assert ar.metrics["count"] == 3 * world and ar.extra["wait_estimate"]["matched_calls"] == 3
    waits = [ar.metrics[f"wait (ns):rank{r}"] for r in range(world)]
    assert all(waits[r] > 3 * 50 * NS for r in range(world) if r != slow), waits  # waited ~3 x 80 ms for it
    assert waits[slow] < min(w for r, w in enumerate(waits) if r != slow) / 4, waits
    from analyzer.cli import main as analyze_main
    report = tmp_path / "report.json"
    assert analyze_main([str(tmp_path / "train.merged.hatchet"), "--json", "-o", str(report)]) == 0
    [diag] = json.loads(report.read_text())["profile_diagnostics"]
    assert diag["severity"] in ("warning", "error"), diag
    assert diag["evidence"]["slow_rank"] == slow and diag["evidence"]["scope"] == "step/forward/data_stall", diag
    assert diag["evidence"]["collective"]["path"] == "step/sync/all_reduce"


@pytest.mark.slow
def test_torchrun_three_ranks_gloo_slow_rank_found(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""), SLOW_RANK="1",
               KPROF_BACKEND="cpu")
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "3",
                        "-m", "kprof", "-n", "train", "--merge-timeout", "60", "train.py"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "wrote train.merged.hatchet" in r.stderr
    check_run(tmp_path, 3, 1, r.stderr)


@pytest.mark.slow
def test_plain_launcher_two_ranks_gloo(tmp_path):
    """Any launcher that sets RANK/WORLD_SIZE (here: two processes started by hand, no run id)."""
    import socket
    (tmp_path / "train.py").write_text(TRAIN)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(2):
        env = {"RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank), "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": str(port), "SLOW_RANK": "0", "KPROF_BACKEND": "cpu", "OMP_NUM_THREADS": "1"}
        e = {k: v for k, v in os.environ.items() if k not in ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID")}
        e.update(env, PYTHONPATH=REPO)
        procs.append(subprocess.Popen([sys.executable, "-m", "kprof", "-n", "train", "train.py"], cwd=tmp_path,
                                      env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    errs = []
    for p in procs:
        _, err = p.communicate(timeout=300)
        errs.append(err)
        assert p.returncode == 0, err[-4000:]
    assert "wrote train.merged.hatchet" in errs[0] and "merged" not in errs[1]
    check_run(tmp_path, 2, 0, "\n".join(errs))
