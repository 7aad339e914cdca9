"""The memory-bound benchmark kernels (examples/kernels/memory_bound.py) in the CPU interpreter
against torch autograd, at small non-power-of-two sizes; and each compiles for sm_90a."""
import pytest

torch = pytest.importorskip("torch")

import kernelc  # noqa: E402
from examples.kernels import memory_bound as K  # noqa: E402

F = torch.nn.functional


def _grads(f, *xs):
    xs = [x.detach().clone().requires_grad_(True) for x in xs]
    y = f(*xs)
    dy = torch.randn_like(y)
    y.backward(dy)
    return dy, [x.grad for x in xs]


def _close(a, b, tol=1e-4):
    torch.testing.assert_close(a, b, atol=tol, rtol=tol)


def test_layout_copies():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(40, 50, generator=g)
    _close(K.transpose(x, BLOCK_M=32, BLOCK_N=32), x.t().contiguous(), 0)
    x3 = torch.randn(2, 20, 18, generator=g).half()
    _close(K.permute021(x3, BLOCK_M=16, BLOCK_N=16), x3.permute(0, 2, 1).contiguous(), 0)


def test_gated_activations():
    torch.manual_seed(0)
    a, b = torch.randn(5, 100), torch.randn(5, 100)
    _close(K.swiglu_fwd(a, b), F.silu(a) * b)
    _close(K.geglu_fwd(a, b), F.gelu(a, approximate="tanh") * b)
    dc, (da, db) = _grads(lambda x, y: F.silu(x) * y, a, b)
    for got, want in zip(K.swiglu_bwd(dc, a, b), (da, db)):
        _close(got, want)
    dc, (da, db) = _grads(lambda x, y: F.gelu(x, approximate="tanh") * y, a, b)
    for got, want in zip(K.geglu_bwd(dc, a, b), (da, db)):
        _close(got, want)


def test_softmax_and_log_softmax():
    torch.manual_seed(1)
    x = torch.randn(6, 77)
    y = torch.softmax(x, -1)
    _close(K.softmax_fwd(x), y)
    _close(K.log_softmax_fwd(x), torch.log_softmax(x, -1))
    dy, (dx,) = _grads(lambda t: torch.softmax(t, -1), x)
    _close(K.softmax_bwd(dy, y), dx)
    dy, (dx,) = _grads(lambda t: torch.log_softmax(t, -1), x)
    _close(K.log_softmax_bwd(dy, torch.log_softmax(x, -1)), dx)


def test_norm_backwards():
    torch.manual_seed(2)
    x, w, b = torch.randn(9, 50), torch.randn(50), torch.randn(50)
    rstd = K.rms_norm_stats(x)
    dy, (dx, dw) = _grads(lambda t, ww: t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6) * ww, x, w)
    got = K.rms_norm_bwd(dy, x, w, rstd)
    _close(got[0], dx)
    _close(got[1], dw)
    mean, var = x.mean(-1), x.var(-1, unbiased=False)
    rstd = torch.rsqrt(var + 1e-5)
    dy, (dx, dw, db) = _grads(lambda t, ww, bb: F.layer_norm(t, (50,), ww, bb, 1e-5), x, w, b)
    for g, want in zip(K.layer_norm_bwd(dy, x, w, mean, rstd), (dx, dw, db)):
        _close(g, want)


def test_cross_entropy_and_rope():
    torch.manual_seed(3)
    logits, target = torch.randn(4, 300), torch.randint(0, 300, (4,))
    lx = logits.clone().requires_grad_(True)
    ref = F.cross_entropy(lx, target)
    ref.backward()
    loss, grad = K.cross_entropy(logits, target)
    _close(loss, ref.detach())
    _close(grad, lx.grad)
    q = torch.randn(2, 5, 3, 12)
    pos = torch.arange(5)[:, None] * torch.arange(6)[None, :] * 0.1
    cos, sin = torch.cos(pos), torch.sin(pos)
    x1, x2 = q[..., :6], q[..., 6:]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    want = torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1)
    _close(K.rope(q.clone(), cos, sin), want)


