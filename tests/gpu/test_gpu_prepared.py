"""Prepared launches (``kernel.prepare``, runtime/prepared.py) on the GPU: calls after the first take the prepared
body (not the general path) and compute with their own tensors; a misaligned view falls back and is still right;
the attention forwards' plans (which launch through them) give each call's output.

Run on an sm_90 machine: ``python -m pytest -q tests/gpu/test_gpu_prepared.py``.
"""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

import kernelc  # noqa: E402
import kernelc.language as kl  # noqa: E402


@kernelc.jit
def _axpy(x_ptr, y_ptr, n, a, BLOCK: kl.constexpr):
    offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
    m = offs < n
    kl.store(y_ptr + offs, kl.load(y_ptr + offs, mask=m) + a * kl.load(x_ptr + offs, mask=m), mask=m)


def test_prepared_launches_use_each_calls_tensors():
    n = 1000
    x, y = torch.randn(n, device="cuda"), torch.zeros(n, device="cuda")
    launch = _axpy.prepare((4,), x, y, n, 2.0, 256)
    launch(x, y)
    assert launch.__globals__["_S"][0] is not None  # specialised to the compiled entry
    for _ in range(3):
        x2, y2 = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        want = y2 + 2.0 * x2
        launch(x2, y2)
        torch.testing.assert_close(y2, want)
    big = torch.randn(n + 1, device="cuda")
    y3 = torch.zeros(n, device="cuda")
    launch(big[1:], y3)  # 4 bytes in: another specialisation, through the general path
    torch.testing.assert_close(y3, 2.0 * big[1:])


def test_attention_plans_give_each_calls_output():
    from examples.kernels import attention as A
    from examples.kernels import attention_fa3 as AF
    SDPA = torch.nn.functional.scaled_dot_product_attention
    for _ in range(2):
        q, k, v = (torch.randn(1, 2, 256, 64, device="cuda", dtype=torch.float16) for _ in range(3))
        ref = SDPA(q.float(), k.float(), v.float(), is_causal=True)
        for f in (A.attention_fwd, AF.attention):
            torch.testing.assert_close(f(q, k, v, True).float(), ref, rtol=1e-2, atol=2e-3)
