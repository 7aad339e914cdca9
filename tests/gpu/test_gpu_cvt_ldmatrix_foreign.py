"""``KERNELC_CVT_LDMATRIX`` on kernels shaped like Triton's own unit tests that transpose 16-bit tiles
(test_permute: one tile through runtime strides, either side transposed; test_dot's 'trans' epilogue): each kernel
is compiled twice in this process, with the knob on and off, and both outputs must equal torch's bit for bit
(the product: equal to each other, and close to torch). The CPU twin, tests/compiler/test_cvt_ldmatrix.py, checks
that the two builds differ (ldmatrix.trans on, none off)."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

import kernelc  # noqa: E402
from tests.compiler import transpose_kernels as TK  # noqa: E402


def _twins(kernel):
    """Two JIT functions of ``kernel``'s Python source, with in-process caches of their own."""
    return kernelc.jit(kernel.fn), kernelc.jit(kernel.fn)


def _run_both(monkeypatch, kernel, launch):
    on, off = _twins(kernel)
    monkeypatch.setenv("KERNELC_CVT_LDMATRIX", "1")
    out_on, ck_on = launch(on)
    monkeypatch.setenv("KERNELC_CVT_LDMATRIX", "0")
    out_off, ck_off = launch(off)
    return out_on, out_off, ck_on, ck_off


def _compiled(jf):
    (ent,) = [e for e in jf._cuda_state["cache"].values()]
    return ent.compiled


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(64, 64), (128, 128)])
@pytest.mark.parametrize("side", ["store", "load"])
def test_permute_tile_knob_on_and_off_match_torch(monkeypatch, dtype, shape, side):
    x = torch.randn(shape, device="cuda").to(dtype)

    def launch(jf):
        z = torch.empty(shape[1], shape[0], device="cuda", dtype=dtype)
        if side == "store":   # z[n, m] = x[m, n]: z's strides passed swapped
            jf[(1,)](x, x.stride(0), x.stride(1), z, z.stride(1), z.stride(0), BLOCK_M=shape[0], BLOCK_N=shape[1])
        else:                 # z[m, n] = x[n, m]: x's strides passed swapped (read down its columns)
            jf[(1,)](x, x.stride(1), x.stride(0), z, z.stride(0), z.stride(1), BLOCK_M=shape[1], BLOCK_N=shape[0])
        return z, _compiled(jf)

    z_on, z_off, ck_on, ck_off = _run_both(monkeypatch, TK.strided_tile_copy_kernel, launch)
    want = x.t().contiguous()
    torch.testing.assert_close(z_on, want, atol=0, rtol=0)
    torch.testing.assert_close(z_off, want, atol=0, rtol=0)
    assert "ldmatrix" in ck_on.asm["ptx"] and "ldmatrix" not in ck_off.asm["ptx"]


@pytest.mark.parametrize("num_warps", [2, 4])
def test_dot_stored_transposed_knob_on_and_off_agree(monkeypatch, num_warps):
    M = N = K = 32
    g = torch.Generator(device="cuda").manual_seed(17)
    x = (torch.randn(M, K, device="cuda", generator=g) * 0.1).half()
    y = (torch.randn(K, N, device="cuda", generator=g) * 0.1).half()

    def launch(jf):
        zt = torch.empty(N, M, device="cuda", dtype=torch.float16)   # z = zt.t(): a transposed store
        jf[(1,)](x, y, zt, zt.stride(1), zt.stride(0), BLOCK_M=M, BLOCK_N=N, BLOCK_K=K, num_warps=num_warps)
        return zt.t(), _compiled(jf)

    z_on, z_off, ck_on, ck_off = _run_both(monkeypatch, TK.dot_strided_store_kernel, launch)
    assert torch.equal(z_on, z_off)   # the same product, moved through shared memory two ways
    torch.testing.assert_close(z_on.float(), x.float() @ y.float(), atol=1e-2, rtol=1e-2)
    assert "ldmatrix" in ck_on.asm["ptx"] and "ldmatrix" not in ck_off.asm["ptx"]
