"""tests/conftest.py: a compile knob set through monkeypatch drops the launcher's in-memory caches (their key has
no compile knobs), so a test never launches a kernel compiled under another test's knobs."""
import kernelc
import kernelc.language as kl
from kernelc.runtime.launcher import get_state


@kernelc.jit
def _k(x_ptr, BLOCK: kl.constexpr):
    kl.store(x_ptr + kl.arange(0, BLOCK), kl.zeros((BLOCK,), kl.float32))


def test_setting_a_compile_knob_drops_the_launch_caches(monkeypatch):
    st = get_state(_k)
    st["cache"]["entry"] = object()
    monkeypatch.setenv("KERNELC_CACHE_DIR", "/tmp/not-a-compile-knob")   # a runtime knob: the cache stays
    assert "entry" in st["cache"]
    monkeypatch.setenv("KERNELC_REDUCE_TREE", "1")
    assert st["cache"] == {}
    st["cache"]["entry"] = object()
    monkeypatch.delenv("KERNELC_REDUCE_TREE")
    assert st["cache"] == {}
