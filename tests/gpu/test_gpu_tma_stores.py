"""TMA stores in loops waited for at the buffer's next write (passes/tma_stores.py, KERNELC_TMA_STORE_WAIT), against
torch: persistent matmuls whose epilogue stores each tile whole or in two halves through one buffer, nested and
flattened, with ragged edges (the copy engine clips the boxes) and more tiles than programs."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

from tests.compiler import persistent_kernels as P  # noqa: E402

SHAPES = [(512, 512, 512), (1000, 600, 200), (128, 256, 64), (2048, 1024, 128)]


@pytest.fixture(params=["deferred"])  # eager: main's lowering, covered by the other GPU tests' earlier runs
def store_wait(request, monkeypatch):
    monkeypatch.setenv("KERNELC_TMA_STORE_WAIT", request.param)
    return request.param


@pytest.mark.parametrize("flatten", ["0", "tma"])
@pytest.mark.parametrize("M,N,K", SHAPES)
@pytest.mark.parametrize("subtiled", [False, True])
def test_persistent_epilogue_stores_match_torch(store_wait, monkeypatch, flatten, M, N, K, subtiled):
    monkeypatch.setenv("KERNELC_FLATTEN_LOOPS", flatten)
    torch.manual_seed(0)
    a = torch.randn((M, K), device="cuda", dtype=torch.float16)
    b = torch.randn((N, K), device="cuda", dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    if subtiled:
        P.persistent_desc_subtiled[(5,)](a, b, c, M, N, K, BM=128, BN=256, BK=64, PROGRAMS=5, FLAT=True,
                                         num_stages=4, num_warps=8)
    else:
        P.persistent_desc[(5,)](a, b, c, M, N, K, BM=128, BN=128, BK=64, PROGRAMS=5, FLAT=True,
                                num_stages=3, num_warps=4)
    torch.testing.assert_close(c.float(), a.float() @ b.float().T, atol=0.05 * K ** 0.5, rtol=1e-2)
