"""The cupti backend's logic on CPU, driven by a fake cupti-python module (tests/profiler/fake_cupti.py):
correlation ids joined to scopes and call paths, kernelc launch descriptions, graphs, memcpy/memset,
windows of activate/deactivate, demangling, devices, busy CUPTI.  The real thing: test_gpu_profiler.py."""
import os

import pytest

import profiler
from profiler import hooks, session as S
from profiler.format import read_profile

from . import fake_cupti
from .test_api import find, names, paths_to

MANGLED = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15CUDAFunctor_addIfEESt5arrayIPcLm3EEEEviT0_T1_"
DEMANGLED = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
             "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)")


# the variants of profiler.options that change how launches are placed or records processed
VARIANTS = {"external-correlation": {"KPROF_CUPTI_ATTRIBUTION": "external-correlation"},
            "deferred": {"KPROF_CUPTI_RECORDS": "deferred"},
            "split": {"KPROF_CUPTI_RECORDS": "split"},
            "raw": {"KPROF_CUPTI_RECORDS": "raw"},
            "raw+external-correlation": {"KPROF_CUPTI_RECORDS": "raw",
                                         "KPROF_CUPTI_ATTRIBUTION": "external-correlation"}}


def _fake_for(monkeypatch, variant, **kw):
    monkeypatch.setenv("KPROF_BACKEND", "auto")
    for k, v in VARIANTS.get(variant, {}).items():
        monkeypatch.setenv(k, v)
    fake = fake_cupti.install(monkeypatch, fake_cupti.FakeCupti(**kw))
    from profiler.backends import cupti as backend_mod
    monkeypatch.setattr(backend_mod, "_cuda_initialized", lambda: True)   # as after torch's first CUDA call
    if variant.startswith("raw"):   # libcupti's own buffers (the default where libcupti is found)
        fake_cupti.install_libcupti(monkeypatch, fake)
    return fake


@pytest.fixture(params=["api-records", "callbacks", *VARIANTS])
def fake(monkeypatch, request):
    """Every way of placing launches: API activity records + timelines (the default), launch
    callbacks (a CUPTI without per-id API records), and the variants of profiler.options."""
    return _fake_for(monkeypatch, request.param, api_records=request.param != "callbacks")


@pytest.fixture(params=["api-records", *VARIANTS])
def light_fake(monkeypatch, request):
    """API activity records, with each variant of profiler.options."""
    return _fake_for(monkeypatch, request.param)


def test_kernels_joined_to_scopes(fake, tmp_path):
    sid = profiler.start(str(tmp_path / "c"))
    assert S.get(sid).backend_name == "cupti"
    assert fake.subscribes == 1 and int(fake_cupti.ActivityKind.CONCURRENT_KERNEL) in fake.kinds
    launch_ids = {int(fake_cupti.DriverApiTraceCbid.cuLaunchKernel), int(fake_cupti.DriverApiTraceCbid.cuGraphLaunch)}
    if fake.api_records:     # no Python callback per launch: CUPTI records the launch calls
        # ... from the first scope on (cupti_api_records="lazy"); with external correlation from the start
        ext = os.environ.get("KPROF_CUPTI_ATTRIBUTION") == "external-correlation"
        assert (launch_ids <= fake.api_ids) == ext and not any((1, i) in fake.enabled for i in launch_ids)
    else:
        assert all((1, i) in fake.enabled for i in launch_ids)
    assert (3, 13) in fake.enabled and (3, 20) in fake.enabled
    with profiler.scope("fwd"):
        assert launch_ids <= fake.api_ids or not fake.api_records
        for _ in range(3):
            fake.launch(MANGLED, dur=1000, runtime=True)
        with profiler.scope("inner"):
            fake.launch("gemm_kernel", dur=5000)
    fake.launch("outside", dur=10)
    profiler.finalize(sid)
    assert fake.flushes == 1 and fake.callback is None and not fake.kinds and not fake.api_ids  # released CUPTI
    root, dev = read_profile(tmp_path / "c.hatchet")
    assert names(root) == ["fwd", "outside"]
    k = find(root, "fwd").children[0]
    assert k.name == DEMANGLED
    assert k.metrics == {"count": 3, "time (ns)": 3000, "device_id": "0", "device_type": "CUDA"}
    assert find(root, "fwd", "inner", "gemm_kernel").metrics["time (ns)"] == 5000
    assert list(dev) == ["CUDA"] and "0" in dev["CUDA"]


