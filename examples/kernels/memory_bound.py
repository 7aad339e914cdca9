"""Memory-bound kernels written the way kernel libraries write them: one program per row, runtime row
lengths, ``BLOCK_SIZE = next_power_of_2(n_cols)``, math in fp32, results in the input dtype.

The same source runs under kernelc and under Triton (bench/common.py ``triton_twin`` swaps the two
imports below); bench/bench_memory_bound.py times them side by side.
"""
import kernelc as triton
import kernelc.language as tl


# -- layout-changing copies ------------------------------------------------------------------------

@triton.jit
def transpose_kernel(x_ptr, y_ptr, M, N, stride_xm, stride_ym, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    x = tl.load(x_ptr + offs_m[:, None] * stride_xm + offs_n[None, :], mask=mask)
    tl.store(y_ptr + offs_n[None, :] * stride_ym + offs_m[:, None], x, mask=mask)


@triton.jit
def permute021_kernel(x_ptr, y_ptr, M, N, stride_xb, stride_xm, stride_yb, stride_yn,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_b = tl.program_id(2)
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    x = tl.load(x_ptr + pid_b * stride_xb + offs_m[:, None] * stride_xm + offs_n[None, :], mask=mask)
    tl.store(y_ptr + pid_b * stride_yb + offs_n[None, :] * stride_yn + offs_m[:, None], x, mask=mask)


def transpose(x, BLOCK_M=64, BLOCK_N=64, num_warps=4):
    import torch
    M, N = x.shape
    y = torch.empty((N, M), device=x.device, dtype=x.dtype)
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    transpose_kernel[grid](x, y, M, N, x.stride(0), y.stride(0), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                           num_warps=num_warps)
    return y


def permute021(x, BLOCK_M=64, BLOCK_N=64, num_warps=4):
    import torch
    B, M, N = x.shape
    y = torch.empty((B, N, M), device=x.device, dtype=x.dtype)
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N), B)
    permute021_kernel[grid](x, y, M, N, x.stride(0), x.stride(1), y.stride(0), y.stride(1), BLOCK_M=BLOCK_M,
                            BLOCK_N=BLOCK_N, num_warps=num_warps)
    return y


# -- gated activations -------------------------------------------------------------------------------

