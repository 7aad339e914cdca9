"""Copy addresses formed by ``mad.wide.s32`` (passes/copy_addresses.py, ``KERNELC_COPY_MAD_WIDE``) against torch:
the persistent pointer GEMM in tutorial 09's form (each load's pointer the argument plus one summed i32 offset;
tests/compiler/test_copy_addresses.py) with the knob on and off, flattened and nested; ragged M, N and K, programs
walking several tiles, C's leading dimension wider than N; the tuners' two configs and a small one."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

from tests.compiler.test_copy_addresses import gemm_offsets_summed  # noqa: E402
from tests.gpu.test_gpu_store_conversion import _check, _operands  # noqa: E402

SHAPES = [(1000, 1240, 520), (256, 512, 64), (8, 136, 1000), (2048, 1536, 384)]


@pytest.mark.parametrize("knob", ["1", "0"])
@pytest.mark.parametrize("flat", [True, False])
@pytest.mark.parametrize("bm,bn,stages,warps", [(128, 128, 3, 4), (128, 256, 4, 8), (64, 128, 3, 4)])
def test_summed_offset_pointer_gemm_matches_torch(monkeypatch, knob, flat, bm, bn, stages, warps):
    monkeypatch.setenv("KERNELC_COPY_MAD_WIDE", knob)
    monkeypatch.setenv("KERNELC_AUTO_TMA", "0")
    monkeypatch.delenv("KERNELC_FLATTEN_LOOPS", raising=False)
    programs = 29   # fewer programs than tiles: each walks several
    for m, n, k in SHAPES:
        a, b, big, c = _operands(m, n, k)
        gemm_offsets_summed[(programs,)](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                         c.stride(0), c.stride(1), BM=bm, BN=bn, BK=64, GROUP=3, PROGRAMS=programs,
                                         FLAT=flat, num_stages=stages, num_warps=warps)
        torch.cuda.synchronize()
        _check(a, b, big, c)