ROW = dict(stride="i32", n_cols="i32")
SIGS = {
    "swiglu_fwd_kernel": dict(a_ptr="*fp16", b_ptr="*fp16", c_ptr="*fp16", **ROW),
    "swiglu_bwd_kernel": dict(dc_ptr="*bf16", a_ptr="*bf16", b_ptr="*bf16", da_ptr="*bf16", db_ptr="*bf16", **ROW),
    "geglu_fwd_kernel": dict(a_ptr="*fp16", b_ptr="*fp16", c_ptr="*fp16", **ROW),
    "geglu_bwd_kernel": dict(dc_ptr="*fp16", a_ptr="*fp16", b_ptr="*fp16", da_ptr="*fp16", db_ptr="*fp16", **ROW),
    "softmax_fwd_kernel": dict(y_ptr="*fp32", x_ptr="*fp32", **ROW),
    "softmax_bwd_kernel": dict(dx_ptr="*fp32", dy_ptr="*fp32", y_ptr="*fp32", **ROW),
    "log_softmax_fwd_kernel": dict(y_ptr="*fp16", x_ptr="*fp16", **ROW),
    "log_softmax_bwd_kernel": dict(dx_ptr="*fp16", dy_ptr="*fp16", y_ptr="*fp16", **ROW),
    "rms_norm_bwd_kernel": dict(dy_ptr="*bf16", x_ptr="*bf16", w_ptr="*bf16", rstd_ptr="*fp32", dx_ptr="*bf16",
                                dw_ptr="*fp32", stride="i32", n_rows="i32", n_cols="i32", rows_per_program="i32"),
    "layer_norm_bwd_kernel": dict(dy_ptr="*fp16", x_ptr="*fp16", w_ptr="*fp16", mean_ptr="*fp32", rstd_ptr="*fp32",
                                  dx_ptr="*fp16", dw_ptr="*fp32", db_ptr="*fp32", stride="i32", n_rows="i32",
                                  n_cols="i32", rows_per_program="i32"),
    "cross_entropy_kernel": dict(logits_ptr="*bf16", grad_ptr="*bf16", target_ptr="*i64", loss_ptr="*fp32",
                                 stride="i32", n_cols="i32", inv_n_rows="fp32"),
    "rope_kernel": dict(q_ptr="*bf16", q_row_stride="i32", cos_ptr="*fp32", sin_ptr="*fp32", cos_row_stride="i32",
                        seq_len="i32", n_heads="i32", head_dim="i32"),
}


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


# convert_layout ops each kernel needs (golden). rope's cos/sin rows, broadcast over the heads, are
# loaded in the tiles' column layout (passes/load_layouts.py), as Triton loads them; the 32x64 tiles never convert.
# The norm backwards' final fp32 dW (and dB) rows are stored through shared memory, 16 bytes a lane, as Triton
# stores them (passes/coalesce.py, KERNELC_STORE_DISCOUNT_SCOPE=all; session 20, mem20)
CONVERSIONS = {"rms_norm_bwd_kernel": 1, "layer_norm_bwd_kernel": 2}


def test_every_kernel_compiles_for_hopper_with_128_bit_row_accesses():
    for name, sig in SIGS.items():
        cx = dict(BLOCK_H=32, BLOCK_D=64) if name == "rope_kernel" else dict(BLOCK_SIZE=4096)
        # runtime row lengths and strides, specialised on divisibility by 16 as the launcher does
        div = {k: 16 for k in sig if k not in ("n_rows", "rows_per_program", "seq_len", "n_heads", "inv_n_rows")}
        ck = kernelc.compile(getattr(K, name), sig, cx, target="sm_90a", num_warps=8, divisibility=div)
        assert ck.n_spills == 0, name
        assert ck.asm["tir"].count("convert_layout") == CONVERSIONS.get(name, 0), name
        tiles = [a for a in ck.reports["memory_accesses"] if a["shape"] and _numel(a["shape"]) >= 1024]
        assert tiles and all(a["vector_bytes"] == 16 for a in tiles), (name, tiles)
