"""exp2 on two pipes on the GPU (passes/exp2_poly.py, KERNELC_EXP2_POLY): the polynomial's exponentials, rounded
to e4m3 and summed, against torch's exact ones; the CPU tests run the same LLVM IR on the host, this runs the PTX.

Run on an sm_90 machine: ``python -m pytest -q tests/gpu/test_gpu_exp2_poly.py``.
"""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

import kernelc  # noqa: E402
from kernelc.compiler.codegen.elementwise import EXP2_POLY_MAX_REL_ERROR  # noqa: E402
from tests.compiler.test_exp2_poly import softmax_fp8_kernel  # noqa: E402


@pytest.mark.parametrize("fraction,degree", [("0", "3"), ("1", "3"), ("1", "2"), ("1/2", "3")])
def test_softmax_exp2_on_the_fma_pipe(fraction, degree, monkeypatch):
    monkeypatch.setenv("KERNELC_EXP2_POLY", fraction)
    monkeypatch.setenv("KERNELC_EXP2_POLY_DEGREE", degree)
    kern = kernelc.jit(softmax_fp8_kernel.fn)  # a fresh JIT: compiled under this environment
    B = 64
    # each row: 0 (its maximum) down to -140 (past the flush to 0 at -126), a few -inf, shifted per row
    x = torch.linspace(0.0, -140.0, B, device="cuda")[None, :] + torch.arange(B, device="cuda")[:, None] * 0.37
    x[:, 7] = -float("inf")
    x[:, 0] = x.max(1).values + 0.25  # a row maximum that is not an integer
    x = x.contiguous()
    p8 = torch.empty(2 * B * B, device="cuda", dtype=torch.float8_e4m3fn)
    l = torch.empty(B, device="cuda", dtype=torch.float32)
    e = torch.empty(B, B, device="cuda", dtype=torch.float32)
    kern[(1,)](x, p8, l, e, BLOCK=B)
    exact = torch.exp2((x - x.max(1, keepdim=True).values).double())
    want8 = exact.float().to(torch.float8_e4m3fn).view(torch.uint8).int()
    got8 = p8[:B * B].view(torch.uint8).int().reshape(B, B)
    assert (got8 - want8).abs().max().item() <= 1
    bound = EXP2_POLY_MAX_REL_ERROR[int(degree)] if fraction != "0" else 2.0 ** -20  # MUFU: ~2^-22
    rel = (l.double() / exact.sum(1) - 1).abs().max().item()
    assert rel < bound + 2.0 ** -16, rel  # + the fp32 sum's rounding
    assert (got8[:, 7] == 0).all()  # exp2(-inf) = 0
