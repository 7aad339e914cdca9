"""Matrix multiplication through tensor descriptors (Triton's host ``TensorDescriptor`` API).

On Hopper (sm_90a) the descriptor loads become TMA bulk copies into a multi-stage ring of swizzled
shared-memory buffers that wgmma reads in place, and the epilogue is a TMA store; elsewhere the same
kernel runs on masked loads/stores. The block shapes live in the descriptors, so the autotune
configs set them in a pre-hook (as Triton's tutorials do).
"""
import importlib

import kernelc as triton
import kernelc.language as tl

# kernelc.tools.tensor_descriptor / triton.tools.tensor_descriptor (the Triton twin of this file)
TensorDescriptor = importlib.import_module(triton.__name__ + ".tools.tensor_descriptor").TensorDescriptor


def _set_block_shapes(nargs):
    bm, bn, bk = nargs["BLOCK_SIZE_M"], nargs["BLOCK_SIZE_N"], nargs["BLOCK_SIZE_K"]
    nargs["a_desc"].block_shape = [bm, bk]
    nargs["b_desc"].block_shape = [bk, bn]
    nargs["c_desc"].block_shape = [bm, bn]


def get_configs():
    return [
        triton.Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8},
                      num_stages=s, num_warps=w, pre_hook=_set_block_shapes)
        for bm, bn, w in ((128, 128, 4), (128, 128, 8), (128, 256, 8), (256, 128, 8))
        for s in (3, 4)
    ]


@triton.jit
def matmul_tma_kernel(a_desc, b_desc, c_desc, M, N, K, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                      BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_m = pid_m * BLOCK_SIZE_M
    offs_n = pid_n * BLOCK_SIZE_N
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = a_desc.load([offs_m, k * BLOCK_SIZE_K])   # out-of-bounds rows/cols read as 0
        b = b_desc.load([k * BLOCK_SIZE_K, offs_n])
        accumulator = tl.dot(a, b, accumulator)
    c_desc.store([offs_m, offs_n], accumulator.to(c_desc.dtype))  # only in-bounds elements are written


matmul_tma_autotuned = triton.autotune(configs=get_configs(), key=["M", "N", "K"])(matmul_tma_kernel)


def fill_config(config):
    """A plain kernel's config (non-empty: no autotuning) with BLOCK_SIZE_M/N/K and GROUP_SIZE_M defaults."""
    if config:
        for name, default in (("BLOCK_SIZE_M", 128), ("BLOCK_SIZE_N", 128), ("BLOCK_SIZE_K", 64), ("GROUP_SIZE_M", 8)):
            config.setdefault(name, default)


def host_operands(a, b, config, descriptor=None):
    """C and the A/B/C host descriptors for ``a @ b`` (fp16/bf16, row-major, 16-byte aligned rows).
    ``config`` (a plain kernel's BLOCK_SIZE_M/N/K, GROUP_SIZE_M) gets its defaults filled in; an empty one
    means autotuning, whose configs set the block shapes in their pre-hook. ``descriptor``: the host
    descriptor class (Triton's when another example's Triton twin calls this)."""
    import torch
    descriptor = descriptor or TensorDescriptor
    M, K = a.shape
    K2, N = b.shape
    assert K == K2, "incompatible dimensions"
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    fill_config(config)
    bm, bn, bk = (config.get("BLOCK_SIZE_M", 128), config.get("BLOCK_SIZE_N", 128), config.get("BLOCK_SIZE_K", 64))
    descs = (descriptor.from_tensor(a, [bm, bk]), descriptor.from_tensor(b, [bk, bn]),
             descriptor.from_tensor(c, [bm, bn]))
    return c, descs


def matmul_tma(a, b, kernel=None, **config):
    """``a @ b`` (fp16/bf16, row-major, 16-byte aligned rows). ``config`` (BLOCK_SIZE_M/N/K, GROUP_SIZE_M,
    num_warps, num_stages) runs the plain kernel with it instead of autotuning."""
    c, descs = host_operands(a, b, config)
    M, N, K = a.shape[0], b.shape[1], a.shape[1]
    grid = lambda META: (triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"]),)  # noqa: E731
    k = kernel or (matmul_tma_autotuned if not config else matmul_tma_kernel)
    k[grid](*descs, M, N, K, **config)
    return c
