"""Warp-specialised TMA -> wgmma loops on the GPU against torch: the descriptor matmul with and without
the producer warp (``kl.range(warp_specialize=...)``), ragged shapes, K shorter than the ring, and the
persistent kernel whose producer runs ahead across output tiles."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

import kernelc  # noqa: E402
from kernelc import TensorDescriptor  # noqa: E402

from examples.kernels import matmul_persistent as MP  # noqa: E402
from tests.compiler.test_warp_specialize import mm_loop  # noqa: E402


def _hopper():
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


def _check(c, a, b):
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=0.05 * a.shape[1] ** 0.5, rtol=1e-2)


SHAPES = [(4096, 4096, 4096), (1000, 1040, 1008), (257, 136, 520), (300, 264, 64), (128, 128, 16), (2000, 8, 3000)]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("M,N,K", SHAPES)
@pytest.mark.parametrize("bm,bn,num_warps,num_stages", [(128, 128, 4, 3), (128, 256, 8, 3), (128, 128, 4, 2),
                                                        (64, 128, 4, 4)])
@pytest.mark.parametrize("ws", [True, False])
def test_persistent_matmul_matches_torch(dtype, M, N, K, bm, bn, num_warps, num_stages, ws):
    torch.manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=dtype)
    b = torch.randn(K, N, device="cuda", dtype=dtype)
    c = MP.matmul_persistent(a, b, warp_specialize=ws, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, num_warps=num_warps,
                             num_stages=num_stages)
    _check(c, a, b)


def test_persistent_kernel_is_warp_specialised_on_hopper():
    if not _hopper():
        pytest.skip("sm_90a only")
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    b = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    c = torch.empty_like(a)
    descs = [TensorDescriptor.from_tensor(t, blk) for t, blk in ((a, [128, 64]), (b, [64, 128]), (c, [128, 128]))]
    ck = MP.matmul_persistent_kernel[(8,)](*descs, 1024, 1024, 1024, BLOCK_SIZE_M=128, BLOCK_SIZE_N=128,
                                          BLOCK_SIZE_K=64, GROUP_SIZE_M=8, NUM_SMS=8, WARP_SPECIALIZE=True, num_warps=4,
                                          num_stages=3)
    _check(c, a, b)  # 64 tiles on 8 programs: every producer wraps the ring across 8 tiles
    # two consumer warpgroups (4 warps asked, a 128-row dot: passes/ws_consumers.py) and the producer warp
    assert ck.extra_warps == 5 and "UTMALDG" in ck.asm["sass"]


@pytest.mark.parametrize("ws", [True, False])
@pytest.mark.parametrize("K", [64, 128, 192, 4096, 1000])
def test_with_and_without_the_producer_warp(ws, K):
    torch.manual_seed(1)
    M, BN = 512, 128
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, BN, device="cuda", dtype=torch.float16)
    c = torch.empty(M, BN, device="cuda", dtype=torch.float16)
    descs = [TensorDescriptor.from_tensor(t, blk) for t, blk in ((a, [128, 64]), (b, [64, BN]), (c, [128, BN]))]
    ck = mm_loop[(M // 128,)](*descs, K, BM=128, BN=BN, BK=64, WS=ws, num_warps=4, num_stages=3)
    _check(c, a, b)
    if _hopper():
        assert ck.extra_warps == (5 if ws else 0)  # ws: a second consumer warpgroup and the producer warp


def test_persistent_autotuned_large():
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    _check(MP.matmul_persistent(a, b), a, b)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("Z,H,N,D", [(2, 3, 1024, 128), (1, 2, 256, 64), (1, 1, 128, 128)])
@pytest.mark.parametrize("BM,BN,num_warps,num_stages", [(128, 128, 8, 2), (128, 64, 4, 2), (128, 64, 8, 3)])
def test_attention_tma_matches_sdpa(causal, Z, H, N, D, BM, BN, num_warps, num_stages):
    from examples.kernels import attention_tma as A
    torch.manual_seed(2)
    q, k, v = (torch.randn(Z, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
    o = A.attention(q, k, v, causal=causal, BLOCK_M=BM, BLOCK_N=BN, num_warps=num_warps, num_stages=num_stages)
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    torch.testing.assert_close(o.float(), ref, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("N,D", [(1024, 128), (256, 64)])
def test_attention_tma_bf16_matches_sdpa(causal, N, D):
    from examples.kernels import attention_tma as A
    torch.manual_seed(3)
    q, k, v = (torch.randn(2, 3, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    o = A.attention(q, k, v, causal=causal)
    assert o.dtype == torch.bfloat16
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    torch.testing.assert_close(o.float(), ref, atol=5e-2, rtol=5e-2)


_OPT_IN = (
    "import torch\n"
    "from examples.kernels import attention_tma as A\n"
    "from tests.compiler.tma_kernels import attn_fa3_order, run_attention\n"
    "torch.manual_seed(0)\n"
    "q, k, v = (torch.randn(2, 3, 1024, 128, device='cuda', dtype=torch.float16) for _ in range(3))\n"
    "sdpa = torch.nn.functional.scaled_dot_product_attention\n"
    "for causal in (False, True):\n"
    "    o = A.attention(q, k, v, causal=causal, BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=2)\n"
    "    ref = sdpa(q.float(), k.float(), v.float(), is_causal=causal)\n"
    "    torch.testing.assert_close(o.float(), ref, atol=2e-2, rtol=2e-2)\n"
    "o, ck = run_attention(attn_fa3_order, q, k, v)\n"
    "torch.testing.assert_close(o.float(), sdpa(q.float(), k.float(), v.float()), atol=2e-2, rtol=2e-2)\n"
    "print('ok', ck.launch_warps)\n")


@pytest.mark.parametrize("setting,warps", [("KERNELC_WS_PINGPONG", 12), ("KERNELC_WS_SETMAXNREG", 12),
                                           ("KERNELC_WGMMA_PIN_WAITS", 12)])
def test_attention_with_opt_in_settings(setting, warps):
    """The opt-in variants (off by default, see warp_specialize.py): warpgroups taking turns on the first dot
    (both dots in FA3's order); a producer warpgroup handing registers to the consumers (setmaxnreg: FA3's
    order has it by default, ``auto``); the pinned waits (on by default; set to 1 here, a no-op check of the
    path). In a fresh process each, so the setting reaches the compiler (it is part of the cache key, not of
    the launch key)."""
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, **{setting: "1"}, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", _OPT_IN], cwd=root, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith(f"ok {warps}"), out.stderr[-2000:]


@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_fa3_order_example_matches_sdpa(D, causal, dtype):
    """examples/kernels/attention_fa3.py (FlashAttention-3's order: pinned waits, setmaxnreg) against SDPA."""
    if not _hopper():
        pytest.skip("descriptor loads and setmaxnreg: sm_90")
    from examples.kernels import attention_fa3 as F
    dt = getattr(torch, dtype)
    torch.manual_seed(3)
    q, k, v = (torch.randn(2, 4, 1024, D, device="cuda", dtype=dt) for _ in range(3))
    o = F.attention(q, k, v, causal=causal)
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    tol = 2e-2 if dt == torch.float16 else 5e-2
    torch.testing.assert_close(o.float(), ref, atol=tol, rtol=tol)