def test_raw_pointer_callback_data(monkeypatch, tmp_path):
    monkeypatch.setenv("KPROF_BACKEND", "auto")
    fake = fake_cupti.install(monkeypatch, fake_cupti.FakeCupti(pass_pointers=True, api_records=False))
    sid = profiler.start(str(tmp_path / "p"))
    with profiler.scope("s"):
        fake.launch("k")
        g = []
        fake.capture_launch(g, "captured")
    ex = fake.instantiate(g)
    fake.graph_launch(ex)
    profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "p.hatchet")
    assert sorted(names(find(root, "s"))) == ["captured", "k"]


def test_memcpy_memset(fake, tmp_path):
    sid = profiler.start(str(tmp_path / "m"))
    with profiler.scope("io"):
        fake.memcpy(nbytes=4096, dur=500)
        fake.memcpy(nbytes=4096, dur=500)
        fake.memset(nbytes=1024, dur=300)
    profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "m.hatchet")
    cp = find(root, "io", "memcpy HtoD")
    assert cp.metrics["count"] == 2 and cp.metrics["bytes"] == 8192 and cp.metrics["time (ns)"] == 1000
    assert cp.extra == {"kind": "memcpy"}
    assert find(root, "io", "memset").metrics["bytes"] == 1024


def test_graph_replays_attributed_to_capture_site(fake, tmp_path):
    sid = profiler.start(str(tmp_path / "g"))
    graph = []
    with profiler.scope("capture"):
        with profiler.scope("layer1"):
            fake.capture_launch(graph, "k1")
        with profiler.scope("layer2"):
            fake.capture_launch(graph, "k2")
    with profiler.scope("instantiate"):
        ex = fake.instantiate(graph)
    with profiler.scope("replay"):
        for _ in range(4):
            fake.graph_launch(ex, dur=800)
    profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "g.hatchet")
    k1 = find(root, "capture", "layer1", "k1")
    assert k1.metrics["count"] == 4 and k1.metrics["time (ns)"] == 3200
    assert find(root, "capture", "layer2", "k2").metrics["count"] == 4
    assert "replay" not in names(root) and "instantiate" not in names(root)


def test_graph_captured_before_start_goes_to_launch_site(fake, tmp_path):
    graph = []
    fake.capture_launch(graph, "k")          # nobody subscribed yet: no node mapping
    ex = fake.instantiate(graph)
    sid = profiler.start(str(tmp_path / "g2"))
    with profiler.scope("replay"):
        fake.graph_launch(ex)
    profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "g2.hatchet")
    assert find(root, "replay", "k").metrics["count"] == 1


def test_deactivated_window_dropped(fake, tmp_path):
    sid = profiler.start(str(tmp_path / "w"))
    fake.launch("first")
    profiler.deactivate(sid)
    fake.launch("skipped")
    profiler.activate(sid)
    fake.launch("second")
    profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "w.hatchet")
    assert names(root) == ["first", "second"]


def test_two_sessions_share_one_subscriber(fake, tmp_path):
    a = profiler.start(str(tmp_path / "a"))
    fake.launch("k_a")
    b = profiler.start(str(tmp_path / "b"))
    fake.launch("k_ab")
    profiler.finalize(a)
    assert fake.callback is not None       # b still needs CUPTI
    fake.launch("k_b")
    profiler.finalize(b)
    assert fake.subscribes == 1 and fake.callback is None
    ra, _ = read_profile(tmp_path / "a.hatchet")
    rb, _ = read_profile(tmp_path / "b.hatchet")
    assert names(ra) == ["k_a", "k_ab"]
    assert names(rb) == ["k_ab", "k_b"]


def test_python_context(fake, tmp_path):
    def launch_here():
        fake.launch("pykernel")

    sid = profiler.start(str(tmp_path / "py"), context="python")
    launch_here()
    profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "py.hatchet")
    chains = paths_to(root, lambda n: n.name == "pykernel")
    assert len(chains) == 1
    chain = chains[0]
    funcs = [n.rsplit("@", 1)[-1] for n in chain[:-1]]
    # ... -> this test -> launch_here -> the fake module's frames (they stand for the library that
    # launches: its frames are part of the call path like torch's)
    i = funcs.index("test_python_context")
    assert funcs[i + 1] == "launch_here" and funcs[i + 2:] == ["launch", "_api"], chain
    assert chain[i].startswith(os.path.abspath(__file__) + ":")
    pkg = os.path.dirname(os.path.abspath(profiler.__file__)) + os.sep
    assert not any(n.startswith(pkg) for n in chain)


