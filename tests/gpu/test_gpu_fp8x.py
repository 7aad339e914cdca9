"""fp8x (2026-11-28) on the GPU: attention_fa3's LATE_RESCALE (O rescaled after the next QK^T is issued) and
attention.py's FOLD_SCALE (the scale in the exponent's FFMA) against torch, and KERNELC_RESCALE_SKIP (a warp skips
acc * alpha where every alpha is 1: x * 1.0 == x) giving the same bits as without it.

Run on an sm_90 machine: ``python -m pytest -q tests/gpu/test_gpu_fp8x.py``.
"""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

from examples.kernels import attention as A  # noqa: E402
from examples.kernels import attention_fa3 as AF  # noqa: E402
from tests.gpu.test_gpu_attention import SDPA, _check_fp8, _close_as_torch, _inputs  # noqa: E402


@pytest.mark.parametrize("D,causal", [(128, False), (128, True), (64, False), (64, True)])
def test_fa3_late_rescale_vs_sdpa(D, causal):
    q, k, v, _ = _inputs(2, 4, 1024, D, torch.float16)
    o = AF.attention(q, k, v, causal=causal, late_rescale=True)
    _close_as_torch("o", o, SDPA(q, k, v, is_causal=causal), SDPA(q.float(), k.float(), v.float(), is_causal=causal),
                    2e-3)
    (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in (q, k, v))
    o8 = AF.attention_fp8(q8, k8, v8.transpose(-1, -2).contiguous(), qs, ks, vs, causal=causal, late_rescale=True)
    _check_fp8(o8, q8, k8, v8, qs, ks, vs, causal)


@pytest.mark.parametrize("D,causal", [(128, False), (64, True), (64, False)])
def test_pointer_fold_scale_vs_sdpa(D, causal):
    q, k, v, _ = _inputs(2, 4, 1000, D, torch.float16)
    o = A.attention_fwd(q, k, v, causal=causal, fold_scale=True)
    _close_as_torch("o", o, SDPA(q, k, v, is_causal=causal), SDPA(q.float(), k.float(), v.float(), is_causal=causal),
                    2e-3)
    q, k, v, _ = _inputs(2, 4, 1024, D, torch.float16)
    (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in (q, k, v))
    o8 = A.attention_fp8(q8, k8, v8.transpose(-1, -2).contiguous(), qs, ks, vs, causal=causal, fold_scale=True)
    _check_fp8(o8, q8, k8, v8, qs, ks, vs, causal)


@pytest.mark.parametrize("which", ["fa3", "fa3_late", "fa3_fp8", "fa3_fp8_late", "pointer_fp8_fold", "pointer_fold"])
@pytest.mark.parametrize("causal", [False, True])
def test_rescale_skip_gives_the_same_bits(which, causal, monkeypatch):
    import kernelc
    q, k, v, _ = _inputs(2, 4, 1024, 128, torch.float16)
    (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in (q, k, v))
    v8t = v8.transpose(-1, -2).contiguous()
    outs = []
    for knob in ("0", "1"):
        monkeypatch.setenv("KERNELC_RESCALE_SKIP", knob)
        if which.startswith("fa3"):
            kern = kernelc.jit(AF.attn_fwd_fa3_kernel.fn)  # a fresh JIT: compiled under this environment
            late = which.endswith("late")
            if "fp8" in which:
                outs.append(AF.attention_fp8(q8, k8, v8t, qs, ks, vs, causal=causal, kernel=kern, late_rescale=late))
            else:
                outs.append(AF.attention(q, k, v, causal=causal, kernel=kern, late_rescale=late))
        else:
            kern = kernelc.jit(A.attn_fwd_lse_kernel.fn)
            if "fp8" in which:
                outs.append(A.attention_fp8(q8, k8, v8t, qs, ks, vs, causal=causal, kernel=kern, fold_scale=True))
            else:
                outs.append(A.attention_fwd(q, k, v, causal=causal, kernel=kern, fold_scale=True))
    assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16))
