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
from examples.kernels.attention import fp8_key_order, l2_lpt, lpt_grid, row_block_and_head

TensorDescriptor = importlib.import_module(triton.__name__ + ".tools.tensor_descriptor").TensorDescriptor


@triton.jit
def _v_block(desc_v, row, off_hz, N_CTX, HEAD_DIM: tl.constexpr, FP8: tl.constexpr):
    """The ``[BLOCK_N, HEAD_DIM]`` V block from row ``row`` of ``[Z * H * N_CTX, HEAD_DIM]``; fp8 reads it
    from V^T, ``[Z * H * HEAD_DIM, N_CTX]``."""
    if FP8:
        return desc_v.load([off_hz * HEAD_DIM, row - off_hz * N_CTX]).T
    return desc_v.load([row, 0])


@triton.jit
def attn_fwd_fa3_kernel(sm_scale, desc_q, desc_k, desc_v, desc_o, N_CTX, QScale, KScale, VScale,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr,
                        FP8: tl.constexpr, EARLY_V: tl.constexpr = True, KEY_ORDER: tl.constexpr = False,
                        LPT: tl.constexpr = 1):
    # FP8: q, k are e4m3 and desc_v is V^T ([Z * H * HEAD_DIM, N_CTX], keys contiguous: fp8 wgmma reads its B
    # operand K-major only); QScale, KScale, VScale point at the per-tensor scales of q, k, v (fp32)
    # EARLY_V: load the last V block before the loop (a program that has the SM to itself: 8 consumer warps);
    # with 4 warps several programs share an SM, hide each other's copies, and the extra block would cost one
    # of them (fp16 head dim 64, 64x64 blocks: 3 programs an SM instead of 4)
    # KEY_ORDER (fp8): V^T's keys are in attention.fp8_key_order's order, and P is carried in it (its registers
    # renamed into the fp8 wgmma A fragments': no shuffle between lanes)
    # causal: the heaviest row blocks launch first (LPT 1: a head's; G > 1: across groups of G heads,
    # attention.row_block_and_head), the light ones fill the tail of the grid
    start_m, off_hz = row_block_and_head(LPT)
    offset_y = off_hz * N_CTX
    qo_offset_y = offset_y + start_m * BLOCK_M
    qk_scale = sm_scale * 1.44269504
    if FP8:
        qk_scale = qk_scale * tl.load(QScale) * tl.load(KScale)
    # the first block: the diagonal (masked) when causal, else block 0; the loop runs over [lo, hi)
    first = start_m * BLOCK_M if CAUSAL else 0
    lo = 0 if CAUSAL else BLOCK_N
    hi = start_m * BLOCK_M if CAUSAL else N_CTX
    q = desc_q.load([qo_offset_y, 0])
    k_first = desc_k.load([offset_y + first, 0])
    if EARLY_V:
        # the V block of the last P V, loaded up front: its copy runs under the work before that P V (the
        # compiler issues a TMA load outside loops where its offsets are known and waits at its first read);
        # it holds one more block of shared memory through the loop
        v_last = _v_block(desc_v, offset_y + tl.where(hi > lo, hi - BLOCK_N, first), off_hz, N_CTX, HEAD_DIM, FP8)
    dtype = q.dtype
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk = tl.dot(q, k_first.T) * qk_scale
    if CAUSAL:
        offs_m = tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        qk = qk + tl.where(offs_m[:, None] >= offs_n[None, :], 0.0, -1.0e6)
    m_i = tl.max(qk, 1)
    p32 = tl.math.exp2(qk - m_i[:, None])
    l_i = tl.sum(p32, 1)
    p = p32.to(dtype)  # fp8: P lies in [0, 1] and is rounded to e4m3 for P V
    if KEY_ORDER:
        p = fp8_key_order(p, BLOCK_M, BLOCK_N)
    v_prev = offset_y + first  # the row of the V block P belongs to
    for start_n in range(lo, hi, BLOCK_N):  # unmasked blocks
        qk = tl.dot(q, desc_k.load([offset_y + start_n, 0]).T)
        acc = tl.dot(p, _v_block(desc_v, v_prev, off_hz, N_CTX, HEAD_DIM, FP8), acc)  # the previous block's P V
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p32 = tl.math.exp2(qk * qk_scale - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p32, 1)
        acc = acc * alpha[:, None]
        m_i = m_ij
        p = p32.to(dtype)
        if KEY_ORDER:
            p = fp8_key_order(p, BLOCK_M, BLOCK_N)
        v_prev = offset_y + start_n
    if not EARLY_V:
        v_last = _v_block(desc_v, v_prev, off_hz, N_CTX, HEAD_DIM, FP8)
    acc = tl.dot(p, v_last, acc)
    if FP8:
        acc = acc * tl.load(VScale)
    acc = acc / l_i[:, None]
    desc_o.store([qo_offset_y, 0], acc.to(desc_o.dtype))


