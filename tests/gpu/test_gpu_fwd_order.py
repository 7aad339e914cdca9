"""fwd18 (2026-11-29) on the GPU: the causal forwards with row blocks heaviest first across groups of heads (``lpt=G``)
and the pointer forward's cheaper masked blocks (``even_n``, ``mask_fold``, ``diag_split``) against SDPA, and
against the plain order's output bit for bit (each program computes the same (row block, head) either way).

Run on an sm_90 machine: ``python -m pytest -q tests/gpu/test_gpu_fwd_order.py``.
"""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

from examples.kernels import attention as A  # noqa: E402
from examples.kernels import attention_fa3 as AF  # noqa: E402
from tests.gpu.test_gpu_attention import _check_fp8, _inputs  # noqa: E402

SDPA = torch.nn.functional.scaled_dot_product_attention


@pytest.mark.parametrize("D,N", [(64, 1024), (128, 1024), (64, 1000)])
def test_pointer_forward_grouped_with_cheap_masks(D, N):
    q, k, v, _ = _inputs(2, 6, N, D, torch.float16)
    opts = dict(lpt=4, even_n=True, mask_fold=True, diag_split=True)
    o, lse = A.attention_fwd(q, k, v, causal=True, return_lse=True, **opts)
    ref = SDPA(q.float(), k.float(), v.float(), is_causal=True)
    torch.testing.assert_close(o.float(), ref, rtol=1e-2, atol=2e-3)
    o0, lse0 = A.attention_fwd(q, k, v, causal=True, return_lse=True, **dict(opts, lpt=0))
    assert torch.equal(o, o0) and torch.equal(lse, lse0)


@pytest.mark.parametrize("D", [64, 128])
def test_fp8_pointer_forward_grouped_split_in_key_order(D):
    q, k, v, _ = _inputs(2, 8, 1024, D, torch.float16)
    (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in (q, k, v))
    v8k = A.fp8_v_key_order(v8.transpose(-1, -2).contiguous())
    opts = dict(key_order=True, lpt=8, even_n=True, mask_fold=True, diag_split=True)
    o8 = A.attention_fp8(q8, k8, v8k, qs, ks, vs, causal=True, **opts)
    _check_fp8(o8, q8, k8, v8, qs, ks, vs, True)
    assert torch.equal(o8, A.attention_fp8(q8, k8, v8k, qs, ks, vs, causal=True, **dict(opts, lpt=0)))


@pytest.mark.parametrize("D", [64, 128])
def test_fa3_order_grouped(D):
    q, k, v, _ = _inputs(2, 8, 1024, D, torch.float16)
    o = AF.attention(q, k, v, causal=True, lpt=8)
    torch.testing.assert_close(o.float(), SDPA(q.float(), k.float(), v.float(), is_causal=True), rtol=1e-2,
                               atol=2e-3)
    assert torch.equal(o, AF.attention(q, k, v, causal=True, lpt=1))
