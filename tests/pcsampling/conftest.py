"""Fixtures of the PC-sampling tests: the synthetic test data (built once), the recorded real data
(tests/pcsampling/data/*.json, written on the GPU by record_fixture.py) and clean sampler state."""

import glob
import json
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(HERE, "data")
for p in (REPO, HERE):
    if p not in sys.path:
        sys.path.insert(0, p)


def recorded_files():
    """The real recorded test-data files present (none until the GPU recording is committed)."""
    return sorted(glob.glob(os.path.join(DATA, "*.json")))


@pytest.fixture(scope="session")
def synthetic(tmp_path_factory):
    """``(path, obj, kernels)``: the synthetic data written to a file, the object, and
    ``{name: (CompiledKernel, JITFunction)}``."""
    import synthetic as syn
    obj, kernels = syn.build()
    path = tmp_path_factory.mktemp("pcs") / "synthetic.json"
    path.write_text(json.dumps(obj))
    return str(path), obj, kernels


@pytest.fixture(params=["synthetic"] + [os.path.basename(p) for p in recorded_files()])
def data_file(request, synthetic):
    """Every test-data file: the synthetic one and each recorded one (the tests must pass on both)."""
    if request.param == "synthetic":
        return synthetic[0]
    return os.path.join(DATA, request.param)


@pytest.fixture(autouse=True)
def _clean_sampler_state():
    import fake_cupti
    from profiler.pcsampling import sampler
    fake_cupti.reset()
    saved = (sampler.CUPTI_FACTORY, sampler.CONTEXT_FACTORY)
    yield
    sampler.CUPTI_FACTORY, sampler.CONTEXT_FACTORY = saved
    active = sampler._active
    if active is not None:
        try:
            active.close()
        except Exception:
            pass
    sampler._active = None
    # contexts a fake CUPTI left enabled; a real one stays enabled for the next GPU test (that is the point)
    for ctx, c in list(sampler._resident.items()):
        if isinstance(c.cupti.lib, fake_cupti.FakeCupti):
            sampler._resident.pop(ctx, None)
    sampler._module_cubins.clear()
    fake_cupti.reset()
