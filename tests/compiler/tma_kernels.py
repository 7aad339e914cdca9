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


@kernelc.jit
def attn_fa3_order(sm_scale, desc_q, desc_k, desc_v, desc_o, N_CTX, BLOCK_M: kl.constexpr, BLOCK_N: kl.constexpr,
                   HEAD_DIM: kl.constexpr):
    """Attention (no mask) in FlashAttention-3's order: block 0's softmax before the loop; each iteration
    issues the next block's QK^T and this block's PV back to back, then the next softmax reads the scores
    while PV is still on the tensor cores (the compiler waits for a wgmma where its result is first read)."""
    start_m = kl.program_id(0)
    offset_y = kl.program_id(1) * N_CTX
    qo_offset_y = offset_y + start_m * BLOCK_M
    acc = kl.zeros([BLOCK_M, HEAD_DIM], dtype=kl.float32)
    qk_scale = sm_scale * 1.44269504
    q = desc_q.load([qo_offset_y, 0])
    qk = kl.dot(q, desc_k.load([offset_y, 0]).T)
    m_i = kl.max(qk, 1) * qk_scale
    p = kl.math.exp2(qk * qk_scale - m_i[:, None])
    l_i = kl.sum(p, 1)
    for start_n in range(0, N_CTX - BLOCK_N, BLOCK_N):
        qk = kl.dot(q, desc_k.load([offset_y + start_n + BLOCK_N, 0]).T)
        acc = kl.dot(p.to(kl.float16), desc_v.load([offset_y + start_n, 0]), acc)
        m_ij = kl.maximum(m_i, kl.max(qk, 1) * qk_scale)
        p = kl.math.exp2(qk * qk_scale - m_ij[:, None])
        alpha = kl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + kl.sum(p, 1)
        acc = acc * alpha[:, None]
        m_i = m_ij
    acc = kl.dot(p.to(kl.float16), desc_v.load([offset_y + N_CTX - BLOCK_N, 0]), acc)
    acc = acc / l_i[:, None]
    desc_o.store([qo_offset_y, 0], acc.to(kl.float16))


def run_attention(kernel, q, k, v, BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=2):
    """Launch ``kernel`` (the signature of ``attn_fa3_order``) on contiguous [Z, H, N, D] fp16 tensors."""
    import torch
    Z, H, N, D = q.shape
    o = torch.empty_like(q)
    y = Z * H * N
    descs = [kernelc.TensorDescriptor(t, [y, D], [D, 1], [b, D])
             for t, b in ((q, BLOCK_M), (k, BLOCK_N), (v, BLOCK_N), (o, BLOCK_M))]
    ck = kernel[(N // BLOCK_M, Z * H, 1)](D ** -0.5, *descs, N, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, HEAD_DIM=D,
                                         num_warps=num_warps, num_stages=num_stages)
    return o, ck


@kernelc.jit
def made_desc_in_loop(x_ptr, y_ptr, M, N, BM: kl.constexpr, BN: kl.constexpr):
    """A descriptor made inside a loop: its map is built there, on every trip."""
    for i in range(0, 2):
        d = kl.make_tensor_descriptor(x_ptr + i * BN, [M, N], [N, 1], [BM, BN])
        t = d.load([0, 0])
        r = kl.arange(0, BM)[:, None] * BN + kl.arange(0, BN)[None, :]
        kl.store(y_ptr + i * BM * BN + r, t)


@kernelc.jit
def made_desc_from_memory(x_ptr, off_ptr, y_ptr, M, N, BM: kl.constexpr, BN: kl.constexpr):
    """A descriptor whose base depends on a loaded value: its map is built where it is made."""
    d = kl.make_tensor_descriptor(x_ptr + kl.load(off_ptr), [M, N], [N, 1], [BM, BN])
    r = kl.arange(0, BM)[:, None] * BN + kl.arange(0, BN)[None, :]
    kl.store(y_ptr + r, d.load([0, 0]))


@kernelc.jit
def made_desc_batched_copy(x_ptr, y_ptr, M, N, stride_b, BM: kl.constexpr, BN: kl.constexpr):
    """y[b] = x[b] for a batch of [M, N] matrices (batch stride ``stride_b`` elements): one descriptor
    per batch entry, made from program ids (program (i, j, b) copies tile (i, j) of entry b)."""
    b = kl.program_id(2)
    src = kl.make_tensor_descriptor(x_ptr + b * stride_b, [M, N], [N, 1], [BM, BN])
    dst = kl.make_tensor_descriptor(y_ptr + b * stride_b, [M, N], [N, 1], [BM, BN])
    dst.store([kl.program_id(0) * BM, kl.program_id(1) * BN], src.load([kl.program_id(0) * BM, kl.program_id(1) * BN]))


@kernelc.jit
def wgmma_then_mma_sync(k_desc, q_desc, out_ptr, BN: kl.constexpr, BM: kl.constexpr, D: kl.constexpr,
                        ATOMIC: kl.constexpr):
    """The attention backward's dQ step in miniature: sT = K Q^T on wgmma ([BN, BM]); dq = sT^T K, a dot of
    BM < 64 rows (mma.sync) whose B operand is the same TMA tile K. Stored or atomically added."""
    k = k_desc.load([0, 0])
    q = q_desc.load([0, 0])
    sT = kl.dot(k, q.T).to(kl.float16)
    dq = kl.dot(kl.trans(sT), k)
    offs = kl.arange(0, BM)[:, None] * D + kl.arange(0, D)[None, :]
    if ATOMIC:
        kl.atomic_add(out_ptr + offs, dq, sem="relaxed")
    else:
        kl.store(out_ptr + offs, dq)


@kernelc.jit
def mma_sync_reads_tma_b(a_ptr, k_desc, out_ptr, BN: kl.constexpr, BM: kl.constexpr, D: kl.constexpr):
    """out = A K with A [BM, BN] from pointers and K [BN, D] a TMA tile, one reader: with BM rows below a
    warpgroup's the dot is mma.sync, which reads K in place (N-major, ldmatrix.trans)."""
    a = kl.load(a_ptr + kl.arange(0, BM)[:, None] * BN + kl.arange(0, BN)[None, :])
    out = kl.dot(a, k_desc.load([0, 0]))
    kl.store(out_ptr + kl.arange(0, BM)[:, None] * D + kl.arange(0, D)[None, :], out)


@kernelc.jit
def invariant_operand_two_roles(k_ptr, q_ptr, out_ptr, ITERS: kl.constexpr, BN: kl.constexpr, BM: kl.constexpr,
                                D: kl.constexpr):
    """The attention backward's atomic-dQ loop in miniature: K, loaded before the loop, is A of sT = K Q_i^T and
    B of acc += sT^T K in every iteration (codegen stages a loop-invariant dot operand once: for one role)."""
    rn = kl.arange(0, BN)
    rm = kl.arange(0, BM)
    rd = kl.arange(0, D)
    k = kl.load(k_ptr + rn[:, None] * D + rd[None, :])
    acc = kl.zeros((BM, D), dtype=kl.float32)
    for i in range(ITERS):
        q = kl.load(q_ptr + (i * BM + rm)[:, None] * D + rd[None, :])
        sT = kl.dot(k, kl.trans(q)).to(kl.float16)
        acc = kl.dot(kl.trans(sT), k, acc)
    kl.store(out_ptr + rm[:, None] * D + rd[None, :], acc)
