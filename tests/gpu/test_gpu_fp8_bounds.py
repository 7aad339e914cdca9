"""fp32 -> e5m2 casts with an overflow bound on the GPU (passes/fp8_bounds.py, codegen/fp8.py: cast_many_bounded):
rows of ``exp2(x)`` summed before the cast, so the cast gets the row sum as its bound and branches (one vote a
warp) between the bare cvt and the fix-up. Rows far below the threshold, rows past it (+Inf codes), rows with
NaN or +Inf, mixed within warps: every byte equals torch's cast of the very fp32 values the kernel computed.

Run on an sm_90 machine: ``python -m pytest -q tests/gpu/test_gpu_fp8_bounds.py``.
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

import kernelc  # noqa: E402
import kernelc.language as kl  # noqa: E402


@kernelc.jit
def exp2_rows(x_ptr, p_ptr, y_ptr, l_ptr, N: kl.constexpr, BLOCK_M: kl.constexpr):
    rm = kl.program_id(0) * BLOCK_M + kl.arange(0, BLOCK_M)
    rn = kl.arange(0, N)
    offs = rm[:, None] * N + rn[None, :]
    p = kl.math.exp2(kl.load(x_ptr + offs))
    kl.store(l_ptr + rm, kl.sum(p, 1))
    kl.store(p_ptr + offs, p)
    kl.store(y_ptr + offs, p.to(y_ptr.dtype.element_ty))


@pytest.mark.parametrize("N,BLOCK_M,num_warps", [(64, 64, 4), (128, 32, 8)])
def test_bounded_e5m2_cast_matches_torch_bit_for_bit(N, BLOCK_M, num_warps):
    g = torch.Generator().manual_seed(0)
    M = 64 * BLOCK_M
    x = torch.rand((M, N), generator=g) * 40 - 30  # exp2 in [2^-30, 2^10): row sums mostly below 61440
    big = torch.rand(M, generator=g) < 0.1
    x[big] += 8  # up to 2^18: overflows, and sums past the threshold
    x[5, 3], x[77, 0], x[300, 9] = float("nan"), float("inf"), 15.9068  # NaN sum, Inf, near log2(61440)
    x[400] = 14.0  # 2^14 each: a sum far past 61440 with no element overflowing
    x = x.cuda()
    p = torch.empty_like(x)
    y = torch.empty((M, N), dtype=torch.float8_e5m2, device="cuda")
    l = torch.empty(M, device="cuda")
    exp2_rows[(M // BLOCK_M,)](x, p, y, l, N=N, BLOCK_M=BLOCK_M, num_warps=num_warps)
    torch.cuda.synchronize()
    got = y.view(torch.uint8).cpu().numpy()
    want = p.cpu().to(torch.float8_e5m2).view(torch.uint8).numpy()
    bad = np.nonzero(got != want)
    assert bad[0].size == 0, [(float(p[i, j]), hex(want[i, j]), hex(got[i, j])) for i, j in zip(*bad)][:8]
    pc = p.cpu()
    assert (pc >= 61440).any() and (pc < 61440).all(dim=1).any()  # rows for both branches


def test_the_kernel_casts_with_the_bound():
    sig = dict(x_ptr="*fp32", p_ptr="*fp32", y_ptr="*fp8e5", l_ptr="*fp32")
    ck = kernelc.compile(exp2_rows, sig, dict(N=64, BLOCK_M=64), target="sm_90a", num_warps=4)
    assert "overflow_bound=True" in ck.asm["tir"] and "vote.any" in ck.asm["llir"]


@kernelc.jit
def scaled_tile(x_ptr, y_ptr, z_ptr, N: kl.constexpr, BLOCK_M: kl.constexpr):
    rm = kl.program_id(0) * BLOCK_M + kl.arange(0, BLOCK_M)
    rn = kl.arange(0, N)
    offs = rm[:, None] * N + rn[None, :]
    y = kl.load(x_ptr + offs)  # no sum bounds it: overflow_bound='self' (KERNELC_FP8_SELF_BOUND); a loaded NaN
    # keeps its sign (an arithmetic op would make it the positive canonical NaN)
    kl.store(y_ptr + offs, y)
    kl.store(z_ptr + offs, y.to(z_ptr.dtype.element_ty))


@pytest.mark.parametrize("N,BLOCK_M,num_warps", [(64, 64, 4), (128, 128, 4)])
def test_self_bounded_e5m2_cast_matches_torch_bit_for_bit(N, BLOCK_M, num_warps):
    """Blocks far below the threshold (the bare cvts), blocks with one value past it, at it, +-Inf, and NaNs of
    both signs (the fix-up branch, NaN signs included): every byte equals torch's cast of the kernel's fp32."""
    g = torch.Generator().manual_seed(1)
    M = 16 * BLOCK_M
    x = torch.randn((M, N), generator=g) * 1000
    specials = [61440.0, 61439.996, -61440.0, 57344.0, 1e9, -1e9, float("inf"), float("-inf"), float("nan"),
                -float("nan"), 61504.0, -65536.0]
    for i, v in enumerate(specials):  # one special in each of programs 1-12; programs 0, 13-15 take the bare path
        x[(i + 1) * BLOCK_M + (5 * i) % BLOCK_M, (7 * i) % N] = v
    x = x.cuda()
    y = torch.empty_like(x)
    z = torch.empty((M, N), dtype=torch.float8_e5m2, device="cuda")
    scaled_tile[(M // BLOCK_M,)](x, y, z, N=N, BLOCK_M=BLOCK_M, num_warps=num_warps)
    torch.cuda.synchronize()
    got = z.view(torch.uint8).cpu().numpy()
    want = y.cpu().to(torch.float8_e5m2).view(torch.uint8).numpy()
    bad = np.nonzero(got != want)
    assert bad[0].size == 0, [(float(y[i, j]), hex(want[i, j]), hex(got[i, j])) for i, j in zip(*bad)][:8]
    assert (want == 0xFF).any() and (want == 0x7C).any() and (want == 0xFC).any()  # -NaN, +Inf, -Inf reached


def test_the_tile_cast_bounds_itself():
    sig = dict(x_ptr="*fp32", y_ptr="*fp32", z_ptr="*fp8e5")
    ck = kernelc.compile(scaled_tile, sig, dict(N=64, BLOCK_M=64), target="sm_90a", num_warps=4)
    assert "overflow_bound='self'" in ck.asm["tir"] and "vote.any" in ck.asm["llir"]
