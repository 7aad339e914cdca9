"""`triton.profiler` (Proton's API) on kprof, on the cpu backend: the session, scopes, launch metadata and
the viewer's parse/print_tree."""
import pytest
import torch

import kernelc
import kernelc.language as kl
from profiler.format import read_profile


def _meta(grid, kernel, args):
    return {"name": f"inc n={args['n']}", "flops": 2 * args["n"]}


@kernelc.jit(launch_metadata=_meta)
def inc(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
    kl.store(x_ptr + offs, kl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)


@pytest.fixture
def cpu_profiler(monkeypatch):
    monkeypatch.setenv("KPROF_BACKEND", "cpu")
    monkeypatch.setenv("KERNELC_INTERPRET", "1")
    yield
    from profiler import session
    for s in list(session._sessions.values()):
        session._sessions.pop(s.id, None)
        s.backend.release(s)
    session._refresh()


def _names(node, out=None, depth=0):
    out = [] if out is None else out
    out.append((depth, node.name, node.metrics))
    for c in node.children:
        _names(c, out, depth + 1)
    return out


def test_proton_session_scopes_and_viewer(tmp_path, cpu_profiler, alias, capsys):
    import triton.profiler as proton
    import triton.profiler.viewer as viewer
    x = torch.zeros(64)
    name = str(tmp_path / "run")
    sid = proton.start(name, hook="triton")
    with proton.scope("outer", {"bytes": 5}):
        assert proton.context.depth() == 1
        inc[(2,)](x, 64, BLOCK=32)
    with proton.cpu_timed_scope("timed"):
        inc[(2,)](x, 64, BLOCK=32)
    proton.enter_scope("manual")
    inc[(2,)](x, 64, BLOCK=32)
    proton.exit_scope()
    proton.deactivate(sid)
    inc[(2,)](x, 64, BLOCK=32)  # not recorded
    proton.activate(sid)
    with proton.state("st"):
        inc[(2,)](x, 64, BLOCK=32)
    proton.finalize()
    assert torch.equal(x, torch.full((64,), 5.0))
    root, _ = read_profile(name + ".hatchet")
    rows = _names(root)
    by_name = {n: (d, m) for d, n, m in rows}
    for scope in ("outer", "timed", "manual", "st"):
        assert by_name[scope][0] == 1, rows
    kernels = [(d, n, m) for d, n, m in rows if n.startswith("inc n=64")]
    assert len(kernels) == 4 and all(d == 2 and m.get("flops") == 128 and m.get("count") == 1 for d, n, m in kernels)
    assert by_name["outer"][1].get("bytes") == 5
    assert by_name["timed"][1].get("cpu_time (ns)", 0) > 0
    tree, metrics = viewer.parse(["time/ms"], name + ".hatchet")
    assert metrics == ["time/ms"]
    capsys.readouterr()
    viewer.print_tree(tree, metrics, depth=1)
    out = capsys.readouterr().out
    assert "outer" in out and "manual" in out and "inc n=64" not in out  # depth 1
    with pytest.raises(ValueError, match="roctracer"):
        proton.start("x", backend="roctracer")
