"""Fused attention backward (FlashAttention-2's algorithm) and an autograd Function around it.

Forward: :func:`examples.kernels.attention.attention_fwd` with ``return_lse=True`` saves O and the
base-2 row log-sum-exp ``LSE`` of the scaled logits. Backward, for dO:

1. ``attn_bwd_preprocess_kernel``: ``delta = rowsum(dO * O)`` (one fp32 per query row).
2. ``attn_bwd_dkdv_kernel``: one program per key block keeps K, V in registers and walks the query
   blocks that see it, recomputing ``P^T = exp2(K Q^T * scale - LSE)`` (no softmax state needed),
   accumulating ``dV += P^T dO`` and ``dK += dS^T Q`` with ``dS = P * (dO V^T - delta)``. Causal: only
   the query blocks on the key block's diagonal are masked; those below it run unmasked.
   With ``ATOMIC_DQ`` it also adds ``dQ^T = K^T dS^T`` into an fp32 dQ^T with atomics (one kernel, not
   deterministic: the order of the adds varies from run to run), cast and transposed afterwards.
3. ``attn_bwd_dq_kernel`` (the default, deterministic): one program per query block walks the key
   blocks, recomputes P and dS the same way and accumulates ``dQ += dS K`` in registers.

``dq_mode="ds"``: the dK/dV kernel also stores dS^T (``STORE_DS``) and ``attn_bwd_dq_from_ds_kernel`` computes
dQ = dS K as a GEMM over it (5 matmuls, deterministic, an ``N^2`` workspace a head).

``dq_mode="flat"``: the dK/dV kernel also computes ``dQ^T = K^T dS^T`` a step and adds its tile into a fp32
accumulator by one 1-D bulk reduction (``kl.bulk_add``, FLAT_DQ; 5 matmuls, no N^2 workspace, not deterministic),
then one cast kernel (:data:`FLAT_KNOBS`).

``attention(q, k, v, causal, sm_scale)`` is differentiable; ``dq_mode="atomic"`` picks the one-kernel variant with
per-element atomics, ``"ds"`` the stored-dS one (which is faster where: ``python3 -m bench attention``,
docs/attention.md). The 2-D TMA form of the bulk adds (``"bulk"``) measured slower than ``ds`` and the separate pass
and was removed (docs/attention.md, "FlashAttention-3's dQ again"); ``"flat"`` came back at D=128 with a producer
warpgroup (docs/attention.md, "att22").
"""
import contextlib

import kernelc as triton
import kernelc.language as tl

from examples.kernels.attention import attention_fwd

LOG2E = 1.44269504


@triton.jit
def _lpt_block(GROUP: tl.constexpr):
    """(rank, head) of this program in a causal grid ordered longest first across heads (rank 0: the longest
    block). Programs start in launch order, and with each head's blocks launched together the last heads' longest
    blocks start near the end of the grid and finish alone. With GROUP > 0 the wrapper launches
    ``(GROUP * blocks, heads // GROUP)`` (:func:`_grid`): launch order walks groups of GROUP heads, in a group
    every head's longest block, then every head's second longest, ...; so few heads are in flight at a time that
    L2 keeps what their programs share. (Divided by the constexpr GROUP, not by the runtime block count: on
    sm_90a the separate pass's loops then compile as without GROUP.)"""
    return tl.program_id(0) // GROUP, tl.program_id(1) * GROUP + tl.program_id(0) % GROUP


