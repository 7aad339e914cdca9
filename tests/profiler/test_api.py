"""The profiler API on the cpu backend: sessions, scopes, metrics, threads, contexts, output."""
import os
import threading
import time

import pytest
import torch

import kernelc
import kernelc.language as kl
import profiler
from profiler import session as S
from profiler.format import inclusive_metrics, read_profile


@kernelc.jit
def add_one(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
    kl.store(x_ptr + offs, kl.load(x_ptr + offs, mask=offs < n) + 1.0, mask=offs < n)


def _flops(grid, meta, args):
    return {"name": f"scale_{args['n']}", "flops": args["n"], "bytes": 8 * args["n"]}


@kernelc.jit(launch_metadata=_flops)
def scale(x_ptr, n, s, BLOCK: kl.constexpr):
    offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
    kl.store(x_ptr + offs, kl.load(x_ptr + offs, mask=offs < n) * s, mask=offs < n)


def launch_add(x):
    add_one[(kernelc.cdiv(x.numel(), 32),)](x, x.numel(), BLOCK=32)


def find(root, *path):
    node = root
    for name in path:
        matches = [c for c in node.children if c.name == name or c.name.startswith(name + " [")]
        assert matches, f"no {name!r} under {node.name!r}: {[c.name for c in node.children]}"
        node = matches[0]
    return node


def paths_to(root, pred):
    """Name paths (root's child first) of every node matching ``pred``."""
    out = []

    def rec(node, prefix):
        for c in node.children:
            p = prefix + [c.name]
            if pred(c):
                out.append(p)
            rec(c, p)

    rec(root, [])
    return out


def names(node):
    return [c.name for c in node.children]


def test_start_returns_id_and_finalize_writes_profile(tmp_path):
    sid = profiler.start(str(tmp_path / "p"))
    assert isinstance(sid, int)
    assert S.get(sid).backend_name == "cpu"
    with profiler.scope("work"):
        launch_add(torch.zeros(64))
    paths = profiler.finalize(sid)
    assert paths == [str(tmp_path / "p.hatchet")]
    root, dev = read_profile(paths[0])
    k = find(root, "work", "add_one")
    assert k.name == "add_one [grid 2x1x1, warps 4, stages 3]"
    assert k.metrics["count"] == 1 and k.metrics["time (ns)"] > 0
    assert k.metrics["device_type"] == "CPU" and k.metrics["device_id"] == "0"
    assert dev["CPU"]["0"]["arch"] == "interpreter"
    assert S.sessions() == []


def test_name_extension_and_output_dir(tmp_path):
    sid = profiler.start("run.hatchet", output_dir=str(tmp_path / "out"))
    assert profiler.finalize(sid) == [str(tmp_path / "out" / "run.hatchet")]
    assert os.path.exists(tmp_path / "out" / "run.hatchet")


def test_nested_scopes_and_metric_sums(tmp_path):
    sid = profiler.start(str(tmp_path / "m"))
    for _ in range(3):
        with profiler.scope("step", metrics={"flops": 10}):
            with profiler.scope("attn", metrics={"flops": 100, "bytes": 7}):
                launch_add(torch.zeros(8))
            with profiler.scope("mlp", metrics={"flops": 1000}):
                pass
    profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "m.hatchet")
    step = find(root, "step")
    assert names(step) == ["attn", "mlp"]
    assert step.metrics["flops"] == 30                   # exclusive: the scope's own
    assert find(root, "step", "attn").metrics["flops"] == 300
    inc = inclusive_metrics(root)
    assert inc[step]["flops"] == 30 + 300 + 3000            # summed up the tree
    assert inc[root]["bytes"] == 21
    assert inc[find(root, "step", "attn", "add_one")]["count"] == 3
    assert root.metrics["flops"] == 0                       # Proton's root placeholders


