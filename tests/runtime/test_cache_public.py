"""The public cache API the analyzer uses: entry_path / load_entry (no private kernelc names needed)."""
import os

from cubintools.target import parse_target
from kernelc.runtime import cache
from tests.runtime.test_cache import SIG, _module


def test_load_entry_returns_the_stored_kernel_and_rejects_bad_keys(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELC_CACHE_DIR", str(tmp_path / "cache"))
    m = _module(tmp_path, "m_public")
    ck = cache.cached_compile(m.kern, SIG, {"BLOCK": 64}, {"x_ptr": 16}, (), 4, 3, parse_target("sm_90a"))
    path = cache.entry_path(ck.cache_key)
    assert path and os.path.isfile(os.path.join(path, "meta.json"))
    got = cache.load_entry(ck.cache_key)
    assert got.asm["cubin"] == ck.asm["cubin"] and got.name == ck.name and got.n_regs == ck.n_regs
    for bad in ("", "ab", "../" + ck.cache_key, ck.cache_key[:2] + "/" + ck.cache_key, ".hidden", "0" * 64):
        assert cache.entry_path(bad) is None and cache.load_entry(bad) is None
    with open(os.path.join(path, "kernel.cubin"), "r+b") as f:
        f.truncate(10)
    assert cache.load_entry(ck.cache_key) is None  # unreadable entry: None, not an exception
