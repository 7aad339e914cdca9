"""``desc.atomic_add`` on the GPU (issue 27: FlashAttention-3's dQ path): TMA bulk tensor reductions from a
staged shared-memory tile (passes/bulk_reductions.py) against torch's sums. Many programs add overlapping
tiles, some past the tensor's edges (those elements must not be touched), over several trips of a loop (the
staging stages are reused while earlier reductions may still read them), through a descriptor made in the
kernel and a host ``TensorDescriptor``; 1, 2 and 3 stages (``KERNELC_BULK_REDUCE_STAGES``).

Run on an sm_90 machine: ``python -m pytest -q tests/gpu/test_gpu_bulk_reduce.py``.
"""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

import kernelc  # noqa: E402
import kernelc.language as kl  # noqa: E402
from kernelc import TensorDescriptor  # noqa: E402


@kernelc.jit
def add_tiles(X, OUT, M, N, BM: kl.constexpr, BN: kl.constexpr, STEPS: kl.constexpr):
    pid = kl.program_id(0)
    d = kl.make_tensor_descriptor(OUT, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    for i in kl.range(0, STEPS):
        rows = kl.arange(0, BM)
        cols = kl.arange(0, BN)
        x = kl.load(X + (pid * STEPS + i) * BM * BN + rows[:, None] * BN + cols[None, :])
        # programs overlap (start rows pid * BM // 2 - 8) and run past the bottom-right edge
        d.atomic_add([pid * (BM // 2) - 8, (i % 3) * (BN // 2)], x)


@kernelc.jit
def add_tiles_host(X, desc, BM: kl.constexpr, BN: kl.constexpr, STEPS: kl.constexpr):
    pid = kl.program_id(0)
    for i in kl.range(0, STEPS):
        rows = kl.arange(0, BM)
        cols = kl.arange(0, BN)
        x = kl.load(X + (pid * STEPS + i) * BM * BN + rows[:, None] * BN + cols[None, :])
        desc.atomic_add([pid * (BM // 2) - 8, (i % 3) * (BN // 2)], x)


def _reference(x, M, N, BM, BN, programs, steps):
    pad = 2 * max(BM, BN)
    ref = torch.zeros(M + 2 * pad, N + 2 * pad, dtype=torch.float64, device=x.device)
    for p in range(programs):
        for i in range(steps):
            r, c = p * (BM // 2) - 8 + pad, (i % 3) * (BN // 2) + pad
            ref[r:r + BM, c:c + BN] += x[p * steps + i].double()
    return ref[pad:pad + M, pad:pad + N]


DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int32]


@pytest.mark.parametrize("stages", ["1", "2", "3"], ids=["s1", "s2", "s3"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "fp16", "bf16", "i32"])
@pytest.mark.parametrize("host", [False, True], ids=["made", "host"])
def test_atomic_add_tiles_match_torch(dtype, stages, host, monkeypatch):
    monkeypatch.setenv("KERNELC_BULK_REDUCE_STAGES", stages)
    BM, BN, steps, programs = 64, 64, 7, 9
    M, N = 272, 112  # 16-byte aligned rows (TMA), tiles past both edges
    g = torch.Generator(device="cuda").manual_seed(0)
    if dtype == torch.int32:
        x = torch.randint(-50, 50, (programs * steps, BM, BN), device="cuda", generator=g, dtype=dtype)
    else:
        x = (torch.randn(programs * steps, BM, BN, device="cuda", generator=g) * 0.25).to(dtype)
    out = torch.full((M, N), 3, device="cuda", dtype=dtype)  # added into, not overwritten
    if host:
        add_tiles_host[(programs,)](x, TensorDescriptor.from_tensor(out, [BM, BN]), BM=BM, BN=BN, STEPS=steps)
    else:
        add_tiles[(programs,)](x, out, M, N, BM=BM, BN=BN, STEPS=steps)
    torch.cuda.synchronize()
    want = _reference(x, M, N, BM, BN, programs, steps) + 3
    if dtype == torch.int32:
        assert torch.equal(out.double(), want)
    else:
        # the adds' order varies; fp16/bf16 round each partial sum
        tol = {torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 1e-1}[dtype]
        torch.testing.assert_close(out.double(), want, rtol=tol, atol=tol)


def test_atomic_add_repeated_launches_accumulate():
    BM, BN, steps, programs = 64, 32, 5, 6
    M, N = 200, 48
    x = torch.randn(programs * steps, BM, BN, device="cuda")
    out = torch.zeros(M, N, device="cuda")
    for _ in range(3):
        add_tiles[(programs,)](x, out, M, N, BM=BM, BN=BN, STEPS=steps)
    torch.cuda.synchronize()
    torch.testing.assert_close(out.double(), 3 * _reference(x, M, N, BM, BN, programs, steps), rtol=1e-4,
                               atol=1e-4)


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16", "i32"])
def test_the_launched_kernel_is_a_bulk_reduction(dtype):
    # what the launches above run at these sizes (16-divisible ints and pointers): TMA, not the atomics fallback
    sig = {"X": "*" + dtype, "OUT": "*" + dtype, "M": "i32", "N": "i32"}
    ck = kernelc.compile(add_tiles, sig, dict(BM=64, BN=64, STEPS=7), divisibility={k: 16 for k in sig})
    assert "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group" in ck.asm["ptx"]
    assert "UTMAREDG.2D.ADD" in ck.asm["sass"]
