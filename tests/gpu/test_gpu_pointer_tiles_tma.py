"""Plain pointer loads copied by TMA on the GPU (kernelc/compiler/passes/pointer_tiles.py): the masked
tutorial matmul (examples/kernels/matmul.py ``matmul_masked_kernel``) against torch for ragged shapes,
fp16 and bf16, with its A/B loads (and with ``KERNELC_AUTO_TMA=all`` its C store) as TMA copies where
the runtime's 16-byte specialisation proves the row strides aligned (K % 16 == 0 for A, N % 16 == 0
for B and C) and as the plain cp.async loads otherwise; with ``KERNELC_AUTO_TMA=all``: negative row
offsets, tiles wholly out of bounds, NaN padding, unchecked dims, and a store whose rows lie wholly
outside."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

from examples.kernels import matmul as MM  # noqa: E402
from tests.compiler import pointer_tile_kernels as PT  # noqa: E402


def _fresh():
    """Forget the kernels compiled so far: KERNELC_AUTO_TMA is read at compile time, and the launcher's
    in-memory cache does not key on it (the disk cache does)."""
    from kernelc.runtime.launcher import get_state
    for k in (MM.matmul_masked_kernel, PT.shifted_copy, PT.unmasked_tile, PT.tile_stores, PT.dot_bt):
        get_state(k)["cache"].clear()


@pytest.fixture(autouse=True)
def _fresh_kernels():
    _fresh()
    yield
    _fresh()


def _hopper():
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


def _tma_loads(ck) -> int:
    return sum("auto-TMA" in n and "-> descriptor_load" in n for n in ck.compile_log)


def _masked_matmul(a, b, **cfg):
    M, K = a.shape
    N = b.shape[1]
    c = torch.full((M, N), float("nan"), device=a.device, dtype=a.dtype)
    cfg = {**MM.MASKED_DEFAULT_CONFIG, **cfg}
    grid = (-(-M // cfg["BLOCK_SIZE_M"]) * -(-N // cfg["BLOCK_SIZE_N"]),)
    ck = MM.matmul_masked_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                       c.stride(0), c.stride(1), **cfg)
    return c, ck


SMALL = dict(BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=32, GROUP_SIZE_M=4, num_warps=4, num_stages=3)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("M,N,K", [(1000, 1000, 1000), (4096, 512, 256), (129, 257, 63), (1000, 1024, 1008),
                                   (1000, 528, 1040), (64, 16, 16), (200, 144, 80), (33, 48, 2000)])
@pytest.mark.parametrize("cfg", [{}, SMALL], ids=["default", "small"])
@pytest.mark.parametrize("scope", ["1", "all"])
def test_masked_matmul_matches_torch(dtype, M, N, K, cfg, scope, monkeypatch):
    monkeypatch.setenv("KERNELC_AUTO_TMA", scope)  # all: C's store too
    torch.manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=dtype)
    b = torch.randn(K, N, device="cuda", dtype=dtype)
    c, ck = _masked_matmul(a, b, **cfg)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=0.05 * K ** 0.5, rtol=1e-2)
    if _hopper():
        want = (K % 16 == 0) + (N % 16 == 0)  # A's rows / B's rows provably 16-byte aligned
        assert _tma_loads(ck) == want, ck.compile_log
        assert ("UTMALDG" in ck.asm["sass"]) == (want > 0)
        store = scope == "all" and N % 16 == 0  # C's rows: aligned, whole 16-byte chunks
        assert ("UTMASTG" in ck.asm["sass"]) == store
        assert ck.global_scratch_bytes == 128 * (want + store)


def test_host_function_and_auto_tma_off_agree(monkeypatch):
    torch.manual_seed(0)
    a = torch.randn(777, 512, device="cuda", dtype=torch.float16)
    b = torch.randn(512, 320, device="cuda", dtype=torch.float16)
    c_tma = MM.matmul_masked(a, b)
    monkeypatch.setenv("KERNELC_AUTO_TMA", "0")
    _fresh()
    c_plain, ck = _masked_matmul(a, b)
    assert _tma_loads(ck) == 0 and "UTMALDG" not in ck.asm["sass"]
    torch.testing.assert_close(c_tma, c_plain, atol=1e-2, rtol=1e-3)
    torch.testing.assert_close(c_tma.float(), a.float() @ b.float(), atol=0.05 * 512 ** 0.5, rtol=1e-2)


@pytest.mark.parametrize("pad", ["zero", "nan"])
@pytest.mark.parametrize("shift,step", [(0, 64), (5, 64), (37, 128)])
def test_shifted_rows_and_out_of_bounds_tiles(pad, shift, step, monkeypatch):
    monkeypatch.setenv("KERNELC_AUTO_TMA", "all")  # the tile feeds no dot
    # rows start `shift` rows before the program's block: program 0 reads rows before x_ptr (inside the
    # allocation); programs past M read tiles wholly out of bounds (the extent <= 0 case)
    M, N, ld, BM, BN, before = 200, 300, 320, 64, 64, 48
    grid = -(-M // BM) + 2
    base = torch.randn((before + M) * ld, device="cuda", dtype=torch.float32)
    x = base[before * ld:]  # x_ptr points `before` rows into the allocation
    y = torch.empty(grid * BM * BN, device="cuda", dtype=torch.float32)
    ck = PT.shifted_copy[(grid,)](x, y, M, N, ld, shift, BM=BM, BN=BN, PAD=pad, STEP=step)
    full = base.view(before + M, ld)
    ref = torch.zeros(grid, BM, BN, device="cuda")
    fill = float("nan") if pad == "nan" else 0.0
    for p in range(grid):
        for n0 in range(0, N, step):
            rows = torch.arange(p * BM - shift, p * BM - shift + BM, device="cuda")
            cols = torch.arange(n0, n0 + BN, device="cuda")
            ok = (rows[:, None] < M) & (cols[None, :] < N)
            vals = full[(rows + before).clamp(0, before + M - 1)][:, cols.clamp(max=ld - 1)]
            ref[p] += torch.where(ok, vals, torch.full_like(vals, fill))
    torch.testing.assert_close(y.view(grid, BM, BN), ref, equal_nan=True)
    if _hopper():
        assert _tma_loads(ck) == 1 and "UTMALDG" in ck.asm["sass"]


def test_unchecked_dims_read_like_the_plain_load(monkeypatch):
    monkeypatch.setenv("KERNELC_AUTO_TMA", "all")  # the tile feeds no dot
    # no mask: the descriptor's extents are 2**31 - 1 (nothing is out of bounds)
    M, ld, BM, BN = 256, 96, 64, 64
    x = torch.randn(M * ld, device="cuda", dtype=torch.float16)
    y = torch.empty(M * BN, device="cuda", dtype=torch.float16)
    ck = PT.unmasked_tile[(M // BM,)](x, y, ld, BM=BM, BN=BN)
    torch.testing.assert_close(y.view(M, BN), x.view(M, ld)[:, :BN], atol=0, rtol=0)
    if _hopper():
        assert _tma_loads(ck) == 1 and "UTMALDG" in ck.asm["sass"]


@pytest.mark.parametrize("N", [48, 64, 40])
def test_tile_store_writes_only_inside(N, monkeypatch):
    monkeypatch.setenv("KERNELC_AUTO_TMA", "all")  # stores
    # z's store is the program's last access: a TMA store where N % 16 == 0 (whole 16-byte row ends);
    # the two extra programs' rows lie wholly past M (the extent <= 0 case) and must write nothing
    M, ld, BM, BN = 100, 64, 64, 64
    grid = -(-M // BM) + 2
    x = torch.randn(grid * BM * ld, device="cuda", dtype=torch.float16)
    y = torch.full_like(x, -3.0)
    z = torch.full_like(x, -3.0)
    ck = PT.tile_stores[(grid,)](x, y, z, M, N, ld, BM=BM, BN=BN, LOOP=False)
    want = torch.full((grid * BM, ld), -3.0, device="cuda", dtype=torch.float16)
    want[:M, :N] = 2 * x.view(-1, ld)[:M, :N]
    torch.testing.assert_close(z.view(-1, ld), want, atol=0, rtol=0)
    want[:M, :N] = x.view(-1, ld)[:M, :N]
    torch.testing.assert_close(y.view(-1, ld), want, atol=0, rtol=0)
    if _hopper():
        assert ("UTMASTG" in ck.asm["sass"]) == (N % 16 == 0), ck.compile_log


@pytest.mark.parametrize("kmajor", [False, True])
@pytest.mark.parametrize("K", [256, 100])
def test_dot_operand_through_a_trans(kmajor, K):
    # b as its transpose bt [N, K] (K contiguous): read through kl.trans, or (kmajor) as b's [BK, BN]
    # tiles with dim 0 contiguous -- the descriptor reads the transposed tile either way
    torch.manual_seed(0)
    BM, BN, BK, ld = 64, 64, 32, 256
    a = torch.randn(BM, ld, device="cuda", dtype=torch.float16)
    bt = torch.randn(BN, ld, device="cuda", dtype=torch.float16)
    c = torch.empty(BM, BN, device="cuda", dtype=torch.float32)
    ck = PT.dot_bt[(1,)](a, bt, c, K, ld, ld, BM=BM, BN=BN, BK=BK, KMAJOR=kmajor)
    torch.testing.assert_close(c, a[:, :K].float() @ bt[:, :K].float().T, atol=0.05 * K ** 0.5, rtol=1e-2)
    if _hopper():
        assert _tma_loads(ck) == 2 and "UTMALDG" in ck.asm["sass"], ck.compile_log


@pytest.mark.parametrize("col_b", [False, True])
@pytest.mark.parametrize("M,N,K", [(256, 256, 256), (200, 144, 160)])
def test_fp8_masked_matmul(col_b, M, N, K):
    # fp8 wgmma wants both operands K-major: a column-major b (stride_bk == 1) is read as the transposed
    # descriptor tile, a row-major one through registers (as its cp.async load was)
    torch.manual_seed(0)
    a = torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn)
    b = (torch.randn(N, K, device="cuda").to(torch.float8_e4m3fn).t() if col_b else
         torch.randn(K, N, device="cuda").to(torch.float8_e4m3fn))
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    cfg = dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=128, GROUP_SIZE_M=8, num_warps=8, num_stages=3)
    grid = (-(-M // 128) * -(-N // 128),)
    ck = MM.matmul_masked_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                       c.stride(0), c.stride(1), **cfg)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=0.05 * K ** 0.5, rtol=2e-2)
    if _hopper():
        assert _tma_loads(ck) == 2, ck.compile_log
