"""fp8 on the GPU: conversions bit for bit against torch (and the interpreter's reference algorithm), fp8
arithmetic against the interpreter, and fp8 dots (e4m3, e5m2, mixed; wgmma and mma.sync paths; 4 and 8
warps; ragged edges; column- and row-major B) against torch's fp32 matmul of the upcast inputs.

Run on an sm_90 machine: ``python -m pytest -q tests/gpu/test_gpu_fp8.py``.
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

import kernelc  # noqa: E402
from examples.kernels import matmul_fp8  # noqa: E402
from tests.compiler.test_fp8_codegen import (FP8, _bits, _expected_fp8, convert, dot_kernel, dot_promoted,  # noqa: E402
                                             fp8_arith, fp32_sweep)


def _gpu_convert(x: torch.Tensor, dst) -> torch.Tensor:
    x = x.cuda()
    y = torch.zeros(x.shape, dtype=dst, device="cuda")
    convert[(kernelc.cdiv(x.numel(), 2048),)](x, y, x.numel(), BLOCK=2048)
    torch.cuda.synchronize()
    return y.cpu()


def _diff(x, got, want, n=8):
    bad = np.nonzero(got != want)[0]
    return [(float(x.reshape(-1)[i]), hex(int(want[i]) & 0xFF), hex(int(got[i]) & 0xFF)) for i in bad[:n]]


@pytest.mark.parametrize("name", list(FP8))
def test_fp32_to_fp8_bitwise(name):
    x = fp32_sweep()
    got, want = _bits(_gpu_convert(x, FP8[name])), _expected_fp8(x, FP8[name])
    assert (got == want).all(), _diff(x, got, want)
    # and torch's own GPU cast wherever torch versions agree (in range: no overflow policy involved)
    inside = (x.abs() <= 448).numpy()
    ref = _bits(x.cuda().to(FP8[name]).cpu())
    assert (got[inside] == ref[inside]).all()


@pytest.mark.parametrize("name", list(FP8))
@pytest.mark.parametrize("src", [torch.float16, torch.bfloat16, torch.float64])
def test_wide_floats_to_fp8_bitwise(name, src):
    if src == torch.float64:
        x = fp32_sweep().double() * (1 + 2**-40)
    else:
        x = torch.arange(-2**15, 2**15, dtype=torch.int32).to(torch.int16).view(src)
    got, want = _bits(_gpu_convert(x, FP8[name])), _expected_fp8(x.float(), FP8[name])
    assert (got == want).all(), _diff(x.float(), got, want)


@pytest.mark.parametrize("name", list(FP8))
@pytest.mark.parametrize("dst", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32,
                                 torch.float8_e4m3fn, torch.float8_e5m2])
def test_all_256_fp8_values_widen_exactly(name, dst):
    x = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(FP8[name])
    got = _gpu_convert(x, dst)
    if dst == x.dtype:
        want = x
    elif dst in FP8.values():  # fp8 -> fp8 (through fp32): e5m2 -> e4m3fn overflows, torch < 2.12 differs
        want = torch.from_numpy(_expected_fp8(x.float(), dst)).view(dst)
    else:
        want = x.float().to(dst)
    if dst == torch.int32:  # NaN/Inf -> int: the GPU saturates (cvt.rzi), torch's is undefined
        finite = torch.isfinite(x.float())
        assert torch.equal(got[finite], want[finite])
        return
    gn, wn = torch.isnan(got.float()), torch.isnan(want.float())
    assert torch.equal(gn, wn)
    # values bit for bit; a NaN's payload is the hardware's (the interpreter gives torch's)
    assert (_bits(got)[~gn.numpy()] == _bits(want)[~wn.numpy()]).all()


def test_fp8_arithmetic_matches_the_interpreter():
    x = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(torch.float8_e4m3fn)
    y = torch.zeros(256, dtype=torch.float8_e4m3fn, device="cuda")
    fp8_arith[(1,)](x.cuda(), y, BLOCK=256)
    yi = torch.zeros(256, dtype=torch.float8_e4m3fn)
    kernelc.jit(fp8_arith.fn, interpret=True)[(1,)](x, yi, BLOCK=256)
    g, i = y.cpu().float(), yi.float()
    assert torch.equal(torch.isnan(g), torch.isnan(i)) and torch.equal(g[~torch.isnan(g)], i[~torch.isnan(i)])


# ---------------------------------------------------------------------------------------------
# dots
# ---------------------------------------------------------------------------------------------


def _check_close(got: torch.Tensor, a: torch.Tensor, b: torch.Tensor, scale: float, rel=2.0 ** -8):
    """|got - a@b*scale| <= rel * (|a|@|b|)*scale: loose enough for the fp8 tensor cores' accumulation,
    far tighter than any misplaced element (which is off by O(1) relative)."""
    af, bf = a.double().cpu(), b.double().cpu()
    ref = af @ bf * scale
    bound = (af.abs() @ bf.abs()) * abs(scale) * rel + 1e-3
    err = (got.double().cpu() - ref).abs()
    worst = (err / bound).max().item()
    assert worst <= 1.0, f"max error {err.max().item():.4g} is {worst:.2f}x the bound"


CASES = [
    # (M, N, K), config
    ((128, 128, 128), dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=128, GROUP_SIZE_M=8, num_warps=4)),
    ((256, 512, 384), dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=128, GROUP_SIZE_M=8, num_warps=8)),
    # K % 16 != 0: rows are not 16-byte aligned, so no vector loads and no cp.async (slow, but must be right)
    ((200, 136, 328), dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64, GROUP_SIZE_M=4, num_warps=4)),
    ((333, 250, 256), dict(BLOCK_SIZE_M=256, BLOCK_SIZE_N=128, BLOCK_SIZE_K=128, GROUP_SIZE_M=8, num_warps=8)),
    ((96, 80, 160), dict(BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=32, GROUP_SIZE_M=2, num_warps=4)),
    # not wgmma-eligible (M % (16 * num_warps)): the mma.sync m16n8k32 e4m3/e5m2 path
    ((100, 72, 96), dict(BLOCK_SIZE_M=32, BLOCK_SIZE_N=64, BLOCK_SIZE_K=64, GROUP_SIZE_M=2, num_warps=4)),
    ((64, 64, 128), dict(BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=64, GROUP_SIZE_M=1, num_warps=2)),
]
TYPES = [(torch.float8_e4m3fn, torch.float8_e4m3fn), (torch.float8_e5m2, torch.float8_e5m2),
         (torch.float8_e4m3fn, torch.float8_e5m2)]


@pytest.mark.parametrize("ta,tb", TYPES, ids=["e4m3", "e5m2", "e4m3xe5m2"])
@pytest.mark.parametrize("shape,cfg", CASES, ids=[f"{m}x{n}x{k}-w{c['num_warps']}" for (m, n, k), c in CASES])
@pytest.mark.parametrize("col_b", [True, False], ids=["b_colmajor", "b_rowmajor"])
def test_fp8_matmul_matches_fp32_matmul(ta, tb, shape, cfg, col_b):
    M, N, K = shape
    g = torch.Generator(device="cuda").manual_seed(M * 7 + N)
    a = (torch.randn(M, K, device="cuda", generator=g) * 2).to(ta)
    if col_b:
        b = torch.randn(N, K, device="cuda", generator=g).to(tb).t()
    else:
        b = torch.randn(K, N, device="cuda", generator=g).to(tb)
    sa, sb = torch.tensor(0.5, device="cuda"), torch.tensor(1.5, device="cuda")
    cfg = dict(cfg)
    nw = cfg.pop("num_warps")
    out = matmul_fp8.matmul_fp8(a, b, sa, sb, torch.float32, num_warps=nw, num_stages=3, **cfg)
    torch.cuda.synchronize()
    _check_close(out, a, b, 0.75)


@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16])
def test_fp8_matmul_matches_scaled_mm(out_dtype):
    M = N = K = 512
    a = torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(N, K, device="cuda").to(torch.float8_e4m3fn).t()
    sa, sb = torch.tensor(0.25, device="cuda"), torch.tensor(4.0, device="cuda")
    ours = matmul_fp8.matmul_fp8(a, b, sa, sb, out_dtype)
    ref = torch._scaled_mm(a, b, sa, sb, out_dtype=out_dtype, use_fast_accum=True)
    torch.testing.assert_close(ours.float(), ref.float(), rtol=2e-2, atol=2e-1)


def test_single_tile_fp8_dot_wgmma():
    a = torch.randn(64, 64).to(torch.float8_e4m3fn)
    b = torch.randn(64, 64).to(torch.float8_e5m2)
    c = torch.zeros(64, 64, device="cuda")
    dot_kernel[(1,)](a.cuda(), b.cuda(), c, M=64, N=64, K=64)
    _check_close(c, a, b, 1.0)


@pytest.mark.parametrize("mnia", [None, 32, 128])
def test_fp8_dot_with_promoted_accumulation(mnia):
    # K = 512 in one dot; with max_num_imprecise_acc the partial sums are added in fp32
    a = (torch.randn(64, 512) * 4).to(torch.float8_e4m3fn)
    b_nk = torch.randn(64, 512).to(torch.float8_e4m3fn)
    c = torch.zeros(64, 64, device="cuda")
    dot_promoted[(1,)](a.cuda(), b_nk.cuda(), c, M=64, N=64, K=512, MNIA=mnia)
    _check_close(c, a, b_nk.t(), 1.0, rel=2.0 ** -8 if mnia is None else 2.0 ** -10)
