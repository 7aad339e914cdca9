"""att20 (2026-11-29) on the GPU: the pointer forward reading Q, K, V through host tensor descriptors (``desc=1``)
and storing O through one (``desc=2``) gives the pointer loads' output bit for bit (the same copies into the same
shared-memory layout, the same wgmmas; only where each tile's tensor map comes from differs), and SDPA's within the
usual tolerances.

Run on an sm_90 machine: ``python -m pytest -q tests/gpu/test_gpu_fwd_desc.py``.
"""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

from examples.kernels import attention as A  # noqa: E402
from tests.gpu.test_gpu_attention import _check_fp8, _inputs  # noqa: E402

SDPA = torch.nn.functional.scaled_dot_product_attention


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("D", [64, 128])
def test_descriptor_forwards_match_the_pointer_forward(D, causal):
    q, k, v, _ = _inputs(2, 4, 1024, D, torch.float16)
    o0, lse0 = A.attention_fwd(q, k, v, causal=causal, return_lse=True, desc=0)
    o2, lse2 = A.attention_fwd(q, k, v, causal=causal, return_lse=True, desc=2)
    torch.testing.assert_close(o2.float(), SDPA(q.float(), k.float(), v.float(), is_causal=causal), rtol=1e-2,
                               atol=2e-3)
    assert torch.equal(o2, o0) and torch.equal(lse2, lse0)
    (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in (q, k, v))
    v8k = A.fp8_v_key_order(v8.transpose(-1, -2).contiguous())
    outs = [A.attention_fp8(q8, k8, v8k, qs, ks, vs, causal=causal, key_order=True, desc=d) for d in (0, 1, 2)]
    _check_fp8(outs[2], q8, k8, v8, qs, ks, vs, causal)
    assert torch.equal(outs[1], outs[0]) and torch.equal(outs[2], outs[0])
