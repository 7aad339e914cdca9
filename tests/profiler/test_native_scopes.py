"""``native_scopes``: a scope's entry and exit in C (profiler/_kscope.c) leave exactly the state the Python
methods leave -- the thread's node and stack, the timeline (times and nodes), queued metrics -- in every case
the C code handles, and hand the others to the Python methods (a new child, a stale kernelc launch marker,
external correlation ids, a session timing scopes, Python call paths)."""
import itertools
import os
import subprocess
import sys
import threading

import pytest

from profiler import _native, context, scopes
from profiler import session as _session

native = pytest.mark.skipif(scopes._kscope is None, reason=f"no native scopes here: {_native.status}")


class _Tick:
    """A clock that counts (the same sequence for both implementations)."""

    def __init__(self):
        self.n = itertools.count(1000)

    def __call__(self):
        return next(self.n)


def _run(cls, body, monkeypatch, *, clock=True, metrics_active=False):
    """Runs ``body(cls)`` on a fresh thread in the cupti backend's state; returns what it left."""
    monkeypatch.setattr(context, "_clock", _Tick() if clock else None)
    monkeypatch.setattr(context, "_tclock", context._clock)
    monkeypatch.setattr(_session, "timing", ())
    monkeypatch.setattr(_session, "active", ("s",) if metrics_active else ())
    monkeypatch.setattr(_session, "python_ctx", False)
    import collections
    q = collections.deque()
    monkeypatch.setattr(_session, "_metrics_q", q)
    out = {}

    def thread():
        c = context.fast.ctx if hasattr(context.fast, "ctx") else context.ctx_slow()
        c.times, c.nodes = [], []
        try:
            body(cls)
        except Exception as e:  # noqa: BLE001 - compared between the two implementations
            out["error"] = f"{type(e).__name__}: {e}"
        out.update(node=c.node, stack=list(c.stack), times=list(c.times),
                   nodes=[context.scope_names(n) if type(n) is int else n for n in c.nodes])

    t = threading.Thread(target=thread)
    t.start()
    t.join()
    out["queued"] = [(sessions, context.scope_names(n), name, m) for sessions, n, name, m in q]
    return out


def _nested(S):
    for _ in range(3):
        with S("outer"):
            with S("inner", metrics={"flops": 2}):
                pass
            with S("inner"):
                with S("leaf"):
                    pass


def _raises(S):
    with S("outer"):
        try:
            with S("boom"):
                raise KeyError("x")
        except KeyError:
            pass


def _stale_marker(S):
    c = context.fast.ctx
    with S("outer"):
        c.kprev = c.node                              # a kernelc launch that raised before its exit hook
        c.node = context.KernelLaunch(c.node, None, None)
        with S("after_launch"):
            pass


def _unbalanced(S):
    S("x").__exit__(None, None, None)                 # an exit with an empty stack: back to the root
    s = S("y")
    s.__enter__()
    s.__enter__()
    s.__exit__(None, None, None)


@native
@pytest.mark.parametrize("body", [_nested, _raises, _stale_marker, _unbalanced])
@pytest.mark.parametrize("clock", [True, False])
@pytest.mark.parametrize("metrics_active", [True, False])
def test_native_scope_leaves_the_state_the_python_one_does(body, clock, metrics_active, monkeypatch):
    want = _run(scopes._PyScope, body, monkeypatch, clock=clock, metrics_active=metrics_active)
    got = _run(scopes.scope, body, monkeypatch, clock=clock, metrics_active=metrics_active)
    assert got == want
    if clock and body is _nested:
        assert len(got["times"]) == 2 * 12 and got["nodes"][:2] == [["outer"], ["outer", "inner"]]
    if metrics_active and body is _nested:
        assert got["queued"] == [(("s",), ["outer", "inner"], "inner", {"flops": 2})] * 3


