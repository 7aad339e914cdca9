"""A grouped GEMM whose tensor descriptors are made inside the loop over the problems, from matrix
addresses and leading dimensions read from memory (the structure of Triton's tutorial 08 TMA kernel;
written for these tests). Shared by the CPU code-generation tests and the GPU test."""
import torch

import kernelc
import kernelc.language as kl


@kernelc.jit
def _matrix(pool, table, i, ADDRESSES: kl.constexpr):
    """Entry ``i`` of the matrix table: an absolute address (``ADDRESSES``) or an element offset into ``pool``."""
    if ADDRESSES:
        return kl.load(table + i).to(kl.pointer_type(kl.float16))
    else:
        return pool + kl.load(table + i)


@kernelc.jit
def grouped_gemm_made_descs(pool, table, dims, lds, n_problems, NUM_PROGRAMS: kl.constexpr, BM: kl.constexpr,
                            BN: kl.constexpr, BK: kl.constexpr, ADDRESSES: kl.constexpr):
    """For every problem p: C_p = A_p @ B_p^T, A_p [M, K], B_p [N, K], C_p [M, N] fp16 (row-major with
    leading dimensions lds[p, 0..2]). ``table[p, 0..2]`` (int64) locates the three matrices: their
    addresses (``ADDRESSES``, as a CUDA grouped GEMM passes them; ``pool`` unused) or their element
    offsets into ``pool`` (the interpreter only maps arguments). ``dims[p, 0..2]``: M, N, K. Program
    ``pid`` takes tiles pid, pid + NUM_PROGRAMS, ... of the problems' tiles laid end to end."""
    tile = kl.program_id(0)
    first = 0
    for p in range(n_problems):
        m = kl.load(dims + 3 * p)
        n = kl.load(dims + 3 * p + 1)
        k = kl.load(dims + 3 * p + 2)
        tiles_n = kl.cdiv(n, BN)
        count = kl.cdiv(m, BM) * tiles_n
        if tile >= first and tile < first + count:
            a = kl.make_tensor_descriptor(_matrix(pool, table, 3 * p, ADDRESSES), [m, k], [kl.load(lds + 3 * p), 1],
                                          [BM, BK])
            b = kl.make_tensor_descriptor(_matrix(pool, table, 3 * p + 1, ADDRESSES), [n, k],
                                          [kl.load(lds + 3 * p + 1), 1], [BN, BK])
            c = kl.make_tensor_descriptor(_matrix(pool, table, 3 * p + 2, ADDRESSES), [m, n],
                                          [kl.load(lds + 3 * p + 2), 1], [BM, BN])
            while tile >= first and tile < first + count:
                row = (tile - first) // tiles_n * BM
                col = (tile - first) % tiles_n * BN
                acc = kl.zeros((BM, BN), dtype=kl.float32)
                for kk in range(0, kl.cdiv(k, BK)):
                    acc += kl.dot(a.load([row, kk * BK]), b.load([col, kk * BK]).T)
                c.store([row, col], acc.to(kl.float16))
                tile += NUM_PROGRAMS
        first = first + count


@kernelc.jit
def made_desc_per_k_step(x_ptr, w_ptr, y_ptr, M, K, BM: kl.constexpr, BK: kl.constexpr):
    """A descriptor made inside the loop whose dot reads its tile: a ring would prefetch later trips'
    tiles before their map is built, so it keeps the generic lowering."""
    acc = kl.zeros((BM, BM), dtype=kl.float32)
    for kk in range(0, kl.cdiv(K, BK)):
        d = kl.make_tensor_descriptor(x_ptr + kk * BK, [M, K - kk * BK], [K, 1], [BM, BK])
        w = kl.load(w_ptr + kl.arange(0, BK)[:, None] * BM + kl.arange(0, BM)[None, :])
        acc += kl.dot(d.load([0, 0]), w)
    kl.store(y_ptr + kl.arange(0, BM)[:, None] * BM + kl.arange(0, BM)[None, :], acc)


def problem_tables(As, Bs, Cs, pool=None):
    """(table, dims, lds) of the kernel for matrices As[i] [M, K], Bs[i] [N, K], Cs[i] [M, N]: the table
    holds the matrices' addresses, or (``pool``: a 1-D fp16 tensor they are all views of) their offsets."""
    mats = [x for abc in zip(As, Bs, Cs) for x in abc]
    if pool is None:
        entries = [x.data_ptr() for x in mats]
    else:
        entries = [(x.data_ptr() - pool.data_ptr()) // pool.element_size() for x in mats]
    dev = As[0].device
    table = torch.tensor(entries, dtype=torch.int64, device=dev).view(-1, 3)
    dims = torch.tensor([[a.shape[0], b.shape[0], a.shape[1]] for a, b in zip(As, Bs)], dtype=torch.int32, device=dev)
    lds = torch.tensor([[a.stride(0), b.stride(0), c.stride(0)] for a, b, c in zip(As, Bs, Cs)], dtype=torch.int32,
                       device=dev)
    return table, dims, lds



@kernelc.jit
def batched_gram_made_descs(table, y_ptr, n, K, BM: kl.constexpr, BK: kl.constexpr, WS: kl.constexpr):
    """y[p] = X_p @ X_p^T for [BM, K] fp16 matrices X_p at the addresses ``table[p]`` (fp32 [BM, BM] out),
    the K loop asking for a producer warp when ``WS``."""
    for p in range(n):
        x = kl.make_tensor_descriptor(kl.load(table + p).to(kl.pointer_type(kl.float16)), [BM, K], [K, 1], [BM, BK])
        acc = kl.zeros((BM, BM), dtype=kl.float32)
        for kk in kl.range(0, kl.cdiv(K, BK), warp_specialize=WS):
            acc += kl.dot(x.load([0, kk * BK]), x.load([0, kk * BK]).T)
        kl.store(y_ptr + p * BM * BM + kl.arange(0, BM)[:, None] * BM + kl.arange(0, BM)[None, :], acc)
