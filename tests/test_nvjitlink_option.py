"""The suite's --nvjitlink LIB (tests/conftest.py): the SASS assertions under another nvJitLink, as the GPU hosts'."""
import os
import subprocess
import sys

import pytest

from tests import conftest


def test_a_missing_library_is_a_usage_error(monkeypatch):
    monkeypatch.setenv("LD_PRELOAD", "")
    with pytest.raises(pytest.UsageError, match="no such file"):
        conftest._preload_nvjitlink("/no/such/libnvJitLink.so.13")
    assert os.environ["LD_PRELOAD"] == ""


def test_the_library_goes_to_the_processes_the_tests_start(monkeypatch, tmp_path):
    # libc stands in for nvJitLink (always present, harmless to load again): the mechanism, not the version
    lib = next((p for p in ("/lib/x86_64-linux-gnu/libc.so.6", "/lib64/libc.so.6", "/usr/lib64/libc.so.6",
                            "/lib/aarch64-linux-gnu/libc.so.6") if os.path.isfile(p)), None)
    if lib is None:
        pytest.skip("no libc.so.6 at a known path")
    monkeypatch.setenv("LD_PRELOAD", "")
    conftest._preload_nvjitlink(lib)
    conftest._preload_nvjitlink(lib)   # once in the list, however often asked (controller and worker)
    assert os.environ["LD_PRELOAD"] == os.path.abspath(lib)
    out = subprocess.run([sys.executable, "-c", "import os; print(os.environ['LD_PRELOAD'])"], capture_output=True,
                         text=True, check=True).stdout.strip()
    assert out == os.path.abspath(lib)


def test_the_header_names_the_nvjitlink_in_use():
    class Config:
        def getoption(self, name):
            return None
    assert conftest.pytest_report_header(Config()).startswith("nvJitLink ")
