"""``pytest -p kernelc.compat.pytest_plugin``: run a Triton library's own test suite on kernelc.

pytest imports a ``-p`` plugin before it imports any conftest or test module, in the main process and
in every pytest-xdist worker (``python -m kernelc.run -m pytest`` covers only the main process: xdist's
workers are fresh interpreters). Importing this module installs the ``triton`` alias there.
"""
from __future__ import annotations

from .alias import install

install()


def pytest_report_header(config):
    import triton
    return f"kernelc: `triton` is kernelc's ({triton.__file__}), standing in for Triton {triton.__version__}"
