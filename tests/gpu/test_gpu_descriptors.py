"""Block pointers and tensor descriptors on the GPU, against torch: fp16 matmuls (block pointers, host
and device-made descriptors) for several shapes including ragged edges and unaligned strides, 2-D and
3-D descriptor copies with ragged edges, out-of-bounds stores dropped, padding, and the launch fast path.

On sm_90a aligned host descriptors may take the Hopper TMA lowering and the others the generic
(masked load/store) one: the same tests cover both."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

import kernelc  # noqa: E402
from kernelc import TensorDescriptor  # noqa: E402
from tests import block_kernels as KS  # noqa: E402

# (M, N, K): square, multiples of the blocks, ragged on every dim, K not 16-byte aligned, a single row
SHAPES = [(512, 512, 512), (256, 384, 128), (300, 200, 136), (77, 45, 83), (1, 64, 17)]
CONFIGS = [dict(BM=128, BN=128, BK=64, num_warps=4, num_stages=3), dict(BM=64, BN=64, BK=32, num_warps=4, num_stages=2)]


def _inputs(M, N, K, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(M, K, device="cuda", dtype=torch.float16, generator=g)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16, generator=g)
    return a, b, (a.float() @ b.float()).half()


def _grid(M, N, cfg):
    return (kernelc.cdiv(M, cfg["BM"]), kernelc.cdiv(N, cfg["BN"]))


@pytest.mark.parametrize("cfg", CONFIGS, ids=["128x128x64", "64x64x32"])
@pytest.mark.parametrize("M,N,K", SHAPES)
def test_block_pointer_matmul_fp16(M, N, K, cfg):
    a, b, ref = _inputs(M, N, K)
    c = torch.full((M, N), 7.0, device="cuda", dtype=torch.float16)
    KS.bp_matmul[_grid(M, N, cfg)](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                   c.stride(0), c.stride(1), **cfg)
    torch.testing.assert_close(c, ref, atol=2e-2, rtol=1e-2)


def test_block_pointer_matmul_transposed_operand():
    M, N, K = 192, 160, 96
    a, b, ref = _inputs(M, N, K, seed=1)
    at = a.t().contiguous().t()  # strides (1, M): the contiguous dim is M
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    cfg = CONFIGS[1]
    KS.bp_matmul[_grid(M, N, cfg)](at, b, c, M, N, K, at.stride(0), at.stride(1), b.stride(0), b.stride(1),
                                   c.stride(0), c.stride(1), **cfg)
    torch.testing.assert_close(c, ref, atol=2e-2, rtol=1e-2)


@pytest.mark.parametrize("cfg", CONFIGS, ids=["128x128x64", "64x64x32"])
@pytest.mark.parametrize("M,N,K", SHAPES)
def test_host_descriptor_matmul_fp16(M, N, K, cfg):
    a, b, ref = _inputs(M, N, K, seed=2)
    c = torch.full((M, N), 7.0, device="cuda", dtype=torch.float16)
    BM, BN, BK = cfg["BM"], cfg["BN"], cfg["BK"]
    descs = (TensorDescriptor.from_tensor(a, [BM, BK]), TensorDescriptor.from_tensor(b, [BK, BN]),
             TensorDescriptor.from_tensor(c, [BM, BN]))
    KS.desc_matmul[_grid(M, N, cfg)](*descs, **cfg)
    torch.testing.assert_close(c, ref, atol=2e-2, rtol=1e-2)
    c.fill_(7.0)
    KS.desc_matmul[_grid(M, N, cfg)](*descs, **cfg)  # cached: the generated fast path
    torch.testing.assert_close(c, ref, atol=2e-2, rtol=1e-2)


@pytest.mark.parametrize("M,N,K", SHAPES)
def test_device_descriptor_matmul_fp16(M, N, K):
    a, b, ref = _inputs(M, N, K, seed=3)
    c = torch.full((M, N), 7.0, device="cuda", dtype=torch.float16)
    cfg = CONFIGS[0]
    KS.dev_desc_matmul[_grid(M, N, cfg)](a, b, c, M, N, K, **cfg)
    torch.testing.assert_close(c, ref, atol=2e-2, rtol=1e-2)


@pytest.mark.parametrize("dtype,block", [(torch.float16, [64, 64]), (torch.float32, [32, 64]), (torch.bfloat16, [16, 128])])
@pytest.mark.parametrize("shape", [(70, 45), (128, 256), (1000, 300), (33, 8)])
def test_descriptor_copy_2d_ragged(shape, dtype, block):
    x = torch.randn(shape, device="cuda").to(dtype)
    y = torch.zeros_like(x)
    grid = (kernelc.cdiv(shape[0], block[0]), kernelc.cdiv(shape[1], block[1]))
    KS.desc_copy[grid](TensorDescriptor.from_tensor(x, block), TensorDescriptor.from_tensor(y, block),
                       BM=block[0], BN=block[1])
    torch.testing.assert_close(y, x, atol=0, rtol=0)


def test_descriptor_store_drops_out_of_bounds_elements():
    x = torch.arange(64 * 64, device="cuda", dtype=torch.float32).reshape(64, 64)
    buf = torch.full((64, 128), -1.0, device="cuda")
    dst = TensorDescriptor(buf, [50, 70], [128, 1], [32, 32])  # the top-left 50 x 70 of buf
    KS.desc_copy[(2, 3)](TensorDescriptor.from_tensor(x, [32, 32]), dst, BM=32, BN=32)
    ref = torch.full((64, 128), -1.0, device="cuda")
    ref[:50, :70] = 0  # inside dst, outside x: x's padding
    ref[:50, :64] = x[:50, :64]
    torch.testing.assert_close(buf, ref, atol=0, rtol=0)


def test_descriptor_transpose_ragged():
    x = torch.randn(100, 70, device="cuda")
    y = torch.zeros(70, 100, device="cuda")
    KS.desc_transpose[(kernelc.cdiv(100, 32), kernelc.cdiv(70, 64))](
        TensorDescriptor.from_tensor(x, [32, 64]), TensorDescriptor.from_tensor(y, [64, 32]), BM=32, BN=64)
    torch.testing.assert_close(y, x.t(), atol=0, rtol=0)


def test_descriptor_copy_3d_ragged():
    x = torch.randn(5, 20, 100, device="cuda")
    y = torch.zeros_like(x)
    KS.desc_copy3[(kernelc.cdiv(5, 2), kernelc.cdiv(20, 8), kernelc.cdiv(100, 32))](
        TensorDescriptor.from_tensor(x, [2, 8, 32]), TensorDescriptor.from_tensor(y, [2, 8, 32]), B0=2, B1=8, B2=32)
    torch.testing.assert_close(y, x, atol=0, rtol=0)


@pytest.mark.parametrize("pad", ["zero", "nan"])
def test_descriptor_padding(pad):
    x = torch.ones(40, 24, device="cuda")
    y = torch.zeros(64, 32, device="cuda")
    KS.desc_copy[(1, 1)](TensorDescriptor.from_tensor(x, [64, 32], padding=pad), TensorDescriptor.from_tensor(y, [64, 32]),
                         BM=64, BN=32)
    ref = torch.full((64, 32), float("nan") if pad == "nan" else 0.0, device="cuda")
    ref[:40, :24] = 1
    torch.testing.assert_close(y, ref, atol=0, rtol=0, equal_nan=True)
    z = torch.zeros(16, 16, device="cuda")
    KS.dev_desc_pad[(1,)](x, z, 40, 24, 32, 16, BM=16, BN=16, PAD=pad)
    ref = torch.full((16, 16), float("nan") if pad == "nan" else 0.0, device="cuda")
    ref[:8, :8] = 1
    torch.testing.assert_close(z, ref, atol=0, rtol=0, equal_nan=True)


@pytest.mark.parametrize("check,pad", [((0, 1), "nan"), ((0,), "zero"), ((1,), "nan")])
def test_block_pointer_boundary_check_and_padding(check, pad):
    M, N, BM, BN = 20, 24, 16, 16
    big = torch.arange(40 * 32, device="cuda", dtype=torch.float32).reshape(40, 32)  # reads past M/N stay inside
    y = torch.zeros(BM, BN, device="cuda")
    KS.bp_load_store[(1,)](big, y, M, N, 32, 12, 16, BM=BM, BN=BN, CHECK=check, PAD=pad)
    ref = big[12:28, 16:32].clone()
    fill = float("nan") if pad == "nan" else 0.0
    if 0 in check:
        ref[M - 12:, :] = fill
    if 1 in check:
        ref[:, N - 16:] = fill
    torch.testing.assert_close(y, ref, atol=0, rtol=0, equal_nan=True)


def test_block_pointer_store_drops_out_of_bounds_elements():
    buf = torch.full((32, 32), -1.0, device="cuda")
    x = torch.arange(256, device="cuda", dtype=torch.float32).reshape(16, 16) + 1
    KS.bp_store_checked[(1,)](x, buf, 20, 21, 32, 8, 12, BM=16, BN=16)
    ref = torch.full((32, 32), -1.0, device="cuda")
    ref[8:20, 12:21] = x[:12, :9]
    torch.testing.assert_close(buf, ref, atol=0, rtol=0)
