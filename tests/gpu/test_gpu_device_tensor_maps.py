"""Descriptors made in the kernel on the GPU (codegen/device_tensor_map.py): on sm_90a each program
builds their CUtensorMaps in global scratch and copies through TMA. Checked against torch for ragged
shapes, every element size, zero/NaN padding, the warp-specialised persistent matmul, and the maps
themselves against the driver's ``cuTensorMapEncodeTiled``."""
import dataclasses

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

from examples.kernels import matmul_persistent as MP  # noqa: E402
from tests import block_kernels as BK  # noqa: E402
from tests.compiler import tma_kernels as TK  # noqa: E402


def _hopper():
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


@pytest.mark.parametrize("M,N,K", [(256, 256, 256), (200, 144, 80), (1000, 528, 1040), (64, 16, 16), (130, 72, 72)])
def test_made_descriptor_matmul_matches_torch(M, N, K):
    torch.manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float32)
    grid = ((M + 127) // 128, (N + 127) // 128)
    ck = BK.dev_desc_matmul[grid](a, b, c, M, N, K, BM=128, BN=128, BK=64, num_warps=4)
    torch.testing.assert_close(c, a.float() @ b.float(), atol=0.05 * K ** 0.5, rtol=1e-2)
    if _hopper():  # K % 16 == 0: a's rows are 16-byte aligned; N % 16 == 0: so are b's and c's
        want = (K % 16 == 0) + 2 * (N % 16 == 0)
        assert ck.global_scratch_bytes == 128 * want


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("M,N,K", [(1024, 1024, 1024), (1000, 1040, 1008), (257, 136, 520), (128, 128, 16)])
@pytest.mark.parametrize("ws", [False, True])
def test_made_descriptor_persistent_matmul_matches_torch(dtype, M, N, K, ws):
    torch.manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=dtype)
    b = torch.randn(K, N, device="cuda", dtype=dtype)
    c = MP.matmul_descriptor_persistent(a, b, warp_specialize=ws, BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, num_warps=8,
                                        num_stages=3)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=0.05 * K ** 0.5, rtol=1e-2)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.int32, torch.int8,
                                   torch.float8_e4m3fn])
@pytest.mark.parametrize("M,N", [(96, 128), (70, 80), (33, 16)])
def test_made_descriptor_batched_copy_is_exact(dtype, M, N):
    torch.manual_seed(0)
    B, BM, BN = 3, 32, 64
    stride_b = (M * N + 15) // 16 * 16
    src = torch.randn(B * stride_b, device="cuda").mul(50).to(dtype)
    dst = torch.zeros_like(src)
    grid = ((M + BM - 1) // BM, (N + BN - 1) // BN, B)
    ck = TK.made_desc_batched_copy[grid](src, dst, M, N, stride_b, BM=BM, BN=BN)
    x = src.view(torch.uint8) if dtype == torch.float8_e4m3fn else src
    y = dst.view(torch.uint8) if dtype == torch.float8_e4m3fn else dst
    for b in range(B):
        lo = b * stride_b
        assert torch.equal(y[lo:lo + M * N], x[lo:lo + M * N])
        assert not y[lo + M * N:(b + 1) * stride_b].any()  # nothing written past a matrix
    if _hopper():
        eb = src.element_size()
        assert ck.global_scratch_bytes == (256 if (N * eb) % 16 == 0 else 0)


@pytest.mark.parametrize("pad", ["zero", "nan"])
def test_made_descriptor_padding(pad):
    M, N = 50, 48
    x = torch.randn(M, N, device="cuda")
    y = torch.empty(32, 32, device="cuda")
    ck = BK.dev_desc_pad[(1,)](x, y, M, N, 40, 32, BM=32, BN=32, PAD=pad)
    want = torch.full((32, 32), 0.0 if pad == "zero" else float("nan"), device="cuda")
    want[:10, :16] = x[40:, 32:]
    torch.testing.assert_close(y, want, equal_nan=True)
    if _hopper():
        assert ck.global_scratch_bytes == 128


def test_device_built_map_equals_the_drivers_encoding():
    """The 128 bytes a program builds match ``cuTensorMapEncodeTiled``'s for the same tensor in every
    byte the ``tensormap.replace`` fields cover. Seen on an H200 (driver 580, 2026-11-22): the driver
    also sets a type-dependent bit in byte 65 (0x10 fp16, 0x20 fp32, 0x40 bf16) and 0x04 in byte 73,
    which no replace field writes; the copies through the device-built maps are exact without them
    (the tests above). L2 promotion (byte 10) is left at none on the device."""
    if not _hopper():
        pytest.skip("sm_90a only")
    from kernelc.runtime import scratch
    from kernelc.runtime.tensor_map import encode, tensor_map_params
    for M, N, bm, bn, dt, name in ((70, 80, 32, 64, torch.float16, "fp16"), (1000, 512, 64, 32, torch.float32, "fp32"),
                                   (256, 256, 128, 64, torch.bfloat16, "bf16")):
        x = torch.randn(M * N, device="cuda").to(dt)
        y = torch.zeros_like(x)
        ck = TK.made_desc_batched_copy[(1, 1, 1)](x, y, M, N, M * N, BM=bm, BN=bn)
        torch.cuda.synchronize()
        assert ck.global_scratch_bytes == 256
        buf = scratch._buffers[(torch.cuda.current_device(), torch.cuda.current_stream().cuda_stream)]
        built = bytes(buf[:128].cpu().numpy().tobytes())  # program 0's first map: the source
        ref = encode(dataclasses.replace(tensor_map_params(name, x.data_ptr(), [M, N], [N, 1], [bm, bn]),
                                         l2_promotion=0))
        diffs = [(i, built[i], ref[i]) for i in range(128) if built[i] != ref[i]]
        assert [i for i, _, _ in diffs] == [65, 73] and all(b == 0 for _, b, _ in diffs), diffs
