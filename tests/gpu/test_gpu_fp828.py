"""fp828 (2026-11-30) on the GPU: the fp8 pointer forward with its ring's copies issued at the top of an iteration
(``KERNELC_TMA_REFILL_TOP``; a race between a copy and the wgmma still reading its stage would show as a wrong
output) gives the default build's output bit for bit (the same copies into the same stages and the same wgmmas, issued
earlier), and the causal forward in one key loop (``one_loop``) SDPA's within the fp8 tolerances; the fp16 pointer
forward under the knob, its default's output bit for bit.

Run on an sm_90 machine: ``python -m pytest -q tests/gpu/test_gpu_fp828.py``.
"""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

from examples.kernels import attention as A  # noqa: E402
from tests.gpu.test_gpu_attention import _check_fp8, _inputs  # noqa: E402

TOP = {"KERNELC_TMA_REFILL_TOP": "1", "KERNELC_WGMMA_ZERO_ACC": "on"}


def _under(env, monkeypatch):
    """A fresh JIT of the forward kernel compiled under ``env`` (compile knobs are read when a kernel compiles)."""
    import kernelc
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return kernelc.jit(A.attn_fwd_lse_kernel.fn)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("D", [64, 128])
def test_refill_top_fp8_forward_is_the_default_bit_for_bit(D, causal, monkeypatch):
    q, k, v, _ = _inputs(2, 4, 1024, D, torch.float16)
    (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in (q, k, v))
    v8k = A.fp8_v_key_order(v8.transpose(-1, -2).contiguous())
    want = A.attention_fp8(q8, k8, v8k, qs, ks, vs, causal=causal, key_order=True)
    kern = _under(TOP, monkeypatch)
    got = A.attention_fp8(q8, k8, v8k, qs, ks, vs, causal=causal, key_order=True, kernel=kern)
    _check_fp8(got, q8, k8, v8, qs, ks, vs, causal)
    assert torch.equal(got, want)
    one = A.attention_fp8(q8, k8, v8k, qs, ks, vs, causal=causal, key_order=True, kernel=kern, one_loop=True)
    _check_fp8(one, q8, k8, v8, qs, ks, vs, causal)


@pytest.mark.parametrize("causal", [False, True])
def test_refill_top_fp16_pointer_forward_is_the_default_bit_for_bit(causal, monkeypatch):
    q, k, v, _ = _inputs(2, 4, 1024, 64, torch.float16)
    want, lse = A.attention_fwd(q, k, v, causal=causal, return_lse=True)
    got, lse2 = A.attention_fwd(q, k, v, causal=causal, return_lse=True, kernel=_under(TOP, monkeypatch))
    assert torch.equal(got, want) and torch.equal(lse2, lse)


@pytest.mark.parametrize("causal", [False, True])
def test_fp8_forward_in_128_row_programs_of_64_keys(causal):
    # 128x64 at 8 warps (two warpgroups on one K/V ring), the copies at the top, causal in one loop (its two masked
    # 64-key blocks behind the branch): SDPA's output within the fp8 tolerances, N a multiple of 128 and not of 256
    q, k, v, _ = _inputs(2, 4, 1152, 128, torch.float16)
    (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in (q, k, v))
    v8k = A.fp8_v_key_order(v8.transpose(-1, -2).contiguous())
    o = A.attention_fp8(q8, k8, v8k, qs, ks, vs, causal=causal, key_order=True, refill_top=True, BLOCK_M=128,
                        BLOCK_N=64, num_warps=8, num_stages=3)
    _check_fp8(o, q8, k8, v8, qs, ks, vs, causal)
