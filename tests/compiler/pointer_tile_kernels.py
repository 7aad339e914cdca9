"""Kernels for the pointer-tile (auto-TMA) tests: tests/compiler/test_pointer_tiles_tma.py (CPU) and
tests/gpu/test_gpu_pointer_tiles_tma.py (GPU). The masked tutorial matmul is
examples/kernels/matmul.py ``matmul_masked_kernel``."""
import kernelc
import kernelc.language as kl


@kernelc.jit
def masked_sum(x_ptr, out_ptr, idx_ptr, M, K, stride_xm, BM: kl.constexpr, BK: kl.constexpr,
               FORM: kl.constexpr):
    offs_m = kl.program_id(0) * BM + kl.arange(0, BM)
    offs_k = kl.arange(0, BK)
    if FORM == "gather":
        rows = kl.load(idx_ptr + offs_m)
        p = x_ptr + rows[:, None] * stride_xm + offs_k[None, :]
    else:
        p = x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :]
    acc = kl.zeros((BM, BK), dtype=kl.float32)
    out = out_ptr + kl.arange(0, BM)[:, None] * BK + kl.arange(0, BK)[None, :]
    if FORM == "after_store":  # out may alias x: a TMA read would not be ordered after this write
        kl.store(out, acc)
    for k in range(0, kl.cdiv(K, BK)):
        if FORM == "static_bound":  # the bound does not move with the pointer: not the tile's bound
            m = (offs_m[:, None] < M) & (offs_k[None, :] < K - 1)
        elif FORM == "parity":
            m = (offs_m[:, None] < M) & (offs_k[None, :] % 2 == 0)
        elif FORM == "lower_too":
            m = (offs_m[:, None] < M) & (offs_k[None, :] >= 0)
        else:
            m = (offs_m[:, None] < M) & (offs_k[None, :] < K - k * BK)
        acc += kl.load(p, mask=m, other=0.0)
        if FORM == "store_in_loop":  # written after the load, but before the next trip's load
            kl.store(out, acc)
        p += BK
    kl.store(out, acc)


@kernelc.jit
def shifted_copy(x_ptr, y_ptr, M, N, stride_xm, SHIFT, BM: kl.constexpr, BN: kl.constexpr, PAD: kl.constexpr,
                 STEP: kl.constexpr):
    # rows start SHIFT before the program's block (negative for program 0): the original reads
    # before x_ptr; the descriptor must read the same elements, not treat them as out of bounds
    offs_m = kl.program_id(0) * BM - SHIFT + kl.arange(0, BM)
    offs_n = kl.arange(0, BN)
    acc = kl.zeros((BM, BN), dtype=kl.float32)
    for n0 in range(0, N, STEP):
        m = (offs_m[:, None] < M) & (offs_n[None, :] + n0 < N)
        acc += kl.load(x_ptr + offs_m[:, None] * stride_xm + (offs_n[None, :] + n0), mask=m,
                       other=float("nan") if PAD == "nan" else 0.0)
    kl.store(y_ptr + kl.program_id(0) * BM * BN + kl.arange(0, BM)[:, None] * BN + kl.arange(0, BN)[None, :], acc)


@kernelc.jit
def unmasked_tile(x_ptr, y_ptr, stride_xm, BM: kl.constexpr, BN: kl.constexpr):
    offs_m = kl.program_id(0) * BM + kl.arange(0, BM)
    t = kl.load(x_ptr + offs_m[:, None] * stride_xm + kl.arange(0, BN)[None, :])
    kl.store(y_ptr + offs_m[:, None] * BN + kl.arange(0, BN)[None, :], t)