def _scale_arg(s, device):
    """A scale as the kernel reads it: a 1-element fp32 tensor on ``device`` (``s`` itself when it is one; passed as
    three pointers, not one buffer of three, which would cost the host a torch.cat every call)."""
    import torch
    if isinstance(s, torch.Tensor) and s.dtype == torch.float32 and s.numel() == 1 and s.device == device:
        return s
    return torch.as_tensor(s, dtype=torch.float32, device=device).reshape(1)


def _check_blocks(name, N, causal, BLOCK_M, BLOCK_N):
    if N % BLOCK_M or N % BLOCK_N or (causal and BLOCK_M != BLOCK_N):
        raise ValueError(f"{name}: N_CTX ({N}) must be a multiple of BLOCK_M ({BLOCK_M}) and BLOCK_N "
                         f"({BLOCK_N}), and causal needs BLOCK_M == BLOCK_N (the diagonal is one block)")


# launch configs, (BLOCK_M, BLOCK_N, num_warps, num_stages), by (head dim, causal); others take DEFAULT_CONFIG
# (128-row programs: two consumer warpgroups and a producer warp, one program an SM)
DEFAULT_CONFIG = (128, 128, 8, 2)
# fp16 / bf16 head dim 64 causal: 64x64 blocks at 4 warps (one warpgroup, no producer warp, several programs an SM),
# 413.9 TFLOP/s against 402.5 for 128x128 at 8 warps at N 4096 (H200 call R1, docs/attention.md "The forward at N 4096")
CONFIGS = {(64, True): (64, 64, 4, 2)}
# fp8, H200 2026-11-27 (one run, docs/attention.md "fp8 and head dim 64"): at D=128 causal 4 stages 600 TFLOP/s
# against 520 with 2 (3: 585); at D=64 non-causal 64-row programs of 128 keys, 3 an SM, 458 against 412;
# D=128 non-causal 4 stages: H100 2026-11-28 (call H10, two readings in one process) 748.0 / 714.6 against
# 711.6 / 684.9 with 2 (the H200 run of 2026-11-27 saw no gain: 684.9 against 688.4)
FP8_CONFIGS = {(128, True): (128, 128, 8, 4), (128, False): (128, 128, 8, 4), (64, False): (64, 128, 4, 2)}


# fp16 / bf16 (head dim, causal) whose last V block is loaded after the loop (EARLY_V off) although the config has 8
# warps: D=128 non-causal 654.9 TFLOP/s against 636.2 (GPU time; per call 620.7 against 598.2, cuDNN 660.0 / 625.7)
# at N 4096, one H200 process (call R2a, docs/attention.md "fp8 P without its shuffle"); not causal, where it
# measured -1.8% at N 16384
LATE_V = {(128, False)}

# causal row blocks heaviest first across groups of G heads (the kernel's LPT, attention.row_block_and_head), or "l2"
# (groups of attention.lpt_heads), by (head dim, fp8); others 1 (a head's row blocks heaviest first). At N 4096
# ("l2": 8 heads at fp16 D=128, 16 at D=64 and fp8 D=128): fp16 D=128 591.9 TFLOP/s in groups of 8 against 579.7,
# D=64 416.2 in groups of 16 against 406.8, fp8 D=128 762.3 against 746.3 (H200 call R2; R1b alike; docs/attention.md
# "Causal forwards: heaviest first across heads"); at N 16384 "l2" keeps a head's heaviest first (LPT_MAX_ROW_BLOCKS)
LPT = {(128, False): "l2", (64, False): "l2", (128, True): "l2"}


def config(D, causal, fp8=False, BLOCK_M=None, BLOCK_N=None, num_warps=None, num_stages=None):
    """The launch config for head dim ``D``, with any of the four given overriding the table's."""
    bm, bn, w, s = (FP8_CONFIGS if fp8 else CONFIGS).get((D, bool(causal)), DEFAULT_CONFIG)
    return (BLOCK_M or bm, BLOCK_N or bn, num_warps or w, num_stages or s)


# Launch plans (as in attention.py): per (shapes, strides, dtypes, options) the config, the grid, the four descriptors'
# shapes, strides and blocks (validated once; a call only puts its tensors in copies of them) and the bound launcher.
# A call with the GPU idle behind it (the bench's per-call timing) waits for all of its host work.
_PLANS = {}
_MAX_PLANS = 256


def clear_plans():
    """Forget the cached launch plans (after changing :data:`CONFIGS` or :data:`FP8_CONFIGS`)."""
    _PLANS.clear()