@native
def test_native_scope_metrics_queue_is_drained_past_its_bound(monkeypatch):
    """The C entry queues a dict's copy as session.queue_metrics does, drains past METRICS_Q_MAX, and hands a
    mapping that is not a dict to session.queue_metrics."""
    import collections
    import types
    drained, via_python = [], []
    q = collections.deque()
    monkeypatch.setattr(_session, "_metrics_q", q)
    monkeypatch.setattr(_session, "METRICS_Q_MAX", 3)
    monkeypatch.setattr(_session, "drain_metrics", lambda: (drained.append(len(q)), q.clear()))
    monkeypatch.setattr(_session, "active", ("s",))
    monkeypatch.setattr(_session, "timing", ())
    monkeypatch.setattr(context, "_clock", None)
    m = {"flops": 1}
    for _ in range(5):
        with scopes.scope("queued", metrics=m):
            pass
    assert drained == [4] and len(q) == 1 and q[0][3] == m and q[0][3] is not m
    monkeypatch.setattr(_session, "queue_metrics", lambda *a: via_python.append(a))
    with scopes.scope("queued", metrics=types.MappingProxyType(m)):
        pass
    assert len(via_python) == 1 and len(q) == 1


@native
def test_native_scope_hands_unusual_cases_to_python(monkeypatch):
    calls = []
    real_enter, real_exit = scopes._PyScope.__enter__, scopes._slow_exit
    scopes._kscope.setup(context, _session, lambda s: (calls.append(("enter", s.name)), real_enter(s))[1],
                         lambda s: (calls.append(("exit", s.name)), real_exit(s))[1],
                         scopes._PyScope.__call__, scopes._PyScope.__repr__, __import__("time").time_ns)
    try:
        monkeypatch.setattr(context, "_clock", None)
        monkeypatch.setattr(_session, "timing", ())
        name = f"new_child_{id(calls)}"
        with scopes.scope(name):                      # not interned yet: context.intern runs in Python
            pass
        with scopes.scope(name):                      # now the C path
            pass
        assert calls == [("enter", name)]

        class Name(str):   # may hash or compare in Python: the Python method
            pass
        with scopes.scope(Name(name)):
            pass
        assert calls == [("enter", name)] * 2
        del calls[1:]
        monkeypatch.setattr(_session, "timing", ("a session timing scopes",))
        monkeypatch.setattr(_session, "scope_entered", lambda *a: None)
        monkeypatch.setattr(_session, "scope_exiting", lambda *a: None)
        with scopes.scope(name):
            pass
        assert calls[1:] == [("enter", name), ("exit", name)]
    finally:
        scopes._kscope.setup(context, _session, scopes._PyScope.__enter__, scopes._slow_exit, scopes._PyScope.__call__,
                             scopes._PyScope.__repr__, __import__("time").time_ns)


@native
def test_native_scope_is_a_scope():
    s = scopes.scope("attn", metrics={"flops": 1})
    assert (s.name, s.metrics) == ("attn", {"flops": 1}) and repr(s) == "profiler.scope('attn')"
    with pytest.raises(TypeError, match="non-empty string"):
        scopes.scope("")

    @scopes.scope("decorated")
    def f(x):
        return context.scope_names(context.fast.ctx.node)

    assert f(1) == ["decorated"]


def test_native_scopes_off_and_a_failed_build_fall_back(tmp_path):
    code = ("import profiler, profiler._native as n, profiler.scopes as s; "
            "print(s.scope is s._PyScope, n.status)")
    env = {"PATH": "/nonexistent", "HOME": str(tmp_path), "PYTHONPATH": ":".join(sys.path)}
    off = subprocess.run([sys.executable, "-c", code], env=dict(env, KPROF_NATIVE_SCOPES="off"),
                         capture_output=True, text=True, timeout=120)
    assert off.stdout.split(None, 1) == ["True", "off (native_scopes=off)\n"], off.stderr
    # no compiler on PATH and an empty cache: the Python methods, and why
    none = subprocess.run([sys.executable, "-c", "import sysconfig; sysconfig.get_config_var = lambda k: "
                           "'no-such-cc' if k == 'CC' else None; " + code], env=env, capture_output=True,
                          text=True, timeout=120)
    assert none.stdout.startswith("True python (build failed: no C compiler"), (none.stdout, none.stderr)


