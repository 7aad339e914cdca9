"""A flattened persistent GEMM whose epilogue converts in pieces beside its live ring
(tests/compiler/test_cvt_pieces.py) against torch: every ``KERNELC_CVT_PIECES`` policy (max: 2 pieces at
128x256 / 8 warps, 4 at 128x128 / 4 warps; fit; off: one piece, or 4-byte stores where that does not fit), at
ragged shapes (masked rows, columns and K, tiles of several programs) and with C's leading dimension wider
than N."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

from tests.compiler.test_store_conversion import ptr_persistent  # noqa: E402
from tests.gpu.test_gpu_store_conversion import SHAPES, _check, _operands  # noqa: E402


@pytest.mark.parametrize("pieces", ["max", "fit", "off"])
@pytest.mark.parametrize("bm,bn,stages,warps", [(128, 128, 3, 4), (128, 256, 4, 8), (64, 128, 4, 4)])
def test_flattened_epilogue_in_pieces_matches_torch(monkeypatch, pieces, bm, bn, stages, warps):
    monkeypatch.setenv("KERNELC_FLATTEN_LOOPS", "1")
    monkeypatch.setenv("KERNELC_CVT_PIECES", pieces)
    programs = 37   # fewer programs than tiles: each walks several, its epilogue between two tiles' K steps
    for m, n, k in SHAPES + [(2048, 1024, 512)]:
        a, b, big, c = _operands(m, n, k)
        ptr_persistent[(programs,)](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                    c.stride(0), c.stride(1), BM=bm, BN=bn, BK=64, PROGRAMS=programs, FLAT=True,
                                    num_stages=stages, num_warps=warps)
        torch.cuda.synchronize()
        _check(a, b, big, c)
