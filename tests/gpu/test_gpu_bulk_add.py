"""``kl.bulk_add`` on the GPU (issue 27: FlashAttention-3's 1-D dQ reduction, language/bulk.py): many programs
add tiles into overlapping contiguous blocks over several trips of a loop (the staging stages reused while
earlier reductions may still read them), with and without an L2 eviction policy, against torch's sums in the
staging order; and the attention backward's postprocess reading such a block back through kl.staging_offsets.

Run on an sm_90 machine: ``python -m pytest -q tests/gpu/test_gpu_bulk_add.py``.
"""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

import kernelc  # noqa: E402
import kernelc.language as kl  # noqa: E402
from kernelc.language.bulk import staging_offset_of  # noqa: E402


@kernelc.jit
def add_blocks(X, OUT, R: kl.constexpr, C: kl.constexpr, STEPS: kl.constexpr, BLOCKS: kl.constexpr,
               EVICT: kl.constexpr):
    pid = kl.program_id(0)
    rows = kl.arange(0, R)
    cols = kl.arange(0, C)
    for i in kl.range(0, STEPS):
        x = kl.load(X + (pid * STEPS + i) * R * C + rows[:, None] * C + cols[None, :])
        kl.bulk_add(OUT + ((pid + i) % BLOCKS) * R * C, x, eviction_policy=EVICT)


@kernelc.jit
def read_block(IN, OUT, R: kl.constexpr, C: kl.constexpr):
    rows = kl.arange(0, R)
    cols = kl.arange(0, C)
    kl.store(OUT + rows[:, None] * C + cols[None, :], kl.load(IN + kl.staging_offsets(R, C, kl.float32)))


@pytest.fixture(autouse=True)
def _sm90():
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("needs an sm_90 GPU (TMA)")


@pytest.mark.parametrize("R,C,EVICT", [(128, 32, ""), (64, 32, "evict_last"), (16, 64, ""), (8, 8, "evict_first")])
def test_bulk_add_sums_every_tile_in_the_staging_order(R, C, EVICT):
    P, STEPS, BLOCKS = 264, 6, 5
    g = torch.Generator(device="cuda").manual_seed(0)
    x = (torch.randn(P * STEPS, R, C, device="cuda", generator=g) * 16).round()  # exact sums in any order
    out = torch.zeros(BLOCKS * R * C, device="cuda")
    add_blocks[(P,)](x, out, R=R, C=C, STEPS=STEPS, BLOCKS=BLOCKS, EVICT=EVICT)
    # the launch's specialisation (16-byte aligned pointers) takes the bulk path, not the atomics
    ck = kernelc.compile(add_blocks, signature={"X": "*fp32", "OUT": "*fp32"}, target="sm_90a",
                         constexprs=dict(R=R, C=C, STEPS=STEPS, BLOCKS=BLOCKS, EVICT=EVICT),
                         divisibility={"X": 16, "OUT": 16})
    assert "cp.reduce.async.bulk.global" in ck.asm["ptx"]
    want = torch.zeros(BLOCKS, R, C, device="cuda", dtype=torch.float64)
    for p in range(P):
        for i in range(STEPS):
            want[(p + i) % BLOCKS] += x[p * STEPS + i].double()
    got = torch.empty(BLOCKS, R, C, device="cuda")
    for b in range(BLOCKS):
        read_block[(1,)](out[b * R * C:], got[b], R=R, C=C)
    torch.testing.assert_close(got.double(), want, rtol=0, atol=0)
    off = torch.tensor([[staging_offset_of(r, c, R, C, 4) for c in range(C)] for r in range(R)], device="cuda")
    torch.testing.assert_close(out[:R * C][off].double(), want[0], rtol=0, atol=0)


@kernelc.jit
def ws_add(X, W, OUT, N, R: kl.constexpr, C: kl.constexpr):
    pid = kl.program_id(0)
    desc = kl.make_tensor_descriptor(X + pid * N * C, shape=[N, C], strides=[C, 1], block_shape=[R, C])
    w = kl.load(W + kl.arange(0, C)[:, None] * C + kl.arange(0, C)[None, :])
    for i in kl.range(0, N, R, warp_specialize=True):
        x = desc.load([i, 0])
        kl.bulk_add(OUT + ((i // R + pid) % 2) * R * C, kl.dot(x, w))


@pytest.mark.parametrize("issue", ["producer", "consumer"])
def test_bulk_add_under_a_producer_warp(issue, monkeypatch):
    # warp_regions hands each staged tile to the producer warp (KERNELC_WS_BULK_ISSUE=producer, the default) or keeps
    # the reduction with an elected consumer thread: either way every program's every trip is added once
    monkeypatch.setenv("KERNELC_WS_BULK_ISSUE", issue)
    P, N, R, C = 132, 64 * 7, 64, 64
    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randint(-3, 4, (P, N, C), device="cuda", generator=g).half()  # small integers: exact in any order
    w = torch.randint(-2, 3, (C, C), device="cuda", generator=g).half()
    out = torch.zeros(2 * R * C, device="cuda")
    ws_add[(P,)](x, w, out, N, R=R, C=C)
    prod = (x.double().view(P, N // R, R, C) @ w.double())  # [P, trips, R, C]
    want = torch.zeros(2, R, C, device="cuda", dtype=torch.float64)
    for p in range(P):
        for t in range(N // R):
            want[(t + p) % 2] += prod[p, t]
    got = torch.empty(2, R, C, device="cuda")
    for b in range(2):
        read_block[(1,)](out[b * R * C:], got[b], R=R, C=C)
    torch.testing.assert_close(got.double(), want, rtol=0, atol=0)
