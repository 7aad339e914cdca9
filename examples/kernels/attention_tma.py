"""Fused attention forward through tensor descriptors (the Hopper shape of ``attention.py``).

Q, K, V and O are viewed as 2-D ``[Z * H * N_CTX, HEAD_DIM]`` tensors, so one descriptor per tensor
serves every head (``N_CTX`` must be a multiple of ``BLOCK_M``, as in Triton's tutorial). On sm_90a
the K/V tiles arrive by TMA into a ring that wgmma reads in place, P stays in registers as the
second dot's A operand, and a producer warp issues the copies (warp specialisation). Causal attention
scores the diagonal block first (masked, outside the loop; ``diag_first``), then the blocks left of it
without any mask; with ``BLOCK_M != BLOCK_N`` (or ``diag_first=False``) the diagonal blocks run masked in a
second loop after the first.
"""
import importlib

import kernelc as triton
import kernelc.language as tl

TensorDescriptor = importlib.import_module(triton.__name__ + ".tools.tensor_descriptor").TensorDescriptor


@triton.jit
def attn_fwd_tma_kernel(sm_scale, desc_q, desc_k, desc_v, desc_o, N_CTX, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr,
                        DIAG_FIRST: tl.constexpr = False):
    # DIAG_FIRST (causal, BLOCK_M == BLOCK_N): the diagonal block, masked, before the key loop instead of in a
    # second loop after it; its K and V copies are then issued with Q's (outside any loop) and the kernel has
    # one key loop, the warp-specialised one (the second loop's copies were the consumers' own)
    # causal: a head's heaviest row blocks (most columns left of the diagonal) launch first, the light
    # ones fill the tail of the grid
    start_m = tl.num_programs(0) - 1 - tl.program_id(0) if CAUSAL else tl.program_id(0)
    off_hz = tl.program_id(1)
    offset_y = off_hz * N_CTX
    qo_offset_y = offset_y + start_m * BLOCK_M
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    q = desc_q.load([qo_offset_y, 0])
    if CAUSAL and DIAG_FIRST:
        qk = tl.dot(q, desc_k.load([qo_offset_y, 0]).T) * qk_scale
        qk = qk + tl.where(offs_m[:, None] >= (start_m * BLOCK_M + offs_n[None, :]), 0.0, -1.0e6)
        m_i = tl.max(qk, 1)
        p = tl.math.exp2(qk - m_i[:, None])
        l_i = tl.sum(p, 1)
        acc = tl.dot(p.to(q.dtype), desc_v.load([qo_offset_y, 0]), acc)
    hi = start_m * BLOCK_M if CAUSAL else N_CTX
    for start_n in range(0, hi, BLOCK_N):  # no mask: every column is visible
        k = desc_k.load([offset_y + start_n, 0]).T
        qk = tl.dot(q, k)
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        l_ij = tl.sum(p, 1)
        alpha = tl.math.exp2(m_i - m_ij)
        acc = acc * alpha[:, None]
        v = desc_v.load([offset_y + start_n, 0])
        acc = tl.dot(p.to(v.dtype), v, acc)
        l_i = l_i * alpha + l_ij
        m_i = m_ij
    if CAUSAL and not DIAG_FIRST:
        for start_n in range(start_m * BLOCK_M, (start_m + 1) * BLOCK_M, BLOCK_N):  # the diagonal blocks
            k = desc_k.load([offset_y + start_n, 0]).T
            qk = tl.dot(q, k)
            visible = offs_m[:, None] >= (start_n + offs_n[None, :])
            qk = qk * qk_scale + tl.where(visible, 0.0, -1.0e6)
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            qk = qk - m_ij[:, None]
            p = tl.math.exp2(qk)
            l_ij = tl.sum(p, 1)
            alpha = tl.math.exp2(m_i - m_ij)
            acc = acc * alpha[:, None]
            v = desc_v.load([offset_y + start_n, 0])
            acc = tl.dot(p.to(v.dtype), v, acc)
            l_i = l_i * alpha + l_ij
            m_i = m_ij
    acc = acc / l_i[:, None]
    desc_o.store([qo_offset_y, 0], acc.to(desc_o.dtype))


def attention(q, k, v, causal=False, sm_scale=None, BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=2, kernel=None,
              diag_first=None):
    """softmax(q k^T * sm_scale) v for fp16/bf16 ``[Z, H, N_CTX, HEAD_DIM]`` tensors (contiguous). ``kernel``: another
    ``kernelc.jit`` of :func:`attn_fwd_tma_kernel` (its own compiled variants, e.g. under other compile knobs).
    ``diag_first``: the kernel's DIAG_FIRST (default: on when causal and BLOCK_M == BLOCK_N; measured faster on an
    H100, docs/attention.md "Head dim 64 and short-sequence fp8")."""
    import torch
    Z, H, N, D = q.shape
    assert N % BLOCK_M == 0 and BLOCK_M % BLOCK_N == 0, "N_CTX must be a multiple of BLOCK_M (and BLOCK_M of BLOCK_N)"
    if q.dtype not in (torch.float16, torch.bfloat16) or k.dtype != q.dtype or v.dtype != q.dtype:
        raise TypeError(f"attention_tma expects q, k, v in float16 or bfloat16, got {q.dtype}, {k.dtype}, {v.dtype}")
    assert all(t.is_contiguous() for t in (q, k, v))
    sm_scale = sm_scale if sm_scale is not None else D ** -0.5
    o = torch.empty_like(q)
    y = Z * H * N
    desc_q = TensorDescriptor(q, [y, D], [D, 1], [BLOCK_M, D])
    desc_k = TensorDescriptor(k, [y, D], [D, 1], [BLOCK_N, D])
    desc_v = TensorDescriptor(v, [y, D], [D, 1], [BLOCK_N, D])
    desc_o = TensorDescriptor(o, [y, D], [D, 1], [BLOCK_M, D])
    if diag_first and causal and BLOCK_M != BLOCK_N:
        raise ValueError(f"attention_tma: diag_first needs BLOCK_M == BLOCK_N (the diagonal is one block), got "
                         f"{BLOCK_M} and {BLOCK_N}")
    if diag_first is None:
        diag_first = causal and BLOCK_M == BLOCK_N
    grid = (triton.cdiv(N, BLOCK_M), Z * H, 1)
    (kernel or attn_fwd_tma_kernel)[grid](sm_scale, desc_q, desc_k, desc_v, desc_o, N, BLOCK_M=BLOCK_M,
                                          BLOCK_N=BLOCK_N, HEAD_DIM=D, CAUSAL=causal,
                                          DIAG_FIRST=bool(diag_first and causal), num_warps=num_warps,
                                          num_stages=num_stages)
    return o
