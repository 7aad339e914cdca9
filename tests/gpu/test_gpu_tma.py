"""Hopper TMA on the GPU: tensor-descriptor matmuls (fp16/bf16, ragged edges, 2-4 stages, 4/8 warps) and
copies against torch. Shapes whose rows are 16-byte multiples run on TMA (checked in the SASS of the
launched kernel); the others take the generic lowering and must give the same results."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

import kernelc  # noqa: E402
from kernelc import TensorDescriptor  # noqa: E402

from examples.kernels import matmul_tma as MM  # noqa: E402
from tests.compiler.tma_kernels import (copy2d, copy3d, copy_rows, load_tile, matmul_bt, qk_sum,  # noqa: E402
                                       invariant_operand_two_roles, mma_sync_reads_tma_b, wgmma_then_mma_sync)


def _hopper():
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


def _tma_ok(*tensors):
    """Whether the runtime specialises these tensors for TMA: 16-byte aligned base, strides divisible by 16."""
    return all(t.data_ptr() % 16 == 0 and all(s % 16 == 0 for s in t.stride()[:-1]) for t in tensors)


def _uses_tma(ck):
    return "UTMALDG" in ck.asm["sass"]


def _run_matmul(a, b, bm, bn, bk, num_warps, num_stages):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    descs = (TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(b, [bk, bn]),
             TensorDescriptor.from_tensor(c, [bm, bn]))
    grid = (kernelc.cdiv(M, bm) * kernelc.cdiv(N, bn),)
    ck = MM.matmul_tma_kernel[grid](*descs, M, N, K, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk,
                                    GROUP_SIZE_M=8, num_warps=num_warps, num_stages=num_stages)
    return c, ck


SHAPES = [(4096, 4096, 4096), (1000, 1040, 1008), (1000, 1000, 1000), (257, 129, 520), (64, 80, 16)]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("M,N,K", SHAPES)
@pytest.mark.parametrize("num_warps,num_stages,bn", [(4, 2, 128), (4, 3, 128), (8, 4, 128), (8, 3, 256)])
def test_tma_matmul_matches_torch(dtype, M, N, K, num_warps, num_stages, bn):
    torch.manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=dtype)
    b = torch.randn(K, N, device="cuda", dtype=dtype)
    c, ck = _run_matmul(a, b, 128, bn, 64, num_warps, num_stages)
    ref = (a.float() @ b.float())
    torch.testing.assert_close(c.float(), ref, atol=0.05 * K ** 0.5, rtol=1e-2)
    if _hopper():
        assert _uses_tma(ck) == _tma_ok(a, b, c), (M, N, K)


def test_tma_matmul_autotuned():
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    c = MM.matmul_tma(a, b)
    torch.testing.assert_close(c, torch.matmul(a, b), atol=0.5, rtol=1e-2)
    assert MM.matmul_tma_autotuned.best_config is not None


def test_tma_matmul_transposed_b():
    M, N, K = 1000, 1040, 1008
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    bt = torch.randn(N, K, device="cuda", dtype=torch.float16)  # B^T stored row-major: B is K-major
    c = torch.empty(M, N, device="cuda", dtype=torch.float32)
    grid = (kernelc.cdiv(M, 128), kernelc.cdiv(N, 128))
    ck = matmul_bt[grid](TensorDescriptor.from_tensor(a, [128, 64]), TensorDescriptor.from_tensor(bt, [128, 64]), c,
                         M, N, K, BM=128, BN=128, BK=64, num_warps=4, num_stages=3)
    torch.testing.assert_close(c, a.float() @ bt.float().T, atol=0.1, rtol=1e-2)
    if _hopper():
        assert _uses_tma(ck)


@pytest.mark.parametrize("shape,block,dtype", [((1000, 304), (64, 64), torch.float16),
                                               ((1000, 300), (64, 64), torch.float16),   # 600-byte rows: generic
                                               ((77, 520), (32, 128), torch.float32),
                                               ((130, 4096), (8, 256), torch.bfloat16),
                                               ((333, 96), (128, 32), torch.uint8)])
def test_tma_copy_with_ragged_edges(shape, block, dtype):
    x = (torch.randn(shape, device="cuda") * 8).to(dtype)
    y = torch.full_like(x, 3)
    grid = (kernelc.cdiv(shape[0], block[0]), kernelc.cdiv(shape[1], block[1]))
    ck = copy2d[grid](TensorDescriptor.from_tensor(x, list(block)), TensorDescriptor.from_tensor(y, list(block)),
                      BM=block[0], BN=block[1])
    torch.testing.assert_close(y, (x * 2).to(dtype), atol=0, rtol=0)
    if _hopper():
        assert _uses_tma(ck) == _tma_ok(x, y)


def test_tma_copy_of_a_view_and_a_3d_tensor():
    big = torch.randn(300, 512, device="cuda", dtype=torch.float16)
    x = big[10:250, 64:448]  # strided view: 16-byte aligned base, row stride 512
    y = torch.zeros_like(x)
    copy2d[(kernelc.cdiv(240, 64), kernelc.cdiv(384, 128))](TensorDescriptor.from_tensor(x, [64, 128]),
                                                           TensorDescriptor.from_tensor(y, [64, 128]), BM=64, BN=128)
    torch.testing.assert_close(y, x * 2, atol=0, rtol=0)
    x3 = torch.randn(5, 8, 64, device="cuda", dtype=torch.float16)
    y3 = torch.zeros_like(x3)
    copy3d[(kernelc.cdiv(5, 2),)](TensorDescriptor.from_tensor(x3, [2, 8, 64]),
                                  TensorDescriptor.from_tensor(y3, [2, 8, 64]), B0=2, B1=8, B2=64)
    torch.testing.assert_close(y3, x3, atol=0, rtol=0)


def test_descriptor_ops_in_a_loop():
    x = torch.randn(512, 1040, device="cuda", dtype=torch.float16)
    y = torch.zeros_like(x)
    ck = copy_rows[(512 // 64,)](TensorDescriptor.from_tensor(x, [64, 64]), TensorDescriptor.from_tensor(y, [64, 64]),
                                 1040, BM=64, BN=64)
    torch.testing.assert_close(y, x + 1, atol=0, rtol=0)
    if _hopper():
        assert _uses_tma(ck)


def test_loop_invariant_q_read_in_place():
    q = torch.randn(256, 64, device="cuda", dtype=torch.float16)
    k = torch.randn(1000, 64, device="cuda", dtype=torch.float16)
    out = torch.empty(256, 64, device="cuda", dtype=torch.float32)
    qk_sum[(2,)](TensorDescriptor.from_tensor(q, [128, 64]), TensorDescriptor.from_tensor(k, [64, 64]), out, 1000,
                 BM=128, BN=64, D=64, num_warps=4, num_stages=3)
    kp = torch.cat([k, torch.zeros(24, 64, device="cuda", dtype=k.dtype)]).float().view(16, 64, 64)
    ref = sum(q.float() @ kp[j].T for j in range(16))
    torch.testing.assert_close(out, ref, atol=0.1, rtol=1e-2)


@pytest.mark.parametrize("padding", ["zero", "nan"])
def test_out_of_bounds_reads_take_the_padding(padding):
    x = torch.randn(50, 48, device="cuda", dtype=torch.float32)
    out = torch.empty(32, 32, device="cuda", dtype=torch.float32)
    d = TensorDescriptor.from_tensor(x, [32, 32], padding=padding)
    load_tile[(1,)](d, out, 30, 32, BM=32, BN=32)  # rows 30..61 (50 valid), cols 32..63 (48 valid)
    want = torch.full((32, 32), float("nan") if padding == "nan" else 0.0, device="cuda")
    want[:20, :16] = x[30:50, 32:48]
    torch.testing.assert_close(out, want, equal_nan=True, atol=0, rtol=0)
    load_tile[(1,)](d, out, -8, -16, BM=32, BN=32)  # negative offsets are out of bounds too
    want = torch.full((32, 32), float("nan") if padding == "nan" else 0.0, device="cuda")
    want[8:, 16:] = x[:24, :16]
    torch.testing.assert_close(out, want, equal_nan=True, atol=0, rtol=0)


def test_an_inner_offset_of_8_bytes_reads_right():
    # TMA faults ("illegal instruction") on an inner coordinate that is not whole 16-byte chunks (fp32 +2 is
    # 8 bytes; H100, 2026-11-27): kernelc takes the element-wise path there, TMA where the offset is aligned
    x = torch.randn(50, 48, device="cuda", dtype=torch.float32)
    out = torch.empty(32, 32, device="cuda", dtype=torch.float32)
    d = TensorDescriptor.from_tensor(x, [32, 32])
    for c0 in (2, 6, 4):
        load_tile[(1,)](d, out, 3, c0, BM=32, BN=32)
        torch.cuda.synchronize()
        want = torch.zeros(32, 32, device="cuda")
        want[:, :48 - c0] = x[3:35, c0:48][:, :32]
        torch.testing.assert_close(out, want, atol=0, rtol=0)


@pytest.mark.parametrize("atomic", [False, True])
@pytest.mark.parametrize("BM,D,num_warps", [(16, 128, 8), (32, 64, 8), (16, 128, 4), (64, 64, 4)])
def test_tma_tile_read_by_two_dots(BM, D, num_warps, atomic):
    """A TMA tile read by two dots in different orientations (the attention backward's atomic dQ step):
    wrong by the size of the result, or a fault, on an H100 on 2026-11-27 while it was read in place."""
    torch.manual_seed(0)
    k = torch.randn(128, D, device="cuda", dtype=torch.float16) / 4
    q = torch.randn(BM, D, device="cuda", dtype=torch.float16) / 4
    sT = (k.float() @ q.float().T).half()
    want = sT.T.float() @ k.float()
    out = torch.zeros(BM, D, device="cuda", dtype=torch.float32)
    wgmma_then_mma_sync[(1,)](TensorDescriptor.from_tensor(k, [128, D]), TensorDescriptor.from_tensor(q, [BM, D]),
                              out, BN=128, BM=BM, D=D, ATOMIC=atomic, num_warps=num_warps)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, want, rtol=2e-3, atol=2e-2)


def test_mma_sync_reads_its_tma_operand_in_place():
    torch.manual_seed(0)
    a = torch.randn(16, 128, device="cuda", dtype=torch.float16) / 4
    k = torch.randn(128, 128, device="cuda", dtype=torch.float16) / 4
    out = torch.empty(16, 128, device="cuda", dtype=torch.float32)
    ck = mma_sync_reads_tma_b[(1,)](a, TensorDescriptor.from_tensor(k, [128, 128]), out, BN=128, BM=16, D=128,
                                    num_warps=8)
    torch.cuda.synchronize()
    assert "HMMA" in ck.asm["sass"] and "UTMALDG" in ck.asm["sass"]
    torch.testing.assert_close(out, a.float() @ k.float(), rtol=2e-3, atol=2e-2)


@pytest.mark.parametrize("BM,D,num_warps", [(16, 128, 8), (32, 64, 8), (64, 64, 4), (64, 128, 8)])
def test_loop_invariant_operand_read_in_two_roles(BM, D, num_warps):
    """K is A of one dot and B of the other in every iteration; staged once for one role, the other dot read
    that copy with the wrong orientation (the atomic-dQ attention backward on an H100, 2026-11-27)."""
    torch.manual_seed(0)
    k = torch.randn(128, D, device="cuda", dtype=torch.float16) / 4
    q = torch.randn(3 * BM, D, device="cuda", dtype=torch.float16) / 4
    want = torch.zeros(BM, D, device="cuda")
    for i in range(3):
        sT = (k.float() @ q[i * BM:(i + 1) * BM].float().T).half()
        want += sT.T.float() @ k.float()
    out = torch.empty(BM, D, device="cuda", dtype=torch.float32)
    invariant_operand_two_roles[(1,)](k, q, out, ITERS=3, BN=128, BM=BM, D=D, num_warps=num_warps)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, want, rtol=2e-3, atol=5e-2)