def test_kernelc_gpu_launch_description(fake, tmp_path):
    """The GPU path of the kernelc hook: enter swaps the thread context for a KernelLaunch that the
    CUPTI launch callback stores; exit restores it.  A fake LaunchRecord stands in for kernelc's."""

    class FakeFn:
        launch_metadata = staticmethod(lambda grid, meta, args: {"flops": 64, "bytes": 8})
        file = __file__
        first_line = 1
        src = "@kernelc.jit\ndef mm(x):\n    pass\n"

    class Compiled:
        signature = {"x": "*fp16"}
        target = type("T", (), {"arch": "sm_90a"})()
        n_regs, n_spills = 128, 0

    class Rec:
        name, grid, num_warps, num_stages, shared = "mm", (128, 1, 1), 8, 3, 96 * 1024
        stream, backend, cache_key, function, compiled = 0, "cuda", "abc123", FakeFn(), Compiled()
        constexprs = {"BLOCK": 64}
        launch_metadata = {"flops": 64, "bytes": 8}
        args = []

    sid = profiler.start(str(tmp_path / "kc"))
    assert hooks.installed()
    with profiler.scope("attn"):
        for _ in range(2):
            hooks._enter(Rec)
            fake.launch("mm", dur=2000)
            hooks._exit(Rec)
        fake.launch("torch_kernel")           # after the exit hook: a plain kernel again
    profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "kc.hatchet")
    k = find(root, "attn", "mm")
    assert k.name == "mm [grid 128x1x1, warps 8, stages 3, smem 96KiB]"
    assert k.metrics["count"] == 2 and k.metrics["flops"] == 128 and k.metrics["time (ns)"] == 4000
    assert k.extra["cache_key"] == "abc123" and k.extra["signature"] == {"x": "*fp16"}
    assert k.extra["target"] == "sm_90a" and k.extra["n_regs"] == 128
    assert k.extra["constexprs"] == {"BLOCK": 64}
    assert "torch_kernel" in names(find(root, "attn"))


def test_kernelc_launches_share_one_launch_object(fake, tmp_path):
    """Launches of one configuration in one scope, without launch_metadata, share one KernelLaunch
    (no object per launch); another scope gets its own; launches with metrics get one each.  Every
    placement mode still puts each launch under its scope."""
    from profiler import context

    class Fn:
        launch_metadata = None
        file, first_line, src = __file__, 1, "def k(x):\n    pass\n"

    class Plain:
        name, grid, num_warps, num_stages, shared = "k", (4, 1, 1), 4, 1, 0
        stream, backend, cache_key, function, compiled = 0, "cuda", "plain1", Fn(), None
        constexprs, args = {}, []

    class WithMd(Plain):
        name, cache_key = "kmd", "md1"
        function = type("FnMd", (Fn,), {"launch_metadata": staticmethod(lambda g, m, a: {"flops": 3})})()
        launch_metadata = {"flops": 3}

    seen = {}

    def launch(rec, scope_name):
        hooks._enter(rec)
        seen.setdefault((rec.name, scope_name), []).append(context.current().node)
        fake.launch(rec.name, dur=1000)
        hooks._exit(rec)

    sid = profiler.start(str(tmp_path / "share"))
    for name in ("a", "b"):
        with profiler.scope(name):
            for _ in range(3):
                launch(Plain, name)
                launch(WithMd, name)
    profiler.finalize(sid)
    a, b = seen[("k", "a")], seen[("k", "b")]
    assert all(type(x) is context.KernelLaunch for x in a + b)
    assert a[0] is a[1] is a[2] and b[0] is b[1] is b[2] and a[0] is not b[0]
    md = seen[("kmd", "a")]
    assert len({id(x) for x in md}) == 3 and all(x.metrics == {"flops": 3} for x in md)
    root, _ = read_profile(tmp_path / "share.hatchet")
    for name in ("a", "b"):
        assert find(root, name, "k [grid 4x1x1, warps 4, stages 1]").metrics["count"] == 3
        k = find(root, name, "kmd [grid 4x1x1, warps 4, stages 1]")
        assert k.metrics["count"] == 3 and k.metrics["flops"] == 9


