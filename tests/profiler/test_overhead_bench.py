"""bench/reconcile_profilers.py ``overhead`` on CPU: the statistics of :func:`summarize` on known
numbers, and one child process (pinning, cold blocks, AB/BA pairs) with kprof's cpu backend."""
import contextlib
import json
import math
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
    assert s["kprof"]["bracket_over_floor_%"] == pytest.approx(10.0, abs=0.01)


def test_in_process_control_and_cpu_time():
    """Each process's own control: adjacent unprofiled blocks (A B | B A | A B | B A: blocks 1-2 and
    3-4 of the unprofiled ones); warm_cpu pairs each profiled block's CPU time with its unprofiled one."""
    r = _child("kprof", [1.2, 1.2, 1.2, 1.2], unprof=[10.0, 10.0, 10.4, 10.0, 9.0])
    assert rp._aa(r) == pytest.approx([1.04, 0.9])
    # bracket: time order u0 p0 p1 u1 u2 p2 p3 u3 -- p0 and p1 between u0 and u1, p2 and p3 between u2 and u3
    assert rp._bracket(r) == pytest.approx([12.0 / 10.0, 12.0 / 10.0, 12.48 / 10.2, 12.0 / 10.2])
    sched = []
    for i, (u, p) in enumerate([(10.0, 11.0), (20.0, 24.0)]):
        blocks = [("u", {"all_run_ms": u, "all_wait_ms": 1.0}), ("p", {"all_run_ms": p, "all_wait_ms": 1.0})]
        sched += blocks if i % 2 == 0 else blocks[::-1]
    r["sched"] = sched
    assert rp._pair_sched(r, "all_run_ms") == pytest.approx([1.1, 1.2])
    assert rp._pair_sched(r, "instr") == []          # a machine without a PMU: no instruction counts
    r["loop_stats"] = [{"callback_ns": 2_000_000, "buffers": 3}, {"callback_ns": 4_000_000, "buffers": 5}]
    s = rp.summarize([r, _child("none", [1.0, 1.0], unprof=[10.0, 10.0, 10.2])], reps=200)
    assert s["kprof"]["warm_cpu"] == pytest.approx(1.15)
    assert s["kprof"]["loop_stats"] == {"callback_ms": 3.0, "buffers": 4}
    assert s["kprof"]["aa_per_process"] == [pytest.approx(0.97)]
    assert s["_aa"]["processes"] == 2 and s["_aa"]["spread_%"] == pytest.approx(5.0)


def test_child_on_cpu(tmp_path):
    spec = {"workload": "tiny", "profiler": "kprof-deferred", "device": "cpu", "out": str(tmp_path / "p"),
            "warmup": 20, "block_s": 0.02, "steps": 200, "pre": 2, "min_pairs": 2, "max_pairs": 2,
            "deadline": time.time() + 60, "cpus": sorted(os.sched_getaffinity(0))[:1], "threads": 1, "buffer": 0,
            "pin_threads": True}
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
    # per timed block (2 pairs: u p p u): which it was and the scheduler's counters over it
    assert [k for k, _ in r["sched"]] == ["u", "p", "p", "u"]
    assert all(d["all_run_ms"] >= 0 and d["all_wait_ms"] >= 0 for _, d in r["sched"])
    assert sum(d["all_run_ms"] for _, d in r["sched"]) > 0
    assert all(d["cores_busy_ms"] >= 0 and d["cores_steal_ms"] >= 0 for _, d in r["sched"])
    # what moved with each block: the CPU probe, the queued tail, CPU time per thread name (the main thread's
    # is most of a single-threaded loop's)
    assert all(d["probe_us"] > 0 and d["tail_ms"] >= 0 for _, d in r["sched"])
    assert all(d["threads_ms"].get("main", 0) > 0 for _, d in r["sched"])
    assert r["pin_threads"] is True and r["cpu_latency0"] is None
    s = rp.summarize([r], reps=50)[r["profiler"]]
    assert s["cpu_share_by_thread"]["main"] > 0.5
    assert s["probe_us_range"][0] > 0 and 0 <= s["tail_share_median"] <= 1
    assert list(r["setup_phases_s"]) == ["torch", "workload", "warmup", "cold", "prime"]
    assert os.path.exists(str(tmp_path / "p_0.hatchet")) and os.path.exists(str(tmp_path / "p_1.hatchet"))


