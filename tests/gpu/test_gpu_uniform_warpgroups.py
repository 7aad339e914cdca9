"""Wgmma dots of two consumer warpgroups whose rows start from the warpgroup index shuffled from lane 0
(passes/uniform_warpgroups.py, ``KERNELC_UNIFORM_WARPGROUP``), against torch, with the knob on and off: tutorial
09's persistent pointer GEMM in shape flattened and nested (ragged M, N, K; programs walking several tiles), the
plain pointer GEMM at 8 warps (128x256 and 256x128 tiles: one and two row blocks per warpgroup), and the TMA GEMM
at 8 warps. A wrong row offset for warpgroup 1 would make it compute warpgroup 0's rows."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

from examples.kernels import matmul as EM, matmul_tma as ET  # noqa: E402
from tests.compiler import persistent_kernels as P  # noqa: E402
from tests.gpu.test_gpu_store_conversion import _check, _operands  # noqa: E402

SHAPES = [(1000, 1240, 520), (256, 512, 64), (2048, 1536, 384)]


@pytest.mark.parametrize("uniform", ["1", "0"])
@pytest.mark.parametrize("flat", [True, False])
def test_persistent_pointer_gemm_two_warpgroups_matches_torch(monkeypatch, uniform, flat):
    monkeypatch.setenv("KERNELC_UNIFORM_WARPGROUP", uniform)
    monkeypatch.setenv("KERNELC_FLATTEN_LOOPS", "1" if flat else "0")
    programs = 29
    for m, n, k in SHAPES:
        a, b, big, c = _operands(m, n, k)
        P.persistent_ptr_grouped[(programs,)](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                              c.stride(0), c.stride(1), BM=128, BN=256, BK=64, GROUP=3,
                                              PROGRAMS=programs, FLAT=flat, num_stages=4, num_warps=8)
        torch.cuda.synchronize()
        _check(a, b, big, c)


@pytest.mark.parametrize("uniform", ["1", "0"])
@pytest.mark.parametrize("bm,bn", [(128, 256), (256, 128)])
def test_pointer_and_tma_gemms_at_8_warps_match_torch(monkeypatch, uniform, bm, bn):
    monkeypatch.setenv("KERNELC_UNIFORM_WARPGROUP", uniform)
    torch.manual_seed(0)
    a = torch.randn((1000, 776), device="cuda", dtype=torch.float16)
    b = torch.randn((776, 1304), device="cuda", dtype=torch.float16)
    ref = torch.matmul(a.float(), b.float())
    cfg = dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=64, GROUP_SIZE_M=8, num_stages=3, num_warps=8)
    for got in (EM.matmul(a, b, **cfg), ET.matmul_tma(a, b, **cfg)):
        torch.testing.assert_close(got.float(), ref, atol=0.25, rtol=2e-2)
