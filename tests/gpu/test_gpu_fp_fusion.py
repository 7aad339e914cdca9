"""``enable_fp_fusion`` on the GPU, against the CPU interpreter.

The interpreter rounds every float op (numpy float32), which is the GPU's result with
``enable_fp_fusion=False``: that must match bit for bit. With fusion on (the default), ``x * y + z``
is one ``fma.rn``: rounded once, so it equals the exact value rounded to fp32, and it differs from the
interpreter's by at most half an ulp of the product ``x * y`` (the one rounding the fma skips) plus
half an ulp of each result. That bound is why the differential tests compare floats with a tolerance
relative to the operands' magnitude (``test_gpu_differential._close``: 1e-5 for values of order 1),
not bit for bit."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

import kernelc  # noqa: E402
import kernelc.language as kl  # noqa: E402


@kernelc.jit
def mul_add(X, Y, Z, Out, N, BLOCK: kl.constexpr):
    offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
    m = offs < N
    x = kl.load(X + offs, mask=m)
    y = kl.load(Y + offs, mask=m)
    z = kl.load(Z + offs, mask=m)
    kl.store(Out + offs, x * y + z, mask=m)


def _run(fusion, x, y, z):
    out = torch.empty_like(x)
    n = x.numel()
    kw = {} if fusion is None else {"enable_fp_fusion": fusion}
    mul_add[(triton_cdiv(n, 1024),)](x, y, z, out, n, BLOCK=1024, **kw)
    torch.cuda.synchronize()
    return out.cpu()


def triton_cdiv(a, b):
    return (a + b - 1) // b


def test_fusion_off_matches_interpreter_bit_for_bit_and_on_is_one_rounding():
    g = torch.Generator().manual_seed(7)
    n = 100_000
    # z close to -x*y: the cancellation makes the product's rounding visible in the result
    x, y = torch.randn(n, generator=g), torch.randn(n, generator=g)
    z = -(x * y) * (1 + torch.randn(n, generator=g) * 1e-3)
    interp_out = torch.empty(n)
    kernelc.jit(mul_add.fn, interpret=True)[(triton_cdiv(n, 1024),)](x, y, z, interp_out, n, BLOCK=1024)
    dx, dy, dz = x.cuda(), y.cuda(), z.cuda()
    off = _run(False, dx, dy, dz)
    on, default = _run(True, dx, dy, dz), _run(None, dx, dy, dz)
    assert torch.equal(off, interp_out)
    assert torch.equal(on, default)                       # Triton's default: on
    exact = (x.double() * y.double() + z.double()).float()  # x*y is exact in fp64; one rounding to fp32
    assert (on == exact).float().mean() > 0.999           # fp64 double rounding may flip a rare tie
    assert not torch.equal(on, off)                       # the cancellation shows the skipped rounding
    prod_ulp = np.spacing(np.abs((x * y).numpy())).astype(np.float64)
    res_ulp = [np.spacing(np.abs(r.numpy())).astype(np.float64) for r in (on, off)]
    diff = np.abs(on.numpy().astype(np.float64) - off.numpy().astype(np.float64))
    assert (diff <= 0.5 * prod_ulp + 0.5 * res_ulp[0] + 0.5 * res_ulp[1]).all()


# -- whole-block reductions across warps (codegen/reduce.py: one shared-memory read per lane and a
# butterfly over the warps' partials)

@kernelc.jit
def row_stats(X, Out, Arg, N, BLOCK: kl.constexpr):
    cols = kl.arange(0, BLOCK)
    mask = cols < N
    x = kl.load(X + kl.program_id(0) * N + cols, mask=mask, other=0.0).to(kl.float32)
    s = kl.sum(kl.where(mask, x, 0.0), axis=0)
    m = kl.max(kl.where(mask, x, -float("inf")), axis=0)
    a = kl.argmax(kl.where(mask, x, -float("inf")), axis=0)
    kl.store(Out + kl.program_id(0) * 2, s)
    kl.store(Out + kl.program_id(0) * 2 + 1, m)
    kl.store(Arg + kl.program_id(0), a)


@pytest.mark.parametrize("num_warps", [1, 2, 4, 8, 16, 32])
@pytest.mark.parametrize("n,dtype", [(4096, torch.float16), (1000, torch.float32), (8192, torch.float32)])
def test_block_reductions_across_warps(num_warps, n, dtype):
    rows = 33
    x = torch.randn(rows, n, device="cuda").to(dtype)
    out = torch.empty(rows, 2, device="cuda")
    arg = torch.empty(rows, dtype=torch.int32, device="cuda")
    block = 1 << (n - 1).bit_length()
    row_stats[(rows,)](x, out, arg, n, BLOCK=block, num_warps=num_warps)
    xf = x.float()
    torch.testing.assert_close(out[:, 0], xf.sum(1), rtol=1e-4, atol=1e-3)
    assert torch.equal(out[:, 1], xf.max(1).values)
    assert torch.equal(arg.long(), xf.argmax(1))
