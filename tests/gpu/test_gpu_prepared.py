"""Prepared launches (``kernel.prepare``, runtime/prepared.py) on the GPU: calls after the first take the prepared
body (not the general path) and compute with their own tensors; a misaligned view falls back and is still right;
the attention forwards' plans (which launch through them) give each call's output.

Run on an sm_90 machine: ``python -m pytest -q tests/gpu/test_gpu_prepared.py``.
"""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

import kernelc  # noqa: E402
import kernelc.language as kl  # noqa: E402


@kernelc.jit
def _axpy(x_ptr, y_ptr, n, a, BLOCK: kl.constexpr):
    offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
    m = offs < n
    kl.store(y_ptr + offs, kl.load(y_ptr + offs, mask=m) + a * kl.load(x_ptr + offs, mask=m), mask=m)


def test_prepared_launches_use_each_calls_tensors():
    n = 1000
    x, y = torch.randn(n, device="cuda"), torch.zeros(n, device="cuda")
    launch = _axpy.prepare((4,), x, y, n, 2.0, 256)
    launch(x, y)
    assert launch.__globals__["_S"][0] is not None  # specialised to the compiled entry
    for _ in range(3):
        x2, y2 = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        want = y2 + 2.0 * x2
        launch(x2, y2)
        torch.testing.assert_close(y2, want)
    big = torch.randn(n + 1, device="cuda")
    y3 = torch.zeros(n, device="cuda")
    launch(big[1:], y3)  # 4 bytes in: another specialisation, through the general path
    torch.testing.assert_close(y3, 2.0 * big[1:])


def test_attention_plans_give_each_calls_output():
    from examples.kernels import attention as A
    from examples.kernels import attention_fa3 as AF
    SDPA = torch.nn.functional.scaled_dot_product_attention
    for _ in range(2):
        q, k, v = (torch.randn(1, 2, 256, 64, device="cuda", dtype=torch.float16) for _ in range(3))
        ref = SDPA(q.float(), k.float(), v.float(), is_causal=True)
        for f in (A.attention_fwd, AF.attention):
            torch.testing.assert_close(f(q, k, v, True).float(), ref, rtol=1e-2, atol=2e-3)


@pytest.mark.parametrize("D,causal", [(64, True), (128, True), (128, False)])
def test_fp8_forward_through_machine_values_is_the_descriptor_launch_bit_for_bit(D, causal):
    """The fp8 forward's descriptor slots given tensors (its DESC plans): after the first call the prepared launch
    passes the descriptors' fields itself (runtime/prepared.py, ``_machine_source``); on fresh inputs each call (new
    addresses: the per-slot map cache misses, then hits) its output is the descriptor path's bit for bit, and SDPA's
    on the dequantised inputs within fp8's tolerance."""
    from examples.kernels import attention as A
    SDPA = torch.nn.functional.scaled_dot_product_attention

    def inputs():
        q, k, v = (torch.randn(2, 4, 512, D, device="cuda", dtype=torch.float16) for _ in range(3))
        (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in (q, k, v))
        return (q8, k8, A.fp8_v_key_order(v8.transpose(-1, -2).contiguous()), qs, ks, vs), (q8, k8, v8, qs, ks, vs)

    args, _ = inputs()
    A.attention_fp8(*args, causal, key_order=True)
    plan = [p for key, p in A._PLANS.items() if key[0] == "fp8" and key[1] == args[0].shape and key[11] == causal][-1]
    assert plan.descs is not None and plan.prepared
    sm, miss = plan.run.__globals__["_SM"], plan.run.__globals__["_MISS"]
    assert sm[0] is not None  # the machine-value launch was made
    hits, mfast = [], sm[0]

    def counted(*a):
        r = mfast(*a)
        hits.append(r is not miss)
        return r
    sm[0] = counted
    for _ in range(3):
        args, (q8, k8, v8, qs, ks, vs) = inputs()
        o = A.attention_fp8(*args, causal, key_order=True)
        o2 = A.attention_fp8(*args, causal, key_order=True)  # the map from the slot's cache this time
        fast, sm[0] = sm[0], None
        try:
            want = A.attention_fp8(*args, causal, key_order=True)  # the descriptors' launch
        finally:
            sm[0] = fast
        assert torch.equal(o, want) and torch.equal(o2, want)
        assert hits[-2:] == [True, True]  # both through the machine values
        ref = SDPA(q8.float() * qs, k8.float() * ks, v8.float() * vs, is_causal=causal)
        err = ((o.float() - ref).abs().max() / ref.abs().max()).item()
        assert err < 0.05, err
    sm[0] = mfast
