"""On the GPU: a store masked by a triangle (cols[None, :] < rows[:, None]) writes exactly the triangle, and
causal attention computes the same under KERNELC_UNIFORM_MASKS=all as under the default (before 2026-11-28's
axis_info fix the first wrote up to 3 elements past the diagonal and the second differed by up to 4.7)."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

from tests.compiler.test_axis_info_expand import _tril_store  # noqa: E402


def test_triangular_masked_store_writes_the_triangle():
    B = 64
    x = torch.randn(4 * B, B, device="cuda")
    y = torch.zeros_like(x)
    _tril_store[(4,)](x, y, BLOCK=B)
    rows = torch.arange(4 * B, device="cuda")[:, None]
    cols = torch.arange(B, device="cuda")[None, :]
    torch.testing.assert_close(y, torch.where(cols < rows, x, torch.zeros_like(x)), rtol=0, atol=0)


def test_causal_attention_is_the_same_under_uniform_masks_all(monkeypatch):
    from examples.kernels import attention
    from kernelc.runtime.launcher import get_state
    q, k, v = (torch.randn(1, 2, 512, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    ref = attention.attention(q, k, v, causal=True)
    monkeypatch.setenv("KERNELC_UNIFORM_MASKS", "all")
    get_state(attention.attn_fwd_kernel)["cache"].clear()   # compile knobs are not in the in-memory key
    try:
        out = attention.attention(q, k, v, causal=True)
    finally:
        get_state(attention.attn_fwd_kernel)["cache"].clear()
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-2)   # the same math; the bug differed by 4.7
