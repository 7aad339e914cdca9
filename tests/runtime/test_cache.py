"""Disk cache: keys follow everything a kernel depends on; corrupt entries are recompiled."""
import importlib.util
import os
import sys
import textwrap
import warnings

import pytest

from cubintools.target import parse_target
from kernelc.runtime import cache

SRC = '''
import kernelc
import kernelc.language as kl

SCALE = {scale}

@kernelc.jit
def helper(x):
    return x * {factor}

@kernelc.jit
def kern(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    x = kl.load(x_ptr + offs, mask=offs < n)
    kl.store(x_ptr + offs, helper(x) + SCALE, mask=offs < n)
'''
SIG = {"x_ptr": "*fp32", "n": "i32"}


def _module(tmp_path, name, scale=1.0, factor=2):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(SRC.format(scale=scale, factor=factor)))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _key(mod, cx=None, warps=4):
    return cache.cache_key(mod.kern, SIG, cx or {"BLOCK": 128}, {"x_ptr": 16}, (), warps, 3, parse_target("sm_90a"))


def test_key_changes_with_everything_the_kernel_depends_on(tmp_path):
    base = _key(_module(tmp_path, "m_base"))
    assert base == _key(_module(tmp_path, "m_base"))                     # stable across reloads
    assert base != _key(_module(tmp_path, "m_base", factor=3))           # a called @jit helper changed
    assert base != _key(_module(tmp_path, "m_base", scale=2.0))          # a constant global changed
    m = _module(tmp_path, "m_base")
    assert base != _key(m, {"BLOCK": 256})                               # a constexpr
    assert base != _key(m, warps=8)                                      # an option
    assert base != cache.cache_key(m.kern, SIG, {"BLOCK": 128}, {"x_ptr": 16}, (), 4, 3, parse_target("sm_80"))


def test_cached_compile_roundtrip_and_corruption(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELC_CACHE_DIR", str(tmp_path / "cache"))
    m = _module(tmp_path, "m_rt")
    target = parse_target("sm_90a")
    ck = cache.cached_compile(m.kern, SIG, {"BLOCK": 128}, {"x_ptr": 16}, (), 4, 3, target)
    key = ck.cache_key
    path = os.path.join(str(tmp_path / "cache"), key[:2], key)
    assert os.path.isfile(os.path.join(path, "meta.json"))
    again = cache.cached_compile(m.kern, SIG, {"BLOCK": 128}, {"x_ptr": 16}, (), 4, 3, target)
    assert again.artifacts is None and again.asm["cubin"] == ck.asm["cubin"]   # came from disk
    assert again.source_map.lines() == ck.source_map.lines()
    assert "LDG" in again.asm["sass"]                                            # SASS still available
    # truncate the cubin: the checksum catches it, the entry is rebuilt with a warning
    with open(os.path.join(path, "kernel.cubin"), "r+b") as f:
        f.truncate(100)
    with pytest.warns(RuntimeWarning, match="corrupt"):
        rebuilt = cache.cached_compile(m.kern, SIG, {"BLOCK": 128}, {"x_ptr": 16}, (), 4, 3, target)
    assert rebuilt.asm["cubin"] == ck.asm["cubin"]
    # garbage metadata
    with open(os.path.join(path, "meta.json"), "w") as f:
        f.write("{not json")
    with pytest.warns(RuntimeWarning, match="corrupt"):
        cache.cached_compile(m.kern, SIG, {"BLOCK": 128}, {"x_ptr": 16}, (), 4, 3, target)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cache.cached_compile(m.kern, SIG, {"BLOCK": 128}, {"x_ptr": 16}, (), 4, 3, target)  # healthy again


def test_no_partial_entries_left_behind(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELC_CACHE_DIR", str(tmp_path / "cache"))
    m = _module(tmp_path, "m_atomic")
    cache.cached_compile(m.kern, SIG, {"BLOCK": 64}, {"x_ptr": 16}, (), 4, 3, parse_target("sm_90a"))
    for root, dirs, files in os.walk(str(tmp_path / "cache")):
        assert not any(d.startswith(".tmp-") for d in dirs)