def test_busy_cupti_falls_back_once(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("KPROF_BACKEND", "auto")
    fake_cupti.install(monkeypatch, fake_cupti.FakeCupti(busy=True))
    a = profiler.start(str(tmp_path / "a"))
    b = profiler.start(str(tmp_path / "b"))
    assert S.get(a).backend_name == "cpu" and S.get(b).backend_name == "cpu"
    profiler.finalize()
    err = capsys.readouterr().err
    assert err.count("kprof:") == 1
    assert "CUPTI is held by another tool" in err and "using the cpu backend" in err
    assert os.path.exists(tmp_path / "a.hatchet") and os.path.exists(tmp_path / "b.hatchet")


def test_torch_profiler_active_is_busy(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("KPROF_BACKEND", "auto")
    fake = fake_cupti.install(monkeypatch, fake_cupti.FakeCupti())
    from profiler.backends import cupti as backend_mod
    monkeypatch.setattr(backend_mod, "_torch_profiler_active", lambda: True)
    sid = profiler.start(str(tmp_path / "t"))
    assert S.get(sid).backend_name == "cpu" and fake.subscribes == 0
    profiler.finalize(sid)
    assert "torch.profiler" in capsys.readouterr().err


def test_chrome_trace_from_cupti(fake, tmp_path):
    import json
    sid = profiler.start(str(tmp_path / "tr"), format="chrome")
    with profiler.scope("step"):
        fake.launch("k", dur=1000)
        fake.memcpy()
    profiler.finalize(sid)
    data = json.load(open(tmp_path / "tr.trace.json"))
    ev = [e for e in data["traceEvents"] if e["ph"] == "X"]
    kinds = {(e["name"], e["cat"]) for e in ev}
    assert ("k", "kernel") in kinds and ("memcpy HtoD", "memory") in kinds and ("step", "scope") in kinds
    k = next(e for e in ev if e["name"] == "k")
    assert k["dur"] == 1.0 and k["args"]["path"] == "step" and "correlation" in k["args"]
    procs = {e["args"]["name"] for e in data["traceEvents"] if e["name"] == "process_name"}
    assert procs == {"GPU 0", "host"}


def test_pcsampling_protocol(fake, tmp_path, monkeypatch):
    """What profiler.pcsampling relies on (see profiler/pcsampling/integration.py): mode options,
    serialized kernel records, add_launch_callback, and session.kernels at finish."""
    import sys
    import types
    seen = {"launches": []}

    def attach(s):
        seen["attach"] = (s.mode, s.mode_options, s.kernel_activity)
        s.add_launch_callback(lambda **kw: seen["launches"].append(kw))

    def finish(s, root):
        seen["kernels"] = {cid: (node.name, getattr(info, "name", None)) for cid, (node, info) in s.kernels.items()}

    mod = types.ModuleType("profiler.pcsampling")
    mod.attach, mod.finish = attach, finish
    monkeypatch.setitem(sys.modules, "profiler.pcsampling", mod)
    monkeypatch.setattr(profiler, "pcsampling", mod, raising=False)
    sid = profiler.start(str(tmp_path / "pcs"), mode="pcsampling:period=10:drain=1")
    assert int(fake_cupti.ActivityKind.KERNEL) in fake.kinds            # serialized kernel records
    assert int(fake_cupti.ActivityKind.CONCURRENT_KERNEL) not in fake.kinds
    # beside PC sampling, launches are placed by callbacks (no API activity records)
    assert not fake.api_ids and (1, int(fake_cupti.DriverApiTraceCbid.cuLaunchKernel)) in fake.enabled
    with profiler.scope("s"):
        c1 = fake.launch("k1")
        c2 = fake.launch("k2")
    profiler.finalize(sid)
    assert seen["attach"] == ("pcsampling", {"period": 10, "drain": 1}, "serialized")
    assert [d["correlation_id"] for d in seen["launches"]] == [c1, c2]
    assert seen["kernels"] == {c1: ("k1", None), c2: ("k2", None)}


def test_threads_with_api_records(light_fake, tmp_path):
    """A native thread (no Python thread object, like torch's autograd engine) inherits the main
    thread's scope; a Python thread keeps its own (here: none)."""
    import _thread
    import threading
    fake = light_fake
    sid = profiler.start(str(tmp_path / "t"))
    done = threading.Event()
    release = threading.Event()

    def python_thread():
        fake.launch("from_python_thread")
        done.set()
        release.wait(10)

    with profiler.scope("backward"):
        finished = threading.Lock()
        finished.acquire()
        # both threads stay alive until the end, so that they have different thread ids
        _thread.start_new_thread(lambda: (fake.launch("from_native_thread"), finished.release(), release.wait(10)), ())
        assert finished.acquire(timeout=10)
        t = threading.Thread(target=python_thread)
        t.start()
        assert done.wait(10)
    fake.launch("after")
    profiler.finalize(sid)
    release.set()
    t.join()
    root, _ = read_profile(tmp_path / "t.hatchet")
    assert names(find(root, "backward")) == ["from_native_thread"]
    assert sorted(names(root)) == ["after", "backward", "from_python_thread"]


def test_api_record_after_its_kernel_record(monkeypatch, tmp_path):
    """A device record whose API record comes in a later buffer waits for it."""
    monkeypatch.setenv("KPROF_BACKEND", "auto")
    fake = fake_cupti.install(monkeypatch, fake_cupti.FakeCupti())
    sid = profiler.start(str(tmp_path / "o"))
    with profiler.scope("s"):
        fake.launch("k")
    api = [r for r in fake.pending if r.kind == int(fake_cupti.ActivityKind.DRIVER)]
    fake.pending = [r for r in fake.pending if r not in api]
    fake.activity_flush_all(1)           # the kernel record alone
    fake.pending = api                   # then its API record
    profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "o.hatchet")
    assert names(find(root, "s")) == ["k"]


def test_light_mode_left_when_a_listener_arrives(monkeypatch, tmp_path):
    """A session placing launches by API records is switched to callbacks when PC sampling needs
    them; launches from before the switch keep their scopes, later ones get theirs."""
    monkeypatch.setenv("KPROF_BACKEND", "auto")
    fake = fake_cupti.install(monkeypatch, fake_cupti.FakeCupti())
    sid = profiler.start(str(tmp_path / "sw"))
    with profiler.scope("before"):
        fake.launch("k_before")
    S.get(sid).add_launch_callback(lambda **kw: None)
    assert not fake.api_ids
    with profiler.scope("after"):
        fake.launch("k_after")
    profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "sw.hatchet")
    assert names(find(root, "before")) == ["k_before"] and names(find(root, "after")) == ["k_after"]


