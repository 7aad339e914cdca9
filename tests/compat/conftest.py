"""Fixtures of the Triton-compatibility tests: the ``triton`` alias is installed per test and removed
after it, so no other test sees a ``triton`` module."""
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def alias():
    import kernelc.compat as compat
    if "triton" in sys.modules and compat.installed() is False:
        pytest.skip("a real triton is imported in this process")
    compat.install()
    try:
        yield compat
    finally:
        compat.uninstall()


def subprocess_env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env
