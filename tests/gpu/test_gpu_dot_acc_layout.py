"""kl.dot with an accumulator that is not in the MMA layout (a transposed load): its conversion used to
go through the scratch holding the staged A and B and overwrite them (tests/compiler/test_scratch_order.py
checks the IR on CPU; this checks the result on the GPU)."""
import pytest

import kernelc
import kernelc.language as kl

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():  # pragma: no cover - CPU machines
    pytest.skip("needs a CUDA GPU", allow_module_level=True)


@kernelc.jit
def _dot_acc_t(a_ptr, b_ptr, c_ptr, o_ptr, M: kl.constexpr, N: kl.constexpr, K: kl.constexpr,
               PREC: kl.constexpr):
    rm, rn, rk = kl.arange(0, M), kl.arange(0, N), kl.arange(0, K)
    a = kl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = kl.load(b_ptr + rk[:, None] * N + rn[None, :])
    c = kl.trans(kl.load(c_ptr + rn[:, None] * M + rm[None, :]))
    kl.store(o_ptr + rm[:, None] * N + rn[None, :], kl.dot(a, b, c, input_precision=PREC))


@pytest.mark.parametrize("dtype,prec", [(torch.float16, None), (torch.float32, "ieee"), (torch.float32, "tf32")])
@pytest.mark.parametrize("num_warps", [1, 4])
def test_dot_with_accumulator_in_another_layout(dtype, prec, num_warps):
    M = N = 64
    K = 32
    a, b = torch.randn(M, K).to(dtype).cuda(), torch.randn(K, N).to(dtype).cuda()
    ct = torch.randn(N, M).cuda()  # the accumulator, stored transposed
    out = torch.zeros(M, N).cuda()
    _dot_acc_t[(1,)](a, b, ct, out, M=M, N=N, K=K, PREC=prec, num_warps=num_warps)
    want = a.double() @ b.double() + ct.t().double()
    tol = 2e-2 if prec == "tf32" else 1e-3
    torch.testing.assert_close(out.double(), want, rtol=tol, atol=tol * K ** 0.5)
