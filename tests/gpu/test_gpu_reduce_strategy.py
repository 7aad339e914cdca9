"""Both ways of combining a block's warps (``KERNELC_BLOCK_REDUCE``, passes/reduce_strategy.py) against torch: sums,
maxima and argmax (two values combined together) of rows read by 2 to 16 warps, and the row softmax."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

import kernelc  # noqa: E402
import kernelc.language as kl  # noqa: E402
from examples.kernels import softmax as S  # noqa: E402


@kernelc.jit
def row_stats(x_ptr, out_ptr, idx_ptr, n, BLOCK: kl.constexpr):
    row = kl.program_id(0)
    offs = kl.arange(0, BLOCK)
    x = kl.load(x_ptr + row * n + offs, mask=offs < n, other=0.0)
    kl.store(out_ptr + row * 2, kl.sum(x, axis=0))
    kl.store(out_ptr + row * 2 + 1, kl.max(kl.where(offs < n, x, -float("inf")), axis=0))
    kl.store(idx_ptr + row, kl.argmax(kl.where(offs < n, x, -float("inf")), axis=0))


@pytest.mark.parametrize("mode", ["butterfly", "gather"])
@pytest.mark.parametrize("warps", [2, 4, 8, 16])
def test_row_reductions(monkeypatch, mode, warps):
    monkeypatch.setenv("KERNELC_BLOCK_REDUCE", mode)
    monkeypatch.setenv("KERNELC_CACHE_DIR", str(__import__("tempfile").mkdtemp()))
    rows, n = 37, 4000
    x = torch.randn(rows, n, device="cuda")
    out = torch.empty(rows, 2, device="cuda")
    idx = torch.empty(rows, dtype=torch.int32, device="cuda")
    row_stats[(rows,)](x, out, idx, n, BLOCK=4096, num_warps=warps)
    torch.testing.assert_close(out[:, 0], x.sum(1), atol=1e-3, rtol=1e-4)
    torch.testing.assert_close(out[:, 1], x.max(1).values, atol=0, rtol=0)
    assert torch.equal(idx.long(), x.argmax(1))


@pytest.mark.parametrize("mode", ["butterfly", "gather"])
def test_softmax(monkeypatch, mode):
    monkeypatch.setenv("KERNELC_BLOCK_REDUCE", mode)
    monkeypatch.setenv("KERNELC_CACHE_DIR", str(__import__("tempfile").mkdtemp()))
    x = torch.randn(1000, 4096, device="cuda")
    torch.testing.assert_close(S.softmax(x), torch.softmax(x, 1), atol=1e-6, rtol=1e-5)
