"""``desc.atomic_add`` on the GPU (issue 27: FlashAttention-3's dQ path): TMA bulk tensor reductions from a
staged shared-memory tile (passes/bulk_reductions.py) against torch's sums. Many programs add overlapping
tiles, some past the tensor's edges (those elements must not be touched), over several trips of a loop (the
staging stages are reused while earlier reductions may still read them), through a descriptor made in the
kernel and a host ``TensorDescriptor``; 1, 2 and 3 stages (``KERNELC_BULK_REDUCE_STAGES``). And ``desc.store``
(TMA stores) at the same kinds of coordinates: the copy engine refuses those too (guarded with
``KERNELC_TMA_WRITE_GUARD=all``).

Each case runs in a subprocess of its own (``python3 tests/gpu/test_gpu_bulk_reduce.py CASE ...``): the first
GPU runs died with "an illegal instruction was encountered" in every case whose tiles start at a negative row
(the copy engine refuses a bulk reduction at a negative coordinate), which leaves the CUDA context unusable for
every later test of the process; isolated, a failing case fails alone. Those tiles now take the masked atomics
of ``guard_tma_writes`` (passes/tma_write_guards.py; docs/attention.md, "desc.atomic_add at negative
coordinates"), the others TMA, in one launch.

Run on an sm_90 machine: ``python -m pytest -q tests/gpu/test_gpu_bulk_reduce.py``.
"""
import os
import pathlib
import subprocess
import sys

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
def add_tiles_at(X, OUT, M, N, row0, row_step, col_step, BM: kl.constexpr, BN: kl.constexpr,
                 STEPS: kl.constexpr):
    # program p, trip i adds its tile at row row0 + p * row_step, column (i % 3) * col_step
    pid = kl.program_id(0)
    d = kl.make_tensor_descriptor(OUT, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    for i in kl.range(0, STEPS):
        rows = kl.arange(0, BM)
        cols = kl.arange(0, BN)
        x = kl.load(X + (pid * STEPS + i) * BM * BN + rows[:, None] * BN + cols[None, :])
        d.atomic_add([row0 + pid * row_step, (i % 3) * col_step], x)


@kernelc.jit
def add_tiles_host(X, desc, BM: kl.constexpr, BN: kl.constexpr, STEPS: kl.constexpr):
    pid = kl.program_id(0)
    for i in kl.range(0, STEPS):
        rows = kl.arange(0, BM)
        cols = kl.arange(0, BN)
        x = kl.load(X + (pid * STEPS + i) * BM * BN + rows[:, None] * BN + cols[None, :])
        desc.atomic_add([pid * (BM // 2) - 8, (i % 3) * (BN // 2)], x)


@kernelc.jit
def store_tiles_at(X, OUT, M, N, row0, col0, BM: kl.constexpr, BN: kl.constexpr):
    # program p stores its tile at row row0 + p * BM, column col0 (the tiles do not overlap)
    pid = kl.program_id(0)
    d = kl.make_tensor_descriptor(OUT, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    x = kl.load(X + pid * BM * BN + kl.arange(0, BM)[:, None] * BN + kl.arange(0, BN)[None, :])
    d.store([row0 + pid * BM, col0], x)


@kernelc.jit
def store_tiles_host(X, desc, row0, col0, BM: kl.constexpr, BN: kl.constexpr):
    pid = kl.program_id(0)
    x = kl.load(X + pid * BM * BN + kl.arange(0, BM)[:, None] * BN + kl.arange(0, BN)[None, :])
    desc.store([row0 + pid * BM, col0], x)


def _reference(x, M, N, BM, BN, programs, steps, row0=-8, row_step=None, col_step=None):
    row_step = BM // 2 if row_step is None else row_step
    col_step = BN // 2 if col_step is None else col_step
    pad = 2 * max(BM, BN)
    ref = torch.zeros(M + 2 * pad, N + 2 * pad, dtype=torch.float64, device=x.device)
    for p in range(programs):
        for i in range(steps):
            r, c = row0 + p * row_step + pad, (i % 3) * col_step + pad
            ref[r:r + BM, c:c + BN] += x[p * steps + i].double()
    return ref[pad:pad + M, pad:pad + N]


# one geometry at a time (the first GPU run of the mixed test died with an illegal instruction; each case in
# its own process tells which one): (BN, M, N, row0, row_step, col_step, stages)
GEOMETRIES = {
    "inside_1box": (32, 352, 64, 0, 32, 16, "2"),     # one 128-byte box a tile, every element inside
    "inside_2box": (64, 352, 96, 0, 32, 16, "2"),     # two boxes a tile (256-byte rows)
    "inside_1stage": (32, 352, 64, 0, 32, 16, "1"),
    "past_end": (32, 300, 48, 0, 32, 16, "2"),        # tiles past the last row and column
    "negative_row": (32, 352, 64, -8, 32, 16, "2"),   # the first program's tile starts at row -8
    "negative_row_1stage": (32, 352, 64, -8, 32, 16, "1"),
    "above_tensor": (32, 352, 64, -64, 32, 16, "2"),  # program 0's tile wholly above the tensor, 1's half
    "negative_col": (32, 352, 64, 0, 32, -16, "2"),   # trips 1 and 2 start at columns -16 and -32
}


def case_geometry(case):
    BN, M, N, row0, row_step, col_step, _ = GEOMETRIES[case]
    BM, steps, programs = 64, 5, 9
    x = torch.randn(programs * steps, BM, BN, device="cuda")
    out = torch.full((M, N), 3.0, device="cuda")
    add_tiles_at[(programs,)](x, out, M, N, row0, row_step, col_step, BM=BM, BN=BN, STEPS=steps)
    torch.cuda.synchronize()
    # what ran is the TMA reduction (the launcher specialises the 16-divisible ints and the pointers)
    sig = {"X": "*fp32", "OUT": "*fp32", "M": "i32", "N": "i32", "row0": "i32", "row_step": "i32", "col_step": "i32"}
    vals = dict(M=M, N=N, row0=row0, row_step=row_step, col_step=col_step)
    div = dict({k: 16 for k, v in vals.items() if v % 16 == 0}, X=16, OUT=16)
    ck = kernelc.compile(add_tiles_at, sig, dict(BM=BM, BN=BN, STEPS=steps), divisibility=div)
    assert "cp.reduce.async.bulk.tensor" in ck.asm["ptx"]
    want = _reference(x, M, N, BM, BN, programs, steps, row0, row_step, col_step) + 3
    torch.testing.assert_close(out.double(), want, rtol=1e-4, atol=1e-4)


DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "i32": torch.int32}


def case_tiles(dtype, host):
    dtype = DTYPES[dtype]
    host = host == "host"
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


# desc.store faults at negative coordinates as the reduction does (docs/attention.md): (M, N, row0, col0)
STORE_GEOMETRIES = {
    "inside": (640, 64, 0, 16),
    "past_end": (600, 40, 0, 16),        # the last tile past the last row, every tile past the last column
    "negative_row": (640, 64, -8, 0),    # program 0 at rows -8..55
    "above_tensor": (640, 64, -64, 0),   # program 0 wholly above the tensor
    "negative_col": (640, 64, 8, -16),   # every tile starts at column -16
}


def case_store(geometry, host):
    M, N, row0, col0 = STORE_GEOMETRIES[geometry]
    BM, BN, programs = 64, 32, 10
    x = torch.randn(programs, BM, BN, device="cuda")
    out = torch.full((M, N), -1.0, device="cuda")
    if host == "host":
        store_tiles_host[(programs,)](x, TensorDescriptor.from_tensor(out, [BM, BN]), row0, col0, BM=BM, BN=BN)
    else:
        store_tiles_at[(programs,)](x, out, M, N, row0, col0, BM=BM, BN=BN)
    torch.cuda.synchronize()
    pad = 2 * BM
    want = torch.full((M + 2 * pad, N + 2 * pad), -1.0, device="cuda")
    for p in range(programs):
        r, c = row0 + p * BM + pad, col0 + pad
        want[r:r + BM, c:c + BN] = x[p]
    torch.testing.assert_close(out, want[pad:pad + M, pad:pad + N], rtol=0, atol=0)


def case_repeated():
    BM, BN, steps, programs = 64, 32, 5, 6
    M, N = 200, 48
    x = torch.randn(programs * steps, BM, BN, device="cuda")
    out = torch.zeros(M, N, device="cuda")
    for _ in range(3):
        add_tiles[(programs,)](x, out, M, N, BM=BM, BN=BN, STEPS=steps)
    torch.cuda.synchronize()
    torch.testing.assert_close(out.double(), 3 * _reference(x, M, N, BM, BN, programs, steps), rtol=1e-4,
                               atol=1e-4)


def _isolated(*args, stages="2", **extra_env):
    root = pathlib.Path(__file__).resolve().parents[2]
    env = dict(os.environ, KERNELC_BULK_REDUCE_STAGES=stages,
               PYTHONPATH=os.pathsep.join([str(root)] + [p for p in [os.environ.get("PYTHONPATH")] if p]),
               **extra_env)
    r = subprocess.run([sys.executable, __file__, *args], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, \
        f"case {args} ({stages} stages): exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"


@pytest.mark.parametrize("case", sorted(GEOMETRIES))
def test_atomic_add_geometry(case):
    _isolated("geometry", case, stages=GEOMETRIES[case][-1])


@pytest.mark.parametrize("dtype,host,stages", [("fp32", "made", "1"), ("fp32", "made", "2"), ("fp32", "made", "3"),
                                               ("fp16", "made", "2"), ("bf16", "made", "2"), ("i32", "made", "2"),
                                               ("fp32", "host", "2"), ("bf16", "host", "3")])
def test_atomic_add_tiles_match_torch(dtype, host, stages):
    # overlapping tiles of 9 programs, two 128-byte boxes each, starting at row -8 and running past both edges
    _isolated("tiles", dtype, host, stages=stages)


def test_atomic_add_repeated_launches_accumulate():
    _isolated("repeated")


@pytest.mark.parametrize("geometry,host", [(g, "made") for g in sorted(STORE_GEOMETRIES)] + [("negative_row", "host")])
def test_descriptor_store_geometry(geometry, host):
    # stores are guarded on request (KERNELC_TMA_WRITE_GUARD=all: the default guards only reductions, see
    # passes/tma_write_guards.py); tiles at coordinates >= 0 run the unguarded default
    negative = STORE_GEOMETRIES[geometry][2] < 0 or STORE_GEOMETRIES[geometry][3] < 0
    _isolated("store", geometry, host, **({"KERNELC_TMA_WRITE_GUARD": "all"} if negative else {}))


def test_the_launched_store_is_a_tma_store():
    sig = {"X": "*fp32", "OUT": "*fp32", "M": "i32", "N": "i32", "row0": "i32", "col0": "i32"}
    # the launches' col0 (16, 0, -16) are 16-divisible, as the runtime specialises them: an inner offset not proven
    # whole 16-byte chunks takes the element-wise store (passes/lower_descriptors.py)
    ck = kernelc.compile(store_tiles_at, sig, dict(BM=64, BN=32),
                         divisibility={"X": 16, "OUT": 16, "M": 16, "N": 16, "col0": 16})
    assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in ck.asm["ptx"]
    assert "UTMASTG.2D" in ck.asm["sass"]


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16", "i32"])
def test_the_launched_kernel_is_a_bulk_reduction(dtype):
    # what the launches above run at these sizes (16-divisible ints and pointers): TMA, not the atomics fallback
    sig = {"X": "*" + dtype, "OUT": "*" + dtype, "M": "i32", "N": "i32"}
    ck = kernelc.compile(add_tiles, sig, dict(BM=64, BN=64, STEPS=7), divisibility={k: 16 for k in sig})
    assert "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group" in ck.asm["ptx"]
    assert "UTMAREDG.2D.ADD" in ck.asm["sass"]


if __name__ == "__main__":  # one case, in the process _isolated starts
    {"geometry": case_geometry, "tiles": case_tiles, "repeated": case_repeated,
     "store": case_store}[sys.argv[1]](*sys.argv[2:])
    print("ok")
