"""Max/min block reductions as ``redux.sync`` (passes/reduce_xwarp.py, KERNELC_REDUCE_REDUX) and the broadcast
combine in warp 0 only (KERNELC_REDUCE_W0) on the GPU: f32 maxima and minima with -inf, +inf, -0.0/+0.0, NaN among
the values and a row of NaN only, i32 and u32 (values past 2^31) maxima and minima, over 1-32 warps and under
each cross-warp form; and softmax rows bit for bit against the build without the knobs.

Run on an sm_90 machine: ``python -m pytest -q tests/gpu/test_gpu_reduce_redux.py``.
"""
import math

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

import kernelc  # noqa: E402
import kernelc.language as kl  # noqa: E402


def _minmax(x_ptr, i_ptr, u_ptr, out_ptr, iout_ptr, uout_ptr, BLOCK: kl.constexpr):
    r = kl.arange(0, BLOCK)
    x = kl.load(x_ptr + r)
    i = kl.load(i_ptr + r)
    u = kl.load(u_ptr + r).to(kl.uint32, bitcast=True)   # an unsigned max/min: umax/umin
    kl.store(out_ptr + 0, kl.max(x, 0))
    kl.store(out_ptr + 1, kl.min(x, 0))
    kl.store(iout_ptr + 0, kl.max(i, 0))
    kl.store(iout_ptr + 1, kl.min(i, 0))
    kl.store(uout_ptr + 0, kl.max(u, 0).to(kl.int32, bitcast=True))
    kl.store(uout_ptr + 1, kl.min(u, 0).to(kl.int32, bitcast=True))


def _case(kind, B, g):
    x = torch.randn(B, device="cuda", generator=g)
    if kind == "specials":   # NaN, the infinities and zeros of both signs among the values
        x[::97] = float("nan")
        x[5], x[B - 3] = float("-inf"), float("-inf")
        x[11] = -0.0
    elif kind == "inf":
        x[7] = float("inf")
        x[B // 2] = float("-inf")
    elif kind == "zeros":   # the extremes are zeros of both signs
        x = torch.zeros(B, device="cuda")
        x[1::2] = -0.0
    elif kind == "allnan":
        x = torch.full((B,), float("nan"), device="cuda")
    elif kind == "neg":
        x = -x.abs() - 1
    return x


def _ref(x, f):
    v = x[~torch.isnan(x)]
    return float("nan") if v.numel() == 0 else f(v).item()


@pytest.mark.parametrize("w0", ["0", "1"])
@pytest.mark.parametrize("xwarp", ["broadcast", "allreduce"])
@pytest.mark.parametrize("num_warps", [1, 4, 16, 32])
@pytest.mark.parametrize("kind", ["plain", "specials", "inf", "zeros", "allnan", "neg"])
def test_max_min(kind, num_warps, xwarp, w0, monkeypatch):
    monkeypatch.setenv("KERNELC_REDUCE_REDUX", "1")
    monkeypatch.setenv("KERNELC_REDUCE_W0", w0)
    monkeypatch.setenv("KERNELC_REDUCE_XWARP", xwarp)
    kern = kernelc.jit(_minmax)   # a fresh JIT: compiled under this environment
    B = 4096
    g = torch.Generator(device="cuda").manual_seed(num_warps)
    x = _case(kind, B, g)
    i = torch.randint(-2 ** 31, 2 ** 31 - 1, (B,), device="cuda", dtype=torch.int32, generator=g)
    u = torch.randint(-2 ** 31, 2 ** 31 - 1, (B,), device="cuda", dtype=torch.int32, generator=g)
    out = torch.empty(2, device="cuda")
    iout = torch.empty(2, device="cuda", dtype=torch.int32)
    uout = torch.empty(2, device="cuda", dtype=torch.int32)
    kern[(1,)](x, i, u, out, iout, uout, BLOCK=B, num_warps=num_warps)
    for got, want in ((out[0].item(), _ref(x, torch.max)), (out[1].item(), _ref(x, torch.min))):
        assert (math.isnan(got) and math.isnan(want)) or got == want, (got, want)
    assert iout.tolist() == [i.max().item(), i.min().item()]
    uu = u.long() & 0xFFFFFFFF
    assert [v & 0xFFFFFFFF for v in uout.tolist()] == [uu.max().item(), uu.min().item()]


def _softmax(x_ptr, y_ptr, stride, BLOCK: kl.constexpr):
    row = kl.program_id(0)
    r = kl.arange(0, BLOCK)
    x = kl.load(x_ptr + row * stride + r).to(kl.float32)
    e = kl.exp(x - kl.max(x, 0))
    kl.store(y_ptr + row * stride + r, (e / kl.sum(e, 0)).to(y_ptr.dtype.element_ty))


@pytest.mark.parametrize("knobs", [("1", "0"), ("0", "1"), ("1", "1")])
def test_softmax_rows_bit_for_bit(knobs, monkeypatch):
    R, B = 64, 8192
    x = (torch.randn(R, B, device="cuda") * 3).half()
    x[3, ::7] = float("-inf")
    ys = []
    for redux, w0 in (("0", "0"), knobs):
        monkeypatch.setenv("KERNELC_REDUCE_REDUX", redux)
        monkeypatch.setenv("KERNELC_REDUCE_W0", w0)
        y = torch.empty_like(x)
        kernelc.jit(_softmax)[(R,)](x, y, x.stride(0), BLOCK=B, num_warps=16)
        ys.append(y)
    assert torch.equal(ys[0], ys[1])
    yr = torch.softmax(x.double(), 1)
    assert (ys[1].double() - yr).abs().max().item() < 1e-3
