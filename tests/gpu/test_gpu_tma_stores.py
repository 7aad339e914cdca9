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


@pytest.mark.parametrize("publish,split,ws", [("shared", "0", False), ("own", "0", False), ("own", "1", False),
                                              ("shared", "1", True)])
@pytest.mark.parametrize("M,K,const_step", [(512, 1024, True), (1000, 640, True), (300, 512, False)])
def test_a_store_published_by_the_rings_barrier_matches_torch(monkeypatch, publish, split, ws, M, K, const_step):
    # tests/compiler/test_tma_stores.store_mid_trip: every trip's tile stored from alternating stages (shared), one
    # stage (own) or in warpgroup bands (split; with a producer warp (ws) no barrier follows the store), read by the
    # next dot in the same trip; ragged M (the copy engine clips the boxes)
    import kernelc
    from tests.compiler.test_tma_stores import store_mid_trip
    monkeypatch.setenv("KERNELC_TMA_STORE_PUBLISH", publish)
    monkeypatch.setenv("KERNELC_TMA_STORE_SPLIT", split)
    kern = kernelc.jit(store_mid_trip.fn)  # a fresh copy compiles under the knobs
    torch.manual_seed(0)
    BM, BK = 128, 64
    a = torch.randn((M, K), device="cuda", dtype=torch.float16)
    b = torch.randn((K, BK), device="cuda", dtype=torch.float16) / 8
    c = torch.full((M, K), float("nan"), device="cuda", dtype=torch.float16)
    o = torch.empty((M, BK), device="cuda", dtype=torch.float32)
    kern[(triton_cdiv(M, BM),)](a, b, c, o, M, K, BK, BM=BM, BK=BK, CONST_STEP=const_step, WS=ws, num_warps=8,
                                  num_stages=3)
    blocks = [(a[:, k:k + BK].float() @ b[k:k + BK].float()).half() for k in range(0, K, BK)]
    torch.testing.assert_close(c, torch.cat(blocks, 1), atol=2e-2, rtol=1e-2)
    ref = sum(x.float() @ b[k:k + BK].float() for x, k in zip(blocks, range(0, K, BK)))
    torch.testing.assert_close(o, ref, atol=5e-2, rtol=1e-2)


def triton_cdiv(a, b):
    return (a + b - 1) // b
