"""Tensor-descriptor kernels shared by the TMA code-generation tests (CPU) and the GPU tests."""
import kernelc
import kernelc.language as kl


@kernelc.jit
def matmul_bt(a_desc, b_desc, c_ptr, M, N, K, BM: kl.constexpr, BN: kl.constexpr, BK: kl.constexpr):
    """C = A @ B^T with B stored [N, K] (K-major), C fp32 through plain pointers."""
    pid_m = kl.program_id(0)
    pid_n = kl.program_id(1)
    acc = kl.zeros((BM, BN), dtype=kl.float32)
    for k in range(0, kl.cdiv(K, BK)):
        a = a_desc.load([pid_m * BM, k * BK])
        b = b_desc.load([pid_n * BN, k * BK])
        acc = kl.dot(a, b.T, acc)
    rm = pid_m * BM + kl.arange(0, BM)
    rn = pid_n * BN + kl.arange(0, BN)
    kl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@kernelc.jit
def copy2d(x_desc, y_desc, BM: kl.constexpr, BN: kl.constexpr):
    """y = 2 x, one tile per program."""
    pm = kl.program_id(0)
    pn = kl.program_id(1)
    y_desc.store([pm * BM, pn * BN], x_desc.load([pm * BM, pn * BN]) * 2)


@kernelc.jit
def copy3d(x_desc, y_desc, B0: kl.constexpr, B1: kl.constexpr, B2: kl.constexpr):
    p = kl.program_id(0)
    y_desc.store([p * B0, 0, 0], x_desc.load([p * B0, 0, 0]))


@kernelc.jit
def copy_rows(x_desc, y_desc, N, BM: kl.constexpr, BN: kl.constexpr):
    """y = x + 1, each program walking its row block tile by tile (descriptor ops inside a loop)."""
    pm = kl.program_id(0)
    for j in range(0, kl.cdiv(N, BN)):
        y_desc.store([pm * BM, j * BN], x_desc.load([pm * BM, j * BN]) + 1)


@kernelc.jit
def qk_sum(q_desc, k_desc, out_ptr, N_CTX, BM: kl.constexpr, BN: kl.constexpr, D: kl.constexpr):
    """out = sum_j Q_blk @ K_j^T: Q loaded once before the loop (read in place by every dot), K pipelined."""
    pm = kl.program_id(0)
    q = q_desc.load([pm * BM, 0])
    acc = kl.zeros((BM, BN), dtype=kl.float32)
    for j in range(0, kl.cdiv(N_CTX, BN)):
        k = k_desc.load([j * BN, 0])
        acc = kl.dot(q, k.T, acc)
    rm = pm * BM + kl.arange(0, BM)
    rn = kl.arange(0, BN)
    kl.store(out_ptr + rm[:, None] * BN + rn[None, :], acc)


@kernelc.jit
def load_tile(x_desc, out_ptr, R0, C0, BM: kl.constexpr, BN: kl.constexpr):
    """The tile at (R0, C0), out-of-bounds elements as the descriptor's padding, to a dense buffer."""
    t = x_desc.load([R0, C0])
    r = kl.arange(0, BM)
    c = kl.arange(0, BN)
    kl.store(out_ptr + r[:, None] * BN + c[None, :], t)