def test_records_held_until_flush_with_api_records(monkeypatch, tmp_path):
    """With API records, buffers completed during the run are only split into columns; the join to
    launches waits for the flush, or for DEFER_MAX held records (then the oldest records beyond the
    bound are delivered in the callback, the newest stay held)."""
    from profiler.backends import cupti as backend_mod
    monkeypatch.setenv("KPROF_BACKEND", "auto")
    DEFER = 5
    monkeypatch.setattr(backend_mod, "DEFER_MAX", DEFER)
    monkeypatch.setenv("KPROF_CUPTI_RECORDS", "split")
    fake = fake_cupti.install(monkeypatch, fake_cupti.FakeCupti())
    sid = profiler.start(str(tmp_path / "h"))
    backend = S.get(sid).backend
    delivered = []
    real = backend._deliver
    monkeypatch.setattr(backend, "_deliver", lambda recs, final: (delivered.append(len(recs)), real(recs, final)))
    with profiler.scope("a"):
        for _ in range(3):
            fake.launch("k")
    fake.activity_flush_all(1)               # a buffer completes mid-run: 3 records held
    assert delivered == [] and backend.held.count == 3
    with profiler.scope("b"):
        for _ in range(3):
            fake.launch("k")
    fake.activity_flush_all(1)               # 6 held >= DEFER_MAX: the oldest 2 delivered, 4 stay
    assert delivered == [2] and backend.held.count == DEFER - 1
    with profiler.scope("c"):
        fake.launch("k")
    profiler.finalize(sid)
    # the flush completes the last buffer first (5 held: the oldest 1 from the callback), then the rest
    assert delivered == [2, 1, 4]
    root, _ = read_profile(tmp_path / "h.hatchet")
    assert [find(root, s, "k").metrics["count"] for s in "abc"] == [3, 3, 1]


def test_python_thread_ended_before_the_join(light_fake, tmp_path):
    """A Python thread that launched outside any scope and has ended by the flush: its launches are
    its own (the root), not the main thread's scope -- it got a context when it started."""
    import threading
    fake = light_fake
    sid = profiler.start(str(tmp_path / "ended"))
    with profiler.scope("main"):
        t = threading.Thread(target=lambda: fake.launch("from_thread"))
        t.start()
        t.join()
        fake.launch("from_main")
    profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "ended.hatchet")
    assert names(find(root, "main")) == ["from_main"] and "from_thread" in names(root)



@pytest.mark.parametrize("variant", ["api-records", "external-correlation"])
@pytest.mark.parametrize("clock,offset", [("monotonic", 7_000_000_000), ("realtime", 0), ("monotonic_raw", -3_000),
                                          ("realtime", 7_000_000_000)])
