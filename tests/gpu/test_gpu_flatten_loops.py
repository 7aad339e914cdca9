"""Persistent matmuls whose tile loop and K loop ``flatten_loops`` makes one loop (KERNELC_FLATTEN_LOOPS=1),
against torch: the ring runs across tiles, the epilogue is in the loop under a branch."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

from tests.compiler import persistent_kernels as P  # noqa: E402


@pytest.fixture(params=["0", "1"], ids=["nested", "flattened"])
def flatten(request, monkeypatch):
    monkeypatch.setenv("KERNELC_FLATTEN_LOOPS", request.param)
    return request.param == "1"


# (M, N, K): ragged edges, one K step, fewer tiles than programs, many tiles per program
SHAPES = [(512, 512, 512), (1000, 600, 200), (128, 128, 64), (2048, 1024, 1024)]


@pytest.mark.parametrize("M,N,K", SHAPES)
@pytest.mark.parametrize("stages,warps,ws", [(3, 4, None), (4, 8, None), (3, 4, True), (3, 8, True)])
def test_flattened_descriptor_matmul_matches_torch(flatten, M, N, K, stages, warps, ws):
    torch.manual_seed(0)
    a = torch.randn((M, K), device="cuda", dtype=torch.float16)
    b = torch.randn((N, K), device="cuda", dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    P.persistent_desc[(7,)](a, b, c, M, N, K, BM=128, BN=128, BK=64, PROGRAMS=7, FLAT=True, WS=ws,
                            num_stages=stages, num_warps=warps)
    torch.testing.assert_close(c.float(), a.float() @ b.float().T, atol=0.05 * K ** 0.5, rtol=1e-2)


@pytest.mark.parametrize("M,N,K", SHAPES + [(100, 72, 8), (96, 64, 0)])
@pytest.mark.parametrize("stages,warps", [(3, 4), (4, 8)])
def test_flattened_pointer_matmul_matches_torch(flatten, M, N, K, stages, warps):
    torch.manual_seed(0)
    a = torch.randn((M, K), device="cuda", dtype=torch.float16)
    b = torch.randn((N, K), device="cuda", dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    P.persistent_ptr[(5,)](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0), BM=64, BN=128, BK=32,
                           PROGRAMS=5, FLAT=True, num_stages=stages, num_warps=warps)
    torch.testing.assert_close(c.float(), a.float() @ b.float().T, atol=0.05 * K ** 0.5, rtol=1e-2)
