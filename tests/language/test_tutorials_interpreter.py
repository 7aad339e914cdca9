"""Issue 2: our versions of Triton tutorials 01-05, written in Triton's spelling
(`import kernelc as triton; import kernelc.language as tl`), run in the CPU interpreter and match torch."""
import math

import pytest
import torch

import kernelc
from examples.kernels import dropout, layernorm, matmul, softmax, vector_add


@pytest.fixture(autouse=True)
def _interpret(monkeypatch):
    monkeypatch.setenv("KERNELC_INTERPRET", "1")


def test_imports_are_triton_compatible():
    import kernelc as triton
    import kernelc.language as tl
    for name in ("jit", "autotune", "heuristics", "Config", "cdiv", "next_power_of_2", "testing"):
        assert hasattr(triton, name), name
    for name in ("program_id", "arange", "load", "store", "dot", "sum", "max", "exp", "where", "constexpr",
                 "float16", "float32", "rand", "static_range", "zeros", "atomic_add", "reduce", "cumsum"):
        assert hasattr(tl, name), name


def test_01_vector_add():
    x, y = torch.rand(10_000), torch.rand(10_000)
    torch.testing.assert_close(vector_add.add(x, y), x + y, rtol=0, atol=0)


def test_02_fused_softmax():
    x = torch.randn(37, 129)
    torch.testing.assert_close(softmax.softmax(x), torch.softmax(x, dim=1), rtol=1e-5, atol=1e-6)


def test_03_matmul_with_autotune_decorator():
    a = torch.randn(96, 80, dtype=torch.float16)
    b = torch.randn(80, 72, dtype=torch.float16)
    c = matmul.matmul(a, b)  # autotuned kernel: the interpreter runs the first config
    assert matmul.matmul_autotuned.best_config == matmul.get_configs()[0]
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=1e-2)
    c2 = matmul.matmul(a, b, activation="leaky_relu", BLOCK_SIZE_M=32, BLOCK_SIZE_N=32, BLOCK_SIZE_K=32, GROUP_SIZE_M=2)
    ref = torch.nn.functional.leaky_relu(a.float() @ b.float(), 0.01)
    torch.testing.assert_close(c2.float(), ref, rtol=1e-2, atol=1e-2)


def test_04_low_memory_dropout():
    x = torch.randn(5000)
    out = dropout.seeded_dropout(x, p=0.5, seed=42)
    again = dropout.seeded_dropout(x, p=0.5, seed=42)
    other = dropout.seeded_dropout(x, p=0.5, seed=43)
    assert torch.equal(out, again)               # the seed determines the mask
    assert not torch.equal(out != 0, other != 0)
    kept = out != 0
    assert 0.45 < kept.float().mean().item() < 0.55
    torch.testing.assert_close(out[kept], x[kept] * 2)


def test_05_layer_norm_forward():
    x = torch.randn(6, 300)
    w, b = torch.rand(300), torch.rand(300)
    y, mean, rstd = layernorm.layer_norm(x, w, b, 1e-5)
    torch.testing.assert_close(y, torch.nn.functional.layer_norm(x, (300,), w, b, 1e-5), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(mean, x.mean(1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(rstd, 1 / torch.sqrt(x.var(1, unbiased=False) + 1e-5), rtol=1e-4, atol=1e-4)


def test_attention_forward():
    from examples.kernels import attention
    q, k, v = (torch.randn(1, 2, 40, 16, dtype=torch.float16) for _ in range(3))
    for causal in (False, True):
        out = attention.attention(q, k, v, causal=causal, BLOCK_M=16, BLOCK_N=16)
        ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
        torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=2e-2)
