"""The epilogue conversion written with stmatrix (tests/compiler/test_epilogue_stmatrix.py), against torch:
a grouped GEMM with tutorial 08's structure at the tile shapes that pick ``stmatrix.trans`` (column-major
buffer) and ``stmatrix``, with C's leading dimension wider than N."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

from tests.compiler.test_epilogue_stmatrix import grouped_ptr_gemm  # noqa: E402


@pytest.mark.parametrize("bm,bn,bk,warps", [(128, 128, 64, 4), (64, 128, 64, 4), (64, 64, 32, 4), (128, 256, 64, 8)])
def test_grouped_gemm_with_stmatrix_epilogue_matches_torch(bm, bn, bk, warps):
    torch.manual_seed(0)
    shapes = [(256, 256, 128), (128, 512, 64), (bm, bn, 256)]
    As = [torch.randn(m, k, device="cuda", dtype=torch.float16) for m, n, k in shapes]
    Bs = [torch.randn(k, n, device="cuda", dtype=torch.float16) for m, n, k in shapes]
    Cbig = [torch.full((m, n + 24), float("nan"), device="cuda", dtype=torch.float16) for m, n, k in shapes]
    Cs = [c[:, :n] for c, (m, n, k) in zip(Cbig, shapes)]
    tab = lambda ts: torch.tensor([t.data_ptr() for t in ts], device="cuda", dtype=torch.int64)  # noqa: E731
    dims = torch.tensor([x for s in shapes for x in s], device="cuda", dtype=torch.int32)
    lds = torch.tensor([x for a, b, c in zip(As, Bs, Cs) for x in (a.stride(0), b.stride(0), c.stride(0))],
                       device="cuda", dtype=torch.int32)
    grid = 64
    ck = grouped_ptr_gemm[(grid,)](tab(As), tab(Bs), tab(Cs), dims, lds, len(shapes), NUM_PROGRAMS=grid, BM=bm, BN=bn,
                                   BK=bk, num_warps=warps, num_stages=3)
    torch.cuda.synchronize()
    for a, b, c, big in zip(As, Bs, Cs, Cbig):
        torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=0.05 * a.shape[1] ** 0.5, rtol=1e-2)
        assert torch.isnan(big[:, c.shape[1]:]).all()  # nothing written past N
    if torch.cuda.get_device_capability() == (9, 0):
        assert "stmatrix.sync.aligned.m8n8.x4" in ck.asm["ptx"]