def test_timelines_on_a_host_clock(monkeypatch, tmp_path, clock, offset, variant):
    """``cupti_timeline_clock``: timelines read a host clock and launches are placed by their API records'
    CUPTI times mapped onto it through the offsets measured at the start and at the join -- here a CUPTI whose
    clock is a host clock plus a constant; every launch lands in its scope, also those of another thread. The
    default (``realtime``) reads the host clock only where it is CUPTI's (no offset), else CUPTI's clock."""
    import threading
    import time

    from profiler.backends import cupti as kc
    host = kc.host_clock(clock)
    fake = _fake_for(monkeypatch, variant, clock=lambda: host() + offset)
    monkeypatch.setenv("KPROF_CUPTI_TIMELINE_CLK", clock)
    sid = profiler.start(str(tmp_path / "h"))
    b = S.get(sid).backend
    fallback = clock == "realtime" and offset != 0   # REALTIME is not this CUPTI's clock: timelines read CUPTI's
    if fallback:
        assert b.tl_offsets is None and any("not REALTIME" in x for x in b.skipped)
    else:
        assert b.tl_offsets and abs(b.tl_offsets[0][1] - offset) < 1_000_000
    with profiler.scope("fwd"):
        fake.launch("k_fwd")
        with profiler.scope("inner"):
            fake.launch("k_inner")
        fake.launch("k_fwd")

    def worker():
        with profiler.scope("side"):
            fake.launch("k_side")
    t = threading.Thread(target=worker)
    t.start()
    t.join()
    fake.launch("k_root")
    time.sleep(0.001)
    profiler.finalize(sid)
    assert fallback or len(b.tl_offsets) >= 2
    root, _ = read_profile(tmp_path / "h.hatchet")
    assert find(root, "fwd", "k_fwd").metrics["count"] == 2
    assert find(root, "fwd", "inner", "k_inner").metrics["count"] == 1
    assert find(root, "side", "k_side").metrics["count"] == 1
    assert find(root, "k_root").metrics["count"] == 1


def test_clock_offset_and_mapping():
    """clock_offset takes the narrowest bracket; the mapping interpolates a drifting offset linearly."""
    from profiler.backends import cupti as kc
    t = [0]

    def host():
        t[0] += 10
        return t[0]
    h, off = kc.clock_offset(lambda: t[0] + 1000, host, tries=3)
    assert off == 1000 - 5 and h == 15
    b = object.__new__(kc.CuptiBackend)
    b.clock, b.tl_clock = (lambda: 0), None
    b.tl_offsets = [(0, 100), (1_000_000, 200)]   # CUPTI - host grew by 100 ns over 1 ms

    def raising():
        raise RuntimeError("CUPTI stopped")
    b.clock = raising
    to_tl = b._to_timeline()
    assert to_tl(100) == 0 and to_tl(1_000_200) == 1_000_000 and to_tl(500_150) == 500_000
    b.tl_offsets = None
    assert b._to_timeline() is None


def test_kernelc_launch_with_an_unhashable_compiled_kernel(fake, tmp_path, capsys):
    """kernelc's CompiledKernel is an eq-dataclass (unhashable): the hook's one-lookup path keys it by id and
    describes every launch (no "hook failed" warning); launches of one configuration share one KernelLaunch."""
    import dataclasses

    from profiler import context

    @dataclasses.dataclass
    class Compiled:
        cache_key: str = "ck1"
        signature: dict = dataclasses.field(default_factory=lambda: {"x": "*fp32"})

    class Fn:
        launch_metadata = None
        file, first_line, src = __file__, 1, "def k(x):\n    pass\n"

    ck = Compiled()

    class Rec:
        name, grid, num_warps, num_stages, shared = "kc", (8, 1, 1), 4, 2, 0
        stream, backend, cache_key, function, compiled = 0, "cuda", "ck1", Fn(), ck
        constexprs, args = {}, []

    with pytest.raises(TypeError):
        hash(ck)
    seen = []
    sid = profiler.start(str(tmp_path / "u"))
    with profiler.scope("s"):
        for _ in range(3):
            hooks._enter(Rec)
            seen.append(context.current().node)
            fake.launch("kc", dur=1000)
            hooks._exit(Rec)
    profiler.finalize(sid)
    assert "hook failed" not in capsys.readouterr().err
    assert type(seen[0]) is context.KernelLaunch and seen[0] is seen[1] is seen[2]
    root, _ = read_profile(tmp_path / "u.hatchet")
    k = find(root, "s", "kc [grid 8x1x1, warps 4, stages 2]")
    assert k.metrics["count"] == 3 and k.extra["cache_key"] == "ck1"


