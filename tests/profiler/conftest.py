"""Fixtures of the kprof profiler tests.

CPU tests run the profiler in this process with ``KPROF_BACKEND=cpu`` (deterministic whatever the
machine) and leave no session behind; the CLI tests run ``python -m kprof`` in subprocesses.
"""
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def _kprof_clean(request, monkeypatch):
    if "gpu" not in request.keywords:
        monkeypatch.setenv("KPROF_BACKEND", "cpu")      # the same on a GPU machine
        monkeypatch.setenv("KERNELC_INTERPRET", "1")
    yield
    from profiler import context, session
    for s in list(session._sessions.values()):
        try:
            session._sessions.pop(s.id, None)
            s.backend.release(s)
        except Exception:
            pass
    session._cli_session = None
    session._refresh()
    c = context.local.ctx
    c.node, c.stack, c.tstack = 0, [], []


def run_kprof(args, cwd, env=None, timeout=120, **kw):
    """``python -m kprof *args`` in ``cwd``; returns the CompletedProcess (text mode)."""
    e = dict(os.environ)
    e["PYTHONPATH"] = REPO + os.pathsep + e.get("PYTHONPATH", "")
    e.pop("KPROF_BACKEND", None)
    if env:
        e.update(env)
    return subprocess.run([sys.executable, "-m", "kprof", *args], cwd=cwd, env=e, capture_output=True, text=True,
                          timeout=timeout, **kw)
