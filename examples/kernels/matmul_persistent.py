"""Persistent matrix multiplication: one program per SM walks the output tiles.

A tile scheduler in the kernel: program ``p`` takes tiles ``p, p + NUM_SMS, p + 2 NUM_SMS, ...`` in
the grouped order (``GROUP_SIZE_M`` rows of tiles at a time, for L2 reuse), so the grid is at most
one wave and a program's next tile starts while its last epilogue drains. On sm_90a the K loop is a
TMA -> wgmma ring; ``WARP_SPECIALIZE=True`` adds a producer warp that keeps filling the ring across
tiles -- it loads the next tile's first K blocks while the consumers store this one (off by default:
on an H200 it measured slower than the plain ring for this loop, see bench/results).

``matmul_descriptor_persistent`` runs the same tile loop on descriptors made in the kernel from plain
tensors (Triton's device-side descriptors): no host descriptor objects, one map build per program.
"""
import importlib

import kernelc as triton
import kernelc.language as tl

from examples.kernels.matmul_tma import _set_block_shapes, fill_config, host_operands

TensorDescriptor = importlib.import_module(triton.__name__ + ".tools.tensor_descriptor").TensorDescriptor


def get_configs(pre_hook=_set_block_shapes):
    """The autotune configs; ``pre_hook`` sets host descriptors' block shapes (none for made ones)."""
    return [
        triton.Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8},
                      num_stages=s, num_warps=w, pre_hook=pre_hook)
        for bm, bn, w, s in ((128, 128, 8, 4), (128, 256, 8, 3), (256, 128, 8, 3), (128, 128, 4, 4))
    ]


@triton.jit
def _persistent_tiles(a_desc, b_desc, c_desc, M, N, K, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                      BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr, NUM_SMS: tl.constexpr,
                      WARP_SPECIALIZE: tl.constexpr):
    start_pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    k_tiles = tl.cdiv(K, BLOCK_SIZE_K)
    num_tiles = num_pid_m * num_pid_n
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    for tile_id in range(start_pid, num_tiles, NUM_SMS):
        group_id = tile_id // num_pid_in_group
        first_pid_m = group_id * GROUP_SIZE_M
        group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
        pid_m = first_pid_m + (tile_id % group_size_m)
        pid_n = (tile_id % num_pid_in_group) // group_size_m
        offs_am = pid_m * BLOCK_SIZE_M
        offs_bn = pid_n * BLOCK_SIZE_N
        accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for ki in tl.range(0, k_tiles, warp_specialize=WARP_SPECIALIZE):
            offs_k = ki * BLOCK_SIZE_K
            a = a_desc.load([offs_am, offs_k])
            b = b_desc.load([offs_k, offs_bn])
            accumulator = tl.dot(a, b, accumulator)
        c_desc.store([offs_am, offs_bn], accumulator.to(c_desc.dtype))


@triton.jit
def matmul_persistent_kernel(a_desc, b_desc, c_desc, M, N, K, BLOCK_SIZE_M: tl.constexpr,
                             BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr,
                             NUM_SMS: tl.constexpr, WARP_SPECIALIZE: tl.constexpr = False):
    _persistent_tiles(a_desc, b_desc, c_desc, M, N, K, BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, GROUP_SIZE_M,
                      NUM_SMS, WARP_SPECIALIZE)


@triton.jit
def matmul_descriptor_persistent_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_SIZE_M: tl.constexpr,
                                        BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                                        GROUP_SIZE_M: tl.constexpr, NUM_SMS: tl.constexpr,
                                        WARP_SPECIALIZE: tl.constexpr = False):
    """The same kernel over plain pointers: the descriptors are made in the kernel (on sm_90a each
    program builds their CUtensorMaps once, at its start)."""
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_SIZE_K, BLOCK_SIZE_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_N])
    _persistent_tiles(a_desc, b_desc, c_desc, M, N, K, BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, GROUP_SIZE_M,
                      NUM_SMS, WARP_SPECIALIZE)


matmul_persistent_autotuned = triton.autotune(configs=get_configs(), key=["M", "N", "K"])(matmul_persistent_kernel)


def num_sms(device=None) -> int:
    """SMs of the GPU (a few programs for CPU tensors, which run in the interpreter)."""
    import torch
    if device is not None and torch.device(device).type != "cuda":
        return 4
    return torch.cuda.get_device_properties(device if device is not None else torch.cuda.current_device()) \
        .multi_processor_count


def matmul_persistent(a, b, kernel=None, warp_specialize=False, **config):
    """``a @ b`` (fp16/bf16, row-major, 16-byte aligned rows) with at most one program per SM.
    ``config`` (BLOCK_SIZE_M/N/K, GROUP_SIZE_M, num_warps, num_stages) skips autotuning."""
    c, descs = host_operands(a, b, config, TensorDescriptor)
    k = kernel or (matmul_persistent_autotuned if not config else matmul_persistent_kernel)
    _launch(k, descs, a, b, warp_specialize, config)
    return c


matmul_descriptor_persistent_autotuned = triton.autotune(configs=get_configs(pre_hook=None), key=["M", "N", "K"])(
    matmul_descriptor_persistent_kernel)


def matmul_descriptor_persistent(a, b, kernel=None, warp_specialize=False, **config):
    """``matmul_persistent`` with the descriptors made in the kernel from plain tensors (Triton's
    device-side descriptors; Triton itself also needs ``triton.set_allocator`` for their scratch)."""
    import torch
    c = torch.empty((a.shape[0], b.shape[1]), device=a.device, dtype=a.dtype)
    fill_config(config)
    k = kernel or (matmul_descriptor_persistent_autotuned if not config else matmul_descriptor_persistent_kernel)
    _launch(k, (a, b, c), a, b, warp_specialize, config)
    return c


def _launch(kernel, operands, a, b, warp_specialize, config):
    M, N, K = a.shape[0], b.shape[1], a.shape[1]
    sms = num_sms(a.device)
    grid = lambda META: (min(sms, triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"])),)  # noqa: E731
    kernel[grid](*operands, M, N, K, NUM_SMS=sms, WARP_SPECIALIZE=warp_specialize, **config)
