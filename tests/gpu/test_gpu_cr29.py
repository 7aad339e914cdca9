"""cr29 (2026-11-30) on the GPU: the fp8 forward's conditional rescale (``rescale_slack``: a row keeps its old max as
the exponent's reference until the new one exceeds it by more than the slack). Guarded (``KERNELC_GUARD_RESCALE``, the
default: a warp skips the accumulator's multiplies where every factor it holds is 1.0) and unguarded builds give the
same output bit for bit (x * 1.0 is x), and both SDPA's within the fp8 tolerances -- on inputs whose row maxima rise
across the key blocks (so some trips rescale and some do not) as well as on plain normal ones.

Run on an sm_90 machine: ``python -m pytest -q tests/gpu/test_gpu_cr29.py``.
"""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

from examples.kernels import attention as A  # noqa: E402
from tests.gpu.test_gpu_attention import _check_fp8, _inputs  # noqa: E402


def _unguarded(monkeypatch):
    import kernelc
    monkeypatch.setenv("KERNELC_GUARD_RESCALE", "0")
    return kernelc.jit(A.attn_fwd_lse_kernel.fn)


@pytest.mark.parametrize("rising", [False, True])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("D", [64, 128])
def test_slack_forward_guarded_is_unguarded_bit_for_bit(D, causal, rising, monkeypatch):
    q, k, v, _ = _inputs(2, 4, 1024, D, torch.float16)
    if rising:  # later keys score higher: the row max moves by more than the slack a few times a row
        k = k * torch.linspace(0.2, 3.0, 1024, device="cuda", dtype=torch.float16)[:, None]
    (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in (q, k, v))
    v8k = A.fp8_v_key_order(v8.transpose(-1, -2).contiguous())
    got = A.attention_fp8(q8, k8, v8k, qs, ks, vs, causal=causal, key_order=True, rescale_slack=8)
    _check_fp8(got, q8, k8, v8, qs, ks, vs, causal)
    bare = A.attention_fp8(q8, k8, v8k, qs, ks, vs, causal=causal, key_order=True, rescale_slack=8,
                           kernel=_unguarded(monkeypatch))
    assert torch.equal(got, bare)
    base = A.attention_fp8(q8, k8, v8k, qs, ks, vs, causal=causal, key_order=True)
    # another exponent reference rounds P differently in e4m3: close to the default, not equal
    assert (got.float() - base.float()).abs().max().item() <= 2 ** -4 * (v8.float() * vs).abs().max().item() + 1e-2
