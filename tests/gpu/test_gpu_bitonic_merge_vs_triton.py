"""kl.bitonic_merge on the GPU against Triton's own tl.bitonic_merge (Triton 3.6 or later) and the
interpreter, on rows holding NaN and ties: kernelc follows Triton's comparison there (see
docs/language-ops.md and docs/llir-simulator.md)."""
import pytest

import kernelc
import kernelc.language as kl

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():  # pragma: no cover - CPU machines
    pytest.skip("needs a CUDA GPU", allow_module_level=True)
if tuple(int(p) for p in triton.__version__.split(".")[:2]) < (3, 6) or not hasattr(tl, "bitonic_merge"):
    pytest.skip(f"needs Triton 3.6's tl.bitonic_merge, found triton {triton.__version__}", allow_module_level=True)


@triton.jit
def _tl_merge(x_ptr, o_ptr, M: tl.constexpr, N: tl.constexpr, DESC: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    tl.store(o_ptr + offs, tl.bitonic_merge(tl.load(x_ptr + offs), descending=DESC))


@kernelc.jit
def _kl_merge(x_ptr, o_ptr, M: kl.constexpr, N: kl.constexpr, DESC: kl.constexpr):
    offs = kl.arange(0, M)[:, None] * N + kl.arange(0, N)[None, :]
    kl.store(o_ptr + offs, kl.bitonic_merge(kl.load(x_ptr + offs), descending=DESC))


def _same(a, b):
    return torch.equal(a.isnan(), b.isnan()) and torch.equal(torch.nan_to_num(a.double()),
                                                             torch.nan_to_num(b.double()))


@pytest.mark.parametrize("desc", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_bitonic_merge_matches_triton_with_nan(dtype, desc):
    M, N = 8, 64
    x = (torch.randn(M, N) * 50).to(dtype)
    x[:, ::9] = x[:, 1:2]
    x[0, 3] = float("nan")
    x[1, 0] = float("nan")
    x[2, 40:44] = float("nan")
    want = torch.zeros_like(x).cuda()
    _tl_merge[(1,)](x.cuda(), want, M=M, N=N, DESC=desc)
    got = torch.zeros_like(x).cuda()
    _kl_merge[(1,)](x.cuda(), got, M=M, N=N, DESC=desc)
    interp = torch.zeros_like(x)
    kernelc.jit(_kl_merge.fn, interpret=True)[(1,)](x.clone(), interp, M=M, N=N, DESC=desc)
    want, got = want.cpu(), got.cpu()
    assert _same(got, want), (got, want)
    assert _same(interp, want), (interp, want)
