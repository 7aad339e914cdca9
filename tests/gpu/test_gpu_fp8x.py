"""fp8x (2026-11-28) on the GPU: attention.py's FOLD_SCALE (the row max of the raw scores, the scale in the
exponent's FFMA), forced on and off, against torch in fp16/bf16 and against the same quantised inputs in fp8.

Run on an sm_90 machine: ``python -m pytest -q tests/gpu/test_gpu_fp8x.py``.
"""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

from examples.kernels import attention as A  # noqa: E402
from tests.gpu.test_gpu_attention import SDPA, _check_fp8, _close_as_torch, _inputs  # noqa: E402


@pytest.mark.parametrize("fold", [True, False])
@pytest.mark.parametrize("D,causal", [(128, False), (128, True), (64, True), (64, False)])
def test_pointer_forward_with_and_without_the_fold(D, causal, fold):
    q, k, v, _ = _inputs(2, 4, 1000, D, torch.float16)
    o = A.attention_fwd(q, k, v, causal=causal, fold_scale=fold)
    _close_as_torch("o", o, SDPA(q, k, v, is_causal=causal), SDPA(q.float(), k.float(), v.float(), is_causal=causal),
                    2e-3)
    q, k, v, _ = _inputs(2, 4, 1024, D, torch.float16)
    (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in (q, k, v))
    o8 = A.attention_fp8(q8, k8, v8.transpose(-1, -2).contiguous(), qs, ks, vs, causal=causal, fold_scale=fold)
    _check_fp8(o8, q8, k8, v8, qs, ks, vs, causal)