def test_scope_metrics_queued_and_summed_at_the_end(light_fake, tmp_path, monkeypatch, capsys):
    """Without a session timing scopes, a scope's metrics are queued at its entry (a copy: the caller's dict may
    change after) and summed at the end, also past the queue's bound; a non-number is left out with a warning
    where the rest of that entry's metrics are kept; a session started later gets only its own entries."""
    monkeypatch.setattr(S, "METRICS_Q_MAX", 5)
    monkeypatch.setattr(S, "_warned_metrics", set())
    sid = profiler.start(str(tmp_path / "m"))
    assert not S.timing
    m = {"flops": 10}
    for _ in range(12):
        with profiler.scope("attn", metrics=m):
            light_fake.launch("k", dur=100)
    m["flops"] = 10 ** 6   # after the entries: not theirs
    with profiler.scope("mlp", metrics={"flops": 3, "bytes": "many"}):
        pass
    assert len(S._metrics_q) <= 6
    sid2 = profiler.start(str(tmp_path / "m2"))
    with profiler.scope("attn", metrics={"flops": 1}):
        pass
    profiler.finalize(sid)
    profiler.finalize(sid2)
    root, _ = read_profile(tmp_path / "m.hatchet")
    assert find(root, "attn").metrics["flops"] == 121
    assert find(root, "mlp").metrics["flops"] == 3 and "bytes" not in find(root, "mlp").metrics
    assert "'bytes' must be a number" in capsys.readouterr().err
    root2, _ = read_profile(tmp_path / "m2.hatchet")
    assert find(root2, "attn").metrics["flops"] == 1


@pytest.mark.parametrize("variant", ["api-records", "raw"])
def test_api_records_turned_on_at_the_first_scope(monkeypatch, tmp_path, variant):
    """cupti_api_records="lazy" (the default): no launch API record until a thread leaves the root (CUPTI's
    record per launch is then the floor's); launches before are the root's, by their start time; from the
    first scope entry on launches are placed as always -- the scope's, and the root's after it -- and a
    window edge meanwhile waits for the GPU (kernels without API records are windowed by their start)."""
    fake = _fake_for(monkeypatch, variant)
    from profiler.backends import cupti as backend_mod
    syncs = []
    monkeypatch.setattr(backend_mod.CuptiBackend, "synchronize", lambda self: syncs.append(1))
    sid = profiler.start(str(tmp_path / "lz"))
    b = S.get(sid).backend
    assert not fake.api_ids and not b.api_wanted and syncs == [1]   # the window's start waited for the GPU
    for _ in range(3):
        fake.launch("root_before")
    fake.memset()
    assert not fake.api_ids and not any(r.kind == int(fake_cupti.ActivityKind.DRIVER) for r in fake.pending)
    fake.activity_flush_all(1)   # a buffer completes before anything is armed
    fake.launch("queued")        # launched before the first scope, run after the profile's end (a GPU behind)
    queued = fake.pending[-1]
    queued.start, queued.end = queued.start + 10 ** 9, queued.end + 10 ** 9
    with profiler.scope("fwd"):
        assert fake.api_ids and b.api_wanted and b.armed_at is not None
        from profiler import context
        assert context.MAIN.nodes[-1] != 0 and b.armed_at <= context.MAIN.times[-1]   # on before the entry's time
        fake.launch("in_scope")
    fake.launch("root_after")
    with profiler.scope("again"):   # armed once
        fake.launch("in_again")
    profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "lz.hatchet")
    assert sorted(n for n in names(root) if "memset" not in n) == ["again", "fwd", "queued", "root_after",
                                                                   "root_before"]
    assert len(names(root)) == 6   # and the memset
    assert find(root, "root_before").metrics["count"] == 3
    assert names(find(root, "fwd")) == ["in_scope"] and names(find(root, "again")) == ["in_again"]


def test_scope_free_run_never_turns_api_records_on(monkeypatch, tmp_path):
    """A run without scopes or kernelc launches (a threaded one included: a thread's first use is no entry
    off the root) pays no API record; kprof deactivated and activated again keeps its windows by start time."""
    import threading
    fake = _fake_for(monkeypatch, "api-records")
    sid = profiler.start(str(tmp_path / "nf"))
    t = threading.Thread(target=lambda: fake.launch("from_thread"))
    t.start()
    t.join()
    fake.launch("first")
    profiler.deactivate(sid)
    fake.launch("skipped")
    profiler.activate(sid)
    fake.launch("second")
    assert not fake.api_ids
    profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "nf.hatchet")
    assert sorted(names(root)) == ["first", "from_thread", "second"]


def test_api_records_always_and_started_inside_a_scope(monkeypatch, tmp_path):
    """cupti_api_records="always": on from the start; lazy, started inside a scope: on at once."""
    fake = _fake_for(monkeypatch, "api-records")
    monkeypatch.setenv("KPROF_CUPTI_API_RECORDS", "always")
    sid = profiler.start(str(tmp_path / "al"))
    assert fake.api_ids and S.get(sid).backend.api_wanted
    profiler.finalize(sid)
    monkeypatch.setenv("KPROF_CUPTI_API_RECORDS", "lazy")
    with profiler.scope("outer"):
        sid = profiler.start(str(tmp_path / "in"))
        assert fake.api_ids
        fake.launch("k")
        profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "in.hatchet")
    assert names(find(root, "outer")) == ["k"]