@triton.jit
def attn_bwd_preprocess_kernel(O, DO, Delta, stride_oz, stride_oh, stride_om, stride_ok, stride_dz, stride_dh,
                               stride_dm, stride_dk, H, N_CTX, BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr):
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = off_hz // H
    off_h = off_hz % H
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    rows = offs_m[:, None] < N_CTX
    o = tl.load(O + off_z.to(tl.int64) * stride_oz + off_h.to(tl.int64) * stride_oh + offs_m[:, None] * stride_om
                + offs_d[None, :] * stride_ok, mask=rows, other=0.0)
    do = tl.load(DO + off_z.to(tl.int64) * stride_dz + off_h.to(tl.int64) * stride_dh + offs_m[:, None] * stride_dm
                 + offs_d[None, :] * stride_dk, mask=rows, other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    tl.store(Delta + off_hz.to(tl.int64) * N_CTX + offs_m, delta, mask=offs_m < N_CTX)


@triton.jit
def _dkdv_inner(dk, dv, k, v, q_ptrs, do_ptrs, dq_ptrs, LSE, Delta, stride_qm, stride_dom, stride_dqm, offs_n,
                offs_m0, qk_scale, lo, hi, N_CTX, sm_scale, BLOCK_M: tl.constexpr, MASKED: tl.constexpr,
                ATOMIC_DQ: tl.constexpr, WS: tl.constexpr, ds_desc=None, start_n=0,
                STORE_DS: tl.constexpr = False, PREFETCH_LD: tl.constexpr = False, EVEN_M: tl.constexpr = False,
                TAIL: tl.constexpr = None, DS_TILED: tl.constexpr = False, ds_base=0, ds_step=0,
                FLAT_DQ: tl.constexpr = False, DQ_FIRST: tl.constexpr = False, lse_desc=None, delta_desc=None):
    """Query blocks [lo, hi) into (dk, dv) of one key block; P^T and dS^T are [BLOCK_N, BLOCK_M]. EVEN_M: N_CTX is a
    multiple of BLOCK_M, the LSE and delta rows are loaded without a mask. DS_TILED: dS^T's tile of query block j goes
    to rows ds_base + j * ds_step of the tiled workspace (attn_bwd_dkdv_kernel)."""
    # PREFETCH_LD: each trip loads the next trip's LSE and delta rows, so their latency runs under a whole trip (they
    # were the dK/dV loop's top stall in Nsight Compute, more so under ds's dS^T stream: docs/attention.md)
    if PREFETCH_LD:
        lse_n = tl.load(LSE + lo + offs_m0, mask=lo + offs_m0 < N_CTX, other=0.0)
        delta_n = tl.load(Delta + lo + offs_m0, mask=lo + offs_m0 < N_CTX, other=0.0)
    # WS: a producer warp(group) fills the Q/dO ring (DKDV_WS / DS_WS); at 8 warps it gives its registers to the
    # consumers (setmaxnreg), whose dK and dV fp32 accumulators get them 240 (KERNELC_WS_CONSUMER_REGS=auto)
    # TAIL: dK += dS^T Q left in flight across the back edge (tl.range's async_tail; None: KERNELC_WGMMA_ASYNC_TAIL)
    for start_m in tl.range(lo, hi, BLOCK_M, warp_specialize=WS, async_tail=TAIL):
        offs_m = start_m + offs_m0
        rows = offs_m < N_CTX
        # rows past N_CTX load as 0 (q, dO, LSE, delta): their P^T is exp2(0) but dO = 0 and Q = 0, so they add 0
        # Q is loaded as stored ([BLOCK_M, HEAD_DIM]) and read through tl.trans by K Q^T: both dots read the
        # one shared-memory tile (a trans of a trans would be a second view, staged through registers)
        if ATOMIC_DQ or STORE_DS:  # descriptors (zero-padded past N_CTX): see attn_bwd_dkdv_kernel
            q = q_ptrs.load([start_m, 0])
            do = do_ptrs.load([start_m, 0])
        else:
            q = tl.load(q_ptrs + start_m * stride_qm, mask=rows[:, None], other=0.0)
            do = tl.load(do_ptrs + start_m * stride_dom, mask=rows[:, None], other=0.0)
        if lse_desc is not None:
            # ROWS_TMA: the rows through 1-D descriptors (zero-padded past N_CTX); the compiler copies them into
            # the loop's TMA ring with Q and dO, so they are in shared memory once the stage's barrier completes
            lse = lse_desc.load([start_m])
            delta = delta_desc.load([start_m])
        elif PREFETCH_LD:
            lse = lse_n
            delta = delta_n
            nxt = offs_m + BLOCK_M
            lse_n = tl.load(LSE + nxt, mask=nxt < N_CTX, other=0.0)
            delta_n = tl.load(Delta + nxt, mask=nxt < N_CTX, other=0.0)
        elif EVEN_M:  # no row past N_CTX: no predicate or zero-fill a trip
            lse = tl.load(LSE + offs_m)
            delta = tl.load(Delta + offs_m)
        else:
            lse = tl.load(LSE + offs_m, mask=rows, other=0.0)
            delta = tl.load(Delta + offs_m, mask=rows, other=0.0)
        # both logit-shaped dots first (FA3's order): the compiler then waits for each where it is first read,
        # and V dO^T runs on the tensor cores while P^T is recomputed (schedule_wgmma, deferred waits)
        qkT = tl.dot(k, tl.trans(q))
        dpT = tl.dot(v, tl.trans(do))
        # the scale is applied to the fp32 logits (one FMA with the LSE), not folded into a rounded fp16/bf16 K
        pT = tl.math.exp2(qkT * qk_scale - lse[None, :])
        if MASKED:
            pT = tl.where(offs_m[None, :] >= offs_n[:, None], pT, 0.0)
        dv = tl.dot(pT.to(do.dtype), do, dv)
        dsT = (pT * (dpT - delta[None, :])).to(q.dtype)
        if STORE_DS:
            # dS^T's tile written out for attn_bwd_dq_from_ds_kernel (dQ = dS K as a plain GEMM, no recompute):
            # a TMA store from a shared-memory stage, clipped at N_CTX (before dK's wgmma: issued after it, the
            # backward measured 4-7% slower on an H100, docs/attention.md)
            if DS_TILED:
                ds_desc.store([ds_base + (start_m // BLOCK_M) * ds_step, 0], dsT)
            else:
                ds_desc.store([start_n, start_m], dsT)
        if FLAT_DQ and DQ_FIRST:
            # dQ^T's product issued before dK's: its tile is staged and added while dS^T Q still runs (FA3's order)
            dqT = tl.dot(tl.trans(k), dsT)
            dk = tl.dot(dsT, q, dk)
            tl.bulk_add(dq_ptrs + (start_m // BLOCK_M) * (dqT.shape[0] * BLOCK_M), dqT)
        else:
            dk = tl.dot(dsT, q, dk)
        if FLAT_DQ and not DQ_FIRST:
            # dQ^T = K^T dS^T of query block start_m / BLOCK_M: one contiguous fp32 block of the head's accumulator in
            # the staging order (kl.bulk_add), added by one 1-D bulk reduction (queries past N_CTX add dS^T's zero
            # columns into the last block's padding; attn_bwd_dq_flat_cast_kernel reads the blocks back)
            dqT = tl.dot(tl.trans(k), dsT)
            tl.bulk_add(dq_ptrs + (start_m // BLOCK_M) * (dqT.shape[0] * BLOCK_M), dqT)
        elif ATOMIC_DQ and not FLAT_DQ:
            # dQ^T = K^T dS^T: the key block is the contraction, HEAD_DIM the rows (one warpgroup's 64 each
            # with 8 warps) -- a wgmma whatever BLOCK_M; added into a transposed fp32 dQ whose query index is
            # contiguous (the accumulator's pairs along a row are one 8-byte vector atomic each)
            dqT = tl.dot(tl.trans(k), dsT)
            tl.atomic_add(dq_ptrs + offs_m[None, :], dqT * sm_scale, mask=rows[None, :], sem="relaxed")
    return dk, dv


@triton.jit
def attn_bwd_dkdv_kernel(Q, K, V, DO, DK, DV, DQ, LSE, Delta, sm_scale, stride_z, stride_h, stride_m, stride_k,
                         dq_stride_z, dq_stride_h, dq_stride_m, H, N_CTX, BLOCK_M: tl.constexpr,
                         BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr,
                         ATOMIC_DQ: tl.constexpr, WS: tl.constexpr = False,
                         STORE_DS: tl.constexpr = False, PREFETCH_LD: tl.constexpr = False,
                         GROUP: tl.constexpr = 0, EVEN_M: tl.constexpr = False, TAIL: tl.constexpr = None,
                         KV_REGS: tl.constexpr = 0, DS_TILED: tl.constexpr = False, FLAT_DQ: tl.constexpr = False,
                         DQ_FIRST: tl.constexpr = False, ROWS_TMA: tl.constexpr = False,
                         ONE_LOOP: tl.constexpr = False):
    """dK, dV of one [BLOCK_N] key block (and dQ's share of it with ATOMIC_DQ); WS: a producer warp(group)
    fills a loop's TMA ring (the compiler specialises one loop a kernel: 1, the first -- causal, the diagonal's two
    trips; 2: the unmasked one, causal's diagonal loop without it; ONE_LOOP=True with 1: causal's one loop). Q, K, V,
    dO, dK, dV share the strides (the wrapper makes them contiguous); DQ is fp32 with its own (FLAT_DQ: the head's
    blocks of dQ^T in kl.bulk_add's staging order, added by the loop; DQ_FIRST: dQ^T's product before dK's).
    ONE_LOOP (causal): the diagonal and the query blocks below it in one loop, the mask applied every trip."""
    if CAUSAL and GROUP > 0:  # longest first across GROUP heads: key block 0 sees every query block
        blk, off_hz = _lpt_block(GROUP)
        start_n = blk * BLOCK_N
    else:
        start_n = tl.program_id(0) * BLOCK_N
        off_hz = tl.program_id(1)
    off = (off_hz // H).to(tl.int64) * stride_z + (off_hz % H).to(tl.int64) * stride_h
    dq_off = (off_hz // H).to(tl.int64) * dq_stride_z + (off_hz % H).to(tl.int64) * dq_stride_h
    LSE += off_hz.to(tl.int64) * N_CTX
    Delta += off_hz.to(tl.int64) * N_CTX
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_m0 = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    cols = offs_n[:, None] < N_CTX
    kv_idx = offs_n[:, None] * stride_m + offs_d[None, :] * stride_k
    k = tl.load(K + off + kv_idx, mask=cols, other=0.0)
    v = tl.load(V + off + kv_idx, mask=cols, other=0.0)
    if KV_REGS:
        # K (KV_REGS >= 1) and V (2) re-laid out as a dot's accumulator, the layout of a wgmma's register A fragment,
        # by a product with the identity (exact: one fp16 term a sum): with KERNELC_WGMMA_A_REGS (the default) the
        # loop's K Q^T (and V dO^T) then read A from registers and only Q^T (dO^T) from shared memory
        # (FUSED_KV_REGS; docs/attention.md "bwd14")
        eye = (tl.arange(0, BLOCK_N)[:, None] == tl.arange(0, BLOCK_N)[None, :]).to(k.dtype)
        k = tl.dot(eye, k).to(k.dtype)
        if KV_REGS > 1:
            v = tl.dot(eye, v).to(v.dtype)
    qk_scale = sm_scale * 1.44269504
    q_ptrs = Q + off + offs_m0[:, None] * stride_m + offs_d[None, :] * stride_k
    do_ptrs = DO + off + offs_m0[:, None] * stride_m + offs_d[None, :] * stride_k
    dq_ptrs = DQ + dq_off + offs_d[:, None] * dq_stride_m  # ATOMIC_DQ: dQ^T, [HEAD_DIM, N_CTX]; the query
    # offsets are added per step: a [HEAD_DIM, BLOCK_M] pointer tile held across the loop would cost 2 registers
    # per element
    if ATOMIC_DQ or STORE_DS:
        # the atomics (STORE_DS: dS^T's stores) write global memory inside the loop, and the compiler does not
        # copy a pointer load that may follow a write of the program with TMA (no proxy fence): Q and dO through
        # descriptors, which it copies into the loop's TMA ring (the wrapper makes the tensors contiguous: unit
        # inner stride)
        q_ptrs = tl.make_tensor_descriptor(Q + off, shape=[N_CTX, HEAD_DIM], strides=[stride_m, 1],
                                           block_shape=[BLOCK_M, HEAD_DIM])
        do_ptrs = tl.make_tensor_descriptor(DO + off, shape=[N_CTX, HEAD_DIM], strides=[stride_m, 1],
                                            block_shape=[BLOCK_M, HEAD_DIM])
        if FLAT_DQ:  # the head's cdiv(N_CTX, BLOCK_M) blocks of HEAD_DIM x BLOCK_M fp32 (kl.bulk_add's order)
            dq_ptrs = DQ + dq_off
    ds_desc = None
    ds_base = 0
    if STORE_DS and DS_TILED:
        # dS^T tile by tile: the tile of (key block i, query block j) is rows (i * QB + j) * BLOCK_N .. + BLOCK_N of a
        # [KB * QB * BLOCK_N, BLOCK_M] buffer (QB = N_CTX / BLOCK_M; the wrapper asks for it only where N_CTX is a
        # multiple of both blocks): each tile one contiguous run of bytes, for the store and the dQ GEMM's reads
        ds_base = (start_n // BLOCK_N) * (N_CTX // BLOCK_M) * BLOCK_N
        ds_desc = tl.make_tensor_descriptor(DQ + off_hz.to(tl.int64) * N_CTX * N_CTX, shape=[N_CTX * N_CTX // BLOCK_M,
                                            BLOCK_M], strides=[BLOCK_M, 1], block_shape=[BLOCK_N, BLOCK_M])
    elif STORE_DS:
        # dS^T of this head, [N_CTX keys, N_CTX queries] (queries contiguous), DQ being that fp16/bf16 buffer
        ds_desc = tl.make_tensor_descriptor(DQ + off_hz.to(tl.int64) * N_CTX * N_CTX, shape=[N_CTX, N_CTX],
                                            strides=[N_CTX, 1], block_shape=[BLOCK_N, BLOCK_M])
    lse_desc = None
    delta_desc = None
    if ROWS_TMA:
        # the LSE and delta rows by TMA with each Q/dO stage (FlashAttention-3's way; the wrapper sets it where
        # N_CTX % 4 == 0: each head's rows start 16-byte aligned)
        lse_desc = tl.make_tensor_descriptor(LSE, shape=[N_CTX], strides=[1], block_shape=[BLOCK_M])
        delta_desc = tl.make_tensor_descriptor(Delta, shape=[N_CTX], strides=[1], block_shape=[BLOCK_M])
    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    lo = 0
    if CAUSAL and ONE_LOOP:
        # one loop from the diagonal on (below the diagonal the mask keeps every entry): one TMA ring, and WS=1
        # specialises the loop that runs nearly every trip -- the compiler gives a producer to one loop a kernel, so
        # with two loops WS=1 gets the diagonal's (docs/attention.md, "att26")
        lo = start_n
    elif CAUSAL:
        # the diagonal: query rows start_n .. start_n + BLOCK_N see part of this key block (BLOCK_N % BLOCK_M == 0)
        lo = start_n + BLOCK_N
        dk, dv = _dkdv_inner(dk, dv, k, v, q_ptrs, do_ptrs, dq_ptrs, LSE, Delta, stride_m, stride_m, dq_stride_m,
                             offs_n, offs_m0, qk_scale, start_n, tl.minimum(lo, N_CTX), N_CTX, sm_scale, BLOCK_M,
                             True, ATOMIC_DQ, WS == 1, ds_desc, start_n, STORE_DS, PREFETCH_LD, EVEN_M, TAIL,
                             DS_TILED, ds_base, BLOCK_N, FLAT_DQ, DQ_FIRST, lse_desc, delta_desc)
    dk, dv = _dkdv_inner(dk, dv, k, v, q_ptrs, do_ptrs, dq_ptrs, LSE, Delta, stride_m, stride_m, dq_stride_m,
                         offs_n, offs_m0, qk_scale, lo, N_CTX, N_CTX, sm_scale, BLOCK_M, CAUSAL and ONE_LOOP,
                         ATOMIC_DQ, WS, ds_desc, start_n, STORE_DS, PREFETCH_LD, EVEN_M, TAIL, DS_TILED, ds_base,
                         BLOCK_N, FLAT_DQ, DQ_FIRST, lse_desc, delta_desc)
    tl.store(DV + off + kv_idx, dv.to(DV.dtype.element_ty), mask=cols)
    tl.store(DK + off + kv_idx, (dk * sm_scale).to(DK.dtype.element_ty), mask=cols)


@triton.jit
def _dq_inner(dq, q, do, lse, delta, k_ptrs, v_ptrs, stride_n, offs_m, offs_n0, lo, hi, N_CTX, qk_scale,
              BLOCK_N: tl.constexpr, MASKED: tl.constexpr, DESC: tl.constexpr = False, TAIL: tl.constexpr = None):
    """Key blocks [lo, hi) into dq of one query block; P and dS are [BLOCK_M, BLOCK_N]."""
    for start_n in tl.range(lo, hi, BLOCK_N, async_tail=TAIL):  # TAIL: dQ += dS K in flight over the back edge
        offs_n = start_n + offs_n0
        # keys past N_CTX load as 0: their P is not 0, but dS K and the dS they feed are multiplied by K = 0, V = 0
        # K, V loaded as stored and read through tl.trans: Q K^T and dS K read one shared-memory tile of K
        if DESC:  # descriptors (zero-padded past N_CTX): see attn_bwd_dq_kernel
            k = k_ptrs.load([start_n, 0])
            v = v_ptrs.load([start_n, 0])
        else:
            k = tl.load(k_ptrs + start_n * stride_n, mask=offs_n[:, None] < N_CTX, other=0.0)
            v = tl.load(v_ptrs + start_n * stride_n, mask=offs_n[:, None] < N_CTX, other=0.0)
        qk = tl.dot(q, tl.trans(k))
        dp = tl.dot(do, tl.trans(v))  # issued before P is recomputed, as in the dK/dV loop
        p = tl.math.exp2(qk * qk_scale - lse[:, None])
        if MASKED:
            p = tl.where(offs_m[:, None] >= offs_n[None, :], p, 0.0)
        ds = (p * (dp - delta[:, None])).to(k.dtype)
        dq = tl.dot(ds, k, dq)
    return dq


@triton.jit
def attn_bwd_dq_kernel(Q, K, V, DO, DQ, LSE, Delta, sm_scale, stride_z, stride_h, stride_m, stride_k, H, N_CTX,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr,
                       LPT: tl.constexpr = True, GROUP: tl.constexpr = 0, DESC: tl.constexpr = False,
                       TAIL: tl.constexpr = None):
    """dQ of one [BLOCK_M] query block (deterministic: no atomics). Causal with LPT: the last query block (the
    most key blocks) first, so a head's longest programs start first and the grid's tail is its shortest ones;
    with GROUP too, longest first across GROUP heads at a time (:func:`_lpt_block`)."""
    if CAUSAL and LPT and GROUP > 0:
        rank, off_hz = _lpt_block(GROUP)
        start_m = (tl.num_programs(0) // GROUP - 1 - rank) * BLOCK_M
    else:
        start_m = (tl.num_programs(0) - 1 - tl.program_id(0) if CAUSAL and LPT else tl.program_id(0)) * BLOCK_M
        off_hz = tl.program_id(1)
    off = (off_hz // H).to(tl.int64) * stride_z + (off_hz % H).to(tl.int64) * stride_h
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n0 = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    rows = offs_m < N_CTX
    q_idx = offs_m[:, None] * stride_m + offs_d[None, :] * stride_k
    q = tl.load(Q + off + q_idx, mask=rows[:, None], other=0.0)
    qk_scale = sm_scale * 1.44269504
    do = tl.load(DO + off + q_idx, mask=rows[:, None], other=0.0)
    lse = tl.load(LSE + off_hz.to(tl.int64) * N_CTX + offs_m, mask=rows, other=0.0)
    delta = tl.load(Delta + off_hz.to(tl.int64) * N_CTX + offs_m, mask=rows, other=0.0)
    k_ptrs = K + off + offs_n0[:, None] * stride_m + offs_d[None, :] * stride_k
    v_ptrs = V + off + offs_n0[:, None] * stride_m + offs_d[None, :] * stride_k
    if DESC:
        # K and V through descriptors (unit inner stride): after the fused kernel's dK/dV stores the compiler
        # keeps pointer loads off TMA (cp.async), a descriptor's loads it rings by TMA
        k_ptrs = tl.make_tensor_descriptor(K + off, shape=[N_CTX, HEAD_DIM], strides=[stride_m, 1],
                                           block_shape=[BLOCK_N, HEAD_DIM])
        v_ptrs = tl.make_tensor_descriptor(V + off, shape=[N_CTX, HEAD_DIM], strides=[stride_m, 1],
                                           block_shape=[BLOCK_N, HEAD_DIM])
    dq = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    if CAUSAL:
        # keys left of the diagonal unmasked, then the diagonal block(s) (BLOCK_M % BLOCK_N == 0)
        dq = _dq_inner(dq, q, do, lse, delta, k_ptrs, v_ptrs, stride_m, offs_m, offs_n0, 0, start_m, N_CTX,
                       qk_scale, BLOCK_N, False, DESC, TAIL)
        dq = _dq_inner(dq, q, do, lse, delta, k_ptrs, v_ptrs, stride_m, offs_m, offs_n0, start_m,
                       tl.minimum(start_m + BLOCK_M, N_CTX), N_CTX, qk_scale, BLOCK_N, True, DESC, TAIL)
    else:
        dq = _dq_inner(dq, q, do, lse, delta, k_ptrs, v_ptrs, stride_m, offs_m, offs_n0, 0, N_CTX, N_CTX,
                       qk_scale, BLOCK_N, False, DESC, TAIL)
    tl.store(DQ + off + q_idx, (dq * sm_scale).to(DQ.dtype.element_ty), mask=rows[:, None])


@triton.jit
def attn_bwd_fused_kernel(Q, K, V, DO, DK, DV, DQ, LSE, Delta, sm_scale, stride_z, stride_h, stride_m, stride_k, H,
                          N_CTX, BLOCK_M1: tl.constexpr, BLOCK_N1: tl.constexpr, BLOCK_M2: tl.constexpr,
                          BLOCK_N2: tl.constexpr, HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr,
                          DQ_DESC: tl.constexpr = False, EVEN_M: tl.constexpr = False, TAIL: tl.constexpr = None,
                          KV_REGS: tl.constexpr = 0):
    """dq_mode="fused": the separate pass's two kernels in one grid, as Triton's tutorial 06 does: program i of a
    head computes dK, dV of key block i, then dQ of query block i (BLOCK_N1 == BLOCK_M2). One launch, so neither
    kernel has a tail of its own; causal, key block i's queries and query block i's keys add up to the same work
    for every program (dQ in launch order: the first query blocks are the shortest)."""
    attn_bwd_dkdv_kernel(Q, K, V, DO, DK, DV, DQ, LSE, Delta, sm_scale, stride_z, stride_h, stride_m, stride_k,
                         0, 0, 0, H, N_CTX, BLOCK_M1, BLOCK_N1, HEAD_DIM, CAUSAL, False, EVEN_M=EVEN_M, TAIL=TAIL,
                         KV_REGS=KV_REGS)
    attn_bwd_dq_kernel(Q, K, V, DO, DQ, LSE, Delta, sm_scale, stride_z, stride_h, stride_m, stride_k, H, N_CTX,
                       BLOCK_M2, BLOCK_N2, HEAD_DIM, CAUSAL, False, 0, DQ_DESC, TAIL)


@triton.jit
def attn_bwd_dq_from_ds_kernel(DST, K, DQ, sm_scale, stride_z, stride_h, stride_m, stride_k, H, N_CTX,
                               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
                               CAUSAL: tl.constexpr, GROUP: tl.constexpr = 0, TILE_N: tl.constexpr = 0):
    """dQ = sm_scale * dS K for one [BLOCK_M] query block, dS^T read from the [N_CTX, N_CTX] (keys, queries)
    buffer the dK/dV kernel wrote with STORE_DS: a GEMM, no P or dS recomputed. Causal: key blocks up to the
    diagonal block's end; BLOCK_M is the dK/dV kernel's BLOCK_N, so every tile read was written (with zeros
    above the diagonal) -- the others are never read. Causal, the longest programs first (GROUP: across GROUP
    heads at a time, :func:`_lpt_block`)."""
    if CAUSAL and GROUP > 0:
        rank, off_hz = _lpt_block(GROUP)
        start_m = (tl.num_programs(0) // GROUP - 1 - rank) * BLOCK_M
    else:
        start_m = (tl.num_programs(0) - 1 - tl.program_id(0) if CAUSAL else tl.program_id(0)) * BLOCK_M
        off_hz = tl.program_id(1)
    off = (off_hz // H).to(tl.int64) * stride_z + (off_hz % H).to(tl.int64) * stride_h
    hi = tl.minimum(start_m + BLOCK_M, N_CTX) if CAUSAL else N_CTX
    if TILE_N > 0:
        # the tiled dS^T (attn_bwd_dkdv_kernel's DS_TILED, tiles of TILE_N keys x BLOCK_M queries, N_CTX a multiple of
        # both): BLOCK_N keys of query block start_m are rows of one tile; causal, up to the end of the key tile that
        # holds the diagonal (written whole, zeros above it)
        ds_desc = tl.make_tensor_descriptor(DST + off_hz.to(tl.int64) * N_CTX * N_CTX,
                                            shape=[N_CTX * N_CTX // BLOCK_M, BLOCK_M], strides=[BLOCK_M, 1],
                                            block_shape=[BLOCK_N, BLOCK_M])
        if CAUSAL:
            hi = tl.cdiv(start_m + BLOCK_M, TILE_N) * TILE_N
    else:
        ds_desc = tl.make_tensor_descriptor(DST + off_hz.to(tl.int64) * N_CTX * N_CTX, shape=[N_CTX, N_CTX],
                                            strides=[N_CTX, 1], block_shape=[BLOCK_N, BLOCK_M])
    k_desc = tl.make_tensor_descriptor(K + off, shape=[N_CTX, HEAD_DIM], strides=[stride_m, 1],
                                       block_shape=[BLOCK_N, HEAD_DIM])
    qb = start_m // BLOCK_M
    dq = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    for start_n in range(0, hi, BLOCK_N):
        # keys past N_CTX load as 0 (both tiles): they add nothing
        if TILE_N > 0:
            dsT = ds_desc.load([((start_n // TILE_N) * (N_CTX // BLOCK_M) + qb) * TILE_N + start_n % TILE_N, 0])
        else:
            dsT = ds_desc.load([start_n, start_m])
        k = k_desc.load([start_n, 0])
        dq = tl.dot(tl.trans(dsT), k, dq)
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    tl.store(DQ + off + offs_m[:, None] * stride_m + offs_d[None, :] * stride_k,
             (dq * sm_scale).to(DQ.dtype.element_ty), mask=offs_m[:, None] < N_CTX)


@triton.jit
def attn_bwd_dq_flat_cast_kernel(DQA, DQ, scale, N_CTX, BLOCK: tl.constexpr, HEAD_DIM: tl.constexpr):
    """dQ = scale * dQ of one [BLOCK] query block of one head from dq_mode="flat"'s accumulator: block
    ``program_id(0)`` of the head ([HEAD_DIM, BLOCK] fp32 in the staging order, kl.bulk_add) read back through
    kl.staging_offsets, transposed and written along the head dim."""
    t = tl.program_id(0)
    off_hz = tl.program_id(1).to(tl.int64)
    blocks = tl.cdiv(N_CTX, BLOCK)
    base = DQA + (off_hz * blocks + t) * (HEAD_DIM * BLOCK)
    x = tl.load(base + tl.staging_offsets(HEAD_DIM, BLOCK, tl.float32))
    offs_n = t * BLOCK + tl.arange(0, BLOCK)
    offs_d = tl.arange(0, HEAD_DIM)
    tl.store(DQ + off_hz * N_CTX * HEAD_DIM + offs_n[:, None] * HEAD_DIM + offs_d[None, :],
             tl.trans(x * scale).to(DQ.dtype.element_ty), mask=offs_n[:, None] < N_CTX)


# (BLOCK_M, BLOCK_N, num_warps, num_stages) by head dim, for the dK/dV kernel (BLOCK_M query rows per step of a
# BLOCK_N key block) and the dQ kernel (BLOCK_M query block, BLOCK_N keys per step); 0 spills on sm_90a. Head
# dims 64 and 128: the bench sweep's fastest pair on an H200 (2026-11-27, docs/attention.md)
DKDV_CONFIGS = {16: (16, 32, 4, 2), 32: (16, 32, 4, 2), 64: (32, 64, 4, 3), 128: (64, 128, 8, 3)}
# ... by (head dim, causal) where a mask has its own (the separate pass's dK/dV kernel; DQ_MASK_CONFIGS the dQ kernel's)
# D=64 non-causal (d64s27): the dK/dV kernel in D=128's form (64-query steps of a 128-key block on two consumer
# warpgroups, with DKDV_WS, DKDV_ROWS_TMA, DKDV_TAIL below) and the dQ kernel at 128 x 128 on 8 warps (the compiler
# gives its loop a producer warpgroup), 3 stages for DQ_TAIL (docs/attention.md, "d64s27"); D=64 causal the same blocks
# (d64c28; its dK/dV kernel's two loops with DKDV_WS=2)
DKDV_MASK_CONFIGS = {(64, False): (64, 128, 8, 3), (64, True): (64, 128, 8, 3)}
DQ_MASK_CONFIGS = {(64, False): (128, 128, 8, 3), (64, True): (128, 128, 8, 3)}
# ATOMIC_DQ adds dQ^T = K^T dS^T ([HEAD_DIM, BLOCK_M]) a step: a wgmma when HEAD_DIM is 64 rows a warpgroup
# (4 warps at 64, 8 at 128; else mma.sync), spill-free at these query steps
ATOMIC_DKDV_CONFIGS = {16: (16, 32, 4, 2), 32: (16, 32, 4, 2), 64: (32, 64, 4, 3), 128: (32, 128, 8, 3)}
# dq_mode="flat" (FLAT_DQ): the atomic mode's dots, dQ^T's tile of each query step added by one 1-D bulk reduction
# (kl.bulk_add) into a tile-contiguous fp32 accumulator (5 matmuls, no N^2 workspace, not deterministic); with the
# kernel constexprs FLAT_KNOBS by head dim (dkdv_config overrides). D=128 on an H200 (att22's R1/R2, docs/attention.md
# "att22"): at 32-query steps with a producer warpgroup and dQ^T's product first, 6.2-6.5 ms at N 4096 non-causal and
# 96-97 at 16384 (the separate pass 6.6-7.1 / 104-105, ds with WS 5.9-6.5 / 90-93); causal 1.13-1.26x the separate
# pass; at FA3's 64-query steps (255 registers, 48 B spilled; with a producer warpgroup ptxas serialises its wgmmas,
# C7512) 7.7-8.0 ms
FLAT_DKDV_CONFIGS = dict(ATOMIC_DKDV_CONFIGS)
FLAT_KNOBS = {128: dict(WS=1, DQ_FIRST=True, EVEN_M=True)}
# dq_mode="ds": the dK/dV kernel also stores dS^T; dQ = dS K by attn_bwd_dq_from_ds_kernel, whose BLOCK_M is the
# dK/dV kernel's BLOCK_N (causal: the tiles it reads are the ones written); 0 spills on sm_90a
DS_DKDV_CONFIGS = {16: (16, 32, 4, 2), 32: (16, 32, 4, 2), 64: (32, 64, 4, 3), 128: (64, 128, 8, 3)}
DQ_FROM_DS_CONFIGS = {16: (32, 32, 4, 3), 32: (32, 32, 4, 3), 64: (64, 64, 4, 4), 128: (128, 64, 8, 3)}
# ds's dK/dV kernel loads the next trip's LSE and delta rows a trip ahead (PREFETCH_LD) at these head dims (none now:
# 3-8% faster than the masked loads at 128 on an H200, call H11c, docs/attention.md "The dS^T store: what it costs",
# but slower than the unmasked ones below); not a win for the separate pass (12% slower at 64 non-causal)
DS_PREFETCH_LD = {}
# ds's dK/dV loop with its last dot in flight over the back edge (the kernel's TAIL) and its LSE/delta rows unmasked
# where N is a multiple of its step (EVEN_M; without PREFETCH_LD, whose loads stay masked), at these head dims. D=128
# EVEN_M against the prefetch on an H200 (call C2 of 2026-11-28, docs/attention.md "bwd14"): 3.0% faster at N=16384,
# 0.5-1.5% causal, 2.7-4% / 1.0-1.3% at 4096; the tail with it was no faster (1.7% slower causal at 16384)
DS_TAIL = {}
DS_EVEN_M = {128: True}
# ds with dS^T stored tile by tile (the kernels' DS_TILED / TILE_N: each [BLOCK_N keys, BLOCK_M queries] tile one
# contiguous run, for the store and the dQ GEMM's reads, where the [N, N] layout strides every tile row by N) at these
# (head dim, causal) then head dims, where N is a multiple of both dK/dV blocks; the GEMM's config then (BLOCK_M = the
# dK/dV BLOCK_M). None: at D=128 non-causal on an H200 (call C4, docs/attention.md "bwd14") 4% slower at N=16384, 2-4%
# at 4096, with either GEMM config
DS_TILED = {}
DS_TILED_DQ_CONFIGS = {16: (16, 32, 4, 3), 32: (16, 32, 4, 3), 64: (32, 64, 4, 4), 128: (64, 64, 4, 4)}
# the dS^T buffer ([heads, N, N] in the inputs' dtype) is at most this large: more heads run in groups of as many
# as fit, each group's dK/dV and dQ launched before the next's
DS_WORKSPACE_BYTES = 8 << 30
# ... and at most this many times dQ's bytes, by head dim (ds_workspace_bytes= overrides both; the default mode runs the
# separate pass where one head's dS^T is larger). 2 is the size of FlashAttention-3's fp32 dQ accumulator. D=128 on an
# H200 (att23's R1/R2, docs/attention.md "att23"): 4x (512 MiB at B=4, H=32, N 4096; 2 GiB at 16384) tied the 8 GiB
# bound; 2x was 10-12% slower causal at 4096, 1-1.6% at 16384
DS_WORKSPACE_X = {128: 4}
# dq_mode="fused": one grid, program i doing dK/dV of key block i then dQ of query block i: ((BLOCK_M1, BLOCK_N1),
# (BLOCK_M2, BLOCK_N2), num_warps, num_stages), BLOCK_N1 == BLOCK_M2; the separate pass's blocks, 0 spills on
# sm_90a (D=64 causal 173 registers: 2 programs an SM where the separate kernels fit 3)
FUSED_CONFIGS = {16: ((16, 32), (32, 16), 4, 2), 32: ((16, 32), (32, 16), 4, 2), 64: ((32, 64), (64, 64), 4, 3),
                 128: ((64, 128), (128, 64), 8, 2)}
# fused: the dQ loop's K and V through descriptors (a TMA ring) instead of pointer loads (cp.async) at these head
# dims (dq_config's DESC overrides); sm_90a, D=64: 140 registers causal against 173, dQ loop 347 SASS against 471;
# D=128 does not fit (258 KB of shared memory at 2 stages). D=64 on an H200 (call H12b): without it 21-35%
# slower; with it 4-9% faster than the separate pass causal, the same non-causal
FUSED_DQ_DESC = {64: True}
# fused: its loops' last dot (dK += dS^T Q, dQ += dS K) left in flight across the back edge (the kernels' TAIL, through
# tl.range's async_tail) at these head dims; else KERNELC_WGMMA_ASYNC_TAIL decides (off by default). And its dK/dV
# loop's LSE/delta rows loaded without a mask (EVEN_M) where N is a multiple of its step, at these head dims. D=64 on an
# H200 (call C2b, docs/attention.md "bwd13"), both together against neither: 3.8-10% faster at N=4096, 1.0-5.6% at
# 16384 (the default timed before and after them), and ahead of the separate pass at both lengths and masks
FUSED_TAIL = {64: True}
FUSED_EVEN_M = {64: True}
# fused: K (1; 2: and V) re-laid out before the dK/dV loop so that K Q^T (V dO^T) reads A from registers, not shared
# memory (the kernels' KV_REGS; KERNELC_WGMMA_A_REGS), by (head dim, causal), then head dim. D=64 causal with K on an
# H200 (call C2, docs/attention.md "bwd14"): 29.55 ms at N=16384 against the default's 31.12 / 30.04 before / after it,
# a tie at 4096; non-causal K was 3-4% slower and K and V 1% slower (not used)
FUSED_KV_REGS = {(64, True): 1}
# fused: the registers a thread may use at most (the launch's maxnreg) by (head dim, causal), then head dim; None: as
# many as the assembler likes (138-167 at D=64: 3 programs of 4 warps an SM). None set: at 128 (4 programs an SM, every
# wgmma then waited for at 0 by ptxas) 8-16% slower on an H200 (docs/attention.md, "bwd18"). dkdv_config's maxnreg
# overrides
FUSED_MAXNREG = {}
DQ_MODES = ("separate", "atomic", "ds", "fused", "flat")
# dq_mode=None picks by (head dim, causal), then by head dim (else separate); fused at 64 (call H12b: 1.945 ms causal
# against the separate pass's 2.08-2.15; call C2b with FUSED_TAIL and FUSED_EVEN_M: 1.930 / 29.84 ms causal at N=4096 /
# 16384 against the separate pass's 2.000 / 31.45, 3.541 / 58.90 non-causal against 3.635 / 59.41); ds at 128 under
# DS_WORKSPACE_X's bound (att23's R1/R2 on an H200: 0.89-1.00 of cuDNN at N 4096, 0.88-0.91 at 16384, against the
# separate pass's 0.78-0.86 / 0.78-0.85; docs/attention.md "att23")
DEFAULT_DQ_MODES = {64: "fused", 128: "ds"}
# ... and from a sequence length on, by (head dim, causal): (N, mode), over DEFAULT_DQ_MODES where N_CTX >= N
# D=64 non-causal from 8192 (d64s27), causal from 16384 (d64c28): the separate pass in D=128's form. Causal on an H200
# (call A28, docs/attention.md "d64c28"): 0.949-0.972 of cuDNN at N 16384 against the fused kernel's 0.889-0.904, ahead
# of it in every round; at 8192 not (0.879-1.023 against 0.959-0.998)
DEFAULT_DQ_MODES_LONG = {(64, False): (8192, "separate"), (64, True): (16384, "separate")}
# D=64 dQ at 2 stages (50 KB: 4 programs an SM, 3 at 3 stages' 66 KB) since call R1b (docs/attention.md "bwd18"). D=128
# at 128-key steps since att21 (225 KB, spill-free, 555 SASS a trip against 2 x 355 at 64-key steps; on an H200 the dQ
# kernel 3.6-3.8% faster, the separate backward 1.5-5% at N 4096: docs/attention.md, "att21")
DQ_CONFIGS = {16: (32, 16, 4, 2), 32: (32, 16, 4, 2), 64: (64, 64, 4, 2), 128: (128, 128, 8, 2)}
# the separate pass's dK/dV loop with its LSE/delta rows unmasked (EVEN_M) where N is a multiple of its step, at these
# head dims (D=64: 126 registers, 4 programs an SM, 223 SASS a trip against 238). With the dQ kernel at 2 stages, both
# kernels run 4 programs an SM with their waits deferred: on an H200 (call R1b, N=16384) 2.4% faster than the separate
# pass before, non-causal
DKDV_EVEN_M = {64: True}
# the dK/dV loop with a producer warpgroup (the kernels' WS: it fills the Q/dO ring, the consumers meet on named
# barriers; both consumer warpgroups get 240 registers by setmaxnreg, KERNELC_WS_CONSUMER_REGS=auto) by (head dim,
# causal), for the separate pass (DKDV_WS) and ds (DS_WS); dkdv_config's WS overrides. On an H200 (att22's R1-R3,
# docs/attention.md "att22") non-causal D=128: the separate pass 1.5-4.6% faster like for like (R1; R3's default 5.5-11%
# at N 4096), ds 0-4.6% (N 4096 and 16384); causal not faster (the separate pass -1.6% to +5.4%, ds 14-21% slower;
# but with causal's two loops WS=1 specialised the diagonal's only: "att26"); ds causal at 128 with DS_ONE_LOOP's one
# loop (below), whose every trip the producer then fills. D=64 causal (d64c28): WS=2, the producer for the two-loop
# kernel's unmasked loop (causal's one loop measured no faster: call A28, docs/attention.md "d64c28")
DKDV_WS = {(128, False): 1, (64, False): 1, (64, True): 2}
DS_WS = {(128, False): 1, (128, True): 1}
# the separate pass's dK/dV loop with its LSE/delta rows through 1-D descriptors (ROWS_TMA: the compiler's auto-TMA
# copies its Q/dO pointer loads, and the rows join that ring) by (head dim, causal); dkdv_config's ROWS_TMA overrides
DKDV_ROWS_TMA = {(64, False): True, (64, True): True}
# the separate pass's loops with their last dot (dK += dS^T Q; dQ += dS K) in flight across the back edge (the kernels'
# TAIL, tl.range's async_tail) by (head dim, causal), for the dK/dV kernel (DKDV_TAIL) and the dQ kernel (DQ_TAIL);
# under a producer warpgroup the compiler keeps it with 3+ stages, releasing each a trip late (passes/schedule.py,
# _ws_async_tail); dkdv_config's / dq_config's TAIL overrides
DKDV_TAIL = {(64, False): True, (64, True): True}
DQ_TAIL = {(64, False): True, (64, True): True}
# ds's dK/dV loop with its LSE and delta rows through 1-D descriptors (ROWS_TMA), which the compiler rings with Q and
# dO (passes/schedule.py, _register_tiles): by (head dim, causal); dkdv_config's ROWS_TMA overrides. On an H200 (att25's
# R1) 10-14% faster at D=128 non-causal (N 4096; 6-8% at 16384), a tie causal (no producer warpgroup there): on
# where faster (docs/attention.md, "att25"); causal with DS_ONE_LOOP (below)
DS_ROWS_TMA = {(128, False): True, (128, True): True}
# ds causal's dK/dV kernel in one loop from the diagonal on, masked every trip (the kernel's ONE_LOOP), by head dim;
# DS_WS and DS_ROWS_TMA apply causal only with it (with two loops WS=1 gives the producer to the diagonal's two trips;
# dkdv_config ONE_LOOP=False gives the two-loop kernel without either). On an H200 (s26's R1 and R2, docs/attention.md
# "att27") D=128 6-14% less time a call than the two loops in every round at N 4096 and 16384; either knob alone ties
DS_ONE_LOOP = {128: True}
# causal grids ordered longest first across groups of this many heads (GROUP, the kernels' constexpr; 0: each
# head's blocks launched together, a head's longest first): (head dim, dQ mode) -> (dK/dV kernel's, dQ kernel's
# or ds's dQ GEMM's). On an H200 (call H12b, N=4096, docs/attention.md) groups of 8: ds 4% faster at D=128 and
# 11% at 64, the separate pass 3-6% at 64; the separate pass at 128 not faster (left out)
CAUSAL_GROUP = {(128, "ds"): (8, 8), (64, "ds"): (8, 8), (64, "separate"): (8, 8)}
PRE_BLOCK = 64


def _cfg(table, head_dim, overrides):
    if head_dim not in table:
        raise ValueError(f"attention backward: head dim {head_dim} is not supported (expected one of {sorted(table)})")
    bm, bn, w, s = table[head_dim]
    cfg = dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=w, num_stages=s)
    cfg.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return cfg


def _mask_table(table, by_mask, causal):
    """``table`` (by head dim) with ``by_mask``'s entries for this mask (by (head dim, causal)) over it."""
    return {**table, **{d: c for (d, m), c in by_mask.items() if m == bool(causal)}} if by_mask else table


def _grid(nblk, heads, causal, cfg):
    """The launch grid of a kernel of ``nblk`` blocks a head over ``heads`` heads and its config with the GROUP it
    runs: causal, ``(GROUP * nblk, heads // GROUP, 1)`` (:func:`_lpt_block`; GROUP the largest divisor of
    ``heads`` not above the asked one), else ``(nblk, heads, 1)`` with GROUP 0."""
    group = min(cfg.get("GROUP", 0), heads) if causal and cfg.get("LPT", True) else 0
    while group and heads % group:
        group -= 1
    cfg = dict(cfg, GROUP=group)
    return ((group * nblk, heads // group, 1) if group else (nblk, heads, 1)), cfg


def _ds_budget(q):
    """ds's workspace bound for q's shape without ds_workspace_bytes: DS_WORKSPACE_BYTES, and DS_WORKSPACE_X times dQ's
    bytes where the head dim has one."""
    x = DS_WORKSPACE_X.get(q.shape[-1])
    return DS_WORKSPACE_BYTES if x is None else min(DS_WORKSPACE_BYTES, int(x * q.numel() * q.element_size()))


def default_dq_mode(head_dim, causal=None, n_ctx=None):
    """The dQ mode ``dq_mode=None`` runs at this head dim, mask and sequence length (:data:`DEFAULT_DQ_MODES_LONG` by
    ``(head_dim, causal)`` where ``n_ctx`` reaches its length, then :data:`DEFAULT_DQ_MODES` by ``(head_dim, causal)``,
    then by ``head_dim``, else ``"separate"``)."""
    long = DEFAULT_DQ_MODES_LONG.get((head_dim, causal))
    if long is not None and n_ctx is not None and n_ctx >= long[0]:
        return long[1]
    return DEFAULT_DQ_MODES.get((head_dim, causal), DEFAULT_DQ_MODES.get(head_dim, "separate"))


def attention_bwd(do, q, k, v, o, lse, causal, sm_scale, dq_mode=None, dkdv_config=None, dq_config=None,
                  kernels=None, ds_workspace_bytes=None):
    """(dq, dk, dv) for ``o, lse = attention_fwd(q, k, v, causal, sm_scale, return_lse=True)``.

    ``dq_mode``: ``None`` (:func:`default_dq_mode`), ``"separate"`` (a second kernel, deterministic),
    ``"atomic"`` (fp32 atomics in the dK/dV kernel, then one cast), ``"fused"`` (the separate pass's two
    kernels as one grid, :data:`FUSED_CONFIGS`) or ``"ds"`` (dS^T stored, dQ = dS K a GEMM; deterministic; needs
    N % 8 == 0 and runs the separate pass otherwise). ``dkdv_config`` / ``dq_config`` override :data:`DKDV_CONFIGS`
    (atomic: :data:`ATOMIC_DKDV_CONFIGS`, ds: :data:`DS_DKDV_CONFIGS`) /
    :data:`DQ_CONFIGS` (ds: the GEMM's, :data:`DQ_FROM_DS_CONFIGS`); ``dkdv_config`` also sets the dK/dV kernel's
    knobs (ds: ``WS``, ``ROWS_TMA``, ``ONE_LOOP``, else from :data:`DS_WS`, :data:`DS_ROWS_TMA`, :data:`DS_ONE_LOOP`;
    causal ``ONE_LOOP=False``: the two-loop kernel, without the other two unless named).
    ``ds_workspace_bytes``: ds's dS^T buffer at most this large (default :data:`DS_WORKSPACE_BYTES` and
    :data:`DS_WORKSPACE_X`; heads in groups, at least one).
    ``kernels``: ``{"dkdv": ..., "dq": ..., "fused": ...}``, other
    compiled copies of the kernels to launch (the bench's A/B of compile knobs).
    """
    if dkdv_config is None and dq_config is None and kernels is None:
        plan = _plan(do, q, k, v, o, lse, causal, sm_scale, dq_mode)
        if plan is not None:  # the fused or separate mode at its defaults: a launch plan (prepared launches)
            return plan.run(do, q, k, v, o, lse)
    grads, steps = attention_bwd_steps(do, q, k, v, o, lse, causal, sm_scale, dq_mode, dkdv_config, dq_config,
                                       kernels, ds_workspace_bytes)
    for _, launch in steps:
        launch()
    return grads()


def attention_bwd_steps(do, q, k, v, o, lse, causal, sm_scale, dq_mode=None, dkdv_config=None,
                        dq_config=None, kernels=None, ds_workspace_bytes=None):
    """The backward as ``(grads, [(name, launch), ...])``: the buffers allocated, each kernel's launch a
    callable (``preprocess``, ``dkdv``, then ``dq`` or the atomic mode's ``cast``; ds with its heads in
    groups: ``preprocess`` and ``dkdv_dq``) to run in order, and ``grads()`` the (dq, dk, dv) they leave.
    :func:`attention_bwd` runs them; the bench times each alone."""
    import torch
    if dq_mode is None:
        dq_mode = default_dq_mode(q.shape[-1], bool(causal), q.shape[-2])
        if dq_mode == "ds" and ds_workspace_bytes is None and q.shape[-2] ** 2 * q.element_size() > _ds_budget(q):
            # the default takes ds only where a whole head fits its bound (else a group of one head would exceed it)
            dq_mode = "separate"
    if dq_mode not in DQ_MODES:
        raise ValueError(f"dq_mode must be one of {', '.join(map(repr, DQ_MODES))}, got {dq_mode!r}")
    kernels = dict(dict(dkdv=attn_bwd_dkdv_kernel, dq=attn_bwd_dq_kernel), **(kernels or {}))
    q, k, v, o, do = (t.contiguous() for t in (q, k, v, o, do))
    Z, H, N, D = q.shape
    # ds: dS^T's rows are N_CTX elements, a TMA descriptor's stride must be whole 16 bytes; else the separate pass
    ds = dq_mode == "ds" and N % 8 == 0
    dq_mode = "separate" if dq_mode == "ds" and not ds else dq_mode
    if dq_mode == "fused":
        return _fused_steps(do, q, k, v, o, lse, causal, sm_scale, dkdv_config, dq_config, kernels.get("fused"))
    flat = dq_mode == "flat"
    atomic = dq_mode in ("atomic", "flat")
    c1 = _cfg(FLAT_DKDV_CONFIGS if flat else ATOMIC_DKDV_CONFIGS if atomic else DS_DKDV_CONFIGS if ds else
              _mask_table(DKDV_CONFIGS, DKDV_MASK_CONFIGS, causal), D, dkdv_config)
    # ds with dS^T stored tile by tile (DS_TILED): where N is a multiple of both dK/dV blocks; the GEMM's query block
    # is then the dK/dV kernel's query step and its key step divides the dK/dV key block
    asked = "DS_TILED" in c1  # asked for by dkdv_config (else DS_TILED's default, dropped where dq_config cannot tile)
    tiled = ds and bool(c1.pop("DS_TILED", DS_TILED.get((D, bool(causal)), DS_TILED.get(D, False)))) \
        and N % c1["BLOCK_N"] == 0 \
        and N % c1["BLOCK_M"] == 0
    c2 = _cfg(DS_TILED_DQ_CONFIGS if tiled else DQ_FROM_DS_CONFIGS if ds else
              _mask_table(DQ_CONFIGS, DQ_MASK_CONFIGS, causal), D, dq_config)
    if tiled and not asked and (c2["BLOCK_M"] != c1["BLOCK_M"] or c1["BLOCK_N"] % c2["BLOCK_N"]):
        tiled = False
        c2 = _cfg(DQ_FROM_DS_CONFIGS, D, dq_config)
    if tiled:
        if c2["BLOCK_M"] != c1["BLOCK_M"] or c1["BLOCK_N"] % c2["BLOCK_N"]:
            raise ValueError("dq_mode='ds' with DS_TILED needs the dQ GEMM's BLOCK_M to be the dK/dV kernel's BLOCK_M "
                             f"and its BLOCK_N to divide the dK/dV kernel's BLOCK_N, got {c1}, {c2}")
        c1["DS_TILED"], c2["TILE_N"] = True, c1["BLOCK_N"]
    elif ds and causal and c2["BLOCK_M"] != c1["BLOCK_N"]:
        raise ValueError("dq_mode='ds' causal needs the dQ GEMM's BLOCK_M to be the dK/dV kernel's BLOCK_N (the dS "
                         f"tiles above the diagonal are not written), got {c1}, {c2}")
    if causal and (c1["BLOCK_N"] % c1["BLOCK_M"] or (c2["BLOCK_M"] % c2["BLOCK_N"] and not tiled)):
        raise ValueError("causal backward needs the dK/dV kernel's BLOCK_N to be a multiple of its BLOCK_M and the "
                         f"dQ kernel's BLOCK_M a multiple of its BLOCK_N (got {c1}, {c2})")
    for c, g in zip((c1, c2), CAUSAL_GROUP.get((D, "ds" if ds else dq_mode), (0, 0))):
        c.setdefault("GROUP", g)
    if dq_mode == "separate" and not ds:
        c1.setdefault("EVEN_M", DKDV_EVEN_M.get(D, False))
        if DKDV_WS.get((D, bool(causal))):  # passed only where set: the other kernels' keys stay as they were
            c1.setdefault("WS", DKDV_WS[(D, bool(causal))])
        if DKDV_ROWS_TMA.get((D, bool(causal))):
            c1.setdefault("ROWS_TMA", True)
        if DKDV_TAIL.get((D, bool(causal))):  # passed only where set, as WS
            c1.setdefault("TAIL", True)
        if DQ_TAIL.get((D, bool(causal))):
            c2.setdefault("TAIL", True)
    if ds and causal and DS_ONE_LOOP.get(D):  # passed only where set (the other kernels' compile keys stay)
        c1.setdefault("ONE_LOOP", True)
    knobs = ds and (not causal or c1.get("ONE_LOOP"))  # causal's producer and ringed rows: for the one loop only
    if knobs and DS_WS.get((D, bool(causal))):
        c1.setdefault("WS", DS_WS[(D, bool(causal))])
    if knobs and DS_ROWS_TMA.get((D, bool(causal))):
        c1.setdefault("ROWS_TMA", True)
    if c1.get("ROWS_TMA"):  # asked for: each head's rows must start 16-byte aligned for their descriptors
        c1["ROWS_TMA"] = N % 4 == 0 and lse.is_contiguous()
    if flat:
        for key, val in FLAT_KNOBS.get(D, {}).items():
            c1.setdefault(key, val)
    if c1.get("EVEN_M"):  # asked for: unmasked LSE/delta loads only where no query step runs past N
        c1["EVEN_M"] = N % c1["BLOCK_M"] == 0
    if ds:
        return _ds_steps(do, q, k, v, o, lse, causal, sm_scale, c1, c2, kernels,
                         _ds_budget(q) if ds_workspace_bytes is None else ds_workspace_bytes)
    delta = torch.empty((Z, H, N), device=q.device, dtype=torch.float32)
    dk, dv = torch.empty_like(k), torch.empty_like(v)
    # atomic: dQ^T in fp32, [Z, H, HEAD_DIM, N] (its third stride is the kernel's dq_stride_m)
    # flat: cdiv(N, BLOCK_M) blocks of D * BLOCK_M fp32 a head (attn_bwd_dkdv_kernel's FLAT_DQ)
    if flat:
        dq = torch.empty((Z, H, triton.cdiv(N, c1["BLOCK_M"]) * D * c1["BLOCK_M"]), device=q.device,
                         dtype=torch.float32)
    else:
        dq = torch.empty((Z, H, D, N), device=q.device, dtype=torch.float32) if atomic else torch.empty_like(q)
    out = {}

    def preprocess():
        attn_bwd_preprocess_kernel[(triton.cdiv(N, PRE_BLOCK), Z * H, 1)](
            o, do, delta, *o.stride(), *do.stride(), H, N, BLOCK_M=PRE_BLOCK, HEAD_DIM=D)

    g1, k1 = _grid(triton.cdiv(N, c1["BLOCK_N"]), Z * H, causal, c1)
    g2, k2 = _grid(triton.cdiv(N, c2["BLOCK_M"]), Z * H, causal, c2)

    def dkdv():
        kernels["dkdv"][g1](q, k, v, do, dk, dv, dq, lse, delta, sm_scale, *q.stride(),
                            *(tuple(dq.stride()[:2]) + (0,) if flat else dq.stride()[:3]), H, N, HEAD_DIM=D,
                            CAUSAL=causal, ATOMIC_DQ=atomic, FLAT_DQ=flat, **k1)

    def dq_pass():
        kernels["dq"][g2](q, k, v, do, dq, lse, delta, sm_scale, *q.stride(), H, N, HEAD_DIM=D, CAUSAL=causal, **k2)

    def cast():
        out["dq"] = dq.transpose(-1, -2).to(q.dtype, memory_format=torch.contiguous_format)

    dq_out = torch.empty_like(q) if flat else None

    def flat_cast():
        attn_bwd_dq_flat_cast_kernel[(triton.cdiv(N, c1["BLOCK_M"]), Z * H, 1)](dq, dq_out, sm_scale, N,
                                                                                BLOCK=c1["BLOCK_M"], HEAD_DIM=D)
        out["dq"] = dq_out

    if atomic:  # the atomics add into dq: zeroed on every run of the steps
        steps = [("preprocess", preprocess), ("dkdv", lambda: (dq.zero_(), dkdv())),
                 ("cast", flat_cast if flat else cast)]
    else:
        steps = [("preprocess", preprocess), ("dkdv", dkdv), ("dq", dq_pass)]
    return (lambda: (out.get("dq", dq), dk, dv)), steps


def _ds_steps(do, q, k, v, o, lse, causal, sm_scale, c1, c2, kernels, workspace_bytes):
    """dq_mode="ds": the dK/dV kernel also writes dS^T into a [heads, N, N] buffer, and dQ = dS K is a GEMM
    (5 matmuls in all, against the separate pass's 7). Heads run in groups whose dS^T fits workspace_bytes (at least
    one head, whatever the bound); each group's kernels see its heads as one batch of G heads (the views below share
    the tensors' memory)."""
    import torch
    Z, H, N, D = q.shape
    ZH = Z * H
    G = max(1, min(ZH, workspace_bytes // (N * N * q.element_size())))
    c1 = dict(dict(STORE_DS=True, PREFETCH_LD=DS_PREFETCH_LD.get(D, False), TAIL=DS_TAIL.get(D),
                   EVEN_M=DS_EVEN_M.get(D, False)), **c1)
    c1["EVEN_M"] = bool(c1["EVEN_M"]) and N % c1["BLOCK_M"] == 0
    delta = torch.empty((Z, H, N), device=q.device, dtype=torch.float32)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    dst = torch.empty((G, N, N), device=q.device, dtype=q.dtype)
    flat = [t.view(ZH, N, D) for t in (q, k, v, do, dq, dk, dv)]
    lse2, delta2 = lse.view(ZH, N), delta.view(ZH, N)

    def preprocess():
        attn_bwd_preprocess_kernel[(triton.cdiv(N, PRE_BLOCK), ZH, 1)](
            o, do, delta, *o.stride(), *do.stride(), H, N, BLOCK_M=PRE_BLOCK, HEAD_DIM=D)

    def dkdv(h0):
        g = min(G, ZH - h0)
        qg, kg, vg, dog, _, dkg, dvg = (t[h0:h0 + g] for t in flat)
        grid, cfg = _grid(triton.cdiv(N, c1["BLOCK_N"]), g, causal, c1)
        kernels["dkdv"][grid](
            qg, kg, vg, dog, dkg, dvg, dst, lse2[h0:h0 + g], delta2[h0:h0 + g], sm_scale, g * N * D, N * D, D, 1,
            0, 0, 0, g, N, HEAD_DIM=D, CAUSAL=causal, ATOMIC_DQ=False, **cfg)

    def dq_gemm(h0):
        g = min(G, ZH - h0)
        grid, cfg = _grid(triton.cdiv(N, c2["BLOCK_M"]), g, causal, c2)
        attn_bwd_dq_from_ds_kernel[grid](
            dst, flat[1][h0:h0 + g], flat[4][h0:h0 + g], sm_scale, g * N * D, N * D, D, 1, g, N, HEAD_DIM=D,
            CAUSAL=causal, **cfg)

    if G >= ZH:  # one group: the two kernels as steps of their own (the bench times each)
        steps = [("preprocess", preprocess), ("dkdv", lambda: dkdv(0)), ("dq", lambda: dq_gemm(0))]
    else:
        steps = [("preprocess", preprocess),
                 ("dkdv_dq", lambda: [(dkdv(h0), dq_gemm(h0)) for h0 in range(0, ZH, G)])]
    return (lambda: (dq, dk, dv)), steps


def _fused_config(N, D, causal, dkdv_config, dq_config):
    """The fused kernel's launch: (dK/dV config, dQ config, its constexprs besides the blocks, launch options)."""
    if D not in FUSED_CONFIGS:
        raise ValueError(f"attention backward: head dim {D} is not supported (expected one of {sorted(FUSED_CONFIGS)})")
    (bm1, bn1), (bm2, bn2), w, st = FUSED_CONFIGS[D]
    c1 = dict(dict(BLOCK_M=bm1, BLOCK_N=bn1, num_warps=w, num_stages=st), **(dkdv_config or {}))
    c2 = dict(dict(BLOCK_M=bm2, BLOCK_N=bn2), **(dq_config or {}))
    if c1["BLOCK_N"] != c2["BLOCK_M"] or (causal and (c1["BLOCK_N"] % c1["BLOCK_M"] or c2["BLOCK_M"] % c2["BLOCK_N"])):
        raise ValueError("dq_mode='fused' needs the dK/dV key block to be the dQ query block (and, causal, each a "
                         f"multiple of its step), got {c1}, {c2}")
    # EVEN_M (dkdv_config's, else FUSED_EVEN_M's): the dK/dV loop's LSE/delta loads unmasked, where N is a multiple of
    # its step
    even = bool(c1.get("EVEN_M", FUSED_EVEN_M.get(D, False))) and N % c1["BLOCK_M"] == 0
    tail = c1.get("TAIL", FUSED_TAIL.get(D))  # both loops' last dot in flight over the back edge (None: the knob)
    kv_regs = c1.get("KV_REGS", FUSED_KV_REGS.get((D, bool(causal)), FUSED_KV_REGS.get(D, 0)))
    maxnreg = c1.get("maxnreg", FUSED_MAXNREG.get((D, bool(causal)), FUSED_MAXNREG.get(D)))
    constexprs = dict(BLOCK_M1=c1["BLOCK_M"], BLOCK_N1=c1["BLOCK_N"], BLOCK_M2=c2["BLOCK_M"], BLOCK_N2=c2["BLOCK_N"],
                      HEAD_DIM=D, CAUSAL=causal, DQ_DESC=c2.get("DESC", FUSED_DQ_DESC.get(D, False)), EVEN_M=even,
                      TAIL=tail, KV_REGS=kv_regs)
    # maxnreg passed only where set: any launch option besides num_warps / num_stages takes the launcher's general path
    opts = dict(num_warps=c1["num_warps"], num_stages=c1["num_stages"], **({} if maxnreg is None else
                                                                           dict(maxnreg=maxnreg)))
    return c1, c2, constexprs, opts


def _fused_steps(do, q, k, v, o, lse, causal, sm_scale, dkdv_config, dq_config, kernel=None):
    """dq_mode="fused": preprocess, then attn_bwd_fused_kernel (``dkdv_config``'s BLOCK_M/BLOCK_N, num_warps,
    num_stages and maxnreg (:data:`FUSED_MAXNREG`) for the grid and its dK/dV loop, ``dq_config``'s BLOCK_M/BLOCK_N for
    its dQ loop; ``kernel``: another compiled copy of it, the bench's A/B of compile knobs)."""
    kernel = kernel or attn_bwd_fused_kernel
    import torch
    Z, H, N, D = q.shape
    c1, c2, constexprs, opts = _fused_config(N, D, causal, dkdv_config, dq_config)
    delta = torch.empty((Z, H, N), device=q.device, dtype=torch.float32)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)

    def preprocess():
        attn_bwd_preprocess_kernel[(triton.cdiv(N, PRE_BLOCK), Z * H, 1)](
            o, do, delta, *o.stride(), *do.stride(), H, N, BLOCK_M=PRE_BLOCK, HEAD_DIM=D)

    def fused():
        kernel[(triton.cdiv(N, c1["BLOCK_N"]), Z * H, 1)](
            q, k, v, do, dk, dv, dq, lse, delta, sm_scale, *q.stride(), H, N, **constexprs, **opts)

    return (lambda: (dq, dk, dv)), [("preprocess", preprocess), ("dkdv_dq", fused)]


# attention_bwd's launch plans where it runs the fused or separate mode with its default configs on contiguous inputs:
# (shapes, strides, dtypes, device, mask, scale, mode) -> _BwdPlan, or False where the call takes the general path.
# The tables (FUSED_CONFIGS, ...) are read when a plan is made: a replaced table makes it again (_plan_deps), one
# changed in place needs clear_plans().
_PLANS = {}
_MAX_PLANS = 256


def clear_plans():
    """Forget the cached launch plans (after changing :data:`FUSED_CONFIGS`, :data:`DEFAULT_DQ_MODES` or the like)."""
    _PLANS.clear()


class _BwdPlan:
    """The backward of one shape at a mode's default configs: its launches prepared (``kernel.prepare``: every
    argument but the tensors bound once) on the plan's first call; no tensor kept. ``launches``: (kernel, grid, the
    call's tensors by name, the arguments after them, keyword arguments and launch options)."""
    __slots__ = ("launches", "delta_shape", "prepared", "deps")

    def __init__(self, launches, delta_shape, deps):
        self.launches, self.delta_shape, self.prepared, self.deps = launches, delta_shape, None, deps

    def run(self, do, q, k, v, o, lse):
        import torch
        delta = torch.empty(self.delta_shape, device=q.device, dtype=torch.float32)
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        ts = dict(q=q, k=k, v=v, o=o, do=do, lse=lse, delta=delta, dq=dq, dk=dk, dv=dv)
        prepared = self.prepared
        if prepared is None:
            prepared = self.prepared = [(_prepare(kernel, grid, [ts[n] for n in names], rest, kw), names)
                                        for kernel, grid, names, rest, kw in self.launches]
        for launch, names in prepared:
            launch(*[ts[n] for n in names])
        return dq, dk, dv


def _prepare(kernel, grid, tensors, rest, kw):
    """``kernel.prepare``'s launch, or for an object without it (a wrapper that only takes ``kernel[grid]``, as
    tests' spies do) a plain launch of all the arguments."""
    if hasattr(kernel, "prepare"):
        return kernel.prepare(grid, *tensors, *rest, **kw)
    return lambda *ts: kernel[grid](*ts, *rest, **kw)


def _fused_launches(q, causal, sm_scale):
    Z, H, N, D = q.shape
    c1, _, constexprs, opts = _fused_config(N, D, causal, None, None)
    st = q.stride()
    return [(attn_bwd_fused_kernel, (triton.cdiv(N, c1["BLOCK_N"]), Z * H, 1),
             ("q", "k", "v", "do", "dk", "dv", "dq", "lse", "delta"), (sm_scale, *st, H, N), dict(constexprs, **opts))]


def _separate_launches(q, causal, sm_scale):
    """The separate pass's dK/dV and dQ launches at the default configs (attention_bwd_steps' choices for
    dq_mode="separate" without configs: the mask's configs, GROUP from CAUSAL_GROUP, EVEN_M from DKDV_EVEN_M where N
    allows it, WS from DKDV_WS, ROWS_TMA from DKDV_ROWS_TMA where N % 4 == 0, TAIL from DKDV_TAIL / DQ_TAIL)."""
    Z, H, N, D = q.shape
    c1 = _cfg(_mask_table(DKDV_CONFIGS, DKDV_MASK_CONFIGS, causal), D, None)
    c2 = _cfg(_mask_table(DQ_CONFIGS, DQ_MASK_CONFIGS, causal), D, None)
    if causal and (c1["BLOCK_N"] % c1["BLOCK_M"] or c2["BLOCK_M"] % c2["BLOCK_N"]):
        return None  # attention_bwd_steps raises; the general path says so
    for c, g in zip((c1, c2), CAUSAL_GROUP.get((D, "separate"), (0, 0))):
        c.setdefault("GROUP", g)
    c1.setdefault("EVEN_M", DKDV_EVEN_M.get(D, False))
    if DKDV_WS.get((D, bool(causal))):
        c1.setdefault("WS", DKDV_WS[(D, bool(causal))])
    if DKDV_ROWS_TMA.get((D, bool(causal))) and N % 4 == 0:  # the plan's LSE is contiguous
        c1.setdefault("ROWS_TMA", True)
    if DKDV_TAIL.get((D, bool(causal))):
        c1.setdefault("TAIL", True)
    if DQ_TAIL.get((D, bool(causal))):
        c2.setdefault("TAIL", True)
    if c1.get("EVEN_M"):
        c1["EVEN_M"] = N % c1["BLOCK_M"] == 0
    g1, k1 = _grid(triton.cdiv(N, c1["BLOCK_N"]), Z * H, causal, c1)
    g2, k2 = _grid(triton.cdiv(N, c2["BLOCK_M"]), Z * H, causal, c2)
    st = q.stride()
    return [(attn_bwd_dkdv_kernel, g1, ("q", "k", "v", "do", "dk", "dv", "dq", "lse", "delta"),
             (sm_scale, *st, *st[:3], H, N), dict(k1, HEAD_DIM=D, CAUSAL=causal, ATOMIC_DQ=False)),
            (attn_bwd_dq_kernel, g2, ("q", "k", "v", "do", "dq", "lse", "delta"), (sm_scale, *st, H, N),
             dict(k2, HEAD_DIM=D, CAUSAL=causal))]


# mode -> its launches after the preprocess kernel, for a plan
_PLAN_MODES = {"fused": _fused_launches, "separate": _separate_launches}


def _plan_deps():
    """The tables and kernels a plan was made from: a plan whose are not these any more (a table or kernel replaced,
    as tests and benches do) is made again. A table changed in place needs clear_plans()."""
    return (FUSED_CONFIGS, FUSED_EVEN_M, FUSED_TAIL, FUSED_KV_REGS, FUSED_MAXNREG, FUSED_DQ_DESC, DKDV_CONFIGS,
            DQ_CONFIGS, DKDV_MASK_CONFIGS, DQ_MASK_CONFIGS, CAUSAL_GROUP, DKDV_EVEN_M, DKDV_WS, DKDV_ROWS_TMA,
            DKDV_TAIL, DQ_TAIL,
            PRE_BLOCK, attn_bwd_fused_kernel, attn_bwd_dkdv_kernel, attn_bwd_dq_kernel, attn_bwd_preprocess_kernel)


def _plan(do, q, k, v, o, lse, causal, sm_scale, dq_mode):
    """The launch plan of this call (None: the general path: a mode without plans, non-contiguous or mismatched
    inputs). The mode is resolved first (DEFAULT_DQ_MODES is read on every call); the plan holds the rest of the
    tables' choices."""
    shape = q.shape
    mode = dq_mode if dq_mode is not None or len(shape) != 4 else default_dq_mode(shape[-1], bool(causal), shape[-2])
    if mode not in _PLAN_MODES:
        return None
    key = (shape, q.stride(), k.shape, k.stride(), v.shape, v.stride(), o.shape, o.stride(), do.shape, do.stride(),
           lse.shape, lse.stride(), q.dtype, k.dtype, v.dtype, o.dtype, do.dtype, lse.dtype, q.device, causal, sm_scale,
           mode)
    plan = _PLANS.get(key)
    deps = _plan_deps()
    if plan is None or (plan and plan.deps != deps):
        import torch
        plan = False
        if len(shape) == 4:
            Z, H, N, D = shape
            contiguous = (H * N * D, N * D, D, 1)
            same = all(t.shape == shape and t.stride() == contiguous and t.dtype == q.dtype for t in (k, v, o, do))
            if D in FUSED_CONFIGS and D in DKDV_CONFIGS and D in DQ_CONFIGS and q.stride() == contiguous and same \
                    and q.dtype in (torch.float16, torch.bfloat16) and tuple(lse.shape) == (Z, H, N) \
                    and lse.stride() == (H * N, N, 1) and lse.dtype == torch.float32:
                launches = _PLAN_MODES[mode](q, causal, sm_scale)
                if launches is not None:
                    pre = (attn_bwd_preprocess_kernel, (triton.cdiv(N, PRE_BLOCK), Z * H, 1), ("o", "do", "delta"),
                           (*contiguous, *contiguous, H, N), dict(BLOCK_M=PRE_BLOCK, HEAD_DIM=D))
                    plan = _BwdPlan([pre] + launches, (Z, H, N), deps)
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        _PLANS[key] = plan
    return plan or None



@contextlib.contextmanager
def tables(**entries):
    """A with-block with these entries merged into the module's tables by name
    (``tables(DKDV_WS={(64, True): 1})``: a candidate), each table a new dict (the launch plans see new
    tables and are made again); the tables as they were afterwards."""
    g = globals()
    for name in entries:
        if not isinstance(g.get(name), dict) or not name.isupper():
            raise ValueError(f"attention backward: no table named {name!r}")
    old = {name: g[name] for name in entries}
    try:
        for name, add in entries.items():
            g[name] = {**old[name], **add}
        yield
    finally:
        g.update(old)


def _autograd_function():
    import torch

    class AttentionFunction(torch.autograd.Function):
        """softmax(q k^T * sm_scale) v with the fused backward above."""

        @staticmethod
        def forward(ctx, q, k, v, causal, sm_scale, dq_mode, fwd_config):
            q, k, v = (t.contiguous() for t in (q, k, v))
            o, lse = attention_fwd(q, k, v, causal, sm_scale, return_lse=True, **(fwd_config or {}))
            ctx.save_for_backward(q, k, v, o, lse)
            ctx.causal, ctx.sm_scale, ctx.dq_mode = causal, sm_scale, dq_mode
            return o

        @staticmethod
        def backward(ctx, do):
            q, k, v, o, lse = ctx.saved_tensors
            dq, dk, dv = attention_bwd(do, q, k, v, o, lse, ctx.causal, ctx.sm_scale, ctx.dq_mode)
            return dq, dk, dv, None, None, None, None

    return AttentionFunction


_FUNCTION = None


def __getattr__(name):
    # torch is imported only when the Function is first asked for (the kernels above compile without it)
    global _FUNCTION
    if name == "AttentionFunction":
        if _FUNCTION is None:
            _FUNCTION = _autograd_function()
        return _FUNCTION
    raise AttributeError(name)


def attention(q, k, v, causal=False, sm_scale=None, dq_mode=None, fwd_config=None):
    """Differentiable fused attention on fp16/bf16 ``[Z, H, N_CTX, HEAD_DIM]`` tensors (HEAD_DIM 16..128
    for the backward): ``loss.backward()`` runs the kernels above."""
    sm_scale = sm_scale if sm_scale is not None else q.shape[-1] ** -0.5
    return __getattr__("AttentionFunction").apply(q, k, v, causal, sm_scale, dq_mode, fwd_config)
