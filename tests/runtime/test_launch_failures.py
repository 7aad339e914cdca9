"""A specialisation that cannot fit the device is compiled once per process, not once per retune.

Tutorial 08 keys its TMA kernel's autotuner on tensors (by identity, as Triton 3.6), so it tunes again
at every benchmark point; 8 of its 16 configs need more shared memory than an H100 has. kernelc raised
that at compile time and remembered nothing, so each retune compiled those 8 again (86 compiles in a
run against Triton's 22, 2026-11-27). On CPU: ``compile_for`` stands in for the compiler."""
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

    def compile_for(fn, key, num_warps, num_stages, device=0, enable_fp_fusion=None):
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

    def compile_for(fn, key, num_warps, num_stages, device=0, enable_fp_fusion=None):
        calls.append(1)
        raise RuntimeError("ptxas crashed")
    monkeypatch.setattr(launcher, "compile_for", compile_for)
    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: 0, raising=False)
    for _ in range(2):
        with pytest.raises(RuntimeError):
            _warm(torch.zeros(64), 64)
    assert len(calls) == 2
