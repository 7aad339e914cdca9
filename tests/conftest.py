import os

import pytest


def _has_gpu() -> bool:
    try:
        from kernelc.runtime.device import cuda_available
        return cuda_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _has_gpu():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (CUDA driver not found)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    # Every test gets its own kernel cache so tests never see each other's compiled kernels.
    monkeypatch.setenv("KERNELC_CACHE_DIR", str(tmp_path_factory.mktemp("kcache")))
    yield