def test_scope_time_is_self_time_on_cpu_backend(tmp_path):
    sid = profiler.start(str(tmp_path / "t"))
    with profiler.scope("outer"):
        time.sleep(0.02)
        with profiler.scope("inner"):
            time.sleep(0.03)
    profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "t.hatchet")
    outer, inner = find(root, "outer"), find(root, "outer", "inner")
    # without inner's 30 ms: self time counting inner would be >= 50 ms; the bound leaves room for a
    # loaded machine's oversleeping (a CI run saw the 20 ms sleep take 28.3 ms)
    assert 0.015e9 < outer.metrics["time (ns)"] < 0.045e9
    assert inner.metrics["time (ns)"] >= 0.029e9
    assert inclusive_metrics(root)[outer]["time (ns)"] >= 0.049e9


def test_scope_as_decorator_and_enter_exit(tmp_path):
    @profiler.scope("decorated", metrics={"flops": 2})
    def f(n):
        if n:
            f(n - 1)

    sid = profiler.start(str(tmp_path / "d"))
    f(2)
    profiler.enter_scope("manual")
    launch_add(torch.zeros(4))
    profiler.exit_scope()
    profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "d.hatchet")
    d = find(root, "decorated")
    assert find(root, "decorated", "decorated", "decorated").metrics["flops"] == 2
    assert inclusive_metrics(root)[d]["flops"] == 6
    find(root, "manual", "add_one")


def test_scope_exception_pops_stack(tmp_path):
    sid = profiler.start(str(tmp_path / "e"))
    with pytest.raises(ZeroDivisionError):
        with profiler.scope("boom"):
            1 / 0
    launch_add(torch.zeros(4))
    profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "e.hatchet")
    assert any(n.startswith("add_one") for n in names(root))  # at the root, not under "boom"


def test_deactivate_activate(tmp_path):
    sid = profiler.start(str(tmp_path / "a"))
    with profiler.scope("on1"):
        launch_add(torch.zeros(4))
    profiler.deactivate(sid)
    with profiler.scope("off", metrics={"flops": 5}):
        launch_add(torch.zeros(4))
    profiler.activate(sid)
    with profiler.scope("on2"):
        launch_add(torch.zeros(4))
    profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "a.hatchet")
    assert names(root) == ["on1", "on2"]


def test_two_sessions(tmp_path):
    a = profiler.start(str(tmp_path / "a"))
    with profiler.scope("both"):
        launch_add(torch.zeros(4))
    profiler.start(str(tmp_path / "b"), context="python")
    with profiler.scope("both"):
        launch_add(torch.zeros(4))
    assert profiler.finalize(a) == [str(tmp_path / "a.hatchet")]
    with profiler.scope("only_b"):
        launch_add(torch.zeros(4))
    assert profiler.finalize() == [str(tmp_path / "b.hatchet")]
    ra, _ = read_profile(tmp_path / "a.hatchet")
    assert find(ra, "both", "add_one").metrics["count"] == 2
    rb, _ = read_profile(tmp_path / "b.hatchet")
    kernels = [n for n, _ in rb.walk() if n.name.startswith("add_one")]
    assert sum(k.metrics["count"] for k in kernels) == 2


def test_profile_decorator(tmp_path):
    @profiler.profile(name=str(tmp_path / "deco"))
    def work():
        with profiler.scope("inside"):
            launch_add(torch.zeros(4))
        return 42

    assert work() == 42
    root, _ = read_profile(tmp_path / "deco.hatchet")
    find(root, "inside", "add_one")
    assert S.sessions() == []


def test_threads_keep_their_scopes(tmp_path):
    sid = profiler.start(str(tmp_path / "th"))
    barrier = threading.Barrier(2)

    def worker(scope_name, n):
        with profiler.scope(scope_name):
            barrier.wait()           # both threads are inside their scope at the same time
            for _ in range(n):
                launch_add(torch.zeros(4))
            barrier.wait()

    ts = [threading.Thread(target=worker, args=("thread_a", 2)), threading.Thread(target=worker, args=("thread_b", 3))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "th.hatchet")
    assert sorted(names(root)) == ["thread_a", "thread_b"]
    assert find(root, "thread_a", "add_one").metrics["count"] == 2
    assert find(root, "thread_b", "add_one").metrics["count"] == 3
    assert names(find(root, "thread_a")) == names(find(root, "thread_b"))  # no cross-talk


