"""GEMMs whose cp.async K masks are computed once per block of 16 K offsets (passes/mask_blocks.py,
tests/compiler/test_mask_blocks.py) against torch, at K divisible by 16 but not by the K block (the last K
step is partly masked, the mask flipping at a multiple of 16 inside the tile), with the pass on and off:
tutorial 03's kernel and the persistent one, nested and flattened."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

from tests.compiler.test_store_conversion import ptr_persistent  # noqa: E402
from tests.gpu.test_gpu_store_conversion import _check, _operands, check_plain_gemm  # noqa: E402

SHAPES = [(1000, 1240, 528), (256, 512, 80), (136, 72, 1040), (64, 64, 16)]


@pytest.mark.parametrize("uniform", ["1", "0"])
@pytest.mark.parametrize("bm,bn,bk,stages,warps", [(128, 256, 64, 3, 8), (128, 128, 32, 4, 4), (64, 128, 64, 4, 4)])
def test_plain_gemm_with_a_partly_masked_last_k_step(monkeypatch, uniform, bm, bn, bk, stages, warps):
    monkeypatch.setenv("KERNELC_UNIFORM_MASKS", uniform)
    check_plain_gemm(SHAPES, bm, bn, bk, stages, warps)


@pytest.mark.parametrize("flat", [False, True])
@pytest.mark.parametrize("bm,bn,stages,warps", [(128, 128, 3, 4), (128, 256, 4, 8)])
def test_persistent_gemm_with_a_partly_masked_last_k_step(monkeypatch, flat, bm, bn, stages, warps):
    monkeypatch.setenv("KERNELC_FLATTEN_LOOPS", "1" if flat else "0")
    for m, n, k in SHAPES:
        a, b, big, c = _operands(m, n, k)
        ptr_persistent[(37,)](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                              c.stride(1), BM=bm, BN=bn, BK=64, PROGRAMS=37, FLAT=flat, num_stages=stages,
                              num_warps=warps)
        torch.cuda.synchronize()
        _check(a, b, big, c)


@pytest.mark.parametrize("pred", ["lt", "le", "gt", "ge", "eq", "ne"])
def test_a_load_masked_by_any_compare_of_offsets_with_an_aligned_bound(pred):
    """passes/axis_info.py: ``offs == n`` / ``offs <= n`` (n a multiple of 16) were one predicated vector load,
    which read past n instead of giving ``other``; every compare against torch at bounds around each vector."""
    import kernelc
    import kernelc.language as kl

    @kernelc.jit
    def masked_copy(x_ptr, y_ptr, n, PRED: kl.constexpr):
        offs = kl.arange(0, 1024)
        if PRED == "lt":
            m = offs < n
        elif PRED == "le":
            m = offs <= n
        elif PRED == "gt":
            m = offs > n
        elif PRED == "ge":
            m = offs >= n
        elif PRED == "eq":
            m = offs == n
        else:
            m = offs != n
        kl.store(y_ptr + offs, kl.load(x_ptr + offs, mask=m, other=-1.0))

    x = torch.arange(1024, device="cuda", dtype=torch.float32)
    offs = torch.arange(1024, device="cuda")
    for n in (0, 16, 512, 1008):
        y = torch.empty_like(x)
        masked_copy[(1,)](x, y, n, PRED=pred)
        m = {"lt": offs < n, "le": offs <= n, "gt": offs > n, "ge": offs >= n, "eq": offs == n, "ne": offs != n}[pred]
        torch.testing.assert_close(y, torch.where(m, x, torch.full_like(x, -1.0)))
