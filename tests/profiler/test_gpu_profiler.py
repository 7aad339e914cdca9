"""kprof on a GPU with the real CUPTI (cupti-python): kernel timing of torch/cuBLAS/kernelc kernels,
call paths, scopes, the kernelc hook, CUDA graphs, memcpy, busy CUPTI, the CLI on examples/train.py.

Every test runs its program in a fresh subprocess: CUPTI allows one subscriber per process and keeps
state across sessions, so isolation makes each test say one thing.
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from profiler.format import inclusive_metrics, read_profile

from .conftest import REPO

pytestmark = pytest.mark.gpu


# the variants of profiler.options the placement tests also run under (docs/performance.md, issue 23)
# (the default records mode is "raw": libcupti's own buffers)
VARIANTS = {"default": {}, "external-correlation": {"KPROF_CUPTI_ATTRIBUTION": "external-correlation"},
            "deferred": {"KPROF_CUPTI_RECORDS": "deferred"}, "split": {"KPROF_CUPTI_RECORDS": "split"},
            # timelines on cupti.get_timestamp instead of the default time.time_ns (launches mapped to it)
            "cupti-clock": {"KPROF_CUPTI_TIMELINE_CLK": "cupti"}, "monotonic-clock": {"KPROF_CUPTI_TIMELINE_CLK": "monotonic"},
            # scopes' entry/exit in Python instead of the default C (profiler/_kscope.c)
            "python-scopes": {"KPROF_NATIVE_SCOPES": "off"}}


def run_program(tmp_path, code, *args, timeout=300, env_extra=None):
    path = tmp_path / "prog.py"
    path.write_text(textwrap.dedent(code))
    env = dict(os.environ)
    env.update(env_extra or {})
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("KPROF_BACKEND", None)
    env.pop("KERNELC_INTERPRET", None)
    r = subprocess.run([sys.executable, str(path), *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, f"rc={r.returncode}\nstdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-5000:]}"
    return r


def kernels_under(node):
    return [n for n, _ in node.walk() if "time (ns)" in n.metrics and n.metrics.get("device_type") == "CUDA"]


def child(node, prefix):
    for c in node.children:
        if c.name == prefix or c.name.startswith(prefix):
            return c
    raise AssertionError(f"no {prefix!r} under {node.name!r}: {[c.name for c in node.children]}")


def test_torch_kernels_scopes_timing_memcpy(tmp_path):
    r = run_program(tmp_path, """
        import json, torch, profiler
        from profiler import session
        x = torch.randn(1 << 20, device="cuda")
        a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
        c = a @ a                   # cuBLAS loads its kernels lazily: keep that out of the timed window
        torch.cuda.synchronize()
        sid = profiler.start("torch_scopes")
        info = {"backend": session.get(sid).backend_name}
        with profiler.scope("adds"):
            for _ in range(100):
                x = x + 1
        # keep the GPU busy while the host queues the GEMMs, so the events' window holds no idle gaps from a slow
        # host (a loaded 16-core host took 645 us a launch, 2026-11-27, and the window tripled)
        torch.cuda._sleep(200_000_000)
        with profiler.scope("gemm"):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(20):
                c = a @ a
            e.record()
        with profiler.scope("copy"):
            h = x.cpu()
        torch.cuda.synchronize()
        info["gemm_event_ms"] = s.elapsed_time(e)
        profiler.deactivate(sid)
        for _ in range(7):
            x = x * 1.0
        profiler.activate(sid)
        print("paths", profiler.finalize())
        # a second session in the same process (CUPTI subscribed again)
        sid2 = profiler.start("second")
        with profiler.scope("again"):
            y = x.sin()
        profiler.finalize(sid2)
        json.dump(info, open("info.json", "w"))
    """)
    info = json.load(open(tmp_path / "info.json"))
    assert info["backend"] == "cupti", r.stderr
    assert "kprof:" not in r.stderr, r.stderr          # no fallback message
    root, dev = read_profile(tmp_path / "torch_scopes.hatchet")
    scopes = [c.name for c in root.children if not kernels_under(c) or c.children]
    assert scopes[:3] == ["adds", "gemm", "copy"], [c.name for c in root.children]
    adds = kernels_under(child(root, "adds"))
    assert len(adds) == 1 and adds[0].metrics["count"] == 100, [(k.name, k.metrics) for k in adds]
    assert "elementwise_kernel" in adds[0].name and not adds[0].name.startswith("_Z")     # demangled
    gemm = kernels_under(child(root, "gemm"))
    assert sum(k.metrics["count"] for k in gemm) >= 20
    t = sum(k.metrics["time (ns)"] for k in gemm) / 1e6
    assert 0.8 * info["gemm_event_ms"] <= t <= 1.05 * info["gemm_event_ms"], (t, info)   # CUPTI agrees with events
    cp = [c for c in child(root, "copy").children if c.name.startswith("memcpy")]
    assert cp and cp[0].name == "memcpy DtoH" and cp[0].metrics["bytes"] == 4 << 20
    assert inclusive_metrics(root)[root]["count"] >= 120
    assert not any("MulFunctor" in k.name for k in kernels_under(root)), "kernels launched while deactivated"
    assert dev["CUDA"]["0"]["arch"] == "90" and dev["CUDA"]["0"]["num_sms"] >= 100
    assert dev["CUDA"]["0"]["bus_width"] > 0 and dev["CUDA"]["0"]["clock_rate"] > 0
    root2, _ = read_profile(tmp_path / "second.hatchet")
    assert [c.name for c in root2.children] == ["again"] and kernels_under(root2)


def test_python_call_paths(tmp_path):
    run_program(tmp_path, """
        import torch, profiler
        x = torch.randn(1024, device="cuda")

        def hot(y):
            for _ in range(50):
                y = y * 2.0
            return y

        def outer():
            return hot(x)

        sid = profiler.start("py", context="python")
        outer()
        profiler.finalize()
    """)
    root, _ = read_profile(tmp_path / "py.hatchet")
    prog = str(tmp_path / "prog.py")
    found = []
    for node, _ in root.walk():
        if node.name.startswith(prog) and node.name.endswith("@hot"):
            found.append(node)
    assert len(found) == 1, [n.name for n, _ in root.walk()][:40]
    ks = kernels_under(found[0])
    assert len(ks) == 1 and ks[0].metrics["count"] == 50
    # the path is <module> -> outer -> hot -> kernel, with no kprof frames
    names = [n.name for n, _ in root.walk()]
    assert not any(n.startswith(os.path.join(REPO, "profiler") + os.sep) for n in names)
    top = root.children[0].name
    assert top.startswith(prog) and top.endswith("@<module>"), top


@pytest.mark.parametrize("variant", ["default", "external-correlation", "split"])
def test_kernelc_hook_on_gpu(tmp_path, variant):
    run_program(tmp_path, """
        import torch, kernelc, profiler
        import kernelc.language as kl

        def meta(grid, m, args):
            return {"flops": 2 * args["n"], "bytes": 12 * args["n"]}

        @kernelc.jit(launch_metadata=meta)
        def axpy(x_ptr, y_ptr, n, a, BLOCK: kl.constexpr):
            offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
            m = offs < n
            kl.store(y_ptr + offs, a * kl.load(x_ptr + offs, mask=m) + kl.load(y_ptr + offs, mask=m), mask=m)

        n = 1 << 20
        x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        axpy[(n // 1024,)](x, y, n, 2.0, BLOCK=1024, num_warps=4)     # compile outside the profile
        torch.cuda.synchronize()
        profiler.start("kc")
        with profiler.scope("axpy_scope"):
            for _ in range(10):
                axpy[(n // 1024,)](x, y, n, 2.0, BLOCK=1024, num_warps=4)
            z = x + y                                                  # a torch kernel beside it
        profiler.finalize()
    """, env_extra=VARIANTS[variant])
    root, _ = read_profile(tmp_path / "kc.hatchet")
    sc = child(root, "axpy_scope")
    k = child(sc, "axpy [")
    assert k.name == "axpy [grid 1024x1x1, warps 4, stages 3]", k.name
    assert k.metrics["count"] == 10 and k.metrics["time (ns)"] > 0
    assert k.metrics["flops"] == 10 * 2 * (1 << 20) and k.metrics["bytes"] == 10 * 12 * (1 << 20)
    e = k.extra
    assert e["kind"] == "kernel" and e["kernel"] == "axpy" and e["backend"] == "cuda"
    assert isinstance(e["cache_key"], str) and len(e["cache_key"]) >= 16
    assert e["signature"]["x_ptr"] == "*fp32" and e["constexprs"] == {"BLOCK": 1024}
    assert e["target"].startswith("sm_90") and e["source"]["file"] == str(tmp_path / "prog.py")
    assert any("elementwise" in c.name for c in sc.children)


@pytest.mark.parametrize("variant", ["default", "external-correlation", "split"])
def test_cuda_graph_replays_attributed_to_capture(tmp_path, variant):
    run_program(tmp_path, """
        import torch, profiler
        x = torch.randn(1 << 16, device="cuda")

        def f(t):
            return (t * 2 + 1).relu()

        profiler.start("graph")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            with profiler.scope("warmup"):
                f(x)
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.stream(s):
            with profiler.scope("capture"):        # the kernels are captured here...
                g.capture_begin()
                y = f(x)
            with profiler.scope("instantiate"):    # ...the executable graph (clones) is made here
                g.capture_end()
        torch.cuda.synchronize()
        with profiler.scope("replay"):
            for _ in range(5):
                g.replay()
        torch.cuda.synchronize()
        profiler.finalize()
    """, env_extra=VARIANTS[variant])
    root, _ = read_profile(tmp_path / "graph.hatchet")
    cap = kernels_under(child(root, "capture"))
    # the graph's 3 kernels, replayed 5 times, belong to the capture site
    replayed = [k for k in cap if k.metrics["count"] == 5]
    assert len(replayed) == 3, [(k.name[:60], k.metrics["count"]) for k in cap]
    # anything else there ran eagerly inside capture_begin (torch seeds its graph RNG state with fills)
    eager = [k for k in cap if k not in replayed]
    assert all("FillFunctor" in k.name for k in eager), [(k.name[:60], k.metrics["count"]) for k in eager]
    names = [c.name for c in root.children]
    for where in ("replay", "instantiate"):
        if where in names:
            assert not kernels_under(child(root, where)), f"replayed kernels attributed to the {where} site"
    assert sum(k.metrics["count"] for k in kernels_under(child(root, "warmup"))) == 3


def test_busy_cupti_falls_back(tmp_path):
    r = run_program(tmp_path, """
        import torch, profiler
        from profiler import session
        x = torch.randn(1024, device="cuda")
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
            sid = profiler.start("busy")
            print("backend", session.get(sid).backend_name)
            with profiler.scope("s"):
                y = x + 1
            profiler.finalize()
        print("torch events", len(p.events()) > 0)
    """)
    assert "backend cpu" in r.stdout
    lines = [line for line in r.stderr.splitlines() if line.startswith("kprof:")]
    assert len(lines) == 1 and "torch.profiler" in lines[0] and "cpu backend" in lines[0], r.stderr
    read_profile(tmp_path / "busy.hatchet")


def test_cli_train_example_on_gpu(tmp_path):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("KPROF_BACKEND", None)
    env.pop("KERNELC_INTERPRET", None)
    r = subprocess.run([sys.executable, "-m", "kprof", "-n", "train", os.path.join(REPO, "examples", "train.py"),
                        "--steps", "3", "--warmup", "1"], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-5000:]
    root, dev = read_profile(tmp_path / "train.hatchet")
    step = child(root, "train_step")
    ks = kernels_under(step)
    kc = [k for k in ks if k.extra and k.extra.get("kind") == "kernel"]
    assert {k.extra["kernel"] for k in kc} == {"attn_fwd_kernel", "layer_norm_fwd_kernel", "softmax_kernel"}
    assert all("[grid" in k.name and k.extra["cache_key"] for k in kc)
    others = [k for k in ks if not k.extra]
    assert len(others) >= 10                             # torch / cuBLAS kernels
    attn = child(child(step, "forward"), "attn")
    assert any(k.extra and k.extra.get("kernel") == "attn_fwd_kernel" for k in kernels_under(attn))
    assert kernels_under(child(step, "backward")), "backward kernels (autograd thread) not under the scope"
    assert "0" in dev["CUDA"]


PLACEMENT_PROGRAM = """
    import json, threading, torch, profiler
    from profiler import session
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    x = torch.randn(1 << 16, device="cuda")
    h = torch.randn(1 << 16).pin_memory()
    c = a @ a
    torch.cuda.synchronize()
    sid = profiler.start("placed")
    for step in range(3):
        with profiler.scope("step"):
            with profiler.scope("gemm"):           # the GPU falls ~10 ms behind the host here
                for _ in range(8):
                    c = a @ a
            with profiler.scope("small"):
                for _ in range(50):
                    x = x * 1.0001
                with profiler.scope("inner"):
                    x = x.sin()
            with profiler.scope("copies"):
                x.copy_(h, non_blocking=True)
                x.zero_()
    def worker():                                  # a Python thread, outside any scope
        y = torch.ones(16, device="cuda")
        for _ in range(5):
            y = y.cos()
    with profiler.scope("threaded"):
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        x = x.exp()
    b = session.get(sid).backend
    info = {"backend": session.get(sid).backend_name, "external": getattr(b, "external", False),
            "raw": getattr(b, "rawbufs", None) is not None, "deferred": getattr(b, "deferred", False),
            "light": getattr(b, "light", None), "tl_offsets": getattr(b, "tl_offsets", None),
            "skipped": list(getattr(b, "skipped", []))}
    from profiler import _native
    info["native"] = _native.status
    profiler.finalize(sid)
    json.dump(info, open("info.json", "w"))
"""


def _kernel_paths(root):
    out = {}

    def walk(node, path):
        for c in node.children:
            p = path + (c.name,)
            if c.metrics.get("device_type") == "CUDA":
                out[p] = out.get(p, 0) + c.metrics["count"]
            walk(c, p)
    walk(root, ())
    return out


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_launch_placement_on_gpu(tmp_path, variant):
    """Kernels and copies land in their scopes while the GPU runs ~10 ms behind the host; a Python
    thread's kernels stay out of the main thread's scope, though the thread ended before the flush.
    The same under each variant of profiler.options, which must really be in use."""
    run_program(tmp_path, PLACEMENT_PROGRAM, env_extra=VARIANTS[variant])
    info = json.load(open(tmp_path / "info.json"))
    assert info["backend"] == "cupti"
    assert (info["external"], info["raw"], info["deferred"]) == (
        variant == "external-correlation", variant in ("default", "external-correlation", "cupti-clock",
                                                       "monotonic-clock", "python-scopes"),
        variant == "deferred"), info
    if variant == "python-scopes":
        assert info["native"] == "off (native_scopes=off)", info
    else:   # C scopes, unless this host cannot build them (no compiler or headers: then said so)
        assert info["native"].startswith("native: ") or "build failed" in info["native"], info
    assert info["light"], info   # every variant places launches by API records + timelines
    # timelines on a host clock unless told cupti's (the default's REALTIME only where it is CUPTI's clock)
    if variant == "cupti-clock":
        assert info["tl_offsets"] is None, info
    elif variant == "monotonic-clock":
        assert info["tl_offsets"], info
    else:
        assert info["tl_offsets"] or any("not REALTIME" in x for x in info["skipped"]), info
    root, _ = read_profile(tmp_path / "placed.hatchet")
    paths = _kernel_paths(root)
    gemm = sum(n for p, n in paths.items() if p[:2] == ("step", "gemm"))
    assert gemm >= 24 and not any(p[:2] == ("step", "gemm") and "elementwise" in p[2] for p in paths), paths
    small = {p[2]: n for p, n in paths.items() if p[:2] == ("step", "small") and len(p) == 3}
    assert sum(small.values()) == 150, paths
    assert [n for p, n in paths.items() if p[:3] == ("step", "small", "inner")] == [3], paths
    copies = {p[-1]: n for p, n in paths.items() if p[:2] == ("step", "copies")}
    assert copies.get("memcpy HtoD") == 3, paths
    threaded = {p: n for p, n in paths.items() if p[0] == "threaded"}
    assert sum(threaded.values()) == 1, paths            # x.exp(); the worker's 6 kernels are not here
    assert sum(n for p, n in paths.items() if len(p) == 1) >= 6, paths


def test_lazy_api_records_on_gpu(tmp_path):
    """cupti_api_records="lazy" (the default) on the real CUPTI: a scope-free run pays no launch API record and
    keeps every kernel, also those still queued when it ends (windowed by their start after a synchronize);
    a run whose first scope comes after a queue of root kernels keeps those at the root and places the
    scope's own."""
    run_program(tmp_path, """
        import json, torch, profiler
        from profiler import session
        a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
        x = torch.randn(1 << 16, device="cuda")
        c = a @ a
        torch.cuda.synchronize()
        info = {}
        sid = profiler.start("free")
        for _ in range(8):                       # the GPU falls ~10 ms behind
            c = a @ a
        for _ in range(20):
            x = x * 1.0001
        info["free"] = session.get(sid).backend.api_wanted
        profiler.finalize(sid)
        sid = profiler.start("late")
        for _ in range(8):
            c = a @ a
        with profiler.scope("s"):
            for _ in range(5):
                x = x.sin()
        info["late"] = session.get(sid).backend.api_wanted
        profiler.finalize(sid)
        json.dump(info, open("info.json", "w"))
    """)
    info = json.load(open(tmp_path / "info.json"))
    assert info == {"free": False, "late": True}, info
    gemms = {}
    for name, n_small in (("free", 20), ("late", 0)):
        root, _ = read_profile(tmp_path / f"{name}.hatchet")
        paths = _kernel_paths(root)
        top = {p[0]: n for p, n in paths.items() if len(p) == 1}
        assert sum(n for k, n in top.items() if "elementwise" in k) == n_small, paths
        gemms[name] = sum(n for k, n in top.items() if "elementwise" not in k)   # cuBLAS's, 8 matmuls' worth
    assert gemms["free"] == gemms["late"] >= 8, gemms
    root, _ = read_profile(tmp_path / "late.hatchet")
    assert sum(n for p, n in _kernel_paths(root).items() if p[0] == "s") == 5


def test_lazy_api_records_started_before_cuda_on_gpu(tmp_path):
    """Lazy API records with the profile started before CUDA is up (as python -m kprof and torchrun start it):
    they stay on until CUDA's first context exists and go off in its CONTEXT_CREATED callback (with them off while
    CUDA came up, no launch was placed: session 22, R2); the root's kernels before the first scope are kept, and
    the scope's kernels are placed under it."""
    run_program(tmp_path, """
        import json, profiler
        from profiler import session
        sid = profiler.start("early")
        b = session.get(sid).backend
        info = {"at_start": [b.api_on, b.api_wanted, b.lazy_ctx]}
        import torch
        x = torch.randn(1 << 16, device="cuda")
        info["after_context"] = [b.api_on, b.api_wanted, b.lazy_ctx]
        for _ in range(20):
            x = x * 1.0001
        with profiler.scope("s"):
            for _ in range(5):
                x = x.sin()
        info["after_scope"] = [b.api_on, b.api_wanted, b.lazy_ctx]
        profiler.finalize(sid)
        json.dump(info, open("info.json", "w"))
    """)
    info = json.load(open(tmp_path / "info.json"))
    assert info == {"at_start": [True, False, True], "after_context": [False, False, False],
                    "after_scope": [True, True, False]}, info
    root, _ = read_profile(tmp_path / "early.hatchet")
    paths = _kernel_paths(root)
    assert sum(n for p, n in paths.items() if p[0] == "s") == 5, paths
    assert sum(n for p, n in paths.items() if len(p) == 1 and "elementwise" in p[0]) >= 20, paths
