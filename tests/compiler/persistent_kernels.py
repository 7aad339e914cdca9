"""Persistent matmul kernels whose tile loop asks to be flattened (``kl.range(..., flatten=True)``): shared by
the CPU tests of ``flatten_loops`` (tests/compiler/test_flatten_loops.py) and the GPU test
(tests/gpu/test_gpu_flatten_loops.py). Each program walks the tiles ``pid, pid + PROGRAMS, ...``; C is written
by the epilogue after each tile's K loop."""
import kernelc
import kernelc.language as kl


@kernelc.jit
def persistent_desc(a_ptr, b_ptr, c_ptr, M, N, K, BM: kl.constexpr, BN: kl.constexpr, BK: kl.constexpr,
                    PROGRAMS: kl.constexpr, FLAT: kl.constexpr, WS: kl.constexpr = None):
    """C = A @ B.T with A (M, K), B (N, K), C (M, N) row-major, through device-made descriptors (TMA); ``WS``
    is the tile loop's ``warp_specialize``."""
    pid = kl.program_id(0)
    n_m = kl.cdiv(M, BM)
    n_n = kl.cdiv(N, BN)
    k_steps = kl.cdiv(K, BK)
    a_d = kl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_d = kl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    c_d = kl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    done = pid - PROGRAMS  # a counter the epilogue advances (carried by the tile loop)
    for t in kl.range(pid, n_m * n_n, PROGRAMS, flatten=FLAT, warp_specialize=WS):
        row = (t % n_m) * BM
        col = (t // n_m) * BN
        acc = kl.zeros((BM, BN), dtype=kl.float32)
        for k in range(k_steps):
            a = a_d.load([row, k * BK])
            b = b_d.load([col, k * BK])
            acc = kl.dot(a, b.T, acc)
        done += PROGRAMS
        c_d.store([(done % n_m) * BM, (done // n_m) * BN], acc.to(kl.float16))


@kernelc.jit
def persistent_ptr(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bn, stride_cm, BM: kl.constexpr,
                   BN: kl.constexpr, BK: kl.constexpr, PROGRAMS: kl.constexpr, FLAT: kl.constexpr):
    """The same with masked pointer loads and a masked store (ragged M, N and K)."""
    pid = kl.program_id(0)
    n_m = kl.cdiv(M, BM)
    n_n = kl.cdiv(N, BN)
    k_steps = kl.cdiv(K, BK)
    kk = kl.arange(0, BK)
    for t in kl.range(pid, n_m * n_n, PROGRAMS, flatten=FLAT):
        rows = (t % n_m) * BM + kl.arange(0, BM)
        cols = (t // n_m) * BN + kl.arange(0, BN)
        # rows and columns past the edge read row 0 (their results are not stored): only K is masked
        ra = kl.where(rows < M, rows, 0)
        cb = kl.where(cols < N, cols, 0)
        acc = kl.zeros((BM, BN), dtype=kl.float32)
        for k in range(k_steps):
            ks = k * BK + kk
            a = kl.load(a_ptr + ra[:, None] * stride_am + ks[None, :], mask=ks[None, :] < K, other=0.0)
            b = kl.load(b_ptr + cb[None, :] * stride_bn + ks[:, None], mask=ks[:, None] < K, other=0.0)
            acc = kl.dot(a, b, acc)
        kl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :], acc.to(kl.float16),
                 mask=(rows[:, None] < M) & (cols[None, :] < N))


@kernelc.jit
def persistent_desc_subtiled(a_ptr, b_ptr, c_ptr, M, N, K, BM: kl.constexpr, BN: kl.constexpr, BK: kl.constexpr,
                             PROGRAMS: kl.constexpr, FLAT: kl.constexpr):
    """``persistent_desc`` with tutorial 09's subtiled epilogue: C's descriptor is half a tile wide and each tile
    is stored in two halves (split from the accumulator), both through that descriptor."""
    pid = kl.program_id(0)
    n_m = kl.cdiv(M, BM)
    n_n = kl.cdiv(N, BN)
    k_steps = kl.cdiv(K, BK)
    a_d = kl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_d = kl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    c_d = kl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN // 2])
    for t in kl.range(pid, n_m * n_n, PROGRAMS, flatten=FLAT):
        row = (t % n_m) * BM
        col = (t // n_m) * BN
        acc = kl.zeros((BM, BN), dtype=kl.float32)
        for k in range(k_steps):
            a = a_d.load([row, k * BK])
            b = b_d.load([col, k * BK])
            acc = kl.dot(a, b.T, acc)
        acc0, acc1 = kl.split(kl.permute(kl.reshape(acc, (BM, 2, BN // 2)), (0, 2, 1)))
        c_d.store([row, col], acc0.to(kl.float16))
        c_d.store([row, col + BN // 2], acc1.to(kl.float16))


@kernelc.jit
def _grouped_tile(t, per_group, n_m, GROUP: kl.constexpr):
    """Tile ``t``'s (row, column) block when GROUP row blocks are walked column by column (L2 reuse)."""
    first = (t // per_group) * GROUP
    rows_here = kl.minimum(n_m - first, GROUP)
    return first + t % rows_here, (t % per_group) // rows_here


@kernelc.jit
def persistent_ptr_grouped(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                           stride_cn, BM: kl.constexpr, BN: kl.constexpr, BK: kl.constexpr, GROUP: kl.constexpr,
                           PROGRAMS: kl.constexpr, FLAT: kl.constexpr):
    """C = A @ B, pointer loads, tiles in grouped order: the shape of tutorial 09's persistent pointer kernel.
    The tile's row and column offsets are wrapped to 0 past the edge (hinted contiguous and aligned, so the
    loads stay vectors); only K is masked in the loop; the epilogue counts its own tile number."""
    pid = kl.program_id(0)
    n_m = kl.cdiv(M, BM)
    n_n = kl.cdiv(N, BN)
    k_steps = kl.cdiv(K, BK)
    per_group = GROUP * n_n
    kk = kl.arange(0, BK)
    done = pid - PROGRAMS
    for t in kl.range(pid, n_m * n_n, PROGRAMS, flatten=FLAT):
        bm, bn = _grouped_tile(t, per_group, n_m, GROUP)
        rows = bm * BM + kl.arange(0, BM)
        cols = bn * BN + kl.arange(0, BN)
        rows = kl.max_contiguous(kl.multiple_of(kl.where(rows < M, rows, 0), BM), BM)
        cols = kl.max_contiguous(kl.multiple_of(kl.where(cols < N, cols, 0), BN), BN)
        acc = kl.zeros((BM, BN), dtype=kl.float32)
        for k in range(k_steps):
            ks = k * BK + kk
            a = kl.load(a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak, mask=kk[None, :] < K - k * BK,
                        other=0.0)
            b = kl.load(b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn, mask=kk[:, None] < K - k * BK,
                        other=0.0)
            acc = kl.dot(a, b, acc)
        done += PROGRAMS
        cm, cn = _grouped_tile(done, per_group, n_m, GROUP)
        r = cm * BM + kl.arange(0, BM)
        c = cn * BN + kl.arange(0, BN)
        kl.store(c_ptr + r[:, None] * stride_cm + c[None, :] * stride_cn, acc.to(kl.float16),
                 mask=(r[:, None] < M) & (c[None, :] < N))
