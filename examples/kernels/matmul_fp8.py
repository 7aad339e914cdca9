"""fp8 matrix multiplication with per-tensor scales, as ``torch._scaled_mm`` computes it.

``out = (a @ b) * scale_a * scale_b`` with ``a`` [M, K] and ``b`` [K, N] in fp8 (e4m3 or e5m2), the
product accumulated in fp32 on tensor cores and the scales applied once in the epilogue (they are
per-tensor fp32 scalars in device memory). Like ``torch._scaled_mm``, ``b`` is expected column-major
(``b = b_nk.t()``): its [BLOCK_K, BLOCK_N] tiles are then K-contiguous, which is the shared-memory
order Hopper's fp8 wgmma needs, so they are copied with cp.async as they are. A row-major ``b`` works
too but is transposed on the way to shared memory (slower).

``matmul_fp8_tma_kernel`` is the same GEMM on tensor descriptors made in the kernel (on sm_90a: TMA
copies into the ring wgmma reads, a TMA store for C). ``b``'s column-major [K, N] is the row-major
[N, K] ``b_nk``, so its descriptor reads [BLOCK_N, BLOCK_K] tiles and the dot takes their transpose --
K-major in shared memory, as fp8 wgmma needs. ``matmul_fp8`` takes it when ``b`` is column-major and
the rows of ``a``, ``b_nk`` and ``c`` are 16-byte aligned (what TMA can address).
"""
import kernelc as triton
import kernelc.language as tl


def get_configs():
    return [
        triton.Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 8}, num_stages=3, num_warps=8),
        triton.Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 8}, num_stages=4, num_warps=8),
        triton.Config({"BLOCK_SIZE_M": 256, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 8}, num_stages=3, num_warps=8),
        triton.Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 8}, num_stages=4, num_warps=4),
        triton.Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 8}, num_stages=4, num_warps=8),
        triton.Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8}, num_stages=4, num_warps=8),
    ]


@triton.jit
def _grouped_tile(pid, M, N, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
    """(pid_m, pid_n) of program ``pid`` in grouped order: GROUP_SIZE_M rows of tiles at a time (L2 reuse)."""
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    return first_pid_m + ((pid % num_pid_in_group) % group_size_m), (pid % num_pid_in_group) // group_size_m


@triton.jit
def matmul_fp8_kernel(a_ptr, b_ptr, c_ptr, scale_a_ptr, scale_b_ptr, M, N, K, stride_am, stride_ak, stride_bk,
                      stride_bn, stride_cm, stride_cn, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                      BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
    pid_m, pid_n = _grouped_tile(tl.program_id(axis=0), M, N, BLOCK_SIZE_M, BLOCK_SIZE_N, GROUP_SIZE_M)
    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    scale = tl.load(scale_a_ptr) * tl.load(scale_b_ptr)
    c = (accumulator * scale).to(c_ptr.dtype.element_ty)
    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


matmul_fp8_autotuned = triton.autotune(configs=get_configs(), key=["M", "N", "K"])(matmul_fp8_kernel)


@triton.jit
def matmul_fp8_tma_kernel(a_ptr, b_ptr, c_ptr, scale_a_ptr, scale_b_ptr, M, N, K, stride_am, stride_bn, stride_cm,
                          BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                          GROUP_SIZE_M: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1],
                                       block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[stride_bn, 1],  # b_nk: b column-major
                                       block_shape=[BLOCK_SIZE_N, BLOCK_SIZE_K])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[stride_cm, 1],
                                       block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_N])
    pid_m, pid_n = _grouped_tile(tl.program_id(axis=0), M, N, BLOCK_SIZE_M, BLOCK_SIZE_N, GROUP_SIZE_M)
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = a_desc.load([pid_m * BLOCK_SIZE_M, k * BLOCK_SIZE_K])  # out of bounds: 0
        b = b_desc.load([pid_n * BLOCK_SIZE_N, k * BLOCK_SIZE_K])
        accumulator = tl.dot(a, b.T, accumulator)
    scale = tl.load(scale_a_ptr) * tl.load(scale_b_ptr)
    c_desc.store([pid_m * BLOCK_SIZE_M, pid_n * BLOCK_SIZE_N], (accumulator * scale).to(c_desc.dtype))


matmul_fp8_tma_autotuned = triton.autotune(configs=get_configs(), key=["M", "N", "K"])(matmul_fp8_tma_kernel)


def _tma_ready(*mats) -> bool:
    """Row-major matrices whose base and row stride are 16-byte aligned (what a descriptor needs)."""
    return all(t.stride(1) == 1 and t.data_ptr() % 16 == 0 and (t.stride(0) * t.element_size()) % 16 == 0
               for t in mats)


def matmul_fp8(a, b, scale_a, scale_b, out_dtype=None, kernel=None, **config):
    """``(a @ b) * scale_a * scale_b`` in ``out_dtype`` (default bfloat16); scales are 1-element fp32 tensors."""
    import torch
    M, K = a.shape
    K2, N = b.shape
    assert K == K2, "incompatible dimensions"
    c = torch.empty((M, N), device=a.device, dtype=out_dtype or torch.bfloat16)
    grid = lambda META: (triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"]),)  # noqa: E731
    if (kernel is None or kernel in (matmul_fp8_tma_kernel, matmul_fp8_tma_autotuned)) and _tma_ready(a, b.t(), c):
        k = kernel or (matmul_fp8_tma_autotuned if not config else matmul_fp8_tma_kernel)
        k[grid](a, b, c, scale_a, scale_b, M, N, K, a.stride(0), b.stride(1), c.stride(0), **config)
        return c
    k = kernel or (matmul_fp8_autotuned if not config else matmul_fp8_kernel)
    k[grid](a, b, c, scale_a, scale_b, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
            c.stride(1), **config)
    return c
