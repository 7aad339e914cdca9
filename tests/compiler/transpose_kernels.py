"""Kernels whose loads and stores run along different dimensions (the coalescing pass's target cases)."""
import kernelc
import kernelc.language as kl


@kernelc.jit
def transpose_kernel(x_ptr, y_ptr, M, N, stride_xm, stride_ym, BLOCK_M: kl.constexpr, BLOCK_N: kl.constexpr):
    """y[j, i] = x[i, j] for an M x N row-major x (y is N x M)."""
    pid_m = kl.program_id(0)
    pid_n = kl.program_id(1)
    offs_m = pid_m * BLOCK_M + kl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + kl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    x = kl.load(x_ptr + offs_m[:, None] * stride_xm + offs_n[None, :], mask=mask)
    kl.store(y_ptr + offs_n[None, :] * stride_ym + offs_m[:, None], x, mask=mask)


@kernelc.jit
def permute021_kernel(x_ptr, y_ptr, B, M, N, stride_xb, stride_xm, stride_yb, stride_yn,
                      BLOCK_M: kl.constexpr, BLOCK_N: kl.constexpr):
    """y[b, j, i] = x[b, i, j]: permute(0, 2, 1) of a contiguous B x M x N tensor."""
    pid_b = kl.program_id(2)
    pid_m = kl.program_id(0)
    pid_n = kl.program_id(1)
    offs_m = pid_m * BLOCK_M + kl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + kl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    x = kl.load(x_ptr + pid_b * stride_xb + offs_m[:, None] * stride_xm + offs_n[None, :], mask=mask)
    kl.store(y_ptr + pid_b * stride_yb + offs_n[None, :] * stride_yn + offs_m[:, None], x, mask=mask)


@kernelc.jit
def permute021_3d_kernel(x_ptr, y_ptr, B, M, N, BLOCK_B: kl.constexpr, BLOCK_M: kl.constexpr, BLOCK_N: kl.constexpr):
    """The same permute with one 3-D tile per program: y (B x N x M) from a contiguous x (B x M x N)."""
    offs_b = kl.program_id(2) * BLOCK_B + kl.arange(0, BLOCK_B)
    offs_m = kl.program_id(0) * BLOCK_M + kl.arange(0, BLOCK_M)
    offs_n = kl.program_id(1) * BLOCK_N + kl.arange(0, BLOCK_N)
    b = offs_b[:, None, None]
    m = offs_m[None, :, None]
    n = offs_n[None, None, :]
    mask = (b < B) & (m < M) & (n < N)
    x = kl.load(x_ptr + b * (M * N) + m * N + n, mask=mask)
    kl.store(y_ptr + b * (M * N) + n * M + m, x, mask=mask)


@kernelc.jit
def copy_kernel(x_ptr, y_ptr, M, N, stride, BLOCK_M: kl.constexpr, BLOCK_N: kl.constexpr):
    """A plain 2-D copy: loads and stores run along the same dimension (no conversion needed)."""
    offs_m = kl.program_id(0) * BLOCK_M + kl.arange(0, BLOCK_M)
    offs_n = kl.program_id(1) * BLOCK_N + kl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    offs = offs_m[:, None] * stride + offs_n[None, :]
    kl.store(y_ptr + offs, kl.load(x_ptr + offs, mask=mask) * 2, mask=mask)


@kernelc.jit
def row_scale_kernel(x_ptr, s_ptr, y_ptr, N, BLOCK_H: kl.constexpr, BLOCK_D: kl.constexpr):
    """A 1-D row loaded once and broadcast over a 2-D tile (as rotary embeddings do with cos/sin)."""
    d = kl.arange(0, BLOCK_D)
    h = kl.arange(0, BLOCK_H)
    s = kl.load(s_ptr + d)
    offs = h[:, None] * N + d[None, :]
    kl.store(y_ptr + offs, kl.load(x_ptr + offs) * s[None, :])


# The shapes of Triton's own unit tests that transpose 16-bit tiles (python/test/unit/language/test_core.py:
# test_permute stores one BLOCK_M x BLOCK_N tile through runtime strides, either side transposed, in one program;
# test_dot's 'trans' epilogue stores the product through swapped strides). Written here from that description.

@kernelc.jit
def strided_tile_copy_kernel(x_ptr, sxm, sxn, z_ptr, szm, szn, BLOCK_M: kl.constexpr, BLOCK_N: kl.constexpr):
    """z[m * szm + n * szn] = x[m * sxm + n * sxn] for one tile; the unit strides specialise to 1."""
    m = kl.arange(0, BLOCK_M)
    n = kl.arange(0, BLOCK_N)
    kl.store(z_ptr + m[:, None] * szm + n[None, :] * szn, kl.load(x_ptr + m[:, None] * sxm + n[None, :] * sxn))


@kernelc.jit
def dot_strided_store_kernel(x_ptr, y_ptr, z_ptr, szm, szn, BLOCK_M: kl.constexpr, BLOCK_N: kl.constexpr,
                             BLOCK_K: kl.constexpr):
    """z = x @ y (row-major fp16 tiles, fp16 product) stored through strides: swapped, a transposed store."""
    m = kl.arange(0, BLOCK_M)
    n = kl.arange(0, BLOCK_N)
    k = kl.arange(0, BLOCK_K)
    x = kl.load(x_ptr + m[:, None] * BLOCK_K + k[None, :])
    y = kl.load(y_ptr + k[:, None] * BLOCK_N + n[None, :])
    z = kl.dot(x, y, out_dtype=kl.float16)
    kl.store(z_ptr + m[:, None] * szm + n[None, :] * szn, z)
