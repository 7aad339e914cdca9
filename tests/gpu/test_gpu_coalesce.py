"""Coalesced stores on the GPU: transposes and permutes (several dtypes, masked non-power-of-two
shapes) against torch, with the conversion the coalescing pass inserts checked in the compiled IR."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

import kernelc  # noqa: E402
import kernelc.language as kl  # noqa: E402
from examples.kernels import memory_bound as K  # noqa: E402
from tests.compiler.transpose_kernels import permute021_3d_kernel  # noqa: E402

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.int64]


def _rand(shape, dtype):
    if dtype.is_floating_point:
        return torch.randn(shape, device="cuda").to(dtype)
    return torch.randint(-100, 100, shape, device="cuda").to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,block", [((1024, 512), (64, 64)), ((1000, 777), (64, 64)), ((33, 65), (32, 64)),
                                         ((8192, 129), (128, 32))])
def test_transpose(dtype, shape, block):
    x = _rand(shape, dtype)
    y = K.transpose(x, BLOCK_M=block[0], BLOCK_N=block[1])
    torch.testing.assert_close(y, x.t().contiguous(), atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(4, 256, 512), (3, 100, 130), (1, 7, 1000)])
def test_permute_021(dtype, shape):
    x = _rand(shape, dtype)
    want = x.permute(0, 2, 1).contiguous()
    torch.testing.assert_close(K.permute021(x), want, atol=0, rtol=0)
    y = torch.empty_like(want)
    B, M, N = shape
    grid = (kernelc.cdiv(M, 64), kernelc.cdiv(N, 64), kernelc.cdiv(B, 2))
    permute021_3d_kernel[grid](x, y, B, M, N, BLOCK_B=2, BLOCK_M=64, BLOCK_N=64)
    torch.testing.assert_close(y, want, atol=0, rtol=0)


@kernelc.jit
def scaled_transpose(x_ptr, y_ptr, M, N, BLOCK_M: kl.constexpr, BLOCK_N: kl.constexpr):
    # an elementwise chain and a row-vector broadcast between the load and the transposed store
    offs_m = kl.program_id(0) * BLOCK_M + kl.arange(0, BLOCK_M)
    offs_n = kl.program_id(1) * BLOCK_N + kl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    x = kl.load(x_ptr + offs_m[:, None] * N + offs_n[None, :], mask=mask, other=0.0)
    rowmax = kl.max(x, axis=1)
    y = kl.exp(x - rowmax[:, None]) * 2.0 + offs_n[None, :].to(kl.float32)
    kl.store(y_ptr + offs_n[None, :] * M + offs_m[:, None], y, mask=mask)


def test_transpose_of_computed_values():
    M, N = 300, 64
    x = torch.randn(M, N, device="cuda")
    y = torch.empty(N, M, device="cuda")
    scaled_transpose[(kernelc.cdiv(M, 64), 1)](x, y, M, N, BLOCK_M=64, BLOCK_N=64)
    want = (torch.exp(x - x.max(1, keepdim=True).values) * 2 + torch.arange(N, device="cuda")).t()
    torch.testing.assert_close(y, want)


def test_compiled_transpose_for_this_gpu_has_one_conversion_and_128_bit_stores():
    ck = kernelc.compile(K.transpose_kernel, dict(x_ptr="*fp32", y_ptr="*fp32", M="i32", N="i32", stride_xm="i32",
                                                  stride_ym="i32"), dict(BLOCK_M=64, BLOCK_N=64),
                         divisibility=dict(M=16, N=16, stride_xm=16, stride_ym=16))
    assert ck.asm["tir"].count("convert_layout") == 1
    assert "STG.E.128" in ck.asm["sass"]


def test_memory_bound_kernels_match_torch_on_the_gpu(monkeypatch):
    """Every bench_memory_bound case at its small (smoke) sizes, on the GPU, against its torch reference."""
    import bench.bench_memory_bound as B
    monkeypatch.setattr(B, "SMOKE", True)
    monkeypatch.setattr(B, "DEV", "cuda")
    bad = {}
    for name, (make, call, ref, _) in B.cases().items():
        args = make()
        err = B._err(call(K, *[a.clone() for a in args]), ref(*args))
        if not err < 5e-2:
            bad[name] = err
    assert not bad, bad


@kernelc.jit
def transpose_compare(x_ptr, y_ptr, M, N, BLOCK_M: kl.constexpr, BLOCK_N: kl.constexpr):
    # an i1 tile converted through shared memory (as bytes) before its transposed store
    offs_m = kl.program_id(0) * BLOCK_M + kl.arange(0, BLOCK_M)
    offs_n = kl.program_id(1) * BLOCK_N + kl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    x = kl.load(x_ptr + offs_m[:, None] * N + offs_n[None, :], mask=mask, other=0.0)
    kl.store(y_ptr + offs_n[None, :] * M + offs_m[:, None], x > 0, mask=mask)


@pytest.mark.parametrize("num_warps", [1, 4, 8])
def test_transposed_bool_store(num_warps):
    M, N = 200, 130
    x = torch.randn(M, N, device="cuda")
    y = torch.zeros(N, M, device="cuda", dtype=torch.bool)
    transpose_compare[(kernelc.cdiv(M, 64), kernelc.cdiv(N, 64))](x, y, M, N, BLOCK_M=64, BLOCK_N=64,
                                                                  num_warps=num_warps)
    assert torch.equal(y, (x > 0).t())


@kernelc.jit
def rows_minus_mean_transposed(x_ptr, y_ptr, M, N, BLOCK_M: kl.constexpr, BLOCK_N: kl.constexpr):
    # a reduction along dim 0, broadcast back, stored transposed: slice layouts meet the conversion
    offs_m = kl.arange(0, BLOCK_M)
    offs_n = kl.program_id(0) * BLOCK_N + kl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    x = kl.load(x_ptr + offs_m[:, None] * N + offs_n[None, :], mask=mask, other=0.0)
    mean = kl.sum(x, axis=0) / M
    kl.store(y_ptr + offs_n[None, :] * M + offs_m[:, None], x - mean[None, :], mask=mask)


@pytest.mark.parametrize("num_warps", [1, 4, 8])
def test_reduction_then_transposed_store(num_warps):
    M, N = 60, 300
    x = torch.randn(M, N, device="cuda")
    y = torch.empty(N, M, device="cuda")
    rows_minus_mean_transposed[(kernelc.cdiv(N, 64),)](x, y, M, N, BLOCK_M=64, BLOCK_N=64, num_warps=num_warps)
    torch.testing.assert_close(y, (x - x.mean(0, keepdim=True)).t())
