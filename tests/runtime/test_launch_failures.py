"""A specialisation that cannot fit the device is compiled once per process, not once per retune.

Tutorial 08 keys its TMA kernel's autotuner on tensors (by identity, as Triton 3.6), so it tunes again
at every benchmark point; 8 of its 16 configs need more shared memory than an H100 has. kernelc raised
that at compile time and remembered nothing, so each retune compiled those 8 again (86 compiles in a
run against Triton's 22, 2026-11-27). On CPU: ``compile_for`` stands in for the compiler."""
import json

import pytest
import torch

import kernelc
import kernelc.language as kl
from kernelc.errors import OutOfResources
from kernelc.runtime import launcher


@kernelc.jit
def big(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
    kl.store(x_ptr + offs, kl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@pytest.fixture
def fake_compiler(monkeypatch):
    calls = []

    def compile_for(fn, key, num_warps, num_stages, device=0, enable_fp_fusion=None, maxnreg=None):
        calls.append((key[-1][1], num_stages))
        raise OutOfResources(300000 + len(calls), 232448, "shared memory", fn.__name__)
    monkeypatch.setattr(launcher, "compile_for", compile_for)
    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: 0, raising=False)
    st = launcher.get_state(big)
    st["cache"].clear()
    st.pop("failed", None)
    yield calls
    st.pop("failed", None)


def _warm(x, block, stages=3):
    return launcher.launch_cuda(big, {"x_ptr": x, "n": 64, "BLOCK": block}, (1, 1, 1), 4, stages, {}, True)


def test_an_oversized_specialisation_is_compiled_once(fake_compiler):
    x = torch.zeros(64)
    for tensor in (x, torch.zeros(64), torch.zeros(64)):   # new tensors, same specialisation
        with pytest.raises(OutOfResources, match="needs 300001 bytes"):
            _warm(tensor, 128)
    assert fake_compiler == [(128, 3)]
    with pytest.raises(OutOfResources, match="needs 300002 bytes"):  # another specialisation: its own compile
        _warm(x, 128, stages=4)
    with pytest.raises(OutOfResources, match="needs 300003 bytes"):
        _warm(x, 256)
    assert fake_compiler == [(128, 3), (128, 4), (256, 3)]


def test_a_remembered_failure_holds_only_under_its_compile_options(fake_compiler, monkeypatch):
    x = torch.zeros(64)
    with pytest.raises(OutOfResources):
        _warm(x, 128)
    monkeypatch.setenv("KERNELC_SMEM_REUSE", "0")   # a compile-time knob (it can shrink shared memory)
    with pytest.raises(OutOfResources):
        _warm(x, 128)
    assert len(fake_compiler) == 2


def test_other_compile_errors_are_not_remembered(monkeypatch):
    calls = []

    def compile_for(fn, key, num_warps, num_stages, device=0, enable_fp_fusion=None, maxnreg=None):
        calls.append(1)
        raise RuntimeError("ptxas crashed")
    monkeypatch.setattr(launcher, "compile_for", compile_for)
    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: 0, raising=False)
    for _ in range(2):
        with pytest.raises(RuntimeError):
            _warm(torch.zeros(64), 64)
    assert len(calls) == 2


# -- the disk cache remembers it too -----------------------------------------------------------------
P = lambda t: "*" + t  # noqa: E731
MM_SIG = dict(a_ptr=P("fp16"), b_ptr=P("fp16"), c_ptr=P("fp16"), M="i32", N="i32", K="i32", stride_am="i32",
              stride_ak="i32", stride_bk="i32", stride_bn="i32", stride_cm="i32", stride_cn="i32")
BIG = dict(BLOCK_SIZE_M=256, BLOCK_SIZE_N=256, BLOCK_SIZE_K=128, GROUP_SIZE_M=8)   # 4 stages: ~1 MB of rings
EQ1 = ("stride_ak", "stride_bn", "stride_cn")


def _compile_big(target):
    from examples.kernels import matmul
    from kernelc.runtime import cache
    return cache.cached_compile(matmul.matmul_kernel, MM_SIG, BIG, {n: 16 for n in MM_SIG}, EQ1, 8, 4, target)


def test_the_disk_cache_remembers_an_oversized_specialisation(tmp_path, monkeypatch):
    # a process that starts from a warm cache (bench/triton_tutorials.py --warm) fails such a config at
    # once, as Triton's does (it caches the binary and fails it when loading)
    from cubintools.target import parse_target
    import kernelc.compiler.compiler as compiler
    monkeypatch.setenv("KERNELC_CACHE_DIR", str(tmp_path))
    target = parse_target("sm_90a")
    with pytest.raises(OutOfResources, match="allows 232448") as first:
        _compile_big(target)
    assert not getattr(first.value, "from_cache", False)
    (rec,) = tmp_path.rglob("*.oor.json")
    assert not list(tmp_path.rglob("meta.json"))              # no entry: tools that list kernels see none

    def no_compile(*a, **k):
        raise AssertionError("compiled again")
    real = compiler.compile
    monkeypatch.setattr(compiler, "compile", no_compile)
    with pytest.raises(OutOfResources) as again:
        _compile_big(target)
    assert again.value.from_cache and str(again.value) == str(first.value)
    # unreadable, or written for a program that has changed since: dropped, and the kernel compiles again
    for bad in ("{not json", json.dumps({"required": 1, "limit": 2, "resource": "shared memory", "kernel": "k",
                                         "dependencies": [["global", "no_such_module", "X", "1"]]})):
        rec.write_text(bad)
        with pytest.raises(AssertionError, match="compiled again"):
            _compile_big(target)
        assert not rec.exists()
    monkeypatch.setattr(compiler, "compile", real)
    with pytest.raises(OutOfResources):
        _compile_big(target)
    assert rec.exists()