def _rebased(template, base):
    """``template`` describing ``base`` instead: the same dtype, shape, strides and block (the plan's key says so),
    so nothing to validate again (a TensorDescriptor's checks cost ~2 us of a call's host time)."""
    d = object.__new__(TensorDescriptor)
    d.__dict__.update(template.__dict__)
    d.base = base
    return d


class _Plan:
    __slots__ = ("kernel", "grid", "descs", "sm_scale", "N", "tail", "opts", "out_shape", "out_dtype", "run")


def _make_plan(key, kernel, q, k, v, vt, causal, sm_scale, BLOCK_M, BLOCK_N, num_warps, num_stages, early_v,
               out_dtype, key_order=False, lpt=None):
    Z, H, N, D = q.shape
    y = Z * H * N
    plan = _Plan()
    plan.descs = (TensorDescriptor(q, [y, D], [D, 1], [BLOCK_M, D]), TensorDescriptor(k, [y, D], [D, 1], [BLOCK_N, D]),
                  TensorDescriptor(v, [Z * H * D, N], [N, 1], [D, BLOCK_N]) if vt else
                  TensorDescriptor(v, [y, D], [D, 1], [BLOCK_N, D]),
                  TensorDescriptor(q.new_empty((0,), dtype=out_dtype), [y, D], [D, 1], [BLOCK_M, D]))
    for d in plan.descs:  # the templates keep no tensor alive
        d.base = None
    lpt = (LPT.get((D, bool(vt)), 1) if lpt is None else lpt) if causal else 0
    lpt, grid = lpt_grid(l2_lpt(N, D, q.element_size(), N // BLOCK_M, 1) if lpt == "l2" else lpt, N // BLOCK_M, Z * H)
    plan.kernel, plan.grid, plan.run = kernel or attn_fwd_fa3_kernel, grid, None
    plan.sm_scale, plan.N = sm_scale, N
    plan.tail = (BLOCK_M, BLOCK_N, D, bool(causal), bool(vt), num_warps >= 8 if early_v is None else bool(early_v),
                 bool(key_order), lpt)
    plan.opts = dict(num_warps=num_warps, num_stages=num_stages)
    plan.out_shape, plan.out_dtype = (Z, H, N, D), out_dtype
    if len(_PLANS) >= _MAX_PLANS:
        _PLANS.clear()
    _PLANS[key] = plan
    return plan


def _launch(plan, q, k, v, o, scales):
    dq, dk, dv, do = plan.descs
    descs = (_rebased(dq, q), _rebased(dk, k), _rebased(dv, v), _rebased(do, o))
    run = plan.run
    if run is None:  # a prepared launch (kernel.prepare): the scalars and constexprs bound once, made on the first call
        if hasattr(plan.kernel, "prepare"):
            run = plan.kernel.prepare(plan.grid, plan.sm_scale, *descs, plan.N, *scales, *plan.tail, **plan.opts)
        else:  # a kernel object without prepared launches (``kernel=``: any object launched as kernel[grid](...))
            kernel, grid, sm_scale, n, tail, opts = plan.kernel, plan.grid, plan.sm_scale, plan.N, plan.tail, plan.opts
            run = lambda *xs: kernel[grid](sm_scale, *xs[:4], n, *xs[4:], *tail, **opts)  # noqa: E731
        plan.run = run
    run(*descs, *scales)
    return o


def attention(q, k, v, causal=False, sm_scale=None, BLOCK_M=None, BLOCK_N=None, num_warps=None, num_stages=None,
              kernel=None, early_v=None, lpt=None):
    """softmax(q k^T * sm_scale) v for fp16/bf16 ``[Z, H, N_CTX, HEAD_DIM]`` tensors (contiguous; N_CTX a
    multiple of BLOCK_M; BLOCK_M == BLOCK_N when causal: the diagonal is one block). The launch config not
    given comes from :func:`config`. ``kernel``: another ``kernelc.jit`` of :func:`attn_fwd_fa3_kernel` (its own
    compiled variants, e.g. under other compile knobs). ``early_v``: load the last V block before the loop
    (default: with 8 warps, see the kernel's EARLY_V, but not where :data:`LATE_V` says). ``lpt`` (causal): the
    order of the row blocks, the kernel's LPT (an int, or "l2": attention.lpt_heads; default :data:`LPT`, else 1: a
    head's heaviest first)."""
    import torch
    key = (q.shape, k.shape, v.shape, q.stride(), k.stride(), v.stride(), q.dtype, k.dtype, v.dtype, q.device,
           causal, sm_scale, BLOCK_M, BLOCK_N, num_warps, num_stages, kernel, early_v, lpt)
    plan = _PLANS.get(key)
    if plan is None:
        Z, H, N, D = q.shape
        BLOCK_M, BLOCK_N, num_warps, num_stages = config(D, causal, False, BLOCK_M, BLOCK_N, num_warps, num_stages)
        if q.dtype not in (torch.float16, torch.bfloat16) or k.dtype != q.dtype or v.dtype != q.dtype:
            raise TypeError(f"attention_fa3 expects q, k, v in float16 or bfloat16, got {q.dtype}, {k.dtype}, "
                            f"{v.dtype}")
        if not all(t.is_contiguous() for t in (q, k, v)):
            raise ValueError("attention_fa3 expects contiguous q, k, v")
        _check_blocks("attention_fa3", N, causal, BLOCK_M, BLOCK_N)
        if early_v is None and (D, bool(causal)) in LATE_V:
            early_v = False
        plan = _make_plan(key, kernel, q, k, v, False, causal, sm_scale if sm_scale is not None else D ** -0.5,
                          BLOCK_M, BLOCK_N, num_warps, num_stages, early_v, q.dtype, lpt=lpt)
    o = torch.empty(plan.out_shape, device=q.device, dtype=plan.out_dtype)
    return _launch(plan, q, k, v, o, (o, o, o))


def attention_fp8(q8, k8, v8t, q_scale, k_scale, v_scale, causal=False, sm_scale=None, out_dtype=None, BLOCK_M=None,
                  BLOCK_N=None, num_warps=None, num_stages=None, kernel=None, early_v=None, key_order=False,
                  lpt=None):
    """fp8 (e4m3) attention in FlashAttention-3's order: ``softmax(q k^T * sm_scale) v`` with ``q = q8 * q_scale``
    etc. (``attention.quantize_fp8``). ``q8``, ``k8``: ``[Z, H, N_CTX, HEAD_DIM]``; ``v8t``: V transposed,
    ``[Z, H, HEAD_DIM, N_CTX]`` (fp8 wgmma reads its B operand K-major only); all contiguous e4m3. Both dots
    run on fp8 wgmma, P is rounded to e4m3, the output is ``out_dtype`` (default float16); the launch config not
    given comes from :func:`config`. The scales are 1-element fp32 tensors (anything else is converted to one on
    every call). ``key_order``: ``v8t``'s keys are in ``attention.fp8_key_order``'s order
    (``attention.fp8_v_key_order``; N_CTX and BLOCK_N multiples of 32): P is carried in that order, no shuffle of P
    between lanes. ``lpt`` as in :func:`attention`."""
    import torch
    dev = q8.device
    key = ("fp8", q8.shape, k8.shape, v8t.shape, q8.stride(), k8.stride(), v8t.stride(), q8.dtype, k8.dtype,
           v8t.dtype, dev, causal, sm_scale, out_dtype, BLOCK_M, BLOCK_N, num_warps, num_stages, kernel, early_v,
           key_order, lpt)
    plan = _PLANS.get(key)
    if plan is None:
        Z, H, N, D = q8.shape
        BLOCK_M, BLOCK_N, num_warps, num_stages = config(D, causal, True, BLOCK_M, BLOCK_N, num_warps, num_stages)
        for name, t in (("q8", q8), ("k8", k8), ("v8t", v8t)):
            if t.dtype != torch.float8_e4m3fn:
                raise TypeError(f"attention_fa3.attention_fp8: {name} must be torch.float8_e4m3fn, got {t.dtype}")
            if not t.is_contiguous():
                raise ValueError(f"attention_fa3.attention_fp8: {name} must be contiguous")
        if tuple(v8t.shape) != (Z, H, D, N):
            raise ValueError(f"attention_fa3.attention_fp8: v8t must be V transposed, shape {(Z, H, D, N)}, "
                             f"got {tuple(v8t.shape)}")
        _check_blocks("attention_fa3.attention_fp8", N, causal, BLOCK_M, BLOCK_N)
        if key_order and BLOCK_N % 32:
            raise ValueError(f"attention_fa3.attention_fp8: key_order needs BLOCK_N ({BLOCK_N}) a multiple of 32")
        plan = _make_plan(key, kernel, q8, k8, v8t, True, causal, sm_scale if sm_scale is not None else D ** -0.5,
                          BLOCK_M, BLOCK_N, num_warps, num_stages, early_v, out_dtype or torch.float16, key_order,
                          lpt)
    o = torch.empty(plan.out_shape, device=dev, dtype=plan.out_dtype)
    return _launch(plan, q8, k8, v8t, o, (_scale_arg(q_scale, dev), _scale_arg(k_scale, dev), _scale_arg(v_scale, dev)))
