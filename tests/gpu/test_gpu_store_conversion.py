"""A 16-bit MMA accumulator stored through pointers, converted through shared memory to 16-byte stores
(tests/compiler/test_store_conversion.py), against torch: the plain GEMM whose conversion takes the finished
ring's bytes and the persistent one whose conversion sits beside its live ring (or is taken out), at ragged
shapes (masked rows, columns and K) and with C's leading dimension wider than N, both settings of
``KERNELC_STORE_SMEM_DISCOUNT``."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

from examples.kernels.matmul import matmul_kernel  # noqa: E402
from tests.compiler.test_store_conversion import ptr_persistent  # noqa: E402

SHAPES = [(1000, 1240, 520), (256, 512, 64), (8, 136, 1000)]


def _operands(m, n, k):
    torch.manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(n, k, device="cuda", dtype=torch.float16).T   # (k, n) with unit stride along k
    big = torch.full((m, n + 24), float("nan"), device="cuda", dtype=torch.float16)
    return a, b, big, big[:, :n]


def _check(a, b, big, c):
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=0.05 * a.shape[1] ** 0.5, rtol=1e-2)
    assert torch.isnan(big[:, c.shape[1]:]).all()   # nothing written past N


def check_plain_gemm(shapes, bm, bn, bk, stages, warps):
    """Tutorial 03's kernel at every shape of ``shapes`` against torch (also used by test_gpu_mask_blocks.py)."""
    for m, n, k in shapes:
        a, b, big, c = _operands(m, n, k)
        grid = (((m + bm - 1) // bm) * ((n + bn - 1) // bn),)
        matmul_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                            c.stride(1), BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8,
                            num_stages=stages, num_warps=warps)
        torch.cuda.synchronize()
        _check(a, b, big, c)


@pytest.mark.parametrize("discount", ["1", "4"])
@pytest.mark.parametrize("bm,bn,bk,stages,warps", [(128, 128, 64, 3, 4), (128, 256, 64, 4, 8), (64, 128, 32, 4, 4)])
def test_plain_gemm_epilogue_matches_torch(monkeypatch, discount, bm, bn, bk, stages, warps):
    monkeypatch.setenv("KERNELC_STORE_SMEM_DISCOUNT", discount)
    check_plain_gemm(SHAPES, bm, bn, bk, stages, warps)


@pytest.mark.parametrize("flat", [False, True])
@pytest.mark.parametrize("discount", ["1", "4"])
@pytest.mark.parametrize("bm,bn,stages,warps", [(128, 128, 3, 4), (128, 256, 4, 8)])
def test_persistent_gemm_epilogue_matches_torch(monkeypatch, discount, flat, bm, bn, stages, warps):
    """Not flattened: the conversion in the drained ring's bytes (a barrier before the next tile's copies);
    flattened (KERNELC_FLATTEN_LOOPS=1): in scratch beside the live ring, or taken out at 128x256 / 4 stages."""
    monkeypatch.setenv("KERNELC_STORE_SMEM_DISCOUNT", discount)
    monkeypatch.setenv("KERNELC_FLATTEN_LOOPS", "1" if flat else "0")
    programs = 37   # fewer programs than tiles: each walks several
    for m, n, k in SHAPES:
        a, b, big, c = _operands(m, n, k)
        ptr_persistent[(programs,)](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                    c.stride(0), c.stride(1), BM=bm, BN=bn, BK=64, PROGRAMS=programs, FLAT=flat,
                                    num_stages=stages, num_warps=warps)
        torch.cuda.synchronize()
        _check(a, b, big, c)
