"""fwd17 (2026-11-28) on the GPU: the fp8 forwards with ``key_order=True`` (V^T's keys in
``attention.fp8_key_order``'s order, P V without P's shuffle between lanes) against the same quantised inputs, and
against the natural order's output.

Run on an sm_90 machine: ``python -m pytest -q tests/gpu/test_gpu_fp8_key_order.py``.
"""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

from examples.kernels import attention as A  # noqa: E402
from examples.kernels import attention_fa3 as AF  # noqa: E402
from tests.gpu.test_gpu_attention import _check_fp8, _inputs  # noqa: E402


@pytest.mark.parametrize("fwd", ["ptr", "fa3"])
@pytest.mark.parametrize("D,causal", [(128, False), (128, True), (64, True), (64, False)])
def test_fp8_forwards_in_key_order(fwd, D, causal):
    q, k, v, _ = _inputs(2, 4, 1024, D, torch.float16)
    (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in (q, k, v))
    v8t = v8.transpose(-1, -2).contiguous()
    f = A.attention_fp8 if fwd == "ptr" else AF.attention_fp8
    o8 = f(q8, k8, A.fp8_v_key_order(v8t), qs, ks, vs, causal=causal, key_order=True)
    _check_fp8(o8, q8, k8, v8, qs, ks, vs, causal)
    torch.testing.assert_close(o8, f(q8, k8, v8t, qs, ks, vs, causal=causal), rtol=0, atol=4e-3)
