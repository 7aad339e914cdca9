"""pytest plugin: record the PTX of every kernel the tests compile (scripts/ptx_corpus.py compares).

    PTX_RECORD_OUT=after.json python3 -m pytest -q -p scripts.ptx_record tests/compiler/test_warp_specialize.py
"""
import json
import os

import pytest

_rec = {}
_cur = {"node": None, "n": 0}


def pytest_configure(config):
    import kernelc.compiler.backend as B
    orig = B.compile_llir

    def recording(llir, tgt, *a, **k):
        art = orig(llir, tgt, *a, **k)
        name = a[0] if a else k.get("name")
        _rec[f"{_cur['node']}#{_cur['n']}:{name}:{getattr(tgt, 'arch', tgt)}"] = art.ptx
        _cur["n"] += 1
        return art
    B.compile_llir = recording  # kernelc.compile looks it up at call time


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    _cur["node"], _cur["n"] = item.nodeid, 0
    yield


def pytest_sessionfinish(session):
    with open(os.environ.get("PTX_RECORD_OUT", "ptx_record.json"), "w") as f:
        json.dump(_rec, f)
