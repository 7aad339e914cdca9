"""The ``maxnreg`` launch option (Triton's): the registers a thread may use at most. ``kernelc.compile(...,
maxnreg=N)`` and ``kernel[grid](..., maxnreg=N)`` write it on the kernel (the tile IR's ``maxnreg``) and the assembler
gets ``-maxrregcount=N``; the disk cache keys it (a launch without it keeps its old key). It was accepted and ignored
before (docs/attention.md, "bwd18": the D=64 fused backward at 128 registers, 4 programs an SM)."""
import pytest

import kernelc
import kernelc.language as kl
from kernelc.runtime import cache

SIG = {"x_ptr": "*fp32", "o_ptr": "*fp32"}
CX = dict(R=32, C=256)


@kernelc.jit
def row_softmax(x_ptr, o_ptr, R: kl.constexpr, C: kl.constexpr):
    # a [32, 256] fp32 tile over 128 threads: 64 values a thread live at once, more registers than the ceiling below
    r = kl.arange(0, R)
    c = kl.arange(0, C)
    x = kl.load(x_ptr + r[:, None] * C + c[None, :])
    e = kl.exp(x - kl.max(x, 1)[:, None])
    kl.store(o_ptr + r[:, None] * C + c[None, :], e / kl.sum(e, 1)[:, None])


def _compile(**kw):
    return kernelc.compile(row_softmax, SIG, CX, target="sm_90a", num_warps=4, num_stages=1, **kw)


def test_the_ceiling_is_on_the_kernel_and_the_assembler_keeps_to_it():
    free = _compile()
    assert free.n_regs > 48 and "maxnreg=" not in free.asm["tir"]
    capped = _compile(maxnreg=48)
    assert capped.n_regs <= 48
    # the register budget's fill_step is still written, but the launch's ceiling is what the assembler gets
    assert "maxnreg=48}" in capped.asm["tir"].splitlines()[0]


@pytest.mark.parametrize("bad", [8, 256, 100.0, True, "128"])
def test_a_ceiling_out_of_range_is_an_error(bad):
    with pytest.raises(ValueError, match="maxnreg must be an integer from 16 to 255"):
        _compile(maxnreg=bad)


def test_the_cache_key_carries_it_only_where_given():
    args = (row_softmax, SIG, CX, {n: 16 for n in SIG}, (), 4, 1, "sm_90a")
    assert cache.cache_key(*args) == cache.cache_key(*args, None, None)
    assert cache.cache_key(*args, None, 128) != cache.cache_key(*args)
    assert cache.cache_key(*args, None, 128) != cache.cache_key(*args, None, 96)


def test_a_launch_passes_it_to_the_compile(monkeypatch):
    # the interpreter's warmup compiles for the stand-in device: the launch option reaches the assembler
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("KERNELC_INTERPRET", "1")
    x = torch.zeros(32, 256, dtype=torch.float32)
    o = torch.zeros(32, 256, dtype=torch.float32)
    ck = row_softmax.warmup(x, o, **CX, num_warps=4, num_stages=1, maxnreg=48, grid=(1,))
    assert ck.n_regs <= 48
    assert row_softmax.warmup(x, o, **CX, num_warps=4, num_stages=1, grid=(1,)).n_regs > 48
