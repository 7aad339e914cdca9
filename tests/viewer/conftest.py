"""Shared fixtures of the kprof-viewer tests (CPU only, no GPU, fast)."""

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
for p in (REPO, HERE):  # the repository (profiler package) and viewer_cases.py
    if p not in sys.path:
        sys.path.insert(0, p)

import viewer_cases  # noqa: E402
from html_cases import analyzed_report  # noqa: E402,F401 (a session fixture shared by the HTML report tests)


@pytest.fixture
def data_dir():
    return viewer_cases.DATA


@pytest.fixture
def data(data_dir):
    """data("kprof_small.hatchet") -> absolute path of a fixture."""
    return lambda name: os.path.join(data_dir, name)


@pytest.fixture
def viewer(monkeypatch):
    """viewer(*argv) -> (status, stdout, stderr), run in tests/viewer/data without colour."""
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    return lambda *argv: viewer_cases.run(list(argv))
