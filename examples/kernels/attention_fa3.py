"""Fused attention forward in FlashAttention-3's order (descriptor loads, sm_90a): the next key block's
``Q K^T`` is issued before this block's ``P V``, so the softmax of one block runs while the other block's
``P V`` is on the tensor cores.

The kernel is plain tile code; the compiler does the rest (docs/attention.md, "FlashAttention-3's order"):
it waits for each dot where its result is first read and keeps that wait there (``pin_wait``), gives the
two consumer warpgroups the registers of the producer warpgroup (``setmaxnreg``, chosen because a wgmma
stays in flight across the softmax), and a producer warp issues the TMA copies.

Each program owns ``BLOCK_M`` query rows. Its first key block (the diagonal one when causal, masked) is
scored before the loop; every trip of the loop scores the next block and adds the previous block's
``P V``; the last ``P V`` follows the loop. ``P`` is carried in the input dtype, ``v_prev`` is the row of
the V block it belongs to. Causal blocks right of the diagonal are never loaded.
"""
import importlib

import kernelc as triton
import kernelc.language as tl

TensorDescriptor = importlib.import_module(triton.__name__ + ".tools.tensor_descriptor").TensorDescriptor


@triton.jit
def attn_fwd_fa3_kernel(sm_scale, desc_q, desc_k, desc_v, desc_o, N_CTX, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr):
    # causal: a head's heaviest row blocks launch first, the light ones fill the tail of the grid
    start_m = tl.num_programs(0) - 1 - tl.program_id(0) if CAUSAL else tl.program_id(0)
    offset_y = tl.program_id(1) * N_CTX
    qo_offset_y = offset_y + start_m * BLOCK_M
    qk_scale = sm_scale * 1.44269504
    q = desc_q.load([qo_offset_y, 0])
    dtype = q.dtype
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    # the first block: the diagonal (masked) when causal, else block 0
    first = start_m * BLOCK_M if CAUSAL else 0
    qk = tl.dot(q, desc_k.load([offset_y + first, 0]).T) * qk_scale
    if CAUSAL:
        offs_m = tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        qk = qk + tl.where(offs_m[:, None] >= offs_n[None, :], 0.0, -1.0e6)
    m_i = tl.max(qk, 1)
    p32 = tl.math.exp2(qk - m_i[:, None])
    l_i = tl.sum(p32, 1)
    p = p32.to(dtype)
    v_prev = offset_y + first
    lo = 0 if CAUSAL else BLOCK_N
    hi = start_m * BLOCK_M if CAUSAL else N_CTX
    for start_n in range(lo, hi, BLOCK_N):  # unmasked blocks
        qk = tl.dot(q, desc_k.load([offset_y + start_n, 0]).T)
        acc = tl.dot(p, desc_v.load([v_prev, 0]), acc)  # the previous block's P V, during this softmax
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p32 = tl.math.exp2(qk * qk_scale - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p32, 1)
        acc = acc * alpha[:, None]
        m_i = m_ij
        p = p32.to(dtype)
        v_prev = offset_y + start_n
    acc = tl.dot(p, desc_v.load([v_prev, 0]), acc)
    acc = acc / l_i[:, None]
    desc_o.store([qo_offset_y, 0], acc.to(dtype))


def attention(q, k, v, causal=False, sm_scale=None, BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=2, kernel=None):
    """softmax(q k^T * sm_scale) v for fp16/bf16 ``[Z, H, N_CTX, HEAD_DIM]`` tensors (contiguous; N_CTX a
    multiple of BLOCK_M; BLOCK_M == BLOCK_N when causal: the diagonal is one block). ``kernel``: another
    ``kernelc.jit`` of :func:`attn_fwd_fa3_kernel` (its own compiled variants, e.g. under other compile knobs)."""
    import torch
    Z, H, N, D = q.shape
    if q.dtype not in (torch.float16, torch.bfloat16) or k.dtype != q.dtype or v.dtype != q.dtype:
        raise TypeError(f"attention_fa3 expects q, k, v in float16 or bfloat16, got {q.dtype}, {k.dtype}, {v.dtype}")
    if not all(t.is_contiguous() for t in (q, k, v)):
        raise ValueError("attention_fa3 expects contiguous q, k, v")
    if N % BLOCK_M or N % BLOCK_N or (causal and BLOCK_M != BLOCK_N):
        raise ValueError(f"attention_fa3: N_CTX ({N}) must be a multiple of BLOCK_M ({BLOCK_M}) and BLOCK_N "
                         f"({BLOCK_N}), and causal needs BLOCK_M == BLOCK_N (the diagonal is one block)")
    sm_scale = sm_scale if sm_scale is not None else D ** -0.5
    o = torch.empty_like(q)
    y = Z * H * N
    desc_q = TensorDescriptor(q, [y, D], [D, 1], [BLOCK_M, D])
    desc_k = TensorDescriptor(k, [y, D], [D, 1], [BLOCK_N, D])
    desc_v = TensorDescriptor(v, [y, D], [D, 1], [BLOCK_N, D])
    desc_o = TensorDescriptor(o, [y, D], [D, 1], [BLOCK_M, D])
    grid = (N // BLOCK_M, Z * H, 1)
    (kernel or attn_fwd_fa3_kernel)[grid](sm_scale, desc_q, desc_k, desc_v, desc_o, N, BLOCK_M=BLOCK_M,
                                          BLOCK_N=BLOCK_N, HEAD_DIM=D, CAUSAL=causal, num_warps=num_warps,
                                          num_stages=num_stages)
    return o