def test_native_thread_inherits_main_scope(tmp_path):
    # A thread not started by `threading` (like torch's C++ autograd worker) that never entered a
    # scope is attributed to the main thread's current scope.
    import _thread
    sid = profiler.start(str(tmp_path / "native"))
    done = threading.Event()

    def native():
        try:
            launch_add(torch.zeros(4))
        finally:
            done.set()

    with profiler.scope("backward"):
        _thread.start_new_thread(native, ())
        assert done.wait(30)
    profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "native.hatchet")
    find(root, "backward", "add_one")


def test_python_context_call_paths(tmp_path):
    def leaf():
        launch_add(torch.zeros(4))

    def middle():
        leaf()

    sid = profiler.start(str(tmp_path / "py"), context="python")
    middle()
    with profiler.scope("sc", metrics={"flops": 3}):
        pass
    profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "py.hatchet")
    chains = paths_to(root, lambda n: n.name.startswith("add_one"))
    assert len(chains) == 1
    chain = chains[0]
    funcs = [n.rsplit("@", 1)[-1] for n in chain[:-1]]
    assert funcs[-3:] == ["middle", "leaf", "launch_add"], chain
    me = os.path.abspath(__file__)
    assert all(n.startswith(me + ":") for n in chain[-4:-1]), chain
    pkg = os.path.dirname(os.path.abspath(profiler.__file__)) + os.sep
    assert not any(n.startswith(pkg) or "kernelc/runtime" in n for n in chain), chain
    # scope metrics land on a frame named after the scope, under the scope's call site
    scopes = [n for n, _ in root.walk() if n.name == "sc"]
    assert len(scopes) == 1 and scopes[0].metrics["flops"] == 3


def test_shadow_vs_python_attribution(tmp_path):
    profiler.start(str(tmp_path / "sh"), context="shadow")
    profiler.start(str(tmp_path / "pyc"), context="python")
    with profiler.scope("region"):
        launch_add(torch.zeros(4))
    profiler.finalize()
    r_sh, _ = read_profile(tmp_path / "sh.hatchet")
    r_py, _ = read_profile(tmp_path / "pyc.hatchet")
    find(r_sh, "region", "add_one")
    assert all("@" in c.name for c in r_py.children)   # python frames, not scope names


def test_kernelc_hook_names_and_launch_metadata(tmp_path):
    sid = profiler.start(str(tmp_path / "k"))
    x = torch.ones(100)
    for _ in range(2):
        scale[(4,)](x, 100, 3.0, BLOCK=32, num_warps=2)
    profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "k.hatchet")
    k = find(root, "scale_100")
    assert k.name == "scale_100 [grid 4x1x1, warps 2, stages 3]"
    assert k.metrics["count"] == 2 and k.metrics["flops"] == 200 and k.metrics["bytes"] == 1600
    e = k.extra
    assert e["kind"] == "kernel" and e["kernel"] == "scale" and e["backend"] == "interpreter"
    assert e["signature"] == {"x_ptr": "*fp32", "n": "i32", "s": "fp32"}
    assert e["constexprs"] == {"BLOCK": 32}
    assert e["num_warps"] == 2 and e["num_stages"] == 3 and e["grid"] == [4, 1, 1]
    assert e["args"] == [{"name": "x_ptr", "kind": "tensor", "dtype": "float32", "shape": [100], "strides": [1]},
                         {"name": "n", "kind": "int", "value": 100}, {"name": "s", "kind": "float", "value": 3.0}]
    assert e["specialization"] == {"divisibility": {"x_ptr": 16}, "equal_to_1": []}
    src = e["source"]
    assert src["file"] == os.path.abspath(__file__)
    assert src["lines"][0].startswith("@kernelc.jit") and "def scale(" in src["lines"][1]
    with open(__file__) as f:
        assert f.read().splitlines()[src["first_line"] - 1] == src["lines"][0]
    assert root.metrics["flops"] == 0 and root.metrics["bytes"] == 0