@triton.jit
def swiglu_fwd_kernel(a_ptr, b_ptr, c_ptr, stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    a = tl.load(a_ptr + row * stride + cols, mask=mask, other=0).to(tl.float32)
    b = tl.load(b_ptr + row * stride + cols, mask=mask, other=0)
    c = (a * tl.sigmoid(a)).to(b.dtype) * b
    tl.store(c_ptr + row * stride + cols, c, mask=mask)


@triton.jit
def swiglu_bwd_kernel(dc_ptr, a_ptr, b_ptr, da_ptr, db_ptr, stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    dc = tl.load(dc_ptr + row * stride + cols, mask=mask, other=0).to(tl.float32)
    a = tl.load(a_ptr + row * stride + cols, mask=mask, other=0).to(tl.float32)
    b = tl.load(b_ptr + row * stride + cols, mask=mask, other=0).to(tl.float32)
    sig_a = tl.sigmoid(a)
    silu_a = a * sig_a
    db = dc * silu_a
    da = dc * (silu_a * (1 - sig_a) + sig_a) * b
    tl.store(da_ptr + row * stride + cols, da.to(da_ptr.dtype.element_ty), mask=mask)
    tl.store(db_ptr + row * stride + cols, db.to(db_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _tanh(x):
    return 2 * tl.sigmoid(2 * x) - 1


@triton.jit
def geglu_fwd_kernel(a_ptr, b_ptr, c_ptr, stride, n_cols, BLOCK_SIZE: tl.constexpr):
    # gelu with the tanh approximation
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    a = tl.load(a_ptr + row * stride + cols, mask=mask, other=0).to(tl.float32)
    b = tl.load(b_ptr + row * stride + cols, mask=mask, other=0)
    inner = 0.7978845608028654 * (a + 0.044715 * a * a * a)
    gelu_a = 0.5 * a * (1 + _tanh(inner))
    c = gelu_a.to(b.dtype) * b
    tl.store(c_ptr + row * stride + cols, c, mask=mask)


@triton.jit
def geglu_bwd_kernel(dc_ptr, a_ptr, b_ptr, da_ptr, db_ptr, stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    dc = tl.load(dc_ptr + row * stride + cols, mask=mask, other=0).to(tl.float32)
    a = tl.load(a_ptr + row * stride + cols, mask=mask, other=0).to(tl.float32)
    b = tl.load(b_ptr + row * stride + cols, mask=mask, other=0).to(tl.float32)
    k = 0.7978845608028654
    inner = k * (a + 0.044715 * a * a * a)
    t = _tanh(inner)
    gelu_a = 0.5 * a * (1 + t)
    db = dc * gelu_a
    dgelu = 0.5 * (1 + t) + 0.5 * a * (1 - t * t) * k * (1 + 3 * 0.044715 * a * a)
    da = dc * b * dgelu
    tl.store(da_ptr + row * stride + cols, da.to(da_ptr.dtype.element_ty), mask=mask)
    tl.store(db_ptr + row * stride + cols, db.to(db_ptr.dtype.element_ty), mask=mask)


# -- softmax and log-softmax ----------------------------------------------------------------------------

@triton.jit
def softmax_fwd_kernel(y_ptr, x_ptr, stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    z = x - tl.max(x, axis=0)
    num = tl.exp(z)
    y = num / tl.sum(num, axis=0)
    tl.store(y_ptr + row * stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def softmax_bwd_kernel(dx_ptr, dy_ptr, y_ptr, stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    dy = tl.load(dy_ptr + row * stride + cols, mask=mask, other=0).to(tl.float32)
    y = tl.load(y_ptr + row * stride + cols, mask=mask, other=0).to(tl.float32)
    dot = tl.sum(y * dy, axis=0)
    dx = y * (dy - dot)
    tl.store(dx_ptr + row * stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)


@triton.jit
def log_softmax_fwd_kernel(y_ptr, x_ptr, stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    z = x - tl.max(x, axis=0)
    lse = tl.log(tl.sum(tl.exp(z), axis=0))
    tl.store(y_ptr + row * stride + cols, (z - lse).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def log_softmax_bwd_kernel(dx_ptr, dy_ptr, y_ptr, stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    dy = tl.load(dy_ptr + row * stride + cols, mask=mask, other=0).to(tl.float32)
    y = tl.load(y_ptr + row * stride + cols, mask=mask, other=0).to(tl.float32)
    dx = dy - tl.exp(y) * tl.sum(dy, axis=0)
    tl.store(dx_ptr + row * stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)


# -- normalisation backward -------------------------------------------------------------------------------

@triton.jit
def rms_norm_bwd_kernel(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, dw_ptr, stride, n_rows, n_cols,
                        rows_per_program, BLOCK_SIZE: tl.constexpr):
    # each program takes a block of rows and writes its partial dW (summed by the caller)
    pid = tl.program_id(0)
    row_start = pid * rows_per_program
    row_end = tl.minimum(row_start + rows_per_program, n_rows)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0).to(tl.float32)
    dw = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for row in range(row_start, row_end):
        off = row * stride
        dy = tl.load(dy_ptr + off + cols, mask=mask, other=0).to(tl.float32)
        x = tl.load(x_ptr + off + cols, mask=mask, other=0).to(tl.float32)
        rstd = tl.load(rstd_ptr + row)
        x_hat = x * rstd
        wdy = w * dy
        c = tl.sum(x_hat * wdy, axis=0) / n_cols
        dx = (wdy - x_hat * c) * rstd
        dw += dy * x_hat
        tl.store(dx_ptr + off + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
    tl.store(dw_ptr + pid * n_cols + cols, dw, mask=mask)


@triton.jit
def layer_norm_bwd_kernel(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_ptr, db_ptr, stride, n_rows, n_cols,
                          rows_per_program, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    row_start = pid * rows_per_program
    row_end = tl.minimum(row_start + rows_per_program, n_rows)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0).to(tl.float32)
    dw = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    db = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for row in range(row_start, row_end):
        off = row * stride
        dy = tl.load(dy_ptr + off + cols, mask=mask, other=0).to(tl.float32)
        x = tl.load(x_ptr + off + cols, mask=mask, other=0).to(tl.float32)
        mean = tl.load(mean_ptr + row)
        rstd = tl.load(rstd_ptr + row)
        x_hat = tl.where(mask, (x - mean) * rstd, 0.)
        wdy = w * dy
        c1 = tl.sum(x_hat * wdy, axis=0) / n_cols
        c2 = tl.sum(wdy, axis=0) / n_cols
        dx = (wdy - (x_hat * c1 + c2)) * rstd
        dw += dy * x_hat
        db += dy
        tl.store(dx_ptr + off + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
    tl.store(dw_ptr + pid * n_cols + cols, dw, mask=mask)
    tl.store(db_ptr + pid * n_cols + cols, db, mask=mask)


# -- cross-entropy over a large vocabulary ----------------------------------------------------------------

@triton.jit
def cross_entropy_kernel(logits_ptr, grad_ptr, target_ptr, loss_ptr, stride, n_cols, inv_n_rows,
                         BLOCK_SIZE: tl.constexpr):
    # pass 1: online max / sum-exp over the row in blocks; pass 2: gradient (softmax - onehot) / N
    row = tl.program_id(0).to(tl.int64)
    logits_ptr += row * stride
    grad_ptr += row * stride
    target = tl.load(target_ptr + row)
    m = -float("inf")
    d = 0.0
    for off in range(0, n_cols, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(logits_ptr + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    lse = m + tl.log(d)
    x_t = tl.load(logits_ptr + target).to(tl.float32)
    tl.store(loss_ptr + row, lse - x_t)
    for off in range(0, n_cols, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(logits_ptr + cols, mask=mask, other=-float("inf")).to(tl.float32)
        g = tl.exp(x - lse)
        g = tl.where(cols == target, g - 1, g) * inv_n_rows
        tl.store(grad_ptr + cols, g.to(grad_ptr.dtype.element_ty), mask=mask)


# -- rotary embeddings ------------------------------------------------------------------------------------

@triton.jit
def rope_kernel(q_ptr, q_row_stride, cos_ptr, sin_ptr, cos_row_stride, seq_len, n_heads, head_dim,
                BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr):
    # q: (batch * seq, n_heads, head_dim) rotated in place; one program per token, all heads at once
    pid = tl.program_id(0).to(tl.int64)
    pos = pid % seq_len
    half = head_dim // 2
    q_ptr += pid * q_row_stride
    d = tl.arange(0, BLOCK_D)
    h = tl.arange(0, BLOCK_H)
    dmask = d < half
    cos = tl.load(cos_ptr + pos * cos_row_stride + d, mask=dmask, other=0).to(tl.float32)
    sin = tl.load(sin_ptr + pos * cos_row_stride + d, mask=dmask, other=0).to(tl.float32)
    offs = h[:, None] * head_dim + d[None, :]
    mask = (h[:, None] < n_heads) & dmask[None, :]
    x1 = tl.load(q_ptr + offs, mask=mask, other=0).to(tl.float32)
    x2 = tl.load(q_ptr + offs + half, mask=mask, other=0).to(tl.float32)
    y1 = x1 * cos[None, :] - x2 * sin[None, :]
    y2 = x2 * cos[None, :] + x1 * sin[None, :]
    tl.store(q_ptr + offs, y1.to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(q_ptr + offs + half, y2.to(q_ptr.dtype.element_ty), mask=mask)


# -- wrappers (torch tensors; CPU tensors run in kernelc's interpreter) ----------------------------------------

def _rows(x):
    return x.reshape(-1, x.shape[-1])


def _block(n_cols):
    return triton.next_power_of_2(n_cols)


def _warps(block):
    # the usual library rule (more warps for longer rows)
    return 32 if block >= 32768 else 16 if block >= 8192 else 8 if block >= 2048 else 4


def swiglu_fwd(a, b):
    import torch
    a2, b2 = _rows(a), _rows(b)
    c = torch.empty_like(a2)
    n_rows, n_cols = a2.shape
    bs = _block(n_cols)
    swiglu_fwd_kernel[(n_rows,)](a2, b2, c, a2.stride(0), n_cols, BLOCK_SIZE=bs, num_warps=_warps(bs))
    return c.view_as(a)


def swiglu_bwd(dc, a, b):
    import torch
    dc2, a2, b2 = _rows(dc), _rows(a), _rows(b)
    da, db = torch.empty_like(a2), torch.empty_like(b2)
    n_rows, n_cols = a2.shape
    bs = _block(n_cols)
    swiglu_bwd_kernel[(n_rows,)](dc2, a2, b2, da, db, a2.stride(0), n_cols, BLOCK_SIZE=bs, num_warps=_warps(bs))
    return da.view_as(a), db.view_as(b)


def geglu_fwd(a, b):
    import torch
    a2, b2 = _rows(a), _rows(b)
    c = torch.empty_like(a2)
    n_rows, n_cols = a2.shape
    bs = _block(n_cols)
    geglu_fwd_kernel[(n_rows,)](a2, b2, c, a2.stride(0), n_cols, BLOCK_SIZE=bs, num_warps=_warps(bs))
    return c.view_as(a)


def geglu_bwd(dc, a, b):
    import torch
    dc2, a2, b2 = _rows(dc), _rows(a), _rows(b)
    da, db = torch.empty_like(a2), torch.empty_like(b2)
    n_rows, n_cols = a2.shape
    bs = _block(n_cols)
    geglu_bwd_kernel[(n_rows,)](dc2, a2, b2, da, db, a2.stride(0), n_cols, BLOCK_SIZE=bs, num_warps=_warps(bs))
    return da.view_as(a), db.view_as(b)


def _rowwise(kernel, out_like, *inputs):
    import torch
    xs = [_rows(t) for t in inputs]
    out = torch.empty_like(_rows(out_like))
    n_rows, n_cols = xs[0].shape
    bs = _block(n_cols)
    kernel[(n_rows,)](out, *xs, xs[0].stride(0), n_cols, BLOCK_SIZE=bs, num_warps=_warps(bs))
    return out.view_as(out_like)


def softmax_fwd(x):
    return _rowwise(softmax_fwd_kernel, x, x)


def softmax_bwd(dy, y):
    return _rowwise(softmax_bwd_kernel, dy, dy, y)


def log_softmax_fwd(x):
    return _rowwise(log_softmax_fwd_kernel, x, x)


def log_softmax_bwd(dy, y):
    return _rowwise(log_softmax_bwd_kernel, dy, dy, y)


def _programs(n_rows, x):
    if x.is_cuda:
        import torch
        return min(n_rows, torch.cuda.get_device_properties(x.device).multi_processor_count * 4)
    return min(n_rows, 4)


def rms_norm_bwd(dy, x, w, rstd):
    import torch
    dy2, x2 = _rows(dy), _rows(x)
    n_rows, n_cols = x2.shape
    progs = _programs(n_rows, x)
    rows_per = triton.cdiv(n_rows, progs)
    dx = torch.empty_like(x2)
    dw = torch.empty((progs, n_cols), device=x.device, dtype=torch.float32)
    bs = _block(n_cols)
    rms_norm_bwd_kernel[(progs,)](dy2, x2, w, rstd, dx, dw, x2.stride(0), n_rows, n_cols, rows_per,
                                  BLOCK_SIZE=bs, num_warps=_warps(bs))
    return dx.view_as(x), dw.sum(0).to(w.dtype)


def layer_norm_bwd(dy, x, w, mean, rstd):
    import torch
    dy2, x2 = _rows(dy), _rows(x)
    n_rows, n_cols = x2.shape
    progs = _programs(n_rows, x)
    rows_per = triton.cdiv(n_rows, progs)
    dx = torch.empty_like(x2)
    dw = torch.empty((progs, n_cols), device=x.device, dtype=torch.float32)
    db = torch.empty((progs, n_cols), device=x.device, dtype=torch.float32)
    bs = _block(n_cols)
    layer_norm_bwd_kernel[(progs,)](dy2, x2, w, mean, rstd, dx, dw, db, x2.stride(0), n_rows, n_cols, rows_per,
                                    BLOCK_SIZE=bs, num_warps=_warps(bs))
    return dx.view_as(x), dw.sum(0).to(w.dtype), db.sum(0).to(w.dtype)


def cross_entropy(logits, target):
    """(mean loss, gradient of the mean loss wrt the logits)."""
    import torch
    n_rows, n_cols = logits.shape
    grad = torch.empty_like(logits)
    loss = torch.empty(n_rows, device=logits.device, dtype=torch.float32)
    bs = min(32768, _block(n_cols))
    cross_entropy_kernel[(n_rows,)](logits, grad, target, loss, logits.stride(0), n_cols, 1.0 / n_rows,
                                    BLOCK_SIZE=bs, num_warps=_warps(bs))
    return loss.mean(), grad


def rope(q, cos, sin):
    """Rotate q (batch, seq, n_heads, head_dim) in place by cos/sin (seq, head_dim // 2)."""
    bsz, seq_len, n_heads, head_dim = q.shape
    q2 = q.view(bsz * seq_len, n_heads * head_dim)
    rope_kernel[(bsz * seq_len,)](q2, q2.stride(0), cos, sin, cos.stride(0), seq_len, n_heads, head_dim,
                                  BLOCK_H=triton.next_power_of_2(n_heads),
                                  BLOCK_D=triton.next_power_of_2(head_dim // 2))
    return q


def rms_norm_stats(x, eps=1e-6):
    """(rstd per row) as the forward pass saves it, computed with torch (the backward's input)."""
    import torch
    return torch.rsqrt(_rows(x).float().pow(2).mean(-1) + eps)