@native
def test_a_corrupt_cached_extension_is_built_again(tmp_path):
    """A cached ``_kscope`` that does not load (here: truncated) is compiled again, not left to the Python code."""
    code = ("import os, profiler._native as n\n"
            "src = open(n._SRC, 'rb').read()\n"
            "out = os.path.join(n._cache_dir(), n._target(src))\n"
            "os.makedirs(os.path.dirname(out), exist_ok=True)\n"
            "open(out, 'wb').write(b'not an ELF file')\n"
            "n._module = None\n"
            "m = n.load('auto')\n"
            "print(m is not None, n.status.startswith('native:'), os.path.getsize(out) > 1000)\n")
    env = {"HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONPATH": ":".join(sys.path),
           "PATH": os.environ.get("PATH", ""), "KPROF_NATIVE_SCOPES": "off"}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "True", "True"], (r.stdout, r.stderr)


def test_a_setup_the_c_code_refuses_falls_back_at_import(tmp_path):
    """The extension loads but its setup raises: ``import profiler`` still works, on the Python methods, the
    kernelc hook included, and ``status`` says why."""
    code = ("import importlib, profiler, profiler._native as n, profiler.scopes as s\n"
            "class Refuses:\n"
            "    @staticmethod\n"
            "    def setup(*a): raise TypeError('unexpected slot layout')\n"
            "n.load = lambda mode: setattr(n, '_module', Refuses) or Refuses\n"
            "s = importlib.reload(s)\n"
            "print(s.scope is s._PyScope, n._module is None, n.status)\n"
            "with s.scope('a'):\n"
            "    pass\n")
    r = subprocess.run([sys.executable, "-c", code], env={"HOME": str(tmp_path), "PYTHONPATH": ":".join(sys.path),
                                                           "PATH": os.environ.get("PATH", "")},
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True True python (setup failed: TypeError: unexpected slot layout)", r.stdout


@native
def test_native_scope_reads_time_ns_itself(monkeypatch):
    """``time.time_ns`` as the timeline clock is read in C (CLOCK_REALTIME): the same clock."""
    import time
    monkeypatch.setattr(context, "_clock", time.time_ns)
    monkeypatch.setattr(_session, "timing", ())
    c = context.fast.ctx
    monkeypatch.setattr(c, "times", [])
    monkeypatch.setattr(c, "nodes", [])
    t0 = time.time_ns()
    with scopes.scope("clocked"):
        pass
    t1 = time.time_ns()
    assert len(c.times) == 2 and t0 <= c.times[0] <= c.times[1] <= t1


# -- the kernelc launch hook -------------------------------------------------------------------------------
class _Fn:
    """A @jit function as kprof's hook sees it (no launch_metadata unless given)."""
    arg_names = ["x", "n"]
    file, first_line, src = __file__, 1, "def k(x, n):\n    pass\n"

    def __init__(self, metadata=None):
        self.launch_metadata = metadata


class _Compiled:
    cache_key = "ck1"
    signature = {"x": "*fp32", "n": "i32"}
    __hash__ = None   # kernelc's CompiledKernel is an eq-dataclass: unhashable


def _launches(enter, exit_, recs):
    """Each record launched inside scopes, twice (the second finds the cached KernelLaunch); the node seen
    between enter and exit, by what it describes."""
    from profiler import scope
    seen = []

    def launch(r):
        enter(r)
        n = context.fast.ctx.node
        seen.append((type(n).__name__, context.scope_names(n.node) if hasattr(n, "node") else n,
                     getattr(getattr(n, "info", None), "display_name", None), getattr(n, "metrics", None)))
        exit_(r)

    for _ in range(2):
        with scope("step"):
            for r in recs:
                launch(r)
            with scope("inner"):
                launch(recs[0])
        launch(recs[0])   # at the root
    return seen


@native
@pytest.mark.parametrize("clock", [True, False])
def test_native_hook_leaves_the_state_the_python_one_does(clock, monkeypatch):
    from kernelc.runtime.hooks import LaunchRecord
    from profiler import hooks
    if hooks._handle is None and scopes._kscope is not None:
        scopes._kscope.setup_hooks(hooks, LaunchRecord, context.KernelLaunch, hooks._enter, hooks._exit)
    monkeypatch.setattr(hooks, "_idle", False)
    monkeypatch.setattr(hooks, "_cupti", True)
    ck = _Compiled()

    def md(grid, kernel, args):
        return {"flops": 7}

    def recs():
        return [LaunchRecord("k", (8, 1, 1), 4, 2, 0, 0, "cuda", ck, "ck1", _Fn(), (None, 3), (False, False)),
                LaunchRecord("k", (16, 1, 1), 4, 2, 0, 0, "cuda", ck, "ck1", _Fn(), (None, 3), (False, False)),
                LaunchRecord("m", (8, 1, 1), 4, 2, 0, 0, "cuda", ck, "ck1", _Fn(md), (None, 3), (False, False), md),
                LaunchRecord("i", (8, 1, 1), 4, 2, 0, 0, "interpreter", None, None, _Fn(), (None, 3),
                             (False, False))]

    outs = []
    for enter, exit_ in ((hooks._enter, hooks._exit), (scopes._kscope.hook_enter, scopes._kscope.hook_exit)):
        hooks._kl_fast.clear()
        hooks._launch_objs.clear()
        got = {}

        def body(S, enter=enter, exit_=exit_, got=got):
            got["seen"] = _launches(enter, exit_, recs())

        st = _run(scopes.scope, body, monkeypatch, clock=clock)
        assert "error" not in st, st["error"]
        st["nodes"] = [("KL", context.scope_names(n.node), n.info.display_name) if type(n) is context.KernelLaunch
                       else n for n in st["nodes"]]
        outs.append((got["seen"], st))
    assert outs[1] == outs[0]
    seen = outs[0][0]
    assert seen[0] == ("KernelLaunch", ["step"], "k [grid 8x1x1, warps 4, stages 2]", None)
    assert seen[2][3] == {"flops": 7} and seen[3][0] == "int"   # metadata: per launch; the interpreter: host-timed


@native
def test_native_hook_is_what_kprof_registers():
    from kernelc.runtime import hooks as khooks
    from profiler import hooks
    hooks._install()
    try:
        assert scopes._kscope.hook_enter in khooks._enter_hooks and scopes._kscope.hook_exit in khooks._exit_hooks
    finally:
        hooks._uninstall()


@native
def test_native_scopes_on_threads_switching_often(monkeypatch):
    """Threads switching every few bytecodes: each keeps its own stack and timeline (ordered, two entries a scope)."""
    import time
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    monkeypatch.setattr(context, "_clock", time.time_ns)
    monkeypatch.setattr(context, "_tclock", time.time_ns)
    monkeypatch.setattr(_session, "timing", ())
    res = {}

    def work(k):
        c = context.fast.ctx if hasattr(context.fast, "ctx") else context.ctx_slow()
        c.times, c.nodes = [], []
        for i in range(2000):
            with scopes.scope(f"t{i % 3}"):
                with scopes.scope("inner"):
                    pass
        res[k] = (c.node, len(c.stack), len(c.times), len(c.nodes), c.times == sorted(c.times))

    try:
        ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert res == {k: (0, 0, 8000, 8000, True) for k in range(4)}
