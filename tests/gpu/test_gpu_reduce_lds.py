"""Block reductions crossing warps in the ``lds`` form (passes/reduce_xwarp.py, KERNELC_REDUCE_XWARP) on the GPU,
against torch: sums, maxima, minima, an argmax and integer sums over 4, 8, 16 and 32 warps, and softmax rows and
their backward.

Run on an sm_90 machine: ``python -m pytest -q tests/gpu/test_gpu_reduce_lds.py``.
"""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

import kernelc  # noqa: E402
import kernelc.language as kl  # noqa: E402


def _row_stats(x_ptr, i_ptr, out_ptr, BLOCK: kl.constexpr):
    r = kl.arange(0, BLOCK)
    x = kl.load(x_ptr + r)
    i = kl.load(i_ptr + r)
    kl.store(out_ptr + 0, kl.sum(x, 0))
    kl.store(out_ptr + 1, kl.max(x, 0))
    kl.store(out_ptr + 2, kl.argmax(x, 0).to(kl.float32))
    kl.store(out_ptr + 3, kl.sum(i, 0).to(kl.float32))
    kl.store(out_ptr + 4, kl.min(x, 0))


@pytest.mark.parametrize("xwarp", ["lds"])
@pytest.mark.parametrize("num_warps", [4, 8, 16, 32])
def test_block_reductions(xwarp, num_warps, monkeypatch):
    monkeypatch.setenv("KERNELC_REDUCE_XWARP", xwarp)
    kern = kernelc.jit(_row_stats)   # a fresh JIT: compiled under this environment
    B = 8192
    g = torch.Generator(device="cuda").manual_seed(num_warps)
    x = torch.randn(B, device="cuda", generator=g)
    i = torch.randint(-1000, 1000, (B,), device="cuda", dtype=torch.int32, generator=g)
    out = torch.empty(5, device="cuda")
    kern[(1,)](x, i, out, BLOCK=B, num_warps=num_warps)
    assert abs(out[0].item() - x.double().sum().item()) < 1e-3
    assert out[1].item() == x.max().item() and out[4].item() == x.min().item()
    assert int(out[2].item()) == int(x.argmax().item())
    assert int(out[3].item()) == int(i.long().sum().item())


def _softmax(x_ptr, y_ptr, stride, BLOCK: kl.constexpr):
    row = kl.program_id(0)
    r = kl.arange(0, BLOCK)
    x = kl.load(x_ptr + row * stride + r)
    e = kl.exp(x - kl.max(x, 0))
    y = e / kl.sum(e, 0)
    kl.store(y_ptr + row * stride + r, y)   # two reductions (broadcast under multi); the backward's one


def _softmax_bwd(y_ptr, dy_ptr, dx_ptr, stride, BLOCK: kl.constexpr):
    row = kl.program_id(0)
    r = kl.arange(0, BLOCK)
    y = kl.load(y_ptr + row * stride + r)
    dy = kl.load(dy_ptr + row * stride + r)
    kl.store(dx_ptr + row * stride + r, y * (dy - kl.sum(y * dy, 0)))


@pytest.mark.parametrize("xwarp", ["multi", "lds", "multi_lds"])
def test_softmax_rows(xwarp, monkeypatch):
    monkeypatch.setenv("KERNELC_REDUCE_XWARP", xwarp)
    fwd, bwd = kernelc.jit(_softmax), kernelc.jit(_softmax_bwd)
    R, B = 64, 8192
    x = torch.randn(R, B, device="cuda") * 3
    dy = torch.randn(R, B, device="cuda")
    y, dx = torch.empty_like(x), torch.empty_like(x)
    fwd[(R,)](x, y, x.stride(0), BLOCK=B, num_warps=16)
    bwd[(R,)](y, dy, dx, x.stride(0), BLOCK=B, num_warps=16)
    yr = torch.softmax(x.double(), 1)
    assert ((y.double() - yr).abs() <= 5e-5 * yr + 1e-12).all()
    dxr = y.double() * (dy.double() - (y.double() * dy.double()).sum(1, keepdim=True))
    assert (dx.double() - dxr).abs().max().item() < 1e-5
