"""GPU: the Triton-tutorial kernels 01-05 and fused attention match torch."""
import math

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

from examples.kernels import attention, dropout, layernorm, matmul, softmax, vector_add  # noqa: E402


def _rel(out, ref):
    return ((out.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30)).item()


@pytest.mark.parametrize("n", [1, 98432, 1 << 20, 1000003])
def test_vector_add(n):
    x = torch.rand(n, device="cuda")
    y = torch.rand(n, device="cuda")
    out = vector_add.add(x, y)
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)


@pytest.mark.parametrize("shape", [(1823, 781), (4096, 4096), (8192, 1024), (7, 3), (64, 4099)])
def test_softmax(shape):
    x = torch.randn(*shape, device="cuda")
    torch.testing.assert_close(softmax.softmax(x), torch.softmax(x, dim=1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("mnk", [(512, 512, 512), (1000, 777, 333), (128, 256, 64), (257, 129, 96)])
def test_matmul_configs(dtype, mnk):
    M, N, K = mnk
    a = torch.randn(M, K, device="cuda", dtype=dtype)
    b = torch.randn(K, N, device="cuda", dtype=dtype)
    ref = (a.float() @ b.float())
    for cfg in matmul.get_configs():
        out = matmul.matmul(a, b, **cfg.kwargs, num_warps=cfg.num_warps, num_stages=cfg.num_stages)
        assert _rel(out, ref) < 1e-2, (cfg, _rel(out, ref))


@pytest.mark.parametrize("b_k_major", [False, True])
def test_matmul_fp32_tf32(b_k_major):
    # fp32 operands run as tf32; B either N-contiguous (transposed through registers) or K-contiguous
    a = torch.randn(512, 256, device="cuda")
    b = torch.randn(384, 256, device="cuda").t() if b_k_major else torch.randn(256, 384, device="cuda")
    c = torch.empty(512, 384, device="cuda")
    grid = (kernelc_cdiv(512, 64) * kernelc_cdiv(384, 64),)
    matmul.matmul_kernel[grid](a, b, c, 512, 384, 256, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                               c.stride(0), c.stride(1), BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=32,
                               GROUP_SIZE_M=4, num_warps=4, num_stages=3)
    assert _rel(c, a.double() @ b.double()) < 3e-3


def kernelc_cdiv(a, b):
    return (a + b - 1) // b


def test_matmul_autotuned_and_activation():
    a = torch.randn(1024, 512, device="cuda", dtype=torch.float16)
    b = torch.randn(512, 768, device="cuda", dtype=torch.float16)
    out = matmul.matmul(a, b, activation="leaky_relu")
    ref = torch.nn.functional.leaky_relu(a.float() @ b.float(), 0.01)
    assert _rel(out, ref) < 1e-2


def test_matmul_transposed_operands():
    a = torch.randn(256, 384, device="cuda", dtype=torch.float16).t()  # A [384, 256] with M contiguous
    b = torch.randn(192, 256, device="cuda", dtype=torch.float16).t()  # K-major B
    out = matmul.matmul(a, b, BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=32, GROUP_SIZE_M=4)
    assert _rel(out, a.float() @ b.float()) < 1e-2


def test_dropout_matches_interpreter_bit_exact():
    x = torch.randn(100_000, device="cuda")
    out_gpu = dropout.seeded_dropout(x, 0.4, seed=123)
    import kernelc
    interp = kernelc.jit(dropout.seeded_dropout_kernel.fn, interpret=True)
    out_cpu = torch.empty_like(x).cpu()
    interp[(kernelc.cdiv(x.numel(), 1024),)](x.cpu(), out_cpu, x.numel(), 0.4, 123, BLOCK_SIZE=1024)
    # the random mask is bit-exact; kept values differ only by the fast fp32 division (<= 2 ulp)
    assert torch.equal(out_gpu.cpu() != 0, out_cpu != 0)
    torch.testing.assert_close(out_gpu.cpu(), out_cpu, rtol=3e-7, atol=0)
    keep = (out_gpu != 0).float().mean().item()
    assert 0.55 < keep < 0.65
    torch.testing.assert_close(out_gpu[out_gpu != 0], (x / 0.6)[out_gpu != 0])


@pytest.mark.parametrize("M,N", [(4096, 8192), (100, 1000), (3, 70000)])
def test_layernorm(M, N):
    x = torch.randn(M, N, device="cuda", dtype=torch.float16)
    w = torch.rand(N, device="cuda", dtype=torch.float16)
    b = torch.rand(N, device="cuda", dtype=torch.float16)
    y, mean, rstd = layernorm.layer_norm(x, w, b, 1e-5)
    ref = torch.nn.functional.layer_norm(x.float(), (N,), w.float(), b.float(), 1e-5)
    torch.testing.assert_close(y.float(), ref, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(mean, x.float().mean(1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("Z,H,N,D", [(2, 3, 1024, 64), (1, 2, 777, 128), (4, 32, 512, 128)])
def test_attention(causal, Z, H, N, D):
    q, k, v = (torch.randn(Z, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
    out = attention.attention(q, k, v, causal=causal)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    torch.testing.assert_close(out, ref, rtol=2e-2, atol=2e-2)
