"""sm_90 vector reductions (passes/atomic_results.py ``vectorize_atomics``) on the GPU: many programs add
fp32 tiles into one output with ``red.global.add.v4.f32``; the sum must match torch (the additions are
exact: small integers), masked rows untouched. Also the loop with a hoisted conversion (dQ kernel) is
covered by tests/gpu/test_gpu_attention.py."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

import kernelc  # noqa: E402
import kernelc.language as kl  # noqa: E402


@kernelc.jit
def _accumulate(x_ptr, y_ptr, n_rows, N: kl.constexpr, BLOCK_M: kl.constexpr):
    pid = kl.program_id(0)
    rows = kl.arange(0, BLOCK_M)
    cols = kl.arange(0, N)
    x = kl.load(x_ptr + pid * BLOCK_M * N + rows[:, None] * N + cols[None, :])
    kl.atomic_add(y_ptr + rows[:, None] * N + cols[None, :], x, mask=(rows < n_rows)[:, None], sem="relaxed")


@kernelc.jit
def _accumulate_dot(a_ptr, b_ptr, y_ptr, M: kl.constexpr, N: kl.constexpr, K: kl.constexpr):
    pid = kl.program_id(0)
    m, n, k = kl.arange(0, M), kl.arange(0, N), kl.arange(0, K)
    a = kl.load(a_ptr + pid * M * K + m[:, None] * K + k[None, :])
    b = kl.load(b_ptr + k[:, None] * N + n[None, :])
    # the MMA accumulator goes to the reductions in its own layout (fp32 pairs): red.v2, no conversion
    kl.atomic_add(y_ptr + m[:, None] * N + n[None, :], kl.dot(a, b), sem="relaxed")


SM90 = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 9,
                          reason="vector red needs sm_90")


@SM90
@pytest.mark.parametrize("M,N,K,num_warps", [(32, 128, 64, 8), (64, 64, 32, 4)])
def test_dot_accumulators_added_with_vector_reds(M, N, K, num_warps):
    progs = 129
    a = torch.randint(-3, 4, (progs, M, K), device="cuda").half()
    b = torch.randint(-3, 4, (K, N), device="cuda").half()
    y = torch.zeros(M, N, device="cuda")
    _accumulate_dot[(progs,)](a, b, y, M=M, N=N, K=K, num_warps=num_warps)
    torch.testing.assert_close(y, (a.float() @ b.float()).sum(0), atol=0, rtol=0)
    ck = kernelc.compile(_accumulate_dot, dict(a_ptr="*fp16", b_ptr="*fp16", y_ptr="*fp32"), dict(M=M, N=N, K=K),
                         target="sm_90a", num_warps=num_warps, divisibility={"a_ptr": 16, "b_ptr": 16, "y_ptr": 16})
    assert "REDG.E.ADD.F32x2" in ck.asm["sass"]


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 9,
                    reason="vector red needs sm_90")
@pytest.mark.parametrize("N,BLOCK_M,n_rows", [(128, 32, 32), (64, 16, 13)])
def test_many_programs_add_tiles_with_vector_reds(N, BLOCK_M, n_rows):
    progs = 257
    x = torch.randint(-8, 8, (progs, BLOCK_M, N), device="cuda").float()
    y = torch.zeros(BLOCK_M, N, device="cuda")
    _accumulate[(progs,)](x, y, n_rows, N=N, BLOCK_M=BLOCK_M)
    want = x.sum(0)
    want[n_rows:] = 0
    torch.testing.assert_close(y, want, atol=0, rtol=0)
    # the same kernel for sm_90a compiles to vector reds (tests/compiler/test_vector_atomics.py checks more)
    ck = kernelc.compile(_accumulate, dict(x_ptr="*fp32", y_ptr="*fp32", n_rows="i32"), dict(N=N, BLOCK_M=BLOCK_M),
                         target="sm_90a", divisibility={"x_ptr": 16, "y_ptr": 16})
    assert "REDG.E.ADD.F32x4" in ck.asm["sass"]