def test_child_against_another_kprof_variant(tmp_path):
    """--against: both blocks of every pair profiled, one per variant, in one process."""
    spec = {"workload": "tiny", "profiler": "kprof-split", "against": "kprof-deferred", "device": "cpu",
            "out": str(tmp_path / "p"), "warmup": 20, "block_s": 0.02, "steps": 100, "pre": 1, "min_pairs": 2,
            "max_pairs": 2, "deadline": time.time() + 60, "cpus": None, "threads": 1, "buffer": 0}
    env = dict(os.environ, PYTHONPATH=REPO, KPROF_BACKEND="cpu")
    p = subprocess.run([sys.executable, os.path.join(REPO, "bench", "reconcile_profilers.py"), "_overhead_child",
                        json.dumps(spec)], env=env, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert p.returncode == 0, p.stderr[-2000:]
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["against"] == "kprof-deferred" and len(r["warm"]) == 2
    assert [k for k, _ in r["sched"]] == ["p"] * 4   # no unprofiled block after the cold one
    for name in ("p_0", "p_1", "p_kprof-deferred_0", "p_kprof-deferred_1"):
        assert os.path.exists(str(tmp_path / f"{name}.hatchet")), name


def test_kprof_variants_alternate_in_one_process(tmp_path, monkeypatch):
    """A variant's knobs do not outlive its block: the next variant starts from the defaults."""
    from profiler import options
    monkeypatch.setenv("KPROF_BACKEND", "cpu")
    try:
        rp._start("kprof-ext", str(tmp_path / "m"))()
        assert options._overrides.get("cupti_attribution") == "external-correlation"
        rp._start("kprof", str(tmp_path / "k"))()
        assert options.get("cupti_attribution") == "api-records"
    finally:
        for k in {k for kn, _ in rp.KPROF_VARIANTS.values() for k in kn}:
            options.set_override(k, None)


def test_against_takes_kprof_variants_floors_and_proton_only(capsys):
    """--against: kprof variants, the floors (which re-register their callbacks per start) and Proton (whose
    finalize releases CUPTI); not the unprofiled control or torch.profiler, which do not share CUPTI that way."""
    for other in ("none", "torch"):
        with pytest.raises(SystemExit):
            rp.main(["overhead", "--device", "cpu", "--profilers", "kprof", "--against", other])
        assert "only; not: " + other in capsys.readouterr().err
    assert {"floor", "floor-raw", "floor-api", "floor-sub", "kprof", "kprof-nosub", "proton"} <= rp.AGAINST_OK


def test_proton_block_opens_proton_scopes_and_floor_reregisters_after(monkeypatch):
    """A Proton block (--against): ``profiler.scope`` is Proton's while it runs (train looks it up per use;
    the encoder gets ``_dyn_scope``) and kprof's again after its stop; a floor started next registers its
    CUPTI callbacks again (Proton's finalize released CUPTI); before a Proton block that follows one on
    cupti-python's CUPTI, that CUPTI is detached (cupti.finalize: one libcupti copy attached at a time)."""
    import profiler
    real = profiler.scope
    calls = []

    def pscope(name, metrics=None):
        calls.append(("scope", name, metrics))
        return contextlib.nullcontext()

    prot = type(sys)("triton.profiler")
    prot.scope = pscope
    prot.start = lambda out, hook=None: calls.append(("start", hook))
    prot.finalize = lambda: calls.append(("finalize",))
    tri = type(sys)("triton")
    tri.profiler = prot
    monkeypatch.setitem(sys.modules, "triton", tri)
    monkeypatch.setitem(sys.modules, "triton.profiler", prot)

    class FakeCupti:
        class ActivityKind:
            CONCURRENT_KERNEL, MEMCPY, MEMSET = 1, 2, 3

        def activity_register_callbacks(self, req, done):
            calls.append(("register",))

        def activity_enable(self, k):
            pass

        activity_disable = activity_flush_all = activity_enable

        def finalize(self):
            calls.append(("cupti.finalize",))

    fake = type(sys)("cupti")
    fake.cupti = FakeCupti()
    monkeypatch.setitem(sys.modules, "cupti", fake)
    monkeypatch.setattr(rp, "_CB_OWNER", ["floor"])
    monkeypatch.setattr(rp, "_REAL_SCOPE", [None])
    try:
        stop = rp._start("proton", "x")
        assert profiler.scope is pscope and rp._CB_OWNER[0] == "proton"
        with rp._dyn_scope("attn", {"flops": 2}):
            pass
        stop()
        assert profiler.scope is real
        with rp._dyn_scope("mlp"):
            pass
        rp._start("floor", "x")()
        assert calls == [("cupti.finalize",), ("start", "triton"), ("scope", "attn", {"flops": 2}), ("finalize",),
                         ("register",)]
        calls.clear()
        rp._start("proton", "x")()   # after the floor: cupti-python's CUPTI is detached again first
        rp._start("proton", "x")()   # after Proton: nothing to detach
        assert [c[0] for c in calls] == ["cupti.finalize", "start", "finalize", "start", "finalize"]
    finally:
        profiler.scope = real


def test_floor_reregisters_after_kprof(monkeypatch):
    """A floor started after a kprof block gives CUPTI its own buffer callbacks again (kprof's start
    registered kprof's), and only then: a second floor start in a row registers nothing."""
    calls = []

    class FakeCupti:
        class ActivityKind:
            CONCURRENT_KERNEL, MEMCPY, MEMSET = 1, 2, 3

        def activity_register_callbacks(self, req, done):
            calls.append("register")

        def activity_enable(self, k):
            pass

        def activity_disable(self, k):
            pass

        def activity_flush_all(self, f):
            pass

    fake = type(sys)("cupti")
    fake.cupti = FakeCupti()
    monkeypatch.setitem(sys.modules, "cupti", fake)
    monkeypatch.setattr(rp, "_CB_OWNER", ["kprof"])
    rp._start("floor", "x")()
    rp._start("floor", "x")()
    assert calls == ["register"]
    rp._CB_OWNER[0] = "kprof"
    rp._start("floor", "x")()
    assert calls == ["register", "register"]


def test_nosub_leaves_graph_callbacks_off_and_restores():
    """kprof-nosub's patch: the graph-node ids are not enabled while it is on; off, the method is kprof's."""
    from profiler.backends import cupti as kc
    orig = kc.CuptiBackend._enable_callbacks
    enabled = []

    class B:
        GRAPHNODE_CREATED, GRAPHNODE_CLONED = 7, 8

    def fake_orig(self, on):
        enabled.extend([self.GRAPHNODE_CREATED, self.GRAPHNODE_CLONED])
    kc.CuptiBackend._enable_callbacks = fake_orig
    try:
        rp._nosub(True)
        b = B()
        kc.CuptiBackend._enable_callbacks(b, 1)
        assert enabled == [-1, -1] and (b.GRAPHNODE_CREATED, b.GRAPHNODE_CLONED) == (7, 8)
        rp._nosub(False)
        assert kc.CuptiBackend._enable_callbacks is fake_orig
    finally:
        kc.CuptiBackend._enable_callbacks = orig


def test_forked_child_on_cpu(tmp_path, monkeypatch):
    """``--spawn fork``: the child is forked from a server that imported torch, runs the same blocks and
    sends the same result back; a child that fails reports its traceback."""
    monkeypatch.setenv("KPROF_BACKEND", "cpu")
    monkeypatch.setenv("PYTHONPATH", REPO)
    monkeypatch.setattr(rp, "_FORK", {"ctx": None, "broken": None})
    rp._start_forkserver()
    assert rp._FORK["broken"] is None, rp._FORK["broken"]
    spec = {"workload": "tiny", "profiler": "kprof", "device": "cpu", "out": str(tmp_path / "f"),
            "warmup": 5, "block_s": 0.02, "steps": 100, "pre": 1, "min_pairs": 2, "max_pairs": 2,
            "deadline": time.time() + 60, "cpus": None, "threads": 1, "buffer": 0}
    r = rp._run_forked_child(spec)
    assert r["profiler"] == "kprof" and len(r["warm"]) == 2 and r["kprof_state"]["backend"] == "cpu"
    assert r["setup_phases_s"]["torch"] < 5.0      # torch came with the fork, not imported again
    assert os.path.exists(str(tmp_path / "f_0.hatchet"))
    with pytest.raises(RuntimeError, match="no_such_workload"):
        rp._run_forked_child(dict(spec, workload="no_such_workload"))


def test_pin_threads_main_apart(tmp_path):
    """--pin-threads: the main thread on the first core, a thread started before on the others."""
    avail = sorted(os.sched_getaffinity(0))
    if len(avail) < 2:
        pytest.skip("needs two cores")
    code = ("import os, sys, threading, time, json; sys.path.insert(0, %r);"
            "from bench import reconcile_profilers as rp;"
            "ev = threading.Event(); ids = [];"
            "t = threading.Thread(target=lambda: (ids.append(threading.get_native_id()), ev.wait())); t.start();"
            "time.sleep(0.2); rp._pin_threads(%r);"
            "print(json.dumps([sorted(os.sched_getaffinity(0)), sorted(os.sched_getaffinity(ids[0]))]));"
            "ev.set(); t.join()") % (REPO, avail[:2])
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    main, other = json.loads(p.stdout)
    assert main == avail[:1] and other == avail[1:2]


def test_instructions_over_floor():
    """Instructions per block (where the machine has a PMU): profiled over unprofiled, per pair, and over the
    floor's -- a ratio of work that the host CPU's clock does not move."""
    def child(prof, warm_instr):
        r = _child(prof, [1.0] * len(warm_instr))
        r["sched"] = []
        for i, w in enumerate(warm_instr):
            blocks = [("u", {"all_run_ms": 1.0, "all_wait_ms": 0.0, "instr": 1_000_000}),
                      ("p", {"all_run_ms": 1.0, "all_wait_ms": 0.0, "instr": int(1_000_000 * w)})]
            r["sched"] += blocks if i % 2 == 0 else blocks[::-1]
        return r
    s = rp.summarize([child("none", [1.0, 1.0]), child("floor", [1.10, 1.10]), child("kprof", [1.111, 1.111])],
                     reps=100)
    assert s["floor"]["warm_instr"] == pytest.approx(1.10) and s["floor"]["instr_per_process"] == [1.1]
    assert s["kprof"]["instr_over_floor_%"] == pytest.approx(1.0) and s["kprof"]["instr_over_floor_ci_%"] == [1.0, 1.0]


def test_instruction_counter_where_available():
    """perf_event_open through ctypes: either the machine has no usable PMU (``ok`` False, as in most
    containers and VMs without one), or a loop's instructions are counted and grow with the loop."""
    ins = rp._Instr()
    if not ins.ok:
        assert ins.start() == []
        return
    def count(n):
        fds = ins.start()
        x = 0
        for i in range(n):
            x += i
        return ins.stop(fds)
    small, big = count(10_000), count(1_000_000)
    assert 0 < small < big


def test_cpu_set_option():
    avail = sorted(os.sched_getaffinity(0))
    assert rp._cpu_set("none") is None
    assert rp._cpu_set(f"{avail[0]}") == [avail[0]]
    with pytest.raises(SystemExit, match="--cpus"):
        rp._cpu_set("100000-100001")


def test_forked_child_failing_keeps_fork(tmp_path, monkeypatch):
    """A forked child that fails on its own (here floor-api: no CUPTI on CPU) gets an error row; the fork
    server is not given up for the children after it (the 2026-11-27 GPU run fell back to exec that way)."""
    monkeypatch.setenv("KPROF_BACKEND", "cpu")
    monkeypatch.setenv("PYTHONPATH", REPO)
    monkeypatch.setattr(rp, "_FORK", {"ctx": None, "broken": None})
    rc = rp.main(["overhead", "--workloads", "tiny", "--profilers", "floor-api,none", "--budget", "6", "--grace", "3",
                  "--spawn", "fork", "--cpus", "none", "--device", "cpu", "--block-s", "0.02", "--min-pairs", "2",
                  "--max-pairs", "2", "--settle-pairs", "0", "--results-dir", str(tmp_path), "--name", "forkerr"])
    assert rc == 0 and rp._FORK["broken"] is None
    rows = json.load(open(tmp_path / "forkerr.json"))
    rows = rows.get("rows", rows) if isinstance(rows, dict) else rows
    by = {(r["profiler"], r["round"]): r for r in rows}
    assert "error" in by[("floor-api", 0)] and by[("none", 1)]["pairs"] == 2


def _ref_sched(kinds, rates):
    return [(k, {"all_run_ms": 1.0, "all_wait_ms": 0.0, "ref_rate": x}) for k, x in zip(kinds, rates)]


def test_reference_speed_corrects_a_host_wide_slowdown():
    """``--ref-cpu``: a block's time times the reference core's speed during it is the block's time at a fixed
    host speed.  Pairs whose raw ratios carry a 2x host slowdown (the profiled block ran in the slow phase)
    give the true 1.1 once corrected; the control's spread from such phases goes to 0."""
    order = ["u", "p", "p", "u"]    # time order of two pairs (AB, BA)
    r = _child("kprof", [2.2, 1.1], unprof=[10.0, 10.0])          # raw: 22/10 and 11/10
    r["sched"] = _ref_sched(order, [1000.0, 500.0, 800.0, 800.0])  # pair 0's profiled block at half speed
    assert rp._pair_ref(r) == pytest.approx([1.1, 1.1])
    c1 = _child("none", [1.0, 2.0], unprof=[10.0, 10.0])
    c1["sched"] = _ref_sched(order, [100.0, 100.0, 50.0, 100.0])
    c2 = _child("none", [1.0, 1.0], unprof=[10.0, 10.0])
    c2["sched"] = _ref_sched(order, [70.0] * 4)
    s = rp.summarize([r, c1, c2], reps=100)
    assert s["none"]["spread_%"] == pytest.approx(50.0)             # medians 1.5 and 1.0, raw
    assert s["none"]["spread_ref_%"] == pytest.approx(0.0) and s["none"]["warm_ref"] == pytest.approx(1.0)
    assert s["kprof"]["warm_ref"] == pytest.approx(1.1)
    r.pop("sched")
    assert rp._pair_ref(r) == []                                    # no reference process: nothing to correct


def test_overhead_run_with_a_reference_core(tmp_path, monkeypatch):
    """A whole ``overhead`` run on CPU with ``--ref-cpu``: every timed block records the reference core's
    speed, and the summary has the corrected ratios."""
    monkeypatch.setenv("KPROF_BACKEND", "cpu")
    monkeypatch.setenv("PYTHONPATH", REPO)
    cpu = sorted(os.sched_getaffinity(0))[-1]
    rc = rp.main(["overhead", "--workloads", "tiny", "--profilers", "none", "--budget", "6", "--grace", "3",
                  "--rounds", "1", "--cpus", "none", "--device", "cpu", "--block-s", "0.1", "--min-pairs", "2",
                  "--max-pairs", "2", "--settle-pairs", "0", "--ref-cpu", str(cpu), "--results-dir", str(tmp_path), "--name", "ref"])
    assert rc == 0
    meta = json.load(open(tmp_path / "ref.json"))
    kids = meta["children"]
    rates = [d["ref_rate"] for k in kids for _, d in k["sched"]]
    # every block has a rate; on a loaded 2-core machine the reference may not run inside a block
    assert kids and rates and all(x >= 0 for x in rates) and max(rates) > 0
    e = meta["summary"]["tiny"]["profilers"]["none"]
    assert e["warm_ref"] > 0 and e["spread_ref_%"] is not None and e["ref_rate_range"][0] > 0


def test_reference_counter_process(tmp_path):
    """The reference process counts on its core and a reader sees the count rise; it stops when killed."""
    cpu = sorted(os.sched_getaffinity(0))[-1]
    path, proc = rp._start_ref(cpu)
    try:
        reader = rp._RefReader(path)
        a = reader.read()
        time.sleep(0.2)
        b = reader.read()
        assert a > 0 and b > a
        assert rp._RefReader(None).read() is None
    finally:
        proc.kill()
        proc.wait(10)
        os.unlink(path)


def _probe_block(kind, work_us, speeds, probe_work_us=300.0):
    """A block of segments of ``work_us`` each at the host speeds ``speeds`` (one per probe: len(seg) + 1);
    each segment runs at the mean speed of the probes around it."""
    seg = [work_us / ((a + b) / 2) for a, b in zip(speeds[:-1], speeds[1:])]
    return (kind, {"all_run_ms": 1.0, "all_wait_ms": 0.0, "seg_us": seg,
                   "seg_probe_us": [probe_work_us / v for v in speeds]})


def test_step_probe_scales_segments_by_their_core_speed():
    """``--step-probe``: each segment's time times its core's speed around it (read from the probes before and
    after it) is its time at a fixed speed.  A pair whose profiled block ran at half speed for part of the
    block gives the true 1.1, where the raw ratio does not; the A/A of a control with slow phases goes to 1."""
    slow = [1.0, 1.0, 0.5, 0.5, 0.5, 1.0]          # a slow phase inside the block
    order = ["u", "p", "p", "u"]                   # AB, BA
    r = _child("kprof", [1.5, 1.1], unprof=[10.0, 10.0])
    r["sched"] = [_probe_block("u", 1000.0, [1.0] * 6), _probe_block("p", 1100.0, slow),
                  _probe_block("p", 1100.0, [0.8] * 6), _probe_block("u", 1000.0, [0.8] * 6)]
    assert [k for k, _ in r["sched"]] == order
    assert rp._pair_probe(r) == pytest.approx([1.1, 1.1])
    # the smoothed probe agrees where no single probe stands out, and is not fooled by one stalled probe
    assert rp._pair_probe(r, "probe-med") == pytest.approx([1.1, 1.1], rel=0.2)
    stalled = _probe_block("u", 1000.0, [1.0] * 6)
    stalled[1]["seg_probe_us"][3] *= 10           # one probe hit by a 3 ms stall; the segments were not
    assert rp._probe_norm(stalled[1], "probe-med") == pytest.approx(rp._probe_norm(_probe_block("u", 1000.0, [1.0] * 6)[1]))
    assert rp._probe_norm(stalled[1], "probe") < 0.9 * rp._probe_norm(stalled[1], "probe-med")
    c = _child("none", [2.0, 1.0, 1.0, 1.0], unprof=[10.0] * 4)
    # time order u p | p u | u p | p u: the unprofiled blocks (0, 3, 4, 7) at different speeds
    c["sched"] = [_probe_block("u", 1000.0, sp) for sp in
                  [[1.0] * 6, [1.0] * 6, [1.0] * 6, [0.5] * 6, slow, [1.0] * 6, [1.0] * 6, [0.8] * 6]]
    assert rp._aa_probe(c) == pytest.approx([1.0])                   # blocks 3 and 4, 30% apart raw
    s = rp.summarize([r, c], reps=100)
    assert s["kprof"]["warm_probe"] == pytest.approx(1.1) and s["none"]["warm_probe"] == pytest.approx(1.0)
    assert s["none"]["spread_probe_%"] == pytest.approx(0.0)
    assert s["none"]["slope_seg_speed"] == pytest.approx(-1.0, abs=0.05)   # segments scale with the speed
    r.pop("sched")
    assert rp._pair_probe(r) == [] and rp._aa_probe(r) == []        # no probes: nothing to scale


def test_overhead_child_with_step_probe(tmp_path, monkeypatch):
    """A whole ``overhead`` run on CPU with ``--step-probe``: every block is a whole number of segments, each
    with a probe on both sides, and the block time is the segments' time (probes left out)."""
    monkeypatch.setenv("KPROF_BACKEND", "cpu")
    monkeypatch.setenv("PYTHONPATH", REPO)
    rc = rp.main(["overhead", "--workloads", "tiny", "--profilers", "none,kprof", "--budget", "10", "--grace", "10",
                  "--rounds", "1", "--cpus", "none", "--device", "cpu", "--block-s", "0.05", "--min-pairs", "2",
                  "--max-pairs", "2", "--settle-pairs", "0", "--step-probe", "500", "--probe-seg-ms", "1", "--pre", "1",
                  "--results-dir", str(tmp_path), "--name", "probe"])
    assert rc == 0
    meta = json.load(open(tmp_path / "probe.json"))
    for k in meta["children"]:
        assert k["step_probe"] == 500 and k["seg_steps"] >= 1 and k["steps_per_block"] % k["seg_steps"] == 0
        for (_, d), (_, ms) in zip(k["sched"], rp._sequence(k)):
            assert len(d["seg_us"]) == k["steps_per_block"] // k["seg_steps"]
            assert len(d["seg_probe_us"]) == len(d["seg_us"]) + 1 and min(d["seg_probe_us"]) > 0
            # the block's time is its segments' plus the final sync's tail (no probes): us rounded to 0.1
            assert sum(d["seg_us"]) / 1e3 / k["steps_per_block"] <= ms * (1 + 1e-4) + 1e-4 / k["seg_steps"]
    e = meta["summary"]["tiny"]["profilers"]["kprof"]
    assert e["warm_probe"] > 0 and e["warm_probe_ci"][0] <= e["warm_probe"] <= e["warm_probe_ci"][1]
    assert meta["summary"]["tiny"]["control_spread_probe_%"] is not None


def test_probe_fit_picks_the_exponent_the_control_follows():
    """``probe-fit``: where the steps slow down by only speed**0.7 of what the probe says (a launch path slows
    less than the pure-Python probe), the beta chosen on the control's successive unprofiled blocks is 0.7,
    and with it a profiled block in a slow phase gives the true ratio, where beta = 1 over-corrects."""
    def block(kind, work, speed, beta=0.7):
        n = 6
        return (kind, {"all_run_ms": 1.0, "all_wait_ms": 0.0, "seg_us": [work / speed ** beta] * n,
                       "seg_probe_us": [300.0 / speed] * (n + 1)})
    speeds = [1.0, 0.6, 0.8, 1.0, 0.5, 0.9, 0.7, 1.0]
    c = _child("none", [1.0] * 4, unprof=[10.0] * 4)
    c["sched"] = [block("u", 1000.0, v) for v in speeds]
    r = _child("kprof", [1.0, 1.0], unprof=[10.0, 10.0])
    r["sched"] = [block("u", 1000.0, 1.0), block("p", 1100.0, 0.5), block("p", 1100.0, 1.0), block("u", 1000.0, 0.8)]
    assert rp._fit_beta([c, r]) == pytest.approx(0.7)
    assert rp._pair_probe(r, "probe-fit", 0.7) == pytest.approx([1.1, 1.1])
    assert rp._pair_probe(r, "probe")[0] == pytest.approx(1.1 * 0.5 ** 0.3)   # beta 1: over-corrected
    s = rp.summarize([c, r], reps=100)
    assert s["_probe_beta"] == pytest.approx(0.7) and s["kprof"]["warm_probe_fit"] == pytest.approx(1.1)
    assert s["none"]["spread_probe_fit_%"] == pytest.approx(0.0)
    # --probe-beta: the exponent fixed before the run is used; the fitted one is still reported
    s = rp.summarize([c, r], reps=100, beta=1.0)
    assert s["_probe_beta"] == 1.0 and s["_probe_beta_fitted"] == pytest.approx(0.7)
    over = rp._pair_probe(r, "probe-fit", 1.0)
    assert s["kprof"]["warm_probe_fit"] == pytest.approx(round(sum(over) / 2, 4))
    assert abs(s["kprof"]["warm_probe_fit"] - 1.1) > 0.01
    assert rp._betas("train=0.15, encoder=0.7") == {"train": 0.15, "encoder": 0.7} and rp._betas("") == {}


def test_sign_interval_is_the_binomial_one():
    """The sign test's 95% interval of a median of 20 values is their 6th and 15th (the binomial table's);
    fewer than 6 values give no interval."""
    m, lo, hi = rp._sign_ci([float(v) for v in range(20, 0, -1)])
    assert (m, lo, hi) == (10.5, 6.0, 15.0)
    assert rp._sign_ci([1.0, 2.0, 3.0]) == (2.0, None, None)
    assert rp._sign_ci([]) == (None, None, None)


def test_hodges_lehmann_cost_over_the_floor():
    """kprof's pair ratios 5% above the floor's, both with the same spread: the shift is +5% and inside its
    Mann-Whitney interval; a few wild pairs (blocks in a slow phase of the host) barely move it, where the
    ratio of the means moves by a lot; the same sets give 0 with an interval across it."""
    floor = [1.10 * (1 + 0.01 * k) for k in (-3, -2, -1, 0, 1, 2, 3)] * 2
    kprof = [1.05 * x for x in floor]
    v, lo, hi = rp._hl_over(kprof, floor)
    assert v == pytest.approx(5.0, abs=0.01) and lo < 5.0 < hi and hi - lo < 5
    wild = kprof[:-2] + [1.6, 1.7]
    assert rp._hl_over(wild, floor)[0] == pytest.approx(5.0, abs=1.1)
    assert 100 * (sum(wild) / len(wild) / (sum(floor) / len(floor)) - 1) > 9
    v, lo, hi = rp._hl_over(floor, floor)
    assert v == pytest.approx(0.0, abs=1e-9) and lo < 0 < hi
    assert rp._hl_over(kprof[:3], floor)[1:] == (None, None)    # too few pairs for an interval
    s = rp.summarize([_child("floor", floor), _child("kprof", kprof), _child("none", [1.0] * 8)], reps=100)
    assert s["kprof"]["hl_over_floor_%"] == pytest.approx(5.0, abs=0.01)
    assert s["kprof"]["warm_sign_ci"][0] <= s["kprof"]["warm"] <= s["kprof"]["warm_sign_ci"][1]
    table = rp.overhead_table({"tiny": rp._workload_summary(s, [])})
    assert "kprof" in table and "+5.00%" in table


def test_reanalyse_gives_the_run_s_own_summary(tmp_path, monkeypatch):
    """``--reanalyse``: the summaries rebuilt from a results file's raw blocks are the run's own."""
    monkeypatch.setenv("KPROF_BACKEND", "cpu")
    monkeypatch.setenv("PYTHONPATH", REPO)
    rc = rp.main(["overhead", "--workloads", "tiny", "--profilers", "none,kprof", "--budget", "8", "--grace", "8",
                  "--rounds", "1", "--cpus", "none", "--device", "cpu", "--block-s", "0.03", "--min-pairs", "2",
                  "--max-pairs", "2", "--pre", "1", "--results-dir", str(tmp_path), "--name", "run",
                  "--settle-pairs", "0"])
    assert rc == 0
    assert rp.main(["overhead", "--reanalyse", str(tmp_path / "run.json"), "--name", "again",
                    "--results-dir", str(tmp_path), "--settle-pairs", "0"]) == 0
    a = json.load(open(tmp_path / "run.json"))["summary"]["tiny"]["profilers"]
    b = json.load(open(tmp_path / "again.json"))["summary"]["tiny"]["profilers"]
    for p in ("none", "kprof"):
        assert b[p]["warm"] == a[p]["warm"] and b[p]["pairs"] == a[p]["pairs"]
        assert b[p]["warm_ci"] == a[p]["warm_ci"]
    run = str(tmp_path / "run.json")   # two files: their processes pooled
    assert rp.main(["overhead", "--reanalyse", f"{run},{run}", "--name", "pooled", "--results-dir", str(tmp_path),
                    "--settle-pairs", "0"]) == 0
    c = json.load(open(tmp_path / "pooled.json"))["summary"]["tiny"]["profilers"]
    assert c["kprof"]["pairs"] == 2 * a["kprof"]["pairs"] and c["kprof"]["warm"] == a["kprof"]["warm"]


def test_reconcile_agreement_flags_counts_and_big_rows():
    """``reconcile``'s agreement per profiler: a key whose count differs is named, a key only the reference
    has is counted with its time, and the worst difference over the rows of >= 1% of the time leaves
    out a tiny row's larger one."""
    ref = {"a": (900e6, [100], 0), "b": (95e6, [50], 0), "c": (4e6, [10], 0), "memset": (1e6, [7], 0)}
    kp = {"a": (909e6, [100], 0), "b": (95e6, [51], 0), "c": (4e6, [10], 0), "memset": (1.1e6, [7], 0)}
    total = sum(v[0] for v in ref.values())
    ag = rp._agreement({"cupti": ref, "kprof": kp, "proton": {"a": (900e6, [100], 0)}},
                       ["cupti", "kprof", "proton"], "cupti", total)
    k = ag["kprof"]
    assert k["count_mismatches"] == 1 and k["count_mismatch_keys"] == ["b"]
    assert k["worst_over_1%"] == ["a", 1.0] and k["rows_over_1%"] == 2
    assert k["worst_any"][0] == "memset" and k["worst_any"][1] == pytest.approx(10.0)
    p = ag["proton"]
    assert p["only_in_ref"] == 3 and p["only_in_ref_ms"] == pytest.approx(100.0)
    assert p["total_vs_ref_%"] == pytest.approx(-10.0)


def test_settle_pairs_leaves_the_first_pairs_out():
    """``--settle-pairs 4``: every statistic starts at each process's fifth pair (an odd count is rounded up, so
    the pairs left start with an AB pair); a process with fewer than 2 pairs left is left out and counted."""
    early = [0.97, 0.96, 0.98, 0.97]
    r = _child("kprof", early + [1.10] * 4, unprof=[10.0] * 8)
    r["sched"] = [(k, {"all_run_ms": 1.0, "all_wait_ms": 0.0}) for i in range(8) for k in (("u", "p") if i % 2 == 0 else ("p", "u"))]
    short = _child("kprof", [1.5] * 5)
    s = rp.summarize([r, short, _child("none", [1.0] * 8)], reps=50, settle=4)
    assert s["kprof"]["warm"] == pytest.approx(1.10) and s["kprof"]["pairs"] == 4
    assert s["_settle"] == {"pairs_dropped_per_process": 4, "processes_dropped": 1}
    assert rp._settled(r, 3)["warm"] == [1.10] * 4 and rp._settled(r, 3)["sched"] == r["sched"][8:]
    assert rp._settled(r, 0) is r
    assert rp.summarize([r], reps=50)["kprof"]["warm"] < 1.10    # without settling the early pairs pull it down


def test_control_noise_tells_within_from_between():
    """The control's spread split into what each process's own pairs explain and what they do not: two
    processes drawn from one distribution give a large chi-square p-value and an expected spread of the order
    of the observed one; two processes 5% apart with the same pair noise give p ~ 0."""
    import random
    rnd = random.Random(1)
    same = [_child("none", [math.exp(rnd.gauss(0, 0.03)) for _ in range(20)]) for _ in range(2)]
    cn = rp.control_noise(same)
    assert cn["n"] == [20, 20] and cn["dof"] == 1 and cn["p_between"] > 0.05
    assert 0.5 < cn["spread_expected_%"] < 2.5 and 2.0 < cn["pooled_pair_sd_%"] < 4.0
    # pairs per process for a spread < 1% at p 0.8: se <= 1% / (sqrt 2 x 1.2816), n = (1.2533 sd / se)^2
    sd = cn["pooled_pair_sd_%"] / 100
    assert cn["pairs_for_1pct"] == math.ceil((1.2533 * sd / (0.01 / (math.sqrt(2) * 1.28155))) ** 2)
    apart = [_child("none", [math.exp(rnd.gauss(0, 0.03)) for _ in range(20)]),
             _child("none", [1.05 * math.exp(rnd.gauss(0, 0.03)) for _ in range(20)])]
    assert rp.control_noise(apart)["p_between"] < 0.01
    assert rp.control_noise(same[:1]) == {}
    # the chi-square tail against known values: P(chi2_1 > 3.841) = 0.05, P(chi2_10 > 18.307) = 0.05
    assert rp._chi2_sf(3.841, 1) == pytest.approx(0.05, abs=1e-3)
    assert rp._chi2_sf(18.307, 10) == pytest.approx(0.05, abs=1e-3)
    assert rp._chi2_sf(0.5, 4) == pytest.approx(0.9735, abs=1e-3)


def _spread_decomp():
    import importlib.util
    path = os.path.join(REPO, "bench", "experiments", "profiler_overhead", "spread_decomp.py")
    spec = importlib.util.spec_from_file_location("spread_decomp", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_pooled_shift_fixed_and_random_effects():
    """Runs that agree pool to their inverse-variance mean with a narrower interval and no between-run variance;
    runs that disagree beyond their intervals get Q's small p-value and a wider random-effects interval."""
    sd = _spread_decomp()
    agree = [("a", 1.0, -1.0, 3.0), ("b", 1.2, -0.8, 3.2), ("c", 0.8, -1.2, 2.8)]
    p = sd.pooled_shift(agree)
    assert p["runs"] == 3 and p["pct"] == pytest.approx(1.0, abs=1e-9)
    assert p["ci"][1] - p["ci"][0] == pytest.approx(4.0 / math.sqrt(3), abs=0.02)
    assert p["p_heterogeneity"] > 0.9 and p["random_effects"]["tau_%"] == 0.0
    apart = [("a", -3.0, -4.0, -2.0), ("b", 3.0, 2.0, 4.0), ("c", 0.0, -1.0, 1.0)]
    q = sd.pooled_shift(apart)
    assert q["p_heterogeneity"] < 0.001 and q["random_effects"]["tau_%"] > 2
    assert q["random_effects"]["ci"][1] - q["random_effects"]["ci"][0] > 3 * (q["ci"][1] - q["ci"][0])
    assert sd.pooled_shift(agree[:1]) is None


def test_first_pairs_and_block_length_from_children():
    """spread_decomp's position effect (a process's pairs against its median, by position) and the block-length
    table (sub-blocks of k segments of the control's blocks)."""
    sd = _spread_decomp()
    kids = [dict(_child("none", [0.9] + [1.0] * 7), workload="train") for _ in range(3)]
    pos = sd.position_effect(kids, "train", last=2)
    assert pos[0][0] == 3 and pos[0][1] == pytest.approx(100 * math.log(0.9), abs=0.01) and pos[1][1] == 0.0
    for k in kids:
        k["sched"] = [("u", {"seg_us": [100.0, 110.0] * 8})] * 4
    bl = sd.block_length_noise(kids, "train", ks=(1, 2))
    assert bl[1]["sd_%"] == 0.0 and bl[2]["sd_%"] == 0.0   # every (100, 110) pair alike; k=2 sums are equal


def test_steady_ratio_leaves_each_block_s_first_segment_out():
    """``warm_steady``: a profiler whose first segment after every start costs a whole extra block's worth but the
    rest 10% has a raw pair ratio far above 1.1 and a steady one of exactly 1.1; its HL shift over a floor with
    no start-up cost is then 0."""
    def pair(i, first_p, rest_p):
        u = ("u", {"all_run_ms": 1.0, "all_wait_ms": 0.0, "seg_us": [50.0] + [100.0] * 9})
        p = ("p", {"all_run_ms": 1.0, "all_wait_ms": 0.0, "seg_us": [first_p] + [rest_p] * 9})
        return [u, p] if i % 2 == 0 else [p, u]
    r = _child("proton", [1.0] * 8, unprof=[10.0] * 8)
    r["sched"] = [b for i in range(8) for b in pair(i, 1000.0, 110.0)]
    f = _child("floor", [1.0] * 8, unprof=[10.0] * 8)
    f["sched"] = [b for i in range(8) for b in pair(i, 55.0, 110.0)]
    assert rp._pair_steady(r) == pytest.approx([1.1] * 8)
    s = rp.summarize([r, f, _child("none", [1.0] * 8)], reps=50)
    assert s["proton"]["warm_steady"] == pytest.approx(1.1) and s["proton"]["hl_steady_over_floor_%"] == 0.0
    assert rp._pair_steady(_child("none", [1.0] * 2)) == []    # no per-segment times: no steady ratio


def test_nopy_makes_scope_a_noop_for_its_blocks_only(tmp_path, monkeypatch):
    """kprof-nopy: profiler.scope is a no-op while its block runs and kprof's again for the next
    profiler's block (here the floor's, whose start needs no GPU through a fake cupti)."""
    import profiler
    real = profiler.scope
    monkeypatch.setattr(rp, "_REAL_SCOPE", [None])
    try:
        rp._noscope(True)
        assert profiler.scope is rp._null_scope
        with profiler.scope("x", metrics={"flops": 1}):
            pass
        rp._noscope(False)
        assert profiler.scope is real
    finally:
        profiler.scope = real


def test_multi_way_order_swaps_every_pair_each_round():
    """A multi-way run (several --against): in rounds 2j and 2j+1 every two profilers swap places (as many AB as
    BA for every pair), and over 2 x n rounds each profiler takes each position equally often."""
    names = ["kprof", "floor", "proton", "none"]
    orders = [rp._multi_order(names, i) for i in range(8)]
    for a in names:
        for b in names:
            if a != b:
                first = [o.index(a) < o.index(b) for o in orders]
                assert all(x != y for x, y in zip(first[::2], first[1::2])), (a, b)
    for p in names:
        assert sorted(o.index(p) for o in orders) == [0, 0, 1, 1, 2, 2, 3, 3]


def test_multi_way_split_into_pair_comparisons():
    """The rounds of a multi-way child become one comparison per pair of profilers, in summarize's shape, with the
    time order of each pair's blocks kept (steady ratios drop each block's first segment) and a none/none
    control from consecutive rounds."""
    names = ["kprof", "floor", "none"]
    ms = {"kprof": 11.0, "floor": 10.5, "none": 10.0}
    rounds = []
    for i in range(6):
        o = rp._multi_order(names, i)
        rounds.append({"order": o, "ms": {p: ms[p] * (1 + 0.01 * i) for p in o},
                       "sched": {p: {"seg_us": [99.0] + [ms[p] * 10] * 4, "all_run_ms": 1.0, "all_wait_ms": 0.0}
                                 for p in o}})
    r = {"workload": "tiny", "profiler": "kprof", "multi": rounds, "cold_ms": [10.0], "stop_s": [],
         "setup_s": 1.0, "wall_s": 5.0, "steps_per_block": 10}
    vs = {v["profiler"]: v for v in rp._multi_split(r)}
    assert set(vs) == {"kprof/floor", "kprof/none", "floor/none", "none/none"}
    assert vs["kprof/floor"]["warm"] == pytest.approx([11 / 10.5] * 6)
    assert vs["none/none"]["warm"] == pytest.approx([1.01 / 1.0, 1.03 / 1.02, 1.05 / 1.04])
    for v in vs.values():
        seq = rp._sequence(v)
        assert [k for k, _ in seq] == [k for k, _ in v["sched"]]
    assert rp._pair_steady(vs["kprof/none"]) == pytest.approx([1.1] * 6)
    s = rp.summarize(list(vs.values()), reps=50, settle=2)
    assert s["kprof/floor"]["warm"] == pytest.approx(11 / 10.5, abs=1e-4)
    assert s["kprof/none"]["warm_steady"] == pytest.approx(1.1)
    w = rp._workload_summary(s, list(vs.values()))
    assert w["comparisons"]["kprof/none"]["steady"] == pytest.approx(1.1) and w["wall_s"] == 5.0


def test_multi_way_rounds_on_disk_as_they_end(tmp_path, capsys):
    """A multi-way child writes its rounds to ``rounds_path`` after each one (a run killed by an outer timeout keeps
    them); ``--reanalyse`` reads that file like a finished run's."""
    names = ["kprof", "floor", "none"]
    rounds = [{"order": rp._multi_order(names, i), "ms": {"kprof": 11.0, "floor": 10.5, "none": 10.0},
               "sched": {p: {"seg_us": [9.0] + [10.0] * 3, "all_run_ms": 1.0, "all_wait_ms": 0.0} for p in names}}
              for i in range(10)]
    path = str(tmp_path / "x.tiny.rounds.json")
    spec = {"workload": "tiny", "profiler": "kprof", "against": "floor,none", "rounds_path": path,
            "steps_per_block": 10, "cold_ms": [10.0], "setup_s": 1.0}
    rp._dump_rounds(spec, names, rounds)
    assert rp.reanalyse(path, settle=2) == 0
    out = capsys.readouterr().out
    assert "kprof/floor" in out and "1.0476" in out and "none/none" in out


class _FakeCupti:
    """What _FineStates calls on cupti-python, recorded."""

    class ActivityKind:
        CONCURRENT_KERNEL, MEMCPY, MEMSET, EXTERNAL_CORRELATION = 10, 1, 2, 99

    def __init__(self):
        self.calls = []

    def activity_enable(self, k):
        self.calls.append(("on", int(k)))

    def activity_disable(self, k):
        self.calls.append(("off", int(k)))


class _FakeBackend:
    def __init__(self, calls):
        self.calls = calls
        self.kinds = [10, 1, 2, 99]
        self.external = self.light = True

    def _enable_api_records(self, on):
        self.calls.append(("api", on))

    def _enable_callbacks(self, on):
        self.calls.append(("cb", on))


def _fine_states(monkeypatch):
    import profiler
    from profiler import session as S
    c = _FakeCupti()
    st = rp._FineStates.__new__(rp._FineStates)
    st.c, st.b, st.S, st.profiler = c, _FakeBackend(c.calls), S, profiler
    st.sess, st.core_kinds, st.ext, st.light = [], [10, 1, 2], True, True
    st.real_scope = st.native_scope = profiler.scope
    st.cur = "kprof"
    monkeypatch.setattr(profiler, "scope", profiler.scope)   # restored after the test
    from profiler import hooks
    monkeypatch.setattr(hooks, "_use_native", True)
    monkeypatch.setattr(S, "_refresh", lambda: c.calls.append(("refresh",)))
    return st, c.calls


def _fine_fake_workload(monkeypatch, order):
    """A workload whose step takes exactly 200 us under kprof and 100 us otherwise, on a patched clock (no sleeps:
    no load can flip it); each step appends the state it ran in to ``order``. Returns (workload, states)."""
    clock = [0]

    st, _ = _fine_states(monkeypatch)

    class W:
        def step(self):
            order.append(st.cur)
            clock[0] += 200_000 if st.cur == "kprof" else 100_000

    import types
    monkeypatch.setattr(rp, "time", types.SimpleNamespace(time=time.time, perf_counter=time.perf_counter,
                                                          perf_counter_ns=lambda: clock[0]))
    return W(), st


def test_fine_states_switch_only_what_differs(monkeypatch):
    """--fine: kprof -> floor turns kprof's extras off (API records, external correlation, callbacks, the session
    and its scope) and keeps the kinds; floor -> none turns the kinds off; none -> none2 changes nothing (the
    control's two states are one); none -> kprof turns everything on again; scopes follow."""
    import profiler
    st, calls = _fine_states(monkeypatch)
    real = profiler.scope
    st.go("floor")
    assert calls == [("api", 0), ("off", 99), ("cb", 0), ("refresh",)] and profiler.scope is rp._null_scope
    calls.clear()
    st.go("none")
    assert calls == [("off", 10), ("off", 1), ("off", 2)]
    calls.clear()
    st.go("none2")
    assert calls == [] and st.cur == "none2"
    st.go("kprof")
    assert calls == [("on", 10), ("on", 1), ("on", 2), ("api", 1), ("on", 99), ("cb", 1), ("refresh",)]
    assert profiler.scope is real
    calls.clear()
    st.go("none")
    assert calls == [("api", 0), ("off", 99), ("cb", 0), ("refresh",), ("off", 10), ("off", 1), ("off", 2)]
    calls.clear()
    st.go("floor")
    assert calls == [("on", 10), ("on", 1), ("on", 2)] and profiler.scope is rp._null_scope


def test_fine_states_take_kprof_apart(monkeypatch):
    """--fine-states: api is the floor plus the launch API records; kprof-noapi / -nocb / -nosess are kprof without
    one part; switching between them touches only the part that differs; a bad list is refused."""
    import profiler
    st, calls = _fine_states(monkeypatch)
    st.go("kprof-noapi")
    assert calls == [("api", 0), ("off", 99)]
    calls.clear()
    st.go("api")
    assert calls == [("cb", 0), ("refresh",), ("api", 1), ("on", 99)] and profiler.scope is rp._null_scope
    calls.clear()
    st.go("kprof-nocb")
    assert calls == [("refresh",)]
    calls.clear()
    st.go("kprof-nosess")
    assert calls == [("refresh",), ("cb", 1)] and profiler.scope is rp._null_scope
    assert rp._fine_states_arg("kprof, floor,api,kprof-noapi") == ("kprof", "floor", "api", "kprof-noapi")
    for bad in ("floor,kprof,none,none2", "kprof,floor,none", "kprof,floor,none,bogus", "kprof,floor,none,none"):
        with pytest.raises(SystemExit):
            rp._fine_states_arg(bad)


def test_fine_states_kprof_with_python_scopes_and_hook(monkeypatch):
    """--fine-states kprof,kprof-py,...: kprof-py is kprof with the Python scopes and kernelc hook instead of the C
    ones (native_scopes); kprof <-> kprof-py swaps only those (the hook registered again if it is in), and a state
    without the session keeps whichever the next session state needs."""
    import profiler
    from profiler import hooks, scopes
    st, calls = _fine_states(monkeypatch)
    native = profiler.scope
    installed = []
    monkeypatch.setattr(hooks, "installed", lambda: True)
    monkeypatch.setattr(hooks, "_uninstall", lambda: installed.append("out"))
    monkeypatch.setattr(hooks, "_install", lambda: installed.append(("in", hooks._use_native)))
    st.go("kprof-py")
    assert calls == [] and installed == ["out", ("in", False)] and profiler.scope is scopes._PyScope
    installed.clear()
    st.go("kprof")
    assert calls == [] and installed == ["out", ("in", True)] and profiler.scope is native
    monkeypatch.setattr(hooks, "installed", lambda: False)
    st.go("floor")
    assert profiler.scope is rp._null_scope and hooks._use_native is False
    st.go("kprof-py")
    assert profiler.scope is scopes._PyScope and hooks._use_native is False
    st.go("none")
    st.go("kprof")
    assert profiler.scope is native and hooks._use_native is True
    assert rp._fine_states_arg("kprof,kprof-py,none,none2") == ("kprof", "kprof-py", "none", "none2")


def test_per_workload_values():
    """--fine / --fine-settle / --shares: one value for every workload, or WL=V pairs (a workload not named: None)."""
    assert rp._per_workload("12", "tiny", float, "--fine") == 12.0
    assert rp._per_workload("tiny=12,encoder=30", "encoder", float, "--fine") == 30.0
    assert rp._per_workload("tiny=12", "train", float, "--fine") is None
    assert rp._per_workload(None, "tiny", float, "--fine") is None
    for bad in ("tiny=x", "bogus=3", "abc"):
        with pytest.raises(SystemExit):
            rp._per_workload(bad, "tiny", float, "--fine")


def test_fine_rounds_balance_carryover_and_give_a_control(monkeypatch, tmp_path):
    """--fine: in a block every state follows every other state equally often (what a segment leaves to the next
    falls on all alike) and weighs the same at each end of the block (a drift cancels); each segment ends with a
    synchronize inside its time; each block's value per state is its time per step; the split has none/none2
    (the control) next to kprof/floor."""
    order, syncs = [], []
    w, st = _fine_fake_workload(monkeypatch, order)

    class B:
        rawbufs = type("R", (), {"max_bytes": 64 << 20})()

        def stats(self):
            return {"buffers": 0}
    back = B()
    monkeypatch.setattr(rp, "_start", lambda p, out: (rp._BACKEND.__setitem__(0, back), lambda: None)[1])
    monkeypatch.setattr(rp, "_FineStates", lambda b: st)
    spec = {"out": str(tmp_path / "x"), "fine_cycles": 1, "deadline": time.time(), "min_pairs": 2,
            "workload": "tiny", "profiler": "kprof", "against": None, "rounds_path": None}
    rounds = rp._fine_rounds(w, "kprof", spec, 1, lambda: syncs.append(len(order)))
    assert len(rounds) == 2 and back.rawbufs.max_bytes > 1 << 40   # no decoding inside the blocks
    blk = order[:26]
    assert syncs[1:27] == list(range(1, 27))   # a synchronize closes every segment
    pairs = [(a, b) for a, b in zip(blk, blk[1:]) if a != b]
    for a in rp.FINE_STATES:
        for b in rp.FINE_STATES:
            if a != b:
                assert pairs.count((a, b)) == 2, (a, b)
    for s in rp.FINE_STATES:
        n = blk.count(s)
        assert n == (8 if s == "kprof" else 6) and sum(i for i, x in enumerate(blk) if x == s) == n * 12.5, s
    assert order[26:52] == blk   # every block the same order
    assert rounds[0]["segments"] == blk and len(rounds[0]["seg_ms"]) == 26
    assert rounds[0]["seg_ms"][0] == pytest.approx(0.2) and rounds[0]["seg_ms"][1] == pytest.approx(0.1)
    r = {"workload": "tiny", "profiler": "kprof", "multi": rounds, "cold_ms": [1.0], "stop_s": [], "setup_s": 1.0,
         "wall_s": 1.0, "steps_per_block": 6}
    vs = {v["profiler"]: v for v in rp._multi_split(r)}
    assert {"kprof/floor", "none/none2", "floor/none"} <= set(vs)
    assert vs["kprof/floor"]["warm"] == pytest.approx([2.0] * len(rounds))
    assert vs["none/none2"]["warm"] == pytest.approx([1.0] * len(rounds))
    order.clear()   # --fine-settle 2: two untimed steps after every switch, each segment's time without them
    syncs.clear()
    st.cur = "kprof"
    rs = rp._fine_rounds(w, "kprof", dict(spec, fine_settle_steps=2, deadline=time.time()), 1,
                         lambda: syncs.append(len(order)))
    assert len(order) == 2 * 26 * 3 and len(syncs) == 2 * (1 + 2 * 26)
    assert rs[0]["ms"] == pytest.approx({"kprof": 0.2, "floor": 0.1, "none": 0.1, "none2": 0.1})
    syncs.clear()   # --fine-sync 0: only the block's own synchronize, before its first segment
    rp._fine_rounds(w, "kprof", dict(spec, fine_sync=False, deadline=time.time()), 1, lambda: syncs.append(1))
    assert len(syncs) == 2


def test_issue23_status_rules():
    """issue23_status's rules: the control met only with its whole 95% interval inside [0.99, 1.01] (its median
    within 1% is kept beside it); kprof/floor met below 1.02 at the upper bound, and marked shown above when the
    whole interval is above; kprof/Proton met at an upper bound <= 1.00."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "issue23_status", os.path.join(REPO, "bench", "experiments", "profiler_overhead", "issue23_status.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    e = {"value": 1.004, "ci": [0.992, 1.012]}
    assert m._met("control (fine)", e) is False and e["median_within_1pct"] is True
    assert m._met("control (fine)", {"value": 0.998, "ci": [0.9933, 1.0011]}) is True
    e = {"value": 1.066, "ci": [1.024, 1.077]}
    assert m._met("kprof/floor", e) is False and e["shown_above"] is True
    assert m._met("kprof/floor", {"value": 1.004, "ci": [0.984, 1.012]}) is True
    e = {"value": 1.03, "ci": [1.021, 1.04], "design": "fine"}   # without settle: an upper bound, never "above"
    assert m._met("kprof/floor", e) is False and e["upper_bound"] and not e["shown_above"]
    e = {"value": 1.03, "ci": [1.021, 1.04], "design": "fine", "settle": True}
    assert m._met("kprof/floor", e) is False and e["shown_above"] and "upper_bound" not in e
    assert m._met("kprof/proton", {"value": 0.975, "ci": [0.955, 0.9998]}) is True
    assert m._met("kprof/floor", {"missing": True}) is None


def test_fine_pairs_order_and_ratios(monkeypatch, tmp_path):
    """--fine-order pairs: a block is 8 adjacent pairs (kprof/floor, none/none2), each state first in half of its
    pairs, each control order after a kprof-last and a floor-last pair once; the cycle's start moves on one pair
    per block; 3 untimed steps open a block; fine_pair_ratios compares inside the pairs only, and on a circuit
    block every adjacent couple of the two states."""
    names = list(rp.FINE_STATES)
    blk = rp._fine_pairs_order(names, 0)
    pairs = [tuple(blk[j:j + 2]) for j in range(0, 16, 2)]
    assert sorted(pairs) == sorted([("kprof", "floor")] * 2 + [("floor", "kprof")] * 2 + [("none", "none2")] * 2
                                   + [("none2", "none")] * 2)
    before = [(pairs[j - 1][1], pairs[j]) for j in range(1, 8) if pairs[j][0].startswith("none")] + \
        [(pairs[-1][1], pairs[0])] * pairs[0][0].startswith("none")
    for ctl in (("none", "none2"), ("none2", "none")):
        assert sorted(p for p, c in before if c == ctl) == ["floor", "kprof"], ctl
    assert [rp._fine_pairs_order(names, i)[:2] for i in range(3)] == [list(pairs[0]), list(pairs[1]), list(pairs[2])]
    assert rp._fine_pairs_order(names, 8) == blk and len(rp._fine_pairs_order(names, 0, 2)) == 32

    order = []
    w, st = _fine_fake_workload(monkeypatch, order)

    class B:
        rawbufs = None

        def stats(self):
            return {}
    monkeypatch.setattr(rp, "_start", lambda p, out: (rp._BACKEND.__setitem__(0, B()), lambda: None)[1])
    monkeypatch.setattr(rp, "_FineStates", lambda b: st)
    spec = {"out": str(tmp_path / "x"), "fine_cycles": 1, "deadline": time.time(), "min_pairs": 2,
            "workload": "tiny", "profiler": "kprof", "against": None, "rounds_path": None, "fine_order": "pairs"}
    rounds = rp._fine_rounds(w, "kprof", spec, 1, lambda: None)
    assert len(rounds) == 2 and len(order) == 2 * (rp.FINE_LEAD_STEPS + 16)
    assert rounds[0]["pairs"] is True and rounds[0]["segments"] == blk and order[3:19] == blk
    assert rounds[1]["segments"] == rp._fine_pairs_order(names, 1)
    assert rounds[0]["ms"] == pytest.approx({"kprof": 0.2, "floor": 0.1, "none": 0.1, "none2": 0.1})
    bl, pr = rp.fine_pair_ratios(rounds, "kprof", "floor")
    assert bl == pytest.approx([2.0, 2.0]) and pr == pytest.approx([2.0] * 8)
    bl, pr = rp.fine_pair_ratios(rounds, "none", "none2", skip=1)
    assert bl == pytest.approx([1.0]) and len(pr) == 4
    # only inside a pair: a made-up block whose adjacent couples across pairs would read otherwise
    fake = {"segments": ["floor", "kprof", "none", "floor"], "seg_ms": [1.0, 3.0, 1.0, 1.0], "pairs": True}
    assert rp.fine_pair_ratios([fake], "kprof", "none") == ([], [])
    fake["pairs"] = False   # a circuit block: every adjacent couple
    assert rp.fine_pair_ratios([fake], "kprof", "none")[1] == pytest.approx([3.0])
    child = {"workload": "tiny", "multi": rounds}
    fp = rp.fine_pairs_summary([child])
    assert fp["kprof/floor"]["block_median"] == pytest.approx(2.0) and fp["none/none2"]["pairs"] == 8
    assert rp.fine_pairs_summary([{"workload": "tiny", "multi": [{"order": names, "ms": {}}]}]) is None


def _synthetic_pairs_run(path, blocks=40, kprof_cost=1.03, seed=3):
    """A pairs-design results file: 8 pairs a block, log-normal step noise, kprof ``kprof_cost`` over the rest."""
    import random
    rng = random.Random(seed)
    names = list(rp.FINE_STATES)
    multi = []
    for i in range(blocks):
        segs = rp._fine_pairs_order(names, i)
        ms = [10.0 * (kprof_cost if s == "kprof" else 1.0) * math.exp(rng.gauss(0, 0.05)) for s in segs]
        multi.append({"order": names, "segments": segs, "seg_ms": ms, "pairs": True})
    child = {"workload": "encoder", "multi": multi, "wall_s": 30.0, "setup_s": 10.0,
             "fine": {"settle_steps": 1, "order": "pairs"}}
    data = {"summary": {"encoder": {"fine_pairs": rp.fine_pairs_summary([child], skip=2)}}, "children": [child]}
    path.write_text(json.dumps(data))
    return data


def test_issue23_status_pairs_all_takes_the_median_over_all_pairs(tmp_path, monkeypatch):
    """s24's rule: the encoder's pairs run is judged by the median over all pairs (pairs-all), the block median
    kept beside it; a source list falls back to the next file when the first is missing."""
    sys.path.insert(0, os.path.join(REPO, "bench", "experiments", "profiler_overhead"))
    import issue23_status as st
    data = _synthetic_pairs_run(tmp_path / "run.json")
    monkeypatch.setattr(st, "RES", str(tmp_path))
    fp = data["summary"]["encoder"]["fine_pairs"]
    src = {("encoder", "kprof/floor"): [("new", "absent.json", "kprof/floor", "pairs-all"),
                                       ("old", "run.json", "kprof/floor", "pairs")],
           ("encoder", "control (fine)"): ("new", "run.json", "none/none2", "pairs-all")}
    e = st._entry("encoder", "control (fine)", src)
    assert e["value"] == fp["none/none2"]["pair_median"] and e["ci"] == fp["none/none2"]["pair_sign_ci"]
    assert e["pairs"] == fp["none/none2"]["pairs"] == 38 * 4 and e["raw"] == fp["none/none2"]["block_median"]
    assert st._met("control (fine)", e) is (e["ci"][0] >= 0.99 and e["ci"][1] <= 1.01)
    e = st._entry("encoder", "kprof/floor", src)   # the first file is missing: the block figure of the second
    assert e["call"] == "old" and e["value"] == fp["kprof/floor"]["block_median"] and e["pairs"] == 38
    assert st._met("kprof/floor", e) is False and e["shown_above"] is (e["ci"][0] > 1.02)


def test_enc_pairs_power_reads_a_pairs_run(tmp_path):
    """enc_pairs_power.py: the pair and block figures equal the bench's, the half-width shrinks with n, and the
    within-block estimators recover a known state effect."""
    sys.path.insert(0, os.path.join(REPO, "bench", "experiments", "profiler_overhead"))
    import enc_pairs_power as pw
    data = _synthetic_pairs_run(tmp_path / "run.json", blocks=60)
    res = pw.analyse(str(tmp_path / "run.json"), 2, [100, 400], 40, 0.3, 1)
    c = res["comparisons"]
    fp = data["summary"]["encoder"]["fine_pairs"]
    assert c["kprof/floor"]["pair_median"] == fp["kprof/floor"]["pair_median"]
    assert c["none/none2"]["block_ci"] == fp["none/none2"]["block_sign_ci"]
    assert abs(c["kprof/floor"]["pair_median"] - 1.03) < 0.02
    hw = c["none/none2"]["halfwidth_%_at"]
    assert hw["400"] < hw["100"]
    assert abs(c["none/none2"]["lag1"]) < 0.3 and c["none/none2"]["need_pairs_at_offset"]["pairs"] > 0
    multi = data["children"][0]["multi"]
    for how in ("trend", "diff"):
        est = pw.block_estimates(multi, "kprof", "floor", how)
        assert len(est) == 60 and abs(sorted(est)[30] - math.log(1.03)) < 0.02, how


def _swap_fake(monkeypatch, events, step_ns=None, start_ns=None, stop_ns=None):
    """A patched clock (1 us per read) and a workload whose step takes ``step_ns[state]``; ``start(n)`` costs
    ``start_ns[n]``, its stop ``stop_ns[n]`` (None for the unprofiled states, as the bench's).  ``events`` gets
    ("start"|"stop"|"step", state) in order."""
    import types
    step_ns = step_ns or {"kprof": 1_000_000, "proton": 1_100_000, "none": 1_000_000, "none2": 1_000_000}
    start_ns = start_ns or {"kprof": 2_000_000, "proton": 9_000_000}
    stop_ns = stop_ns or {"kprof": 3_000_000, "proton": 3_000_000}
    clock, cur = [0], [None]

    def perf():
        clock[0] += 1000
        return clock[0]

    class W:
        def step(self):
            events.append(("step", cur[0]))
            clock[0] += step_ns.get(cur[0], 1_000_000)   # before the first start: unprofiled

    def start(n):
        events.append(("start", n))
        cur[0] = n
        if n not in start_ns:
            return None
        clock[0] += start_ns[n]

        def stop():
            events.append(("stop", n))
            clock[0] += stop_ns[n]
        return stop
    monkeypatch.setattr(rp, "time", types.SimpleNamespace(time=time.time, perf_counter=time.perf_counter,
                                                          perf_counter_ns=perf))
    return W(), start, perf


def test_swap_rounds_bracket_each_segment_and_pad_the_control(monkeypatch):
    """--fine-order swap: each profiler segment between its own start and stop (the previous state's stop before
    the next start), one untimed settle step after each start, the timed steps after it; a switch into none/none2
    spins to the median profiler-to-profiler switch, so the control's in-pair gap is A/B's; the pairs summary
    reads kprof/proton and none/none2 inside the pairs; the last stop runs."""
    events = []
    w, start, perf = _swap_fake(monkeypatch, events)
    names = rp.SWAP_STATES
    spec = {"fine_cycles": 1, "deadline": 0, "min_pairs": 4, "rounds_path": None}
    rounds = rp._swap_rounds(w, names, start, spec, 2, lambda: None, settle=1, perf=perf)
    assert len(rounds) == 4 and all(r["pairs"] and r["swap"] for r in rounds)
    assert [r["segments"] for r in rounds] == [rp._fine_pairs_order(list(names), i) for i in range(4)]
    assert events[-1] == ("stop", rounds[-1]["segments"][-1]) or rounds[-1]["segments"][-1].startswith("none")
    # between two starts: the previous profiler's stop, then settle + timed steps in the started state only
    seq = events
    starts = [i for i, e in enumerate(seq) if e[0] == "start"]
    for a, b in zip(starts, starts[1:]):
        n = seq[a][1]
        body = seq[a + 1:b]
        stops = [e for e in body if e[0] == "stop"]
        assert stops in ([], [("stop", n)]) and (stops == []) is n.startswith("none")
        assert [e for e in body if e[0] == "step"][:3] == [("step", n)] * 3   # 1 settle + 2 timed
    # each segment's ms per step is its state's step alone: starts, stops and settle steps are outside
    fp = rp.fine_pairs_summary([{"workload": "train", "multi": rounds}])
    assert fp["kprof/proton"]["pair_median"] == pytest.approx(1 / 1.1, rel=2e-3)
    assert fp["none/none2"]["pair_median"] == pytest.approx(1.0, rel=2e-3) and fp["none/none2"]["pairs"] == 16
    # the in-pair switch: kprof->proton 3+9 ms, proton->kprof 3+2 ms; the control's padded to their median
    g = rp.swap_gap_summary(rounds, names)
    assert 5.0 <= g["kprof/proton"] <= 12.1 and g["none/none2"] == pytest.approx(g["kprof/proton"], rel=0.25)
    pads = [p for r in rounds[1:] for p, s in zip(r["pad_ms"], r["segments"]) if s.startswith("none")]
    assert pads and all(p > 0 for p in pads)
    assert all(p == 0 for r in rounds for p, s in zip(r["pad_ms"], r["segments"]) if not s.startswith("none"))
    # the settle step is timed apart, per step (the check on a start's after-effect)
    assert all(m == pytest.approx(1.1 if s == "proton" else 1.0, rel=1e-2)
               for r in rounds for m, s in zip(r["settle_ms"], r["segments"]))


def test_swap_rounds_stop_the_last_profiler_on_error(monkeypatch):
    """A step that raises mid-run still stops the profiler that is on (the process would otherwise hold CUPTI)."""
    events = []
    w, start, perf = _swap_fake(monkeypatch, events)
    n = [0]
    step = w.step

    def bad():
        n[0] += 1
        if n[0] == 8:
            raise RuntimeError("boom")
        step()
    w.step = bad
    with pytest.raises(RuntimeError):
        rp._swap_rounds(w, rp.SWAP_STATES, start, {"fine_cycles": 1, "deadline": 0, "min_pairs": 2,
                                                   "rounds_path": None}, 1, lambda: None, perf=perf)
    on = [e[1] for e in events if e[0] == "start"][-1]
    assert on.startswith("none") or events[-1] == ("stop", on)


def test_swap_order_takes_kprof_against_proton_only(capsys):
    """--fine-order swap runs kprof --against proton on a GPU; anything else is refused before a run."""
    for extra in (["--against", "floor", "--device", "cuda"], ["--against", "proton", "--device", "cpu"],
                  ["--device", "cuda"]):
        with pytest.raises(SystemExit):
            rp.main(["overhead", "--profilers", "kprof", "--workloads", "train", "--fine", "3",
                     "--fine-order", "swap", *extra])
        assert "--fine-order swap runs --profilers kprof --against proton" in capsys.readouterr().err


def test_swap_child_on_cpu(tmp_path, monkeypatch):
    """The overhead child's swap path on CPU, kprof and Proton stood in for (no GPU, no Triton here): rounds in
    the pairs form, the in-pair gaps per comparison, the states and settle steps recorded."""
    calls = []

    def fake_start(p, out):
        calls.append(p)
        return lambda: calls.append("stop " + p)
    monkeypatch.setattr(rp, "_start", fake_start)
    spec = {"workload": "tiny", "profiler": "kprof", "device": "cpu", "out": str(tmp_path / "p"), "warmup": 5,
            "block_s": 0.01, "steps": 50, "pre": 1, "min_pairs": 2, "max_pairs": 2, "deadline": time.time(),
            "cpus": None, "threads": None, "buffer": 0, "against": "proton", "fine": 1.0, "fine_cycles": 1,
            "fine_order": "swap", "fine_settle": 0.0, "rounds_path": str(tmp_path / "r.json")}
    r = rp.child_overhead(spec)
    assert r["fine"]["order"] == "swap" and r["fine"]["states"] == ["kprof", "proton", "none", "none2"]
    assert r["fine"]["settle_steps"] == 1 and len(r["multi"]) == 2
    assert set(r["swap_gap_ms"]) == {"kprof/proton", "none/none2"}
    assert calls.count("kprof") >= 4 and calls.count("proton") >= 4
    assert json.load(open(tmp_path / "r.json"))["children"][0]["multi"][0]["swap"] is True
    # the summary a run writes (here from the rounds file, as --reanalyse makes it): both comparisons in pairs
    assert rp.reanalyse(str(tmp_path / "r.json"), name="swap", results_dir=str(tmp_path)) == 0
    fp = json.load(open(tmp_path / "swap.json"))["summary"]["tiny"]["fine_pairs"]
    assert set(fp) == {"kprof/proton", "none/none2"} and fp["none/none2"]["pairs"] == 8


def test_issue23_status_reads_a_swap_run_and_needs_the_gaps_matched(tmp_path, monkeypatch):
    """s25's rule: a swap run's kprof/Proton and control are the medians over all pairs; the control counts only
    where its in-pair gap is within 25% of kprof/Proton's."""
    import random
    sys.path.insert(0, os.path.join(REPO, "bench", "experiments", "profiler_overhead"))
    import issue23_status as st
    rng = random.Random(5)
    names = list(rp.SWAP_STATES)
    multi = []
    for i in range(200):
        segs = rp._fine_pairs_order(names, i)
        multi.append({"order": names, "segments": segs, "pairs": True, "swap": True,
                      "seg_ms": [20.0 * (0.98 if s == "kprof" else 1.0) * math.exp(rng.gauss(0, 0.01)) for s in segs]})
    child = {"workload": "train", "multi": multi, "swap_gap_ms": {"kprof/proton": 10.0, "none/none2": 11.0}}
    monkeypatch.setattr(st, "RES", str(tmp_path))
    src = {("train", "kprof/proton"): [("swap", "s.json", "kprof/proton", "swap")],
           ("train", "control (block)"): [("swap", "s.json", "none/none2", "swap")]}
    for gap, matched in ((11.0, True), (14.0, False)):
        child["swap_gap_ms"]["none/none2"] = gap
        data = {"summary": {"train": {"fine_pairs": rp.fine_pairs_summary([child], skip=2)}}, "children": [child]}
        (tmp_path / "s.json").write_text(json.dumps(data))
        e = st._entry("train", "kprof/proton", src)
        assert e["pairs"] == 198 * 4 and abs(e["value"] - 0.98) < 0.003 and st._met("kprof/proton", e) is True
        c = st._entry("train", "control (block)", src)
        assert c["gap_matched"] is matched and st._met("control (block)", c) is matched


def test_proton_pairs_size_grows_with_distance_and_reads_the_stored_runs(tmp_path):
    """proton_pairs_size.py: on a random walk the pair spread grows with the distance between the two segments,
    on independent noise it does not; the pairs needed scale with the spread squared; it reads the stored runs."""
    import random
    sys.path.insert(0, os.path.join(REPO, "bench", "experiments", "profiler_overhead"))
    import proton_pairs_size as ps
    rng = random.Random(1)
    walk, x = [], 0.0
    for _ in range(4000):
        x += rng.gauss(0, 0.01)
        walk.append((math.exp(x), True))
    flat = [(math.exp(rng.gauss(0, 0.01)), True) for _ in range(4000)]
    vw, vf = ps.variogram([walk], 8), ps.variogram([flat], 8)
    assert vw[8][0] > 2 * vw[1][0] and abs(vf[8][0] / vf[1][0] - 1) < 0.2
    assert ps.k_gap_rsd([flat], 4, 2)[0] == pytest.approx(vf[1][0] / 2, rel=0.2)
    assert ps.need_pairs(0.02, 0.007) == 4 * ps.need_pairs(0.01, 0.007) or \
        abs(ps.need_pairs(0.02, 0.007) - 4 * ps.need_pairs(0.01, 0.007)) <= 4
    if os.path.exists(os.path.join(ps.RES, ps.MULTI["train"])):
        assert ps.main(["--out", str(tmp_path / "s")]) == 0
        res = json.load(open(tmp_path / "s.json"))
        assert set(res) >= {"tiny", "encoder", "train"} and res["total_swap_s"] > 0


def test_swap_verdict_applies_the_request_rules(tmp_path):
    """swap_verdict.py (request_s25_proton.sh's rules): a matched control inside [0.99, 1.01] and kprof/Proton's
    upper bound <= 1.00 show "not above"; an unmatched gap, an empty profile or a partial run do not."""
    import random
    sys.path.insert(0, os.path.join(REPO, "bench", "experiments", "profiler_overhead"))
    import swap_verdict as sv
    rng = random.Random(2)
    names = list(rp.SWAP_STATES)
    multi = []
    for i in range(120):
        segs = rp._fine_pairs_order(names, i)
        ms = [20.0 * (0.98 if s == "kprof" else 1.0) * math.exp(rng.gauss(0, 0.005)) for s in segs]
        multi.append({"order": names, "segments": segs, "pairs": True, "swap": True, "seg_ms": ms,
                      "settle_ms": [m * (2.0 if s == "proton" else 1.0) for m, s in zip(ms, segs)]})
    child = {"workload": "train", "multi": multi, "swap_gap_ms": {"kprof/proton": 10.0, "none/none2": 10.5},
             "out_bytes": {"kprof": [100, 100], "proton": [50]}}

    def write(c, partial=False):
        d = {"summary": {"train": {"fine_pairs": rp.fine_pairs_summary([c], skip=2)}}, "children": [c]}
        if partial:
            d["partial"] = True
        p = tmp_path / "profiler_overhead_s25_swap_train_h200.json"
        p.write_text(json.dumps(d))
        return str(p)
    v = sv.verdict(write(child), "train")
    assert v["verdict"] == "not above Proton: shown" and v["settle_over_timed"]["proton"] == pytest.approx(2.0)
    assert abs(v["halves"]["first"]["kprof/proton"] - 0.98) < 0.005 and v["halves"]["second"]["gap_ms"] is None
    assert sv.verdict(write(dict(child, swap_gap_ms={"kprof/proton": 10.0, "none/none2": 14.0})),
                      "train")["verdict"] == "not decided (control not met)"
    assert sv.verdict(write(dict(child, out_bytes={"kprof": [100], "proton": [0]})), "train")["verdict"].startswith("void")
    assert sv.verdict(write(child, partial=True), "train")["verdict"].startswith("void")
    assert sv.main([str(tmp_path)]) == 0 and os.path.exists(tmp_path / "swap_verdict.json")


def test_solo_order_takes_kprof_and_proton_without_against(capsys):
    """--fine-order solo runs kprof and/or Proton, a process each, on a GPU, never --against (the point of the design:
    one profiler a process, nothing finalized for another)."""
    for profs, extra in (("kprof", ["--against", "proton", "--device", "cuda"]), ("kprof,floor", ["--device", "cuda"]),
                         ("kprof,proton", ["--device", "cpu"])):
        with pytest.raises(SystemExit):
            rp.main(["overhead", "--profilers", profs, "--workloads", "encoder", "--fine", "3",
                     "--fine-order", "solo", *extra])
        assert "--fine-order solo runs --profilers kprof and/or proton" in capsys.readouterr().err


def test_solo_child_on_cpu(tmp_path, monkeypatch):
    """The overhead child's solo path on CPU (the profiler stood in for): only its own profiler starts, once per P
    segment; base is unprofiled and compared with P inside pairs; the control is padded to the P<->base switch."""
    calls = []

    def fake_start(p, out):
        calls.append(p)
        t = time.perf_counter()
        while time.perf_counter() - t < 0.002:   # a start that takes a while: the control's padding follows it
            pass
        return lambda: calls.append("stop " + p)
    monkeypatch.setattr(rp, "_start", fake_start)
    spec = {"workload": "tiny", "profiler": "proton", "device": "cpu", "out": str(tmp_path / "p"), "warmup": 5,
            "block_s": 0.01, "steps": 50, "pre": 1, "min_pairs": 2, "max_pairs": 2, "deadline": time.time(),
            "cpus": None, "threads": None, "buffer": 0, "against": None, "fine": 1.0, "fine_cycles": 1,
            "fine_order": "solo", "fine_settle": 0.0, "rounds_path": str(tmp_path / "r.json")}
    r = rp.child_overhead(spec)
    assert r["fine"]["order"] == "solo" and r["fine"]["states"] == ["proton", "base", "none", "none2"]
    assert set(calls) == {"proton", "stop proton"} and calls.count("proton") == 1 + 2 * 4   # prime + 4 a block
    g = r["swap_gap_ms"]
    assert set(g) == {"proton/base", "none/none2", "into proton", "into base"}
    pf = [x for rr in r["multi"] for x, sg in zip(rr["pad_for"], rr["segments"]) if sg in ("none", "none2")]
    assert pf.count("proton") == pf.count("base") == len(pf) // 2
    # the switch into proton (its start, >= 2 ms) is mimicked by half the control pairs, padded to it
    assert g["into proton"][0] >= 2.0 and g["into proton"][1] >= 0.75 * g["into proton"][0]
    fp = rp.fine_pairs_summary([r])
    assert set(fp) == {"proton/base", "none/none2"} and fp["proton/base"]["pairs"] == 8


def _solo_child(prof, rnd, ratio, rng, blocks=60, gap=(10.0, 10.5), size=1000):
    names = [prof, "base", "none", "none2"]
    multi = []
    for i in range(blocks):
        segs = rp._fine_pairs_order(names, i)
        multi.append({"order": names, "segments": segs, "pairs": True, "swap": True,
                      "seg_ms": [10.0 * (ratio if s == prof else 1.0) * math.exp(rng.gauss(0, 0.02)) for s in segs],
                      "settle_ms": [10.0] * len(segs), "gap_ms": [1.0] * len(segs), "pad_ms": [0.0] * len(segs)})
    return {"workload": "encoder", "profiler": prof, "round": rnd, "multi": multi,
            "swap_gap_ms": {f"{prof}/base": gap[0], "none/none2": gap[1]}, "out_bytes": {prof: [size] * 8}}


def test_solo_verdict_applies_the_rule(tmp_path):
    """solo_verdict.py: kprof/Proton from the pooled pair medians with the Bonferroni interval; "not above" needs the
    control met, the upper bound <= 1 and every cross pairing < 1; a gap not matched, a missing process or an empty
    profile each take the decision away; two calls must agree."""
    import random
    sys.path.insert(0, os.path.join(REPO, "bench", "experiments", "profiler_overhead"))
    import solo_verdict as sv
    rng = random.Random(3)

    def call(name, kr=1.03, pr=1.12, **kw):
        ch = [_solo_child("kprof", 0, kr, rng), _solo_child("proton", 0, pr, rng),
              _solo_child("proton", 1, pr, rng), _solo_child("kprof", 1, kr, rng)]
        for k, v in kw.items():
            ch[1][k] = v
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps({"rows": [], "children": ch}))
        return str(p)
    c = sv.call_verdict(call("a"))
    assert c["verdict"] == "not above Proton: shown" and c["control_met"]
    assert abs(c["kprof/proton"]["median_ratio"] - 1.03 / 1.12) < 0.01
    lo, hi = c["kprof/proton"]["ci95_bonferroni"]
    assert lo < 1.03 / 1.12 < hi < 1.0 and len(c["cross_pairings"]) == 4
    assert sv.call_verdict(call("b", kr=1.12, pr=1.03))["verdict"] == "above Proton: shown"
    assert sv.call_verdict(call("c", kr=1.05, pr=1.05))["verdict"].startswith("not decided")
    assert sv.call_verdict(call("d", swap_gap_ms={"proton/base": 10.0, "none/none2": 14.0}))["verdict"] == \
        "not decided (control not met)"
    assert sv.call_verdict(call("d2", swap_gap_ms={"proton/base": 10.0, "none/none2": 10.0, "into proton": [12.0, 12.5],
                                                   "into base": [8.0, 12.0]}))["verdict"] == "not decided (control not met)"
    assert sv.call_verdict(call("d3", swap_gap_ms={"proton/base": 10.0, "none/none2": 14.0, "into proton": [12.0, 12.5],
                                                   "into base": [8.0, 8.5]}))["verdict"] == "not above Proton: shown"
    assert sv.call_verdict(call("e", out_bytes={"proton": [1000, 0]}))["verdict"].startswith("void")
    d = json.load(open(call("f")))
    d["partial"] = True
    (tmp_path / "f.json").write_text(json.dumps(d))
    assert sv.call_verdict(str(tmp_path / "f.json"))["verdict"].startswith("void")
    a = sv.call_verdict(call("g"))
    assert sv.combine([a, a]) == "not above Proton: shown (2 calls)"
    assert sv.combine([a, sv.call_verdict(call("h", kr=1.05, pr=1.05))]).startswith("not decided over the calls")
    assert sv.main([call("i"), "--out", str(tmp_path / "v.json")]) == 0
    assert json.load(open(tmp_path / "v.json"))["verdict"] == "not above Proton: shown (one call)"


def test_issue23_status_reads_a_solo_verdict(tmp_path, monkeypatch):
    """s26's solo design: issue23_status.py shows the first call's kprof/Proton and control, met only by the verdict
    over the calls (solo_verdict.py's)."""
    import random
    sys.path.insert(0, os.path.join(REPO, "bench", "experiments", "profiler_overhead"))
    import issue23_status as st
    import solo_verdict as sv
    rng = random.Random(4)
    ch = [_solo_child("kprof", 0, 1.03, rng), _solo_child("proton", 0, 1.12, rng),
          _solo_child("proton", 1, 1.12, rng), _solo_child("kprof", 1, 1.03, rng)]
    (tmp_path / "r2.json").write_text(json.dumps({"rows": [], "children": ch}))
    monkeypatch.setattr(st, "RES", str(tmp_path))
    src = {("encoder", "kprof/proton"): [("solo", "v.json", "kprof/proton", "solo")],
           ("encoder", "control (block)"): [("solo", "v.json", "none/none2", "solo")]}
    for ncalls, met in ((2, True), (1, False)):
        sv.main([str(tmp_path / "r2.json")] * ncalls + ["--out", str(tmp_path / "v.json")])
        e = st._entry("encoder", "kprof/proton", src)
        assert abs(e["value"] - 1.03 / 1.12) < 0.01 and e["ci"][1] < 1.0
        assert st._met("kprof/proton", e) is met   # one call: "(one call)", not shown over the calls
        c = st._entry("encoder", "control (block)", src)
        assert st._met("control (block)", c) is True
