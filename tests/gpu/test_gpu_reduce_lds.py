"""Block reductions crossing warps in the ``lds`` and ``lds4`` forms (passes/reduce_xwarp.py, KERNELC_REDUCE_XWARP)
and the softmax-form exp with ``ftz`` (KERNELC_EXP_FTZ=softmax) on the GPU, against torch: sums, maxima, an
argmax and integer sums over 4, 8, 16 and 32 warps, and a softmax row whose smallest results are below 2^-126.

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


@pytest.mark.parametrize("xwarp", ["lds", "lds4"])
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
    kl.store(y_ptr + row * stride + r, e / kl.sum(e, 0))


@pytest.mark.parametrize("xwarp", ["multi", "lds", "lds4"])
@pytest.mark.parametrize("ftz", ["off", "softmax"])
def test_softmax_rows(xwarp, ftz, monkeypatch):
    monkeypatch.setenv("KERNELC_REDUCE_XWARP", xwarp)
    monkeypatch.setenv("KERNELC_EXP_FTZ", ftz)
    kern = kernelc.jit(_softmax)
    R, B = 64, 2048
    x = torch.linspace(0.0, -100.0, B, device="cuda")[None, :].repeat(R, 1)   # exp down to e^-100 < 2^-126
    x += torch.randn(R, B, device="cuda") * 3
    y = torch.empty_like(x)
    kern[(R,)](x, y, x.stride(0), BLOCK=B, num_warps=16)
    want = torch.softmax(x.double(), 1)
    err = (y.double() - want).abs()
    # exp2.approx of x * log2(e) rounded in fp32: a relative error up to ~1e-5 at arguments near -100
    assert (err <= 5e-5 * want + 2.0 ** -126).all(), err.max().item()
    if ftz == "softmax":   # an exponential below 2^-126 is flushed: its result is 0
        ex = torch.exp(x.double() - x.double().max(1, keepdim=True).values)
        assert (ex < 2.0 ** -127).any() and (y[ex < 2.0 ** -127] == 0).all()