def test_hook_none_records_no_kernelc_launches(tmp_path):
    from profiler import hooks
    sid = profiler.start(str(tmp_path / "nh"), hook=None)
    assert not hooks.installed()
    with profiler.scope("s"):
        launch_add(torch.zeros(4))
    profiler.finalize(sid)
    root, _ = read_profile(tmp_path / "nh.hatchet")
    assert names(find(root, "s")) == []
    assert not hooks.installed()


def test_hooks_unregistered_after_finalize(tmp_path):
    from kernelc.runtime import hooks as khooks
    assert not khooks.any_registered()
    sid = profiler.start(str(tmp_path / "u"))
    assert khooks.any_registered()
    profiler.finalize(sid)
    assert not khooks.any_registered()


def test_bad_arguments():
    with pytest.raises(ValueError, match="context"):
        profiler.start("x", context="stack")
    with pytest.raises(ValueError, match="mode"):
        profiler.start("x", mode="sampling")
    with pytest.raises(ValueError, match="format"):
        profiler.start("x", format="csv")
    with pytest.raises(ValueError, match="hook"):
        profiler.start("x", hook="torch")
    with pytest.raises(TypeError):
        profiler.scope("")
    with pytest.raises(ValueError, match="no kprof session"):
        profiler.finalize(12345)
    assert S.sessions() == []


def test_scope_metric_must_be_numbers(tmp_path):
    sid = profiler.start(str(tmp_path / "bad"))
    with pytest.raises(TypeError, match="flops"):
        with profiler.scope("s", metrics={"flops": "many"}):
            pass
    profiler.finalize(sid)


def test_parse_mode():
    assert S.parse_mode(None) == (None, {})
    assert S.parse_mode("pcsampling") == ("pcsampling", {})
    assert S.parse_mode("pcsampling:period=10") == ("pcsampling", {"period": 10})
    assert S.parse_mode("pcsampling:period=10,serialize=yes") == ("pcsampling", {"period": 10, "serialize": "yes"})
    assert S.parse_mode("pcsampling:period=10:drain=2:verbose") == ("pcsampling", {"period": 10, "drain": 2,
                                                                                   "verbose": True})
    assert S.is_mode("pcsampling:period=12") and S.is_mode("pcsampling") and not S.is_mode("pytest")
    assert not S.is_mode("pcsamplingx")
    with pytest.raises(ValueError):
        S.parse_mode("pcsampling:=3")


def test_pcsampling_mode_calls_integration(tmp_path, monkeypatch):
    import sys
    import types
    calls = []
    fake = types.ModuleType("profiler.pcsampling")
    fake.attach = lambda s: calls.append(("attach", s.mode, s.mode_options, s.kernel_activity, s.backend_name))
    fake.finish = lambda s, root: calls.append(("finish", root.name))
    monkeypatch.setitem(sys.modules, "profiler.pcsampling", fake)
    monkeypatch.setattr(profiler, "pcsampling", fake, raising=False)
    sid = profiler.start(str(tmp_path / "pc"), mode="pcsampling:period=8")
    profiler.finalize(sid)
    assert calls == [("attach", "pcsampling", {"period": 8}, "serialized", "cpu"), ("finish", "ROOT")]


def test_no_temp_files_left(tmp_path):
    sid = profiler.start(str(tmp_path / "clean"), format="hatchet,chrome")
    with profiler.scope("s"):
        launch_add(torch.zeros(4))
    profiler.finalize(sid)
    assert sorted(os.listdir(tmp_path)) == ["clean.hatchet", "clean.trace.json"]
