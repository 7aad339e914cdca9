"""mc29 (2026-11-30) on the GPU: ``num_ctas=2`` clusters whose TMA ring copies are multicast (passes/multicast.py)
give the single-program build's output bit for bit (the same copies land in the same stages and the same wgmmas read
them: a copy into a stage the peer still reads, a lost barrier arrival or a phase off by one would show as a wrong
output or a hang), with the cluster barrier and with the 'empty' barriers (KERNELC_MULTICAST_SYNC), for the fp8
attention forward (non-causal: K and V of a head, the compiler proves the copies alike) and a two-dot test kernel;
a grid whose axis 0 is odd is refused before launch.

Run on an sm_90 machine: ``python -m pytest -q tests/gpu/test_gpu_multicast.py``.
"""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

from examples.kernels import attention as A  # noqa: E402
from tests.gpu.test_gpu_attention import _check_fp8, _inputs  # noqa: E402


def _under(env, monkeypatch):
    """A fresh JIT of the forward kernel compiled under ``env`` (compile knobs are read when a kernel compiles)."""
    import kernelc
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return kernelc.jit(A.attn_fwd_lse_kernel.fn)


@pytest.mark.parametrize("refill_top", [False, True])
@pytest.mark.parametrize("sync", ["cluster", "empty"])
@pytest.mark.parametrize("N", [1024, 4096])
def test_multicast_fp8_forward_is_the_default_bit_for_bit(N, sync, refill_top, monkeypatch):
    q, k, v, _ = _inputs(2, 4, N, 128, torch.float16)
    (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in (q, k, v))
    v8k = A.fp8_v_key_order(v8.transpose(-1, -2).contiguous())
    want = A.attention_fp8(q8, k8, v8k, qs, ks, vs, key_order=True, refill_top=refill_top, num_ctas=1)
    kern = _under({"KERNELC_MULTICAST_SYNC": sync}, monkeypatch)
    got = A.attention_fp8(q8, k8, v8k, qs, ks, vs, key_order=True, refill_top=refill_top, num_ctas=2, kernel=kern)
    torch.cuda.synchronize()
    _check_fp8(got, q8, k8, v8, qs, ks, vs, False)
    assert torch.equal(got, want)
    from kernelc.runtime.launcher import get_state
    built = [e.compiled for e in get_state(kern)["cache"].values()]
    assert built and all(c.num_ctas == 2 and "UTMALDG.2D.MULTICAST" in c.asm["sass"] for c in built)


@pytest.mark.parametrize("sync", ["cluster", "empty"])
def test_multicast_two_dot_loop_is_the_single_program_build_bit_for_bit(sync, monkeypatch):
    import kernelc
    from kernelc.tools.tensor_descriptor import TensorDescriptor as TD
    from tests.compiler.test_multicast import kv_loop
    monkeypatch.setenv("KERNELC_MULTICAST_SYNC", sync)
    kern = kernelc.jit(kv_loop.fn)
    Z, N, D = 6, 1024, 64
    g = torch.Generator(device="cuda").manual_seed(29)
    q, k, v = (torch.randn(Z * N, D, device="cuda", dtype=torch.float16, generator=g) / 4 for _ in range(3))
    descs = [TD(t, [Z * N, D], [D, 1], [64, D]) for t in (q, k, v)]
    outs = []
    for nc in (1, 2):
        o = torch.empty(Z * N, D, device="cuda", dtype=torch.float32)
        kern[(N // 64, Z)](*descs, o, N, BM=64, BN=64, D=D, VARY=0, num_warps=4, num_stages=2, num_ctas=nc)
        outs.append(o)
    torch.cuda.synchronize()
    s = (q.view(Z, N, D).float() @ k.view(Z, N, D).float().transpose(1, 2)).half().float()
    want = (s @ v.view(Z, N, D).float()).reshape(Z * N, D)
    assert torch.allclose(outs[0], want, rtol=2e-2, atol=2e-1)
    assert torch.equal(outs[1], outs[0])


def test_an_odd_grid_is_refused_with_num_ctas_2():
    import kernelc
    from kernelc.tools.tensor_descriptor import TensorDescriptor as TD
    from tests.compiler.test_multicast import kv_loop
    N, D = 192, 64
    t = torch.zeros(N, D, device="cuda", dtype=torch.float16)
    d = TD(t, [N, D], [D, 1], [64, D])
    o = torch.empty(N, D, device="cuda", dtype=torch.float32)
    with pytest.raises(ValueError, match="multiple of 2"):
        kernelc.jit(kv_loop.fn)[(3, 1)](d, d, d, o, N, BM=64, BN=64, D=D, VARY=0, num_warps=4, num_stages=2,
                                         num_ctas=2)
