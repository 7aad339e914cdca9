"""Tutorial 02's host path: ``warmup`` answered from a memo keyed by the generated binding, the warmed kernel's
per-grid launcher. The memo must never serve a kernel that the arguments, KERNELC_OVERRIDE, KERNELC_INTERPRET or
the device would not give (CPU: the binding is made by hand, warmups compile for the stand-in device)."""
import functools

import pytest
import torch

import kernelc
import kernelc.language as kl
from kernelc.runtime import device as D
from kernelc.runtime.compiled import _positional
from kernelc.runtime.fastpath import make_binder
from kernelc.runtime.grid import GridError


@kernelc.jit
def memo_twice(x_ptr, y_ptr, n, BLOCK: kl.constexpr):
    offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
    kl.store(y_ptr + offs, kl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


@kernelc.jit
def memo_staged(x_ptr, n, BLOCK: kl.constexpr, num_stages: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    kl.store(x_ptr + offs, 1.0, mask=offs < n)


@pytest.fixture
def counted(monkeypatch):
    """memo_twice with the generated binding (what a GPU has) and a count of the general path's bindings."""
    monkeypatch.setenv("KERNELC_INTERPRET", "1")
    monkeypatch.delenv("KERNELC_OVERRIDE", raising=False)
    monkeypatch.setattr(memo_twice, "_warm_memo", {})
    monkeypatch.setattr(memo_twice, "_fast", make_binder(memo_twice))
    binds = []
    real_bind = type(memo_twice).bind
    monkeypatch.setattr(type(memo_twice), "bind", lambda self, a, kw: binds.append(1) or real_bind(self, a, kw))
    return binds


def test_memo_follows_the_override(monkeypatch, counted):
    x = torch.arange(100, dtype=torch.float32)
    y = torch.zeros_like(x)
    k = memo_twice.warmup(x, y, 100, BLOCK=64, grid=(1,))
    assert memo_twice.warmup(x, y, 100, BLOCK=64) is k and len(counted) == 1
    monkeypatch.setenv("KERNELC_OVERRIDE", "memo_twice:BLOCK=128")
    forced = memo_twice.warmup(x, y, 100, BLOCK=64)
    assert forced.constexprs["BLOCK"] == 128
    assert memo_twice.warmup(x, y, 100, BLOCK=64).constexprs["BLOCK"] == 128  # never memoised, never stale
    assert len(counted) == 3
    monkeypatch.setenv("KERNELC_OVERRIDE", "other_kernel:BLOCK=32")  # names another kernel: memoised again
    assert memo_twice.warmup(x, y, 100, BLOCK=64).constexprs["BLOCK"] == 64
    assert memo_twice.warmup(x, y, 100, BLOCK=64).constexprs["BLOCK"] == 64 and len(counted) == 4
    monkeypatch.delenv("KERNELC_OVERRIDE")
    assert memo_twice.warmup(x, y, 100, BLOCK=64) is k and len(counted) == 4


def test_memo_follows_the_interpreter_knob_and_the_device(monkeypatch, counted):
    x = torch.arange(100, dtype=torch.float32)
    y = torch.zeros_like(x)
    k = memo_twice.warmup(x, y, 100, BLOCK=64)
    monkeypatch.setenv("KERNELC_INTERPRET", "0")  # no GPU here: the interpreter still runs, but warmed up anew
    memo_twice.warmup(x, y, 100, BLOCK=64)
    assert len(counted) == 2
    monkeypatch.setenv("KERNELC_INTERPRET", "1")
    assert memo_twice.warmup(x, y, 100, BLOCK=64) is k and len(counted) == 2
    monkeypatch.setattr(D, "_cuda_device", lambda: 1)  # torch's current device is now 1
    memo_twice.warmup(x, y, 100, BLOCK=64)
    assert len(counted) == 3
    monkeypatch.setattr(D, "_cuda_device", lambda: 0)
    assert memo_twice.warmup(x, y, 100, BLOCK=64) is k and len(counted) == 3


def test_memo_follows_dtype_alignment_divisibility_and_options(counted):
    buf = torch.arange(101, dtype=torch.float32)
    x, y = buf[:100], torch.zeros(100)
    k = memo_twice.warmup(x, y, 100, BLOCK=64)
    assert memo_twice.warmup(buf[:100].clone(), y, 116, BLOCK=64) is k and len(counted) == 1  # same specialisation
    others = [memo_twice.warmup(buf[1:], y, 100, BLOCK=64),         # a 4-byte aligned pointer
              memo_twice.warmup(x.double(), y.double(), 100, BLOCK=64),
              memo_twice.warmup(x, y, 96, BLOCK=64),                # n divisible by 16
              memo_twice.warmup(x, y, 1, BLOCK=64),                 # n == 1
              memo_twice.warmup(x, y, 100, BLOCK=128),
              memo_twice.warmup(x, y, 100, BLOCK=64, num_warps=2)]
    assert len(counted) == 7 and all(o is not k for o in others)
    assert others[0].compiled is not k.compiled and others[5].metadata.num_warps == 2
    assert memo_twice.warmup(buf[1:], y, 100, BLOCK=64) is others[0] and len(counted) == 7


def test_warmed_kernel_launchers_per_grid(monkeypatch):
    monkeypatch.setenv("KERNELC_INTERPRET", "1")
    x = torch.arange(100, dtype=torch.float32)
    y = torch.zeros_like(x)
    k = memo_twice.warmup(x, y, 100, BLOCK=64)
    assert k[(2, 1, 1)] is k[(2, 1, 1)]
    k[(2, 1, 1)](x, y, 100, 64)
    assert torch.equal(y, 2 * x)
    with pytest.raises(GridError, match="2.0"):  # equal to (2, 1, 1) as a dict key: never its launcher
        k[(2.0, 1, 1)](x, y, 100, 64)


def test_warmed_launch_passes_the_options_by_position():
    """What WarmedKernel binds for an integer grid where the generated binder exists: fast3 and the options in its
    parameter order (num_stages is memo_staged's parameter, so only num_warps is an option there)."""
    fast = make_binder(memo_twice)
    assert _positional(functools.partial(fast.fast3, 2, 1, 1), 4, {"num_warps": 8}) == (fast.fast3, 2, 1, 1, (8,))
    assert _positional(functools.partial(fast.fast3, 2, 1, 1), 4, {"num_stages": 2}) == \
        (fast.fast3, 2, 1, 1, (4, 2))
    assert _positional(functools.partial(fast.fast3, 2, 1, 1), 4, {}) == (fast.fast3, 2, 1, 1, ())
    assert _positional(functools.partial(fast.fast3, 2, 1, 1), 4, {"enable_fp_fusion": False}) is None
    assert _positional(functools.partial(fast, (2, 1, 1)), 4, {"num_warps": 8}) is None
    staged = make_binder(memo_staged)
    assert _positional(functools.partial(staged.fast3, 1, 1, 1), 4, {"num_warps": 8}) == \
        (staged.fast3, 1, 1, 1, (8,))


def test_raw_reader_sees_every_change(monkeypatch):
    from kernelc.options import raw_reader
    read = raw_reader("KERNELC_OVERRIDE", "KERNELC_INTERPRET")
    monkeypatch.delenv("KERNELC_OVERRIDE", raising=False)
    monkeypatch.setenv("KERNELC_INTERPRET", "1")
    a = read()
    assert a[0] is None and a == read()
    monkeypatch.setenv("KERNELC_OVERRIDE", "k:BLOCK=1")
    b = read()
    assert b != a and b == read()
    monkeypatch.setenv("KERNELC_INTERPRET", "0")
    assert read() != b
    one = raw_reader("KERNELC_INTERPRET", "KERNELC_OVERRIDE", "KERNELC_LAUNCH_BLOCKING")  # the general form
    assert len(one()) == 3 and one()[1] == read()[0]


@pytest.mark.gpu
def test_gpu_tutorial02_pattern_launches_what_it_warmed_and_respecialises():
    """Tutorial 02 on a GPU: warmup every call, then the warmed kernel's launch (the generated binder, the warmed
    num_warps by position); an unaligned tensor through the same warmed launcher gets its own specialisation."""
    buf = torch.arange(5001, dtype=torch.float32, device="cuda")
    x = buf[:5000]
    for _ in range(3):
        y = torch.empty_like(x)
        k = memo_twice.warmup(x, y, 5000, BLOCK=1024, num_warps=8, grid=(1,))
        assert k is memo_twice.warmup(x, y, 5000, BLOCK=1024, num_warps=8, grid=(1,))
        k._init_handles()
        k[(5, 1, 1)](x, y, 5000, 1024)
        torch.cuda.synchronize()
        assert torch.equal(y, 2 * x) and k.metadata.num_warps == 8
    y = torch.zeros(5000, device="cuda")
    k[(5, 1, 1)](buf[1:], y, 5000, 1024)  # 4-byte aligned: not the kernel compiled for 16-byte aligned pointers
    torch.cuda.synchronize()
    assert torch.equal(y, 2 * buf[1:])
