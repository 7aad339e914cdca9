"""Fused attention forward (FlashAttention-2 style online softmax), causal or not."""
import kernelc as triton
import kernelc.language as tl


@triton.jit
def attn_fwd_kernel(Q, K, V, Out, sm_scale, stride_qz, stride_qh, stride_qm, stride_qk, stride_kz, stride_kh,
                    stride_kn, stride_kk, stride_vz, stride_vh, stride_vn, stride_vk, stride_oz, stride_oh,
                    stride_om, stride_ok, H, N_CTX, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr):
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = off_hz // H
    off_h = off_hz % H
    q_off = off_z.to(tl.int64) * stride_qz + off_h.to(tl.int64) * stride_qh
    k_off = off_z.to(tl.int64) * stride_kz + off_h.to(tl.int64) * stride_kh
    v_off = off_z.to(tl.int64) * stride_vz + off_h.to(tl.int64) * stride_vh
    o_off = off_z.to(tl.int64) * stride_oz + off_h.to(tl.int64) * stride_oh
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + q_off + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qk,
                mask=offs_m[:, None] < N_CTX, other=0.0)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    hi = tl.minimum((start_m + 1) * BLOCK_M, N_CTX) if CAUSAL else N_CTX
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(K + k_off + cols[None, :] * stride_kn + offs_d[:, None] * stride_kk,
                    mask=cols[None, :] < N_CTX, other=0.0)
        qk = tl.dot(q, k)
        valid = cols[None, :] < N_CTX
        if CAUSAL:
            valid = valid & (offs_m[:, None] >= cols[None, :])
        qk = tl.where(valid, qk * qk_scale, -1.0e6)
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        qk = qk - m_ij[:, None]
        p = tl.math.exp2(qk)
        l_ij = tl.sum(p, 1)
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + l_ij
        acc = acc * alpha[:, None]
        v = tl.load(V + v_off + cols[:, None] * stride_vn + offs_d[None, :] * stride_vk,
                    mask=cols[:, None] < N_CTX, other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_ij
    acc = acc / l_i[:, None]
    tl.store(Out + o_off + offs_m[:, None] * stride_om + offs_d[None, :] * stride_ok, acc.to(Out.dtype.element_ty),
             mask=offs_m[:, None] < N_CTX)


def attention(q, k, v, causal=False, sm_scale=None, BLOCK_M=128, BLOCK_N=64, num_warps=4, num_stages=2):
    import torch
    Z, H, N, D = q.shape
    sm_scale = sm_scale if sm_scale is not None else D ** -0.5
    o = torch.empty_like(q)
    grid = (triton.cdiv(N, BLOCK_M), Z * H, 1)
    attn_fwd_kernel[grid](q, k, v, o, sm_scale, *q.stride(), *k.stride(), *v.stride(), *o.stride(), H, N,
                          BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, HEAD_DIM=D, CAUSAL=causal, num_warps=num_warps,
                          num_stages=num_stages)
    return o


# ---------------------------------------------------------------------------------------------------------------
# The same forward with the extras training and inference need (docs/attention.md): the row log-sum-exp saved for
# the backward pass, causal masking only on the diagonal blocks, head dims up to 256, and fp8 (e4m3) inputs.


@triton.jit
def fp8_key_order(p, ROWS: tl.constexpr, KEYS: tl.constexpr):
    """``p[:, pi(k)]`` for each key ``k``: within each 32-key group, key bits 1, 2, 3 taken from bits 3, 1, 2 (a
    reshape and permute). On a tile in an MMA accumulator layout it only renames registers, into the layout an
    fp8 wgmma A fragment reads (kernelc codegen/fp8_words.py: a8_operand_layout), so ``dot(fp8_key_order(p), v)``
    needs no shuffle of P between lanes; it is P V when ``v``'s keys come in the same order
    (:func:`fp8_v_key_order`)."""
    return tl.reshape(tl.permute(tl.reshape(p, [ROWS, KEYS // 32, 2, 2, 4, 2]), [0, 1, 2, 4, 3, 5]), [ROWS, KEYS])


@triton.jit
def row_block_and_head(LPT: tl.constexpr):
    """This program's (row block, head). LPT 0: a grid of (row blocks, heads) in program_id's order. LPT 1: the same
    grid, a head's row blocks last first (causal: the heaviest first). LPT G > 1: a grid of (G * row blocks,
    heads / G) (:func:`lpt_grid`), whose launch order walks the heads in groups of G, a group's row blocks heaviest
    first across its heads: the light programs of the whole group fill the grid's tail, and the group's K and V
    are few enough to share L2 (the backward's ``_lpt_block``; divided by the constexpr G, not by a runtime count)."""
    if LPT > 1:
        start_m = tl.num_programs(0) // LPT - 1 - tl.program_id(0) // LPT
        off_hz = tl.program_id(1) * LPT + tl.program_id(0) % LPT
    elif LPT == 1:
        start_m = tl.num_programs(0) - 1 - tl.program_id(0)
        off_hz = tl.program_id(1)
    else:
        start_m = tl.program_id(0)
        off_hz = tl.program_id(1)
    return start_m, off_hz


# lpt="l2": a causal grid's heads in groups whose K and V (N_CTX x HEAD_DIM each, in the inputs' dtype) take at most
# this many bytes together, a power of two of heads (FlashAttention-3's causal scheduler sizes its head sections by
# what fits in L2 the same way)
LPT_L2_BYTES = 16 << 20


# lpt="l2" groups heads only where a head has at most this many row blocks; longer heads keep the launch's order (the
# pointer forward's launch order, the FA3 order's heaviest first within a head). At N 16384 (128-256 row blocks a
# head) the tail model gives groups under 1%, and R2 measured -1.5% (fp8 D=128) and -2.7% (fp16 FA3 D=128) in groups of
# 4 and 2 heads, in 3 reps of spread 1.05-1.16 (docs/attention.md, "Causal forwards: heaviest first across heads")
LPT_MAX_ROW_BLOCKS = 64


def l2_lpt(n_ctx, head_dim, itemsize, row_blocks, otherwise):
    """The LPT ``lpt="l2"`` means: :func:`lpt_heads` heads a group where a head has at most
    :data:`LPT_MAX_ROW_BLOCKS` row blocks, else ``otherwise``."""
    return lpt_heads(n_ctx, head_dim, itemsize) if row_blocks <= LPT_MAX_ROW_BLOCKS else otherwise


def lpt_heads(n_ctx, head_dim, itemsize, budget=None):
    """The heads of an ``lpt="l2"`` group: the largest power of two whose K and V fit in ``budget`` bytes
    (default :data:`LPT_L2_BYTES`), at least 1."""
    per_head = 2 * n_ctx * head_dim * itemsize
    budget = LPT_L2_BYTES if budget is None else budget
    g = 1
    while 2 * g * per_head <= budget:
        g *= 2
    return g


def lpt_grid(lpt, row_blocks, heads):
    """(the kernel's LPT, its grid) for ``lpt`` asked over ``row_blocks`` x ``heads``: a group of G > 1 heads becomes
    the largest divisor of ``heads`` not above G (a grid of whole groups)."""
    g = max(int(lpt), 0)
    if g > 1:
        g = max(d for d in range(1, min(g, heads) + 1) if heads % d == 0)
    if g > 1:
        return g, (g * row_blocks, heads // g, 1)
    return g, (row_blocks, heads, 1)


@triton.jit
def _attn_fwd_inner(acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_kn, stride_vn, offs_m, offs_n, lo, hi, N_CTX, qk_scale,
                    BLOCK_N: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr,
                    FOLD_SCALE: tl.constexpr = False, KEY_ORDER: tl.constexpr = False, BLOCK_M: tl.constexpr = 0,
                    EVEN_N: tl.constexpr = False, DESC: tl.constexpr = 0, k_row=0, v_row=0,
                    FP8: tl.constexpr = False, MASK_FROM: tl.constexpr = False, mask_from=0,
                    REFILL_TOP: tl.constexpr = None):
    """Key blocks [lo, hi) into the running (acc, l_i, m_i); only MASKED blocks pay for the mask.
    FOLD_SCALE (qk_scale > 0): the row max of the raw scores times the scale, and the scale folded into the
    exponent's multiply-add, instead of a multiply of every score before the max; a MASKED block then masks the raw
    scores with -inf (every row of a block this is called with masked sees a key of it, or an earlier block's: the
    row max stays finite). EVEN_N (N_CTX a multiple of the blocks): no key is past N_CTX, only the causal mask.
    KEY_ORDER: V's keys come in :func:`fp8_key_order`'s order (fp8), P goes to P V in it too. DESC (EVEN_N):
    ``k_ptrs``/``v_ptrs`` are host tensor descriptors of K ``[Z*H*N_CTX, HEAD_DIM]`` and V (fp8: V^T
    ``[Z*H*HEAD_DIM, N_CTX]``), this head's first rows ``k_row``/``v_row``."""
    # REFILL_TOP: the ring's copies of a key block at the top of the trip two blocks before it, not after the
    # previous trip's dots (tl.range's refill_top; None: KERNELC_TMA_REFILL_TOP)
    for start_n in tl.range(lo, hi, BLOCK_N, refill_top=REFILL_TOP):
        cols = start_n + offs_n
        if DESC:
            k = k_ptrs.load([k_row + start_n, 0]).T
        elif MASKED and not EVEN_N:
            k = tl.load(k_ptrs + start_n * stride_kn, mask=cols[None, :] < N_CTX, other=0.0)
        else:
            k = tl.load(k_ptrs + start_n * stride_kn)
        if MASKED:
            if EVEN_N:
                visible = offs_m[:, None] >= cols[None, :]
            else:
                visible = cols[None, :] < N_CTX
                if CAUSAL:
                    visible = visible & (offs_m[:, None] >= cols[None, :])
        if FOLD_SCALE:
            qk = tl.dot(q, k)
            if MASKED:
                qk = tl.where(visible, qk, float("-inf"))
            if MASK_FROM:
                if start_n >= mask_from:
                    qk = tl.where(offs_m[:, None] >= cols[None, :], qk, float("-inf"))
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            p = tl.math.exp2(qk * qk_scale - m_ij[:, None])
        else:
            qk = tl.dot(q, k) * qk_scale
            if MASKED:
                qk = tl.where(visible, qk, -1.0e6)
            if MASK_FROM:
                if start_n >= mask_from:
                    qk = tl.where(offs_m[:, None] >= cols[None, :], qk, -1.0e6)
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            p = tl.math.exp2(qk - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if DESC:
            if FP8:
                v = v_ptrs.load([v_row, start_n]).T
            else:
                v = v_ptrs.load([v_row + start_n, 0])
        elif MASKED and not EVEN_N:
            v = tl.load(v_ptrs + start_n * stride_vn, mask=cols[:, None] < N_CTX, other=0.0)
        else:
            v = tl.load(v_ptrs + start_n * stride_vn)
        if KEY_ORDER:
            acc = tl.dot(fp8_key_order(p.to(v.dtype), BLOCK_M, BLOCK_N), v, acc)
        else:
            acc = tl.dot(p.to(v.dtype), v, acc)  # fp8 V: P is rounded to e4m3 too (it lies in [0, 1])
        m_i = m_ij
    return acc, l_i, m_i


@triton.jit
def attn_fwd_lse_kernel(Q, K, V, Out, LSE, QScale, KScale, VScale, sm_scale, stride_qz, stride_qh, stride_qm,
                        stride_qk, stride_kz, stride_kh, stride_kn, stride_kk, stride_vz, stride_vh, stride_vn,
                        stride_vk, stride_oz, stride_oh, stride_om, stride_ok, H, N_CTX, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr,
                        HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, STORE_LSE: tl.constexpr, FP8: tl.constexpr,
                        FOLD_SCALE: tl.constexpr = False, LPT: tl.constexpr = 0,
                        KEY_ORDER: tl.constexpr = False, DIAG_SPLIT: tl.constexpr = False,
                        MASK_FOLD: tl.constexpr = False, EVEN_N: tl.constexpr = False, DESC: tl.constexpr = 0,
                        K2=None, V2=None, ONE_LOOP: tl.constexpr = False, REFILL_TOP: tl.constexpr = None):
    """One [BLOCK_M, HEAD_DIM] block of O (and of the base-2 log-sum-exp LSE [Z*H, N_CTX] when STORE_LSE).

    Causal: the key blocks left of the diagonal run unmasked, then the diagonal block(s) masked
    (BLOCK_M a multiple of BLOCK_N, or BLOCK_N of BLOCK_M: one masked block, which may start left of the row
    block). Not causal: full key blocks unmasked, the ragged tail masked. FP8: Q, K, V are e4m3 and QScale,
    KScale, VScale point at their fp32 per-tensor scales (three pointers: one buffer of three would cost the host a
    torch.cat every call); V may be passed K-major (strides of a transposed tensor), which is what fp8 wgmma reads.
    LPT (causal): the order of the row blocks, :func:`row_block_and_head` (1: a head's heaviest first; G > 1:
    heaviest first across groups of G heads), so that the light ones fill the grid's tail. DIAG_SPLIT (causal,
    BLOCK_N a multiple of BLOCK_M): the masked key blocks that would reach past the row block's last key run
    BLOCK_M keys at a time, so no key right of the diagonal is scored (with BLOCK_N = 2 BLOCK_M every other row
    block's masked block would score BLOCK_M keys that every row masks). MASK_FOLD: the masked blocks fold the scale
    too (FOLD_SCALE). EVEN_N (N_CTX a multiple of BLOCK_M and BLOCK_N): the masked blocks test only the causal
    mask. KEY_ORDER (fp8; BLOCK_N and N_CTX multiples of 32): V's keys are stored in :func:`fp8_key_order`'s order
    within each 32-key group (:func:`fp8_v_key_order`), so P V reads P's registers as they are. DESC (EVEN_N,
    contiguous Q, K, V): Q, K, V are host tensor descriptors (:func:`fwd_descriptors`: Q and K ``[Z*H*N_CTX,
    HEAD_DIM]`` in BLOCK_M- and BLOCK_N-row blocks, V the same or, fp8, V^T ``[Z*H*HEAD_DIM, N_CTX]``), K2 and V2
    K's and V's in BLOCK_M-key blocks for DIAG_SPLIT: one CUtensorMap each for the whole launch, encoded on the host,
    where the pointer loads have the compiler build a map per program at its entry (written to global memory and
    fenced before Q's copy can start). DESC 2: Out too (``[Z*H*N_CTX, HEAD_DIM]`` in BLOCK_M-row blocks), stored by
    TMA. ONE_LOOP (causal, EVEN_N): every key block in one loop, one ring, the causal mask on the blocks from the
    diagonal's on by a uniform branch, instead of an unmasked loop and masked ones after it, each with its own ring
    (with BLOCK_N = 2 BLOCK_M every other row block's last block scores BLOCK_M keys that every row masks).
    REFILL_TOP (None: KERNELC_TMA_REFILL_TOP): the key loops' ``tl.range(refill_top=)``.
    """
    start_m, off_hz = row_block_and_head(LPT)
    off_z = off_hz // H
    off_h = off_hz % H
    q_off = off_z.to(tl.int64) * stride_qz + off_h.to(tl.int64) * stride_qh
    k_off = off_z.to(tl.int64) * stride_kz + off_h.to(tl.int64) * stride_kh
    v_off = off_z.to(tl.int64) * stride_vz + off_h.to(tl.int64) * stride_vh
    o_off = off_z.to(tl.int64) * stride_oz + off_h.to(tl.int64) * stride_oh
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    if DESC:
        k_row = off_hz * N_CTX
        v_row = off_hz * HEAD_DIM if FP8 else k_row
        q = Q.load([k_row + start_m * BLOCK_M, 0])
        k_ptrs = K
        v_ptrs = V
    else:
        k_row = 0
        v_row = 0
        q = tl.load(Q + q_off + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qk,
                    mask=offs_m[:, None] < N_CTX, other=0.0)
        k_ptrs = K + k_off + offs_n[None, :] * stride_kn + offs_d[:, None] * stride_kk
        v_ptrs = V + v_off + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vk
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    if FP8:
        qk_scale = qk_scale * tl.load(QScale) * tl.load(KScale)
    if CAUSAL:
        # the first key block that reaches the diagonal: the row block's first key, or (BLOCK_N a multiple of
        # BLOCK_M) the key block holding it, whose keys left of the row block are visible to every row
        if BLOCK_N > BLOCK_M:
            diag = (start_m * BLOCK_M // BLOCK_N) * BLOCK_N
        else:
            diag = start_m * BLOCK_M
        if not ONE_LOOP:
            acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_kn, stride_vn, offs_m, offs_n,
                                            0, diag, N_CTX, qk_scale, BLOCK_N, False, CAUSAL, FOLD_SCALE, KEY_ORDER,
                                            BLOCK_M, DESC=DESC, k_row=k_row, v_row=v_row, FP8=FP8,
                                            REFILL_TOP=REFILL_TOP)
        end = tl.minimum((start_m + 1) * BLOCK_M, N_CTX)
        if ONE_LOOP:
            # every key block in one loop (one ring: no second ring's setup and cold start), the causal mask on the
            # blocks from the diagonal's on (a uniform branch)
            acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_kn, stride_vn, offs_m, offs_n,
                                            0, end, N_CTX, qk_scale, BLOCK_N, False, CAUSAL, FOLD_SCALE, KEY_ORDER,
                                            BLOCK_M, DESC=DESC, k_row=k_row, v_row=v_row, FP8=FP8, MASK_FROM=True,
                                            mask_from=diag, REFILL_TOP=REFILL_TOP)
        elif DIAG_SPLIT and BLOCK_N > BLOCK_M:
            # wide blocks that end within the row block, then the rest BLOCK_M keys at a time
            mid = end // BLOCK_N * BLOCK_N
            acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_kn, stride_vn, offs_m, offs_n,
                                            diag, mid, N_CTX, qk_scale, BLOCK_N, True, CAUSAL,
                                            FOLD_SCALE and MASK_FOLD, KEY_ORDER, BLOCK_M, EVEN_N, DESC=DESC,
                                            k_row=k_row, v_row=v_row, FP8=FP8, REFILL_TOP=REFILL_TOP)
            offs_n2 = tl.arange(0, BLOCK_M)
            if DESC:
                k_ptrs2 = K2
                v_ptrs2 = V2
            else:
                k_ptrs2 = K + k_off + offs_n2[None, :] * stride_kn + offs_d[:, None] * stride_kk
                v_ptrs2 = V + v_off + offs_n2[:, None] * stride_vn + offs_d[None, :] * stride_vk
            acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, k_ptrs2, v_ptrs2, stride_kn, stride_vn, offs_m,
                                            offs_n2, mid, end, N_CTX, qk_scale, BLOCK_M, True, CAUSAL,
                                            FOLD_SCALE and MASK_FOLD, KEY_ORDER, BLOCK_M, EVEN_N, DESC=DESC,
                                            k_row=k_row, v_row=v_row, FP8=FP8, REFILL_TOP=REFILL_TOP)
        else:
            acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_kn, stride_vn, offs_m, offs_n,
                                            diag, end, N_CTX, qk_scale, BLOCK_N, True, CAUSAL,
                                            FOLD_SCALE and MASK_FOLD, KEY_ORDER, BLOCK_M, EVEN_N, DESC=DESC,
                                            k_row=k_row, v_row=v_row, FP8=FP8, REFILL_TOP=REFILL_TOP)
    else:
        n_full = (N_CTX // BLOCK_N) * BLOCK_N
        acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_kn, stride_vn, offs_m, offs_n, 0,
                                        n_full, N_CTX, qk_scale, BLOCK_N, False, CAUSAL, FOLD_SCALE,
                                        KEY_ORDER, BLOCK_M, DESC=DESC, k_row=k_row, v_row=v_row, FP8=FP8,
                                        REFILL_TOP=REFILL_TOP)
        if not EVEN_N:
            acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_kn, stride_vn, offs_m, offs_n,
                                            n_full, N_CTX, N_CTX, qk_scale, BLOCK_N, True, CAUSAL,
                                            FOLD_SCALE and MASK_FOLD, KEY_ORDER, BLOCK_M, DESC=DESC, k_row=k_row,
                                            v_row=v_row, FP8=FP8, REFILL_TOP=REFILL_TOP)
    if FP8:
        acc = acc * tl.load(VScale)
    acc = acc / l_i[:, None]
    if DESC == 2:
        Out.store([k_row + start_m * BLOCK_M, 0], acc.to(Out.dtype))
    else:
        tl.store(Out + o_off + offs_m[:, None] * stride_om + offs_d[None, :] * stride_ok,
                 acc.to(Out.dtype.element_ty), mask=offs_m[:, None] < N_CTX)
    if STORE_LSE:
        tl.store(LSE + off_hz.to(tl.int64) * N_CTX + offs_m, m_i + tl.math.log2(l_i), mask=offs_m < N_CTX)


# (BLOCK_M, BLOCK_N, num_warps, num_stages) by head dim: 0 register spills on sm_90a
# (tests/compiler/test_attention_kernels.py). Head dim 64: 64x64 blocks at 2 stages, 102 registers and 42 KB, 4
# programs an SM where 128x64 at 3 stages ran 2: 465.6 TFLOP/s against 432.6 at N 4096 (H200 call R1,
# docs/attention.md "The forward at N 4096")
FWD_CONFIGS = {16: (64, 32, 4, 2), 32: (64, 32, 4, 2), 64: (64, 64, 4, 2), 128: (128, 128, 8, 2),
               256: (64, 64, 4, 2)}


# fp8 takes the fp16 configs: at head dim 128 the warp-specialised 8-warp one spilled 336 registers while P went
# through shared memory; with P in registers it fits and measured 11-17% faster than 128x64 at 4 warps
# (docs/attention.md, H200 2026-11-27). Head dim 64: 64-row programs of 128 keys, 4 an SM (128 registers), 7.4
# instructions a score against 8.4 at 128x64 (3 an SM): H200 call C2 2026-11-28, 623 / 531 TFLOP/s (causal)
# against 518 / 441 (docs/attention.md, "fp8 at head dim 64"). Head dim 128: 64x128 at 4 warps and 2 stages, 3 an SM
# (168 registers, 74 KB), 819.5 TFLOP/s against 735.3 for the 8-warp 128x128 and 765.0 for the FA3 order at N 4096
# (H200 call R1, docs/attention.md "The forward at N 4096")
FP8_FWD_CONFIGS = {**FWD_CONFIGS, 64: (64, 128, 4, 3), 128: (64, 128, 4, 2)}


def fwd_config(head_dim, fp8=False, **overrides):
    """The forward's launch config for ``head_dim`` as a dict, with ``overrides`` applied."""
    table = FP8_FWD_CONFIGS if fp8 else FWD_CONFIGS
    if head_dim not in table:
        raise ValueError(f"head dim {head_dim} is not supported (expected one of {sorted(table)})")
    bm, bn, w, s = table[head_dim]
    cfg = dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=w, num_stages=s)
    cfg.update({k: v for k, v in overrides.items() if v is not None})
    return cfg


# the forwards' default for FOLD_SCALE (with sm_scale > 0): 64 FMUL a thread and key block fewer (D=64, 128x64);
# measured faster in 7 of 8 rows of calls H11 and H11b (H100, B4 H32 N4096) but at 0.87 / 0.94 of the unfolded kernel
# in both for fp8 at D=64 causal (docs/attention.md, "fp8 against our fp16"), which kept the unfolded form until its
# config became 64x128, where the fold measured 531 TFLOP/s against 499 (H200 call C2, "fp8 at head dim 64")
FOLD_SCALE = True
FOLD_SCALE_OFF = set()  # (head dim, causal, fp8) keeping the unfolded form


def _fold(fold_scale, D, causal, fp8) -> bool:
    if fold_scale is not None:
        return bool(fold_scale)
    return FOLD_SCALE and (D, bool(causal), bool(fp8)) not in FOLD_SCALE_OFF


# causal row blocks heaviest first (the kernel's LPT) by (head dim, fp8), when a call does not say: 1 a head's, G > 1
# across groups of G heads (row_block_and_head), "l2" across groups of lpt_heads(...); others 0 (program_id's order).
# At N 4096 (H200 calls R1b, R2; docs/attention.md "Causal forwards: heaviest first across heads"): fp8 D=128 (64x128,
# 3 programs an SM) in groups of 16 heads 781.0 TFLOP/s against 751.8 in launch order; fp16 D=64 (64x64, 5 an SM) in
# groups of 16 422.3 against 401.9 (R2; R1b's groups of 8 with EVEN_N read 379.6 against 401.2, not explained);
# fp8 D=64 in groups of 8 with the masks below 547.6 against 553.8 (R1b): not grouped
LPT = {(128, True): "l2", (64, False): "l2"}
# (head dim, fp8) whose causal diagonal runs BLOCK_M keys at a time (the kernel's DIAG_SPLIT) when a call does not say
DIAG_SPLIT = {(128, True)}


def _lpt(lpt, D, causal, fp8, N, row_blocks) -> int:
    if not causal:
        return 0
    if lpt is None:
        lpt = LPT.get((D, bool(fp8)), 0)
    if lpt == "l2":
        return l2_lpt(N, D, 1 if fp8 else 2, row_blocks, 0)
    return int(lpt)


# (head dim, causal, fp8) whose masked blocks fold the scale too (the kernel's MASK_FOLD) when a call does not say
MASK_FOLD = {(128, True, True)}
# (head dim, causal, fp8) whose masked blocks test only the causal mask when N_CTX is a multiple of the blocks (the
# kernel's EVEN_N) when a call does not say. With DIAG_SPLIT and MASK_FOLD, fp8 D=128 causal: 783.1 TFLOP/s grouped
# against 779.4 without the three (H200 call R1b)
EVEN_N = {(128, True, True)}


# (head dim, fp8) whose causal programs run every key block in one loop (the kernel's ONE_LOOP: one ring, the causal
# mask from the diagonal's block on by a uniform branch) where N_CTX is a multiple of the blocks, when a call does not
# say; DIAG_SPLIT does not apply then. fp8 D=128 causal with REFILL_TOP, against main's three loops: N 16384 +3.4%
# (call R2) and +5% / +11% (R3), N 4096 +8.6% / +8.7% (GPU time); the three loops with REFILL_TOP read 1.1% faster
# at N 4096 in both calls (within their spreads) and 4% / 15% slower at N 16384 (docs/attention.md, "fp828")
ONE_LOOP = {(128, True)}


def _one_loop(one_loop, D, fp8) -> bool:
    return bool((D, bool(fp8)) in ONE_LOOP if one_loop is None else one_loop)


# (head dim, causal, fp8) -> the largest N_CTX (None: any) whose key loops issue their ring's copies at the top of a
# trip, a whole trip ahead (the kernel's REFILL_TOP, tl.range's refill_top) instead of after the trip's dots, when a call
# does not say; elsewhere KERNELC_TMA_REFILL_TOP decides (off). fp8 D=128 at 2 stages, where the copy of the next key
# block went out after the dots and the next trip waited for all of it: N 4096 +9% at both masks in two H200 calls
# (docs/attention.md, "fp828"; "sh29": 30 of 30 rounds in shuffled order). N 16384 non-causal: faster in all four
# processes of two calls in shuffled order, +0.9% to +6.3%, 124 of 160 rounds (calls R4, F29, "mc29"), where fp828's
# cyclic-order calls had read it either way. D=64 (3 stages, copies already a trip ahead): ties
REFILL_TOP = {(128, True, True): None, (128, False, True): None}


def _refill_top(refill_top, D, causal, fp8, N):
    """The kernel's REFILL_TOP for a call: ``refill_top`` where given, else True where :data:`REFILL_TOP` names the
    call and N_CTX is within its bound, else None (the compile knob)."""
    if refill_top is not None:
        return bool(refill_top)
    key = (D, bool(causal), bool(fp8))
    if key not in REFILL_TOP:
        return None
    bound = REFILL_TOP[key]
    return True if bound is None or N <= bound else None


def _mask_fold(mask_fold, D, causal, fp8) -> bool:
    return bool((D, bool(causal), bool(fp8)) in MASK_FOLD if mask_fold is None else mask_fold)


def _diag_split(diag_split, D, causal, fp8) -> bool:
    if not causal:
        return False
    return bool((D, bool(fp8)) in DIAG_SPLIT if diag_split is None else diag_split)


def _check_blocks(cfg, causal):
    if causal and cfg["BLOCK_M"] % cfg["BLOCK_N"] and cfg["BLOCK_N"] % cfg["BLOCK_M"]:
        raise ValueError(f"causal attention needs BLOCK_M ({cfg['BLOCK_M']}) and BLOCK_N ({cfg['BLOCK_N']}) to "
                         f"divide one another: the diagonal loop starts at the key block holding the row block's "
                         f"first key")


# Launch plans. With the bench's per-call timing (an event, the call, an event, a synchronisation) every microsecond
# the host spends before the launch is GPU idle time inside the measurement, so a forward computes once per
# (shapes, strides, dtypes, device, options) what depends on nothing else: the config, the grid, the strides, the
# constexprs, the bound launcher. A call then builds its key, allocates the output and launches. The tables above
# (FWD_CONFIGS, FOLD_SCALE, ...) are read when a plan is made: after changing one, call clear_plans().
_PLANS = {}
_MAX_PLANS = 256


def clear_plans():
    """Forget the cached launch plans (after changing :data:`FWD_CONFIGS`, :data:`FOLD_SCALE` or the like)."""
    _PLANS.clear()


class _Plan:
    __slots__ = ("kernel", "grid", "tail", "opts", "out_shape", "out_dtype", "lse_shape", "run", "descs", "prepared",
                 "fast", "out_like")

    def __init__(self, kernel, grid, tail, opts, out_shape, out_dtype, lse_shape=None):
        self.kernel, self.grid, self.tail, self.opts = kernel, grid, tail, opts
        self.out_shape, self.out_dtype, self.lse_shape = out_shape, out_dtype, lse_shape
        self.run = None
        self.descs = None  # DESC: the templates of (Q, K, V, K2, V2, O)'s descriptors (fwd_descriptors)
        self.prepared = False  # self.run is a prepared launch (it takes tensors in the descriptors' slots)
        # what a call launches its eight tensors with: this plan's launch until it made a prepared launch that takes
        # them as they are (then that one: no frame of launch() a call)
        self.fast = self.launch
        self.out_like = False  # attention_fp8: q8's strides are the output's (torch.empty_like(q8) is the output)

    def launch(self, *tensors):
        """The kernel on this call's eight tensors: a prepared launch (``kernel.prepare``: the tail and options bound
        once, each call checks only the tensors' part of the launch key), made on the plan's first call. DESC: Q, K, V
        (and O with DESC 2) are descriptors, K2 and V2 come after the eight; the prepared launch takes the tensors and
        rebases its descriptors onto them (runtime/prepared.py), other kernel objects get the descriptors."""
        run = self.run
        descs = self.descs
        if run is None:
            if hasattr(self.kernel, "prepare"):
                args = self._descriptors(tensors) if descs is not None else tensors
                self.run = self.kernel.prepare(self.grid, *args[:8], *self.tail, *args[8:], **self.opts)
                self.prepared = True
                if descs is None or descs[3] is None:
                    self.fast = self.run
                return self.run(*args)
            kernel, grid, tail, opts = self.kernel, self.grid, self.tail, self.opts
            run = self.run = lambda *ts: kernel[grid](*ts[:8], *tail, *ts[8:], **opts)  # noqa: E731
        if descs is None:
            return run(*tensors)
        if not self.prepared:
            return run(*self._descriptors(tensors))
        if descs[3] is not None:  # K2 and V2: K's and V's tensors again
            return run(*tensors, tensors[1], tensors[2])
        return run(*tensors)

    def _descriptors(self, tensors):
        q, k, v, o = tensors[:4]
        dq, dk, dv, dk2, dv2, do = self.descs
        return (_rebased(dq, q), _rebased(dk, k), _rebased(dv, v), o if do is None else _rebased(do, o),
                *tensors[4:]) + (() if dk2 is None else (_rebased(dk2, k), _rebased(dv2, v)))


def _rebased(template, base):
    """``template`` describing ``base`` instead (attention_fa3's: no checks again, ~2 us a descriptor)."""
    d = object.__new__(type(template))
    d.__dict__.update(template.__dict__)
    d.base = base
    return d


def fwd_descriptors(q, k, v, fp8, BLOCK_M, BLOCK_N, split, out_dtype=None):
    """The DESC kernel's host descriptors (Q, K, V, K2, V2, O) of contiguous ``[Z, H, N, D]`` q, k and v (fp8: v is
    V^T, ``[Z, H, D, N]``); K2, V2 (BLOCK_M keys) only with ``split``, O only with ``out_dtype`` (DESC 2), else None.
    Templates: their bases are None."""
    import importlib
    TD = importlib.import_module(triton.__name__ + ".tools.tensor_descriptor").TensorDescriptor
    Z, H, N, D = q.shape
    y = Z * H * N

    def vd(keys):
        return TD(v, [Z * H * D, N], [N, 1], [D, keys]) if fp8 else TD(v, [y, D], [D, 1], [keys, D])

    out = [TD(q, [y, D], [D, 1], [BLOCK_M, D]), TD(k, [y, D], [D, 1], [BLOCK_N, D]), vd(BLOCK_N),
           TD(k, [y, D], [D, 1], [BLOCK_M, D]) if split else None, vd(BLOCK_M) if split else None,
           None if out_dtype is None else TD(q.new_empty((0,), dtype=out_dtype), [y, D], [D, 1], [BLOCK_M, D])]
    for d in out:
        if d is not None:
            d.base = None
    return tuple(out)


# (head dim, causal, fp8) -> the kernel's DESC (1: Q, K, V through host tensor descriptors, 2: O too) where the
# inputs allow it (contiguous, N_CTX a multiple of the blocks), when a call does not say; others 0 (pointer loads).
# fp8 (H200 calls R1 and R2 of the twentieth session, in one process against the pointer loads, GPU time): N 4096
# +5.6% / +5.0% (D=128 causal), +2.5% / +3.7% (D=128), +4.1% / +4.2% (D=64 causal), +3.0% / +2.7% (D=64); N 16384
# ties. DESC 2 (O by TMA too) read the same at N 4096 and 4-7% slower at 16384; fp16's pointer forward at D=64 was
# faster at N 4096 and slower at 16384 in both calls (docs/attention.md, "fp8 causal per call: host tensor descriptors")
DESC = {(128, False, True): 1, (128, True, True): 1, (64, False, True): 1, (64, True, True): 1}


def _make_plan(key, q, k, v_strides, o_strides, causal, sm_scale, store_lse, fp8, cfg, kernel, fold_scale, lpt,
               out_dtype, lse_shape=None, key_order=False, diag_split=None, mask_fold=None, even_n=None, desc=None,
               v=None, one_loop=None, refill_top=None):
    Z, H, N, D = q.shape
    _check_blocks(cfg, causal)
    cfg = dict(cfg)
    opts = dict(num_warps=cfg.pop("num_warps"), num_stages=cfg.pop("num_stages"))
    row_blocks = triton.cdiv(N, cfg["BLOCK_M"])
    lpt, grid = lpt_grid(_lpt(lpt, D, causal, fp8, N, row_blocks), row_blocks, Z * H)
    # every kernel parameter after the eight tensors, positionally (the kernel's order), constexprs included
    fits = N % cfg["BLOCK_M"] == 0 and N % cfg["BLOCK_N"] == 0
    one = bool(causal) and _one_loop(one_loop, D, fp8) and N % cfg["BLOCK_M"] == 0 and N % cfg["BLOCK_N"] == 0
    if one:
        opts["ONE_LOOP"] = True
    refill = _refill_top(refill_top, D, causal, fp8, N)
    if refill is not None:
        opts["REFILL_TOP"] = refill
    split = _diag_split(diag_split, D, causal, fp8) and not one
    use_desc = int(DESC.get((D, bool(causal), bool(fp8)), 0) if desc is None else desc) if fits and all(
        t.is_contiguous() for t in (q, k, v)) else 0
    tail = (sm_scale, *q.stride(), *k.stride(), *v_strides, *o_strides, H, N, cfg["BLOCK_M"], cfg["BLOCK_N"], D,
            bool(causal), bool(store_lse), bool(fp8), bool(_fold(fold_scale, D, causal, fp8) and sm_scale > 0),
            lpt, bool(key_order), split, _mask_fold(mask_fold, D, causal, fp8),
            bool(((D, bool(causal), bool(fp8)) in EVEN_N if even_n is None else even_n) and fits or use_desc),
            use_desc)
    plan = _Plan(kernel or attn_fwd_lse_kernel, grid, tail, opts, tuple(q.shape), out_dtype, lse_shape)
    if use_desc:
        plan.descs = fwd_descriptors(q, k, v, fp8, cfg["BLOCK_M"], cfg["BLOCK_N"],
                                     split and causal and cfg["BLOCK_N"] > cfg["BLOCK_M"],
                                     out_dtype if use_desc == 2 else None)
    if len(_PLANS) >= _MAX_PLANS:
        _PLANS.clear()
    _PLANS[key] = plan
    return plan


def attention_fwd(q, k, v, causal=False, sm_scale=None, return_lse=False, fold_scale=None, kernel=None, lpt=None,
                  diag_split=None, mask_fold=None, even_n=None, desc=None, **config):
    """softmax(q k^T * sm_scale) v for fp16/bf16 ``[Z, H, N_CTX, HEAD_DIM]`` (HEAD_DIM 16..256, any N_CTX).

    With ``return_lse`` also returns the base-2 row log-sum-exp ``[Z, H, N_CTX]`` fp32 of the scaled
    logits (``m + log2(l)``), which the backward pass recomputes P from. ``config``: BLOCK_M, BLOCK_N,
    num_warps, num_stages (defaults: :data:`FWD_CONFIGS`). ``fold_scale``: the kernel's FOLD_SCALE (default:
    :data:`FOLD_SCALE` unless the config is in :data:`FOLD_SCALE_OFF`); ``kernel``: another ``kernelc.jit`` of
    :func:`attn_fwd_lse_kernel`; ``lpt``: causal row blocks heaviest first (the kernel's LPT: True or 1 a head's, an
    int G > 1 across groups of G heads, "l2" across groups of :func:`lpt_heads`; default :data:`LPT`); ``diag_split``: the kernel's DIAG_SPLIT (default
    :data:`DIAG_SPLIT`); ``mask_fold``: the kernel's MASK_FOLD (default :data:`MASK_FOLD`); ``even_n``: the kernel's
    EVEN_N where N_CTX allows it (default :data:`EVEN_N`); ``desc``: the kernel's DESC (1: Q, K, V through host
    descriptors, 2: O too) where N_CTX and the inputs allow it (default :data:`DESC`).
    """
    import torch
    key = (q.shape, k.shape, v.shape, q.stride(), k.stride(), v.stride(), q.dtype, k.dtype, v.dtype, q.device,
           causal, sm_scale, return_lse, fold_scale, kernel, lpt, diag_split, mask_fold, even_n, desc,
           *config.items())
    plan = _PLANS.get(key)
    if plan is None:
        Z, H, N, D = q.shape
        if q.dtype not in (torch.float16, torch.bfloat16) or k.dtype != q.dtype or v.dtype != q.dtype:
            raise TypeError(f"attention_fwd expects q, k, v in one of float16/bfloat16, got {q.dtype}, {k.dtype}, "
                            f"{v.dtype} (fp8: attention_fp8)")
        o_strides = torch.empty_like(q).stride()  # empty_like keeps q's layout: a function of q's shape and strides
        plan = _make_plan(key, q, k, v.stride(), o_strides, causal, sm_scale if sm_scale is not None else D ** -0.5,
                          return_lse, False, fwd_config(D, **config), kernel, fold_scale, lpt, q.dtype, (Z, H, N),
                          diag_split=diag_split, mask_fold=mask_fold, even_n=even_n, desc=desc, v=v)
    o = torch.empty_like(q)
    if return_lse:
        lse = torch.empty(plan.lse_shape, device=q.device, dtype=torch.float32)
        plan.fast(q, k, v, o, lse, o, o, o)
        return o, lse
    plan.fast(q, k, v, o, o, o, o, o)
    return o


def quantize_fp8(t):
    """``(t / scale)`` in e4m3 and its fp32 per-tensor ``scale`` (a 1-element tensor): amax maps to 448."""
    import torch
    scale = (t.abs().amax().float() / torch.finfo(torch.float8_e4m3fn).max).clamp(min=1e-12).reshape(1)
    return (t.float() / scale).to(torch.float8_e4m3fn), scale


def fp8_v_key_order(v8t):
    """``v8t`` (V transposed, ``[..., HEAD_DIM, N_CTX]``, N_CTX a multiple of 32) with its keys in
    :func:`fp8_key_order`'s order within each 32-key group: ``attention_fp8(..., key_order=True)``'s V. A copy (one
    pass over V, which the transposed copy ``attention_fp8`` wants can take at no extra cost)."""
    *lead, D, N = v8t.shape
    if N % 32:
        raise ValueError(f"fp8_v_key_order: N_CTX ({N}) must be a multiple of 32")
    return v8t.reshape(*lead, D, N // 32, 2, 2, 4, 2).transpose(-2, -3).reshape(*lead, D, N).contiguous()


def _scale_args(qs, ks, vs, device):
    """The three scales as the kernel reads them (:func:`_scale_arg` each), in one frame when they are already
    1-element fp32 tensors on ``device``."""
    import torch
    T, f = torch.Tensor, torch.float32
    if (type(qs) is T and type(ks) is T and type(vs) is T and qs.dtype is f and ks.dtype is f and vs.dtype is f
            and qs.numel() == 1 and ks.numel() == 1 and vs.numel() == 1 and qs.device == device
            and ks.device == device and vs.device == device):
        return qs, ks, vs
    return _scale_arg(qs, device), _scale_arg(ks, device), _scale_arg(vs, device)


def _scale_arg(s, device):
    """A scale as the kernel reads it: a 1-element fp32 tensor on ``device`` (``s`` itself when it is one)."""
    import torch
    if isinstance(s, torch.Tensor) and s.dtype == torch.float32 and s.numel() == 1 and s.device == device:
        return s
    return torch.as_tensor(s, dtype=torch.float32, device=device).reshape(1)


def attention_fp8(q8, k8, v8t, q_scale, k_scale, v_scale, causal=False, sm_scale=None, out_dtype=None, kernel=None,
                  fold_scale=None, lpt=None, key_order=False, diag_split=None, mask_fold=None, even_n=None,
                  desc=None, one_loop=None, refill_top=None, **config):
    """fp8 (e4m3) attention forward: ``softmax(q k^T * sm_scale) v`` with ``q = q8 * q_scale`` etc.

    ``q8``, ``k8``: ``[Z, H, N_CTX, HEAD_DIM]`` e4m3; ``v8t``: V transposed, ``[Z, H, HEAD_DIM, N_CTX]``
    (contiguous: K-major tiles for the P V dot, as fp8 wgmma needs); the scales are 1-element fp32
    tensors (:func:`quantize_fp8`; anything else is converted to one on every call). Q K^T runs in fp8, P is
    rounded to e4m3 for P V, accumulation is fp32, the output ``out_dtype`` (default float16). ``kernel``: another
    ``kernelc.jit`` of :func:`attn_fwd_lse_kernel` (its own compiled variants, e.g. under other compile knobs);
    ``fold_scale``, ``lpt``, ``diag_split``, ``mask_fold``, ``even_n`` and ``desc`` as in :func:`attention_fwd`. ``key_order``: ``v8t``'s keys are in
    :func:`fp8_key_order`'s order within each 32-key group (:func:`fp8_v_key_order`, N_CTX and BLOCK_N multiples
    of 32): P V then takes P's registers as they are, no shuffle between lanes (docs/attention.md, "fp8 P without
    its shuffle"). ``one_loop`` (causal, N_CTX a multiple of the blocks): the kernel's ONE_LOOP, every key block in
    one loop with the mask from the diagonal's block on (default :data:`ONE_LOOP`); ``diag_split`` does not apply then.
    ``refill_top``: the kernel's REFILL_TOP, the key loops' copies at the top of a trip (default :data:`REFILL_TOP`;
    False: after the trip's dots whatever KERNELC_TMA_REFILL_TOP says).
    """
    import torch
    device = q8.device
    key = ("fp8", q8.shape, k8.shape, v8t.shape, q8.stride(), k8.stride(), v8t.stride(), q8.dtype, k8.dtype,
           v8t.dtype, device, causal, sm_scale, out_dtype, fold_scale, kernel, lpt, key_order, diag_split, mask_fold,
           even_n, desc, one_loop, refill_top, *config.items())
    plan = _PLANS.get(key)
    if plan is None:
        Z, H, N, D = q8.shape
        for name, t in (("q8", q8), ("k8", k8), ("v8t", v8t)):
            if t.dtype != torch.float8_e4m3fn:
                raise TypeError(f"attention_fp8: {name} must be torch.float8_e4m3fn, got {t.dtype}")
        if tuple(v8t.shape) != (Z, H, D, N):
            raise ValueError(f"attention_fp8: v8t must be V transposed, shape {(Z, H, D, N)}, "
                             f"got {tuple(v8t.shape)}")
        cfg = fwd_config(D, fp8=True, **config)
        if key_order and (N % 32 or cfg["BLOCK_N"] % 32):
            raise ValueError(f"attention_fp8: key_order needs N_CTX ({N}) and BLOCK_N ({cfg['BLOCK_N']}) multiples "
                             f"of 32")
        vs = v8t.stride()
        out_dtype = out_dtype or torch.float16
        o_strides = (H * N * D, N * D, D, 1)
        # V's strides as [Z, H, N_CTX, HEAD_DIM] are v8t's with the last two swapped (no transposed view per call)
        plan = _make_plan(key, q8, k8, (vs[0], vs[1], vs[3], vs[2]), o_strides, causal,
                          sm_scale if sm_scale is not None else D ** -0.5, False, True,
                          cfg, kernel, fold_scale, lpt, out_dtype, key_order=key_order, diag_split=diag_split,
                          mask_fold=mask_fold, even_n=even_n, desc=desc, v=v8t, one_loop=one_loop,
                          refill_top=refill_top)
        # q8's strides are in the key: where they are the output's, empty_like (which keeps a dense tensor's
        # strides) makes it with less argument parsing than torch.empty(shape, device=, dtype=)
        plan.out_like = tuple(q8.stride()) == o_strides
    o = torch.empty_like(q8, dtype=plan.out_dtype) if plan.out_like else torch.empty(
        plan.out_shape, device=device, dtype=plan.out_dtype)
    plan.fast(q8, k8, v8t, o, o, *_scale_args(q_scale, k_scale, v_scale, device))
    return o
