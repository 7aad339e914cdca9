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


@kernelc.jit
def tile_stores(x_ptr, y_ptr, z_ptr, M, N, stride, BM: kl.constexpr, BN: kl.constexpr, LOOP: kl.constexpr):
    offs_m = kl.program_id(0) * BM + kl.arange(0, BM)
    offs = offs_m[:, None] * stride + kl.arange(0, BN)[None, :]
    m = (offs_m[:, None] < M) & (kl.arange(0, BN)[None, :] < N)
    t = kl.load(x_ptr + offs, mask=m)
    if LOOP:  # the store's next trip follows it
        for i in range(0, 2):
            kl.store(y_ptr + offs, t + i, mask=m)
    else:  # the z store follows the y store
        kl.store(y_ptr + offs, t, mask=m)
        kl.store(z_ptr + offs, t * 2, mask=m)


@kernelc.jit
def dot_bt(a_ptr, bt_ptr, c_ptr, K, stride_a, stride_b, BM: kl.constexpr, BN: kl.constexpr, BK: kl.constexpr,
           KMAJOR: kl.constexpr = False):
    # b given as its transpose [N, K]: both tiles K-contiguous, the dot reads bt through a trans;
    # the loop steps by BK (the trip count is k // BK)
    rm, rn, rk = kl.arange(0, BM), kl.arange(0, BN), kl.arange(0, BK)
    acc = kl.zeros((BM, BN), dtype=kl.float32)
    for k in range(0, K, BK):
        a = kl.load(a_ptr + rm[:, None] * stride_a + (k + rk)[None, :], mask=(k + rk)[None, :] < K, other=0.0)
        if KMAJOR:  # b's [BK, BN] tile read directly, K contiguous: the transpose of a descriptor tile
            b = kl.load(bt_ptr + (k + rk)[:, None] + rn[None, :] * stride_b, mask=(k + rk)[:, None] < K, other=0.0)
        else:
            b = kl.trans(kl.load(bt_ptr + rn[:, None] * stride_b + (k + rk)[None, :], mask=(k + rk)[None, :] < K,
                                 other=0.0))
        acc = kl.dot(a, b, acc)
    kl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


@kernelc.jit
def row_chunks(x_ptr, y_ptr, N, BM: kl.constexpr, BN: kl.constexpr, LD: kl.constexpr):
    # the column step (BN per trip) equals the row stride LD: only the mask says which dim moves
    rows, cols = kl.arange(0, BM), kl.arange(0, BN)
    acc = kl.zeros((BM, BN), dtype=kl.float32)
    for n0 in range(0, N, BN):
        acc += kl.load(x_ptr + rows[:, None] * LD + (n0 + cols)[None, :], mask=(n0 + cols)[None, :] < N, other=0.0)
    kl.store(y_ptr + rows[:, None] * BN + cols[None, :], acc)


@kernelc.jit
def after_flag(x_ptr, flag_ptr, y_ptr, M, BM: kl.constexpr, BN: kl.constexpr, VOLATILE: kl.constexpr):
    # another program publishes x and raises the flag: the tile read after the flag read must not be a TMA copy
    while kl.load(flag_ptr, volatile=VOLATILE) == 0:
        pass
    offs_m = kl.program_id(0) * BM + kl.arange(0, BM)
    offs = offs_m[:, None] * BN + kl.arange(0, BN)[None, :]
    t = kl.load(x_ptr + offs, mask=offs_m[:, None] < M)
    kl.store(y_ptr + offs, kl.dot(t, t), mask=offs_m[:, None] < M)
