"""cr29 on CPU (the interpreter): the fp8 forward with the conditional rescale (``attention_fp8(rescale_slack=)``: a row
keeps its old max as the exponent's reference until the new one exceeds it by more than the slack) gives the
reference's output within the fp8 bounds, on inputs whose row maxima rise across the key blocks (rescaling on some
trips and not on others) and on plain ones; a slack past e4m3's range is refused."""
import pytest
import torch

from examples.kernels import attention as A
from tests.language.test_attention_interpreter import _ref


@pytest.fixture(autouse=True)
def _interpret(monkeypatch):
    monkeypatch.setenv("KERNELC_INTERPRET", "1")


@pytest.mark.parametrize("rising", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_slack_forward_against_the_same_quantised_inputs(causal, rising):
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 2, 96, 32, generator=g).half() for _ in range(3))
    if rising:  # later keys score up to ~9x higher: row maxima move by more than 8 (log2) between blocks
        k = k * torch.linspace(0.3, 9.0, 96).half()[:, None]
    (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in (q, k, v))
    v8t = v8.transpose(-1, -2).contiguous()
    o = A.attention_fp8(q8, k8, v8t, qs, ks, vs, causal=causal, BLOCK_M=32, BLOCK_N=16, rescale_slack=8)
    ref, _ = _ref(q8.float() * qs, k8.float() * ks, v8.float() * vs, causal)
    vmax = (v8.float() * vs).abs().max().item()
    err = (o.float() - ref).abs()
    # P (now in [0, 2^8]) is rounded to e4m3 (relative error <= 2^-4) while l sums the exact P
    assert err.max().item() <= 2 ** -4 * vmax + 1e-2, err.max().item()
    assert err.mean().item() <= 2 ** -8 * vmax, err.mean().item()
    if rising:  # the slack changed the reference somewhere: not the default's P bit for bit
        base = A.attention_fp8(q8, k8, v8t, qs, ks, vs, causal=causal, BLOCK_M=32, BLOCK_N=16)
        assert (base.float() - ref).abs().max().item() <= 2 ** -4 * vmax + 1e-2


def test_a_slack_past_e4m3s_range_is_refused():
    q8 = torch.zeros(1, 1, 32, 32).to(torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="rescale_slack"):
        A.attention_fp8(q8, q8, q8, 1.0, 1.0, 1.0, rescale_slack=9)
