"""fp8 attention's key order (``attention.fp8_key_order``, ``key_order=True``): P V over keys permuted within
32-key groups, with V^T's keys stored in the same order, in the interpreter against the natural order."""
import pytest
import torch

from examples.kernels import attention as A
from examples.kernels import attention_fa3 as AF


@pytest.fixture(autouse=True)
def _interpret(monkeypatch):
    monkeypatch.setenv("KERNELC_INTERPRET", "1")


def _pi(k):
    """The key fp8_key_order puts at position k of a 32-key group: bits 3, 1, 2 of k become bits 1, 2, 3."""
    return (k & 17) | ((k >> 1) & 1) << 3 | ((k >> 2) & 1) << 1 | ((k >> 3) & 1) << 2


def test_v_key_order_is_the_kernels_permutation():
    v = torch.arange(2 * 3 * 64).reshape(2, 3, 64)
    out = A.fp8_v_key_order(v)
    perm = [32 * (k // 32) + _pi(k % 32) for k in range(64)]
    assert sorted(perm) == list(range(64)) and perm != list(range(64))
    assert torch.equal(out, v[..., perm])
    with pytest.raises(ValueError, match="multiple of 32"):
        A.fp8_v_key_order(v[..., :48])


def _inputs(N, D=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, 2, N, D, generator=g).half() for _ in range(3))
    (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in (q, k, v))
    return q8, k8, v8.transpose(-1, -2).contiguous(), qs, ks, vs


@pytest.mark.parametrize("fwd,causal,cfg", [
    ("ptr", False, dict(BLOCK_M=16, BLOCK_N=32)), ("ptr", False, dict(BLOCK_M=32, BLOCK_N=64)),  # a ragged block
    ("ptr", True, dict(BLOCK_M=32, BLOCK_N=32)),
    ("ptr", True, dict(BLOCK_M=16, BLOCK_N=64, lpt=True)), ("fa3", False, dict(BLOCK_M=32, BLOCK_N=64)),
    ("fa3", True, dict(BLOCK_M=32, BLOCK_N=32))])
def test_key_order_gives_the_natural_orders_output(fwd, causal, cfg):
    """The same output as without it (up to the order of the fp32 sums), and a different one when V is not in
    the key order (so the permutation of P is really applied)."""
    q8, k8, v8t, qs, ks, vs = _inputs(96 if fwd == "ptr" else 128)
    f = A.attention_fp8 if fwd == "ptr" else AF.attention_fp8
    want = f(q8, k8, v8t, qs, ks, vs, causal=causal, **cfg).float()
    got = f(q8, k8, A.fp8_v_key_order(v8t), qs, ks, vs, causal=causal, key_order=True, **cfg).float()
    torch.testing.assert_close(got, want, rtol=0, atol=2e-3)
    wrong = f(q8, k8, v8t, qs, ks, vs, causal=causal, key_order=True, **cfg).float()
    assert (wrong - want).abs().max().item() > 0.05


def test_key_order_needs_multiples_of_32():
    q8, k8, v8t, qs, ks, vs = _inputs(48)
    with pytest.raises(ValueError, match="key_order needs"):
        A.attention_fp8(q8, k8, v8t, qs, ks, vs, key_order=True, BLOCK_M=16, BLOCK_N=16)