def test_kernelc_launch_at_the_root_arms(monkeypatch, tmp_path):
    """A hooked kernelc launch outside any scope is an entry off the root (its KernelLaunch node): the API
    records come on before its launch, so the launch gets its description."""
    fake = _fake_for(monkeypatch, "api-records")

    class Rec:
        name, grid, num_warps, num_stages, shared = "mm", (4, 1, 1), 4, 2, 0
        stream, backend, cache_key, compiled = 0, "cuda", "k1", None
        function = type("F", (), {"launch_metadata": None, "file": __file__, "first_line": 1, "src": ""})()
        constexprs, launch_metadata, args = {}, None, []

    sid = profiler.start(str(tmp_path / "kr"))
    assert not fake.api_ids
    hooks._enter(Rec)
    assert fake.api_ids
    fake.launch("mm")
    hooks._exit(Rec)
    profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "kr.hatchet")
    assert [c.name for c in root.children][0].startswith("mm [grid 4x1x1")


def test_unarmed_window_edge_does_not_synchronize_a_capture(monkeypatch, tmp_path):
    """While nothing is armed a window edge synchronizes -- except during a CUDA graph capture (torch's current
    stream capturing), which a synchronize would invalidate."""
    import sys
    import types
    fake = _fake_for(monkeypatch, "api-records")
    from profiler.backends import cupti as backend_mod
    syncs = []
    monkeypatch.setattr(backend_mod.CuptiBackend, "synchronize", lambda self: syncs.append(1))
    capturing = [False]
    cuda = types.SimpleNamespace(is_initialized=lambda: True, is_current_stream_capturing=lambda: capturing[0])
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    sid = profiler.start(str(tmp_path / "cap"))
    assert syncs == [1]
    capturing[0] = True
    profiler.deactivate(sid)
    assert syncs == [1]
    capturing[0] = False
    profiler.activate(sid)
    assert syncs == [1, 1]
    fake.launch("k")
    profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "cap.hatchet")
    assert names(root) == ["k"]


def test_lazy_started_before_cuda_is_up(monkeypatch, tmp_path):
    """cupti_api_records="lazy" with CUDA not yet up when the profile starts (python -m kprof, torchrun): with the
    records off while CUDA came up kprof placed no launch on an H200 (modelled here: the fake's context then gives
    none), so they stay on until CUDA's first context exists and go off in its CONTEXT_CREATED callback; the first
    scope turns them on again and its kernels are placed; a later context changes nothing."""
    fake = _fake_for(monkeypatch, "api-records")
    fake.ctx_api_model = True
    from profiler.backends import cupti as backend_mod
    monkeypatch.setattr(backend_mod, "_cuda_initialized", lambda: False)
    sid = profiler.start(str(tmp_path / "early"))
    b = S.get(sid).backend
    assert fake.api_ids and not b.api_wanted and b.lazy_ctx
    fake.create_context()
    assert not fake.api_ids and not b.lazy_ctx and not fake.ctx_dead and not b.api_wanted
    fake.launch("root_k")
    with profiler.scope("step"):
        assert fake.api_ids and b.api_wanted
        fake.launch("k")
    fake.create_context()
    assert fake.api_ids and not fake.ctx_dead
    with profiler.scope("step"):
        fake.launch("k")
    profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "early.hatchet")
    assert names(find(root, "step")) == ["k"] and find(root, "step", "k").metrics["count"] == 2
    assert "root_k" in names(root)



def test_start_stop_cycles_keep_no_old_backend(monkeypatch, tmp_path):
    """A process that starts and finalizes kprof many times (a profile per epoch; the swap design's ~600 cycles a
    run, issue 23, session 25) keeps only the last few starts' callbacks for CUPTI, not every backend it had: the
    first cycle's backend is freed, and what is kept stays bounded, whatever the number of cycles."""
    import gc
    import weakref

    fake = _fake_for(monkeypatch, "raw")
    from profiler.backends import cupti as backend_mod
    kept = getattr(backend_mod, "KEEPALIVE_STARTS", 4)
    first = None
    for i in range(3 * kept):
        sid = profiler.start(str(tmp_path / f"e{i % 2}"))
        b = S.get(sid).backend
        assert b.rawbufs is not None   # libcupti's own buffer callbacks, kept as this start's
        first = first or weakref.ref(b)
        with profiler.scope("epoch"):
            fake.launch("k")
        profiler.finalize(sid)
        del b
    gc.collect()
    assert len(backend_mod._KEEPALIVE) <= kept
    assert first() is None, "the first cycle's backend is still referenced"
    root, _ = read_profile(tmp_path / "e1.hatchet")   # the last cycle still profiled
    assert find(root, "epoch", "k").metrics["count"] == 1
