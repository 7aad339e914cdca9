"""Tutorial 09's persistent pointer GEMM in shape (``persistent_ptr_grouped``: grouped tile order, row and column
offsets wrapped past the edge, only K masked, the epilogue's own tile counter) flattened with the tile values
carried from step to step (tests/compiler/test_flatten_carry.py), against torch: by default (flattened, carried),
carried, recomputed on every step, and nested; ragged M, N and K (a last group of fewer row blocks, a partial last K step), programs walking
several tiles, C's leading dimension wider than N; the tuners' two configs and a small one."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

from tests.compiler import persistent_kernels as P  # noqa: E402
from tests.gpu.test_gpu_store_conversion import _check, _operands  # noqa: E402

SHAPES = [(1000, 1240, 520), (256, 512, 64), (8, 136, 1000), (2048, 1536, 384)]


@pytest.mark.parametrize("mode", ["default", "carry", "recompute", "nested"])
@pytest.mark.parametrize("bm,bn,stages,warps", [(128, 128, 3, 4), (128, 256, 4, 8), (64, 128, 3, 4)])
def test_flattened_grouped_pointer_gemm_matches_torch(monkeypatch, mode, bm, bn, stages, warps):
    if mode == "default":   # KERNELC_FLATTEN_LOOPS=auto flattens it, the offsets carried
        monkeypatch.delenv("KERNELC_FLATTEN_LOOPS", raising=False)
        monkeypatch.delenv("KERNELC_FLATTEN_CARRY_TILES", raising=False)
    else:
        monkeypatch.setenv("KERNELC_FLATTEN_LOOPS", "0" if mode == "nested" else "1")
        monkeypatch.setenv("KERNELC_FLATTEN_CARRY_TILES", "0" if mode == "recompute" else "1")
    programs = 29   # fewer programs than tiles: each walks several, tile changes mid-ring
    for m, n, k in SHAPES:
        a, b, big, c = _operands(m, n, k)
        P.persistent_ptr_grouped[(programs,)](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                              c.stride(0), c.stride(1), BM=bm, BN=bn, BK=64, GROUP=3,
                                              PROGRAMS=programs, FLAT=True, num_stages=stages, num_warps=warps)
        torch.cuda.synchronize()
        _check(a, b, big, c)
