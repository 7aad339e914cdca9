"""An attention backward in one kernel, shaped as Triton's tutorial 06 ``_attn_bwd`` (our own text): each
program computes dK, dV of one key block (a masked loop over the diagonal's query blocks when causal,
then an unmasked one) and then dQ of one query block (the same two loops over key blocks). Four
pipelined loops that run one after the other: what ``assign_smem_offsets`` (passes/smem_offsets.py)
lets share shared memory.

Conventions (as the tutorial's): ``K`` comes pre-scaled by ``sm_scale * log2(e)``, ``LSE`` is the
base-2 log-sum-exp of the rows of ``Q K^T`` in that scale, ``Delta`` is ``rowsum(O * dO)``; the
kernel writes ``dQ * ln 2`` (undoing the scale of ``K``) and ``dK * sm_scale``.
"""
import kernelc
import kernelc.language as kl

LN2 = 0.6931471824645996


@kernelc.jit
def _key_block_pass(dk, dv, k, v, Q, DO, LSE, Delta, stride_tok, n_lo, m_lo, steps,
                    BM: kl.constexpr, BN: kl.constexpr, D: kl.constexpr, DIAG: kl.constexpr):
    # dK, dV of keys [n_lo, n_lo + BN) over `steps` query blocks of BM from m_lo; P^T and dS^T are [BN, BM]
    keys = n_lo + kl.arange(0, BN)
    cols = kl.arange(0, D)
    q_t_at = Q + cols[:, None] + (m_lo + kl.arange(0, BM))[None, :] * stride_tok      # [D, BM]
    g_at = DO + (m_lo + kl.arange(0, BM))[:, None] * stride_tok + cols[None, :]       # [BM, D]
    m = m_lo
    for _ in range(steps):
        queries = m + kl.arange(0, BM)
        q_t = kl.load(q_t_at)
        lse = kl.load(LSE + queries)
        p_t = kl.math.exp2(kl.dot(k, q_t) - lse[None, :])
        if DIAG:
            p_t = kl.where(queries[None, :] >= keys[:, None], p_t, 0.0)
        g = kl.load(g_at)
        dv += kl.dot(p_t.to(kl.float16), g)
        delta = kl.load(Delta + queries)
        dp_t = kl.dot(v, kl.trans(g))
        ds_t = (p_t * (dp_t - delta[None, :])).to(kl.float16)
        dk += kl.dot(ds_t, kl.trans(q_t))
        m += BM
        q_t_at += BM * stride_tok
        g_at += BM * stride_tok
    return dk, dv


@kernelc.jit
def _query_block_pass(dq, q, g, lse, K, V, Delta, stride_tok, m_lo, n_lo, steps,
                      BM: kl.constexpr, BN: kl.constexpr, D: kl.constexpr, DIAG: kl.constexpr):
    # dQ of queries [m_lo, m_lo + BM) over `steps` key blocks of BN from n_lo; P and dS are [BM, BN]
    queries = m_lo + kl.arange(0, BM)
    cols = kl.arange(0, D)
    delta = kl.load(Delta + queries)
    k_t_at = K + cols[:, None] + (n_lo + kl.arange(0, BN))[None, :] * stride_tok      # [D, BN]
    v_t_at = V + cols[:, None] + (n_lo + kl.arange(0, BN))[None, :] * stride_tok
    n = n_lo
    for _ in range(steps):
        k_t = kl.load(k_t_at)
        v_t = kl.load(v_t_at)
        p = kl.math.exp2(kl.dot(q, k_t) - lse)
        if DIAG:
            keys = n + kl.arange(0, BN)
            p = kl.where(queries[:, None] >= keys[None, :], p, 0.0)
        dp = kl.dot(g, v_t)
        ds = (p * (dp - delta[:, None])).to(kl.float16)
        dq += kl.dot(ds, kl.trans(k_t))
        n += BN
        k_t_at += BN * stride_tok
        v_t_at += BN * stride_tok
    return dq


@kernelc.jit
def fused_attn_bwd(Q, K, V, DO, DQ, DK, DV, LSE, Delta, sm_scale, stride_bh, stride_tok, N_CTX,
                   BM1: kl.constexpr, BN1: kl.constexpr, BM2: kl.constexpr, BN2: kl.constexpr,
                   SLICE: kl.constexpr, D: kl.constexpr, CAUSAL: kl.constexpr):
    pid = kl.program_id(0)
    bh = kl.program_id(1)
    base = bh.to(kl.int64) * stride_bh
    rows = (bh * N_CTX).to(kl.int64)
    Q += base
    K += base
    V += base
    DO += base
    DQ += base
    DK += base
    DV += base
    LSE += rows
    Delta += rows
    cols = kl.arange(0, D)

    # dK, dV of key block pid
    n0 = pid * BN1
    keys = n0 + kl.arange(0, BN1)
    k = kl.load(K + keys[:, None] * stride_tok + cols[None, :])
    v = kl.load(V + keys[:, None] * stride_tok + cols[None, :])
    dk = kl.zeros([BN1, D], dtype=kl.float32)
    dv = kl.zeros([BN1, D], dtype=kl.float32)
    m0 = 0
    if CAUSAL:
        m0 = n0
        dk, dv = _key_block_pass(dk, dv, k, v, Q, DO, LSE, Delta, stride_tok, n0, m0, SLICE * BN1 // BM1,
                                 BM1 // SLICE, BN1, D, True)
        m0 += BN1
    dk, dv = _key_block_pass(dk, dv, k, v, Q, DO, LSE, Delta, stride_tok, n0, m0, (N_CTX - m0) // BM1,
                             BM1, BN1, D, False)
    kl.store(DV + keys[:, None] * stride_tok + cols[None, :], dv.to(kl.float16))
    kl.store(DK + keys[:, None] * stride_tok + cols[None, :], (dk * sm_scale).to(kl.float16))

    # dQ of query block pid
    mq = pid * BM2
    queries = mq + kl.arange(0, BM2)
    q = kl.load(Q + queries[:, None] * stride_tok + cols[None, :])
    g = kl.load(DO + queries[:, None] * stride_tok + cols[None, :])
    lse = kl.load(LSE + queries)[:, None]
    dq = kl.zeros([BM2, D], dtype=kl.float32)
    end = N_CTX
    if CAUSAL:
        end = mq + BM2
        steps = SLICE * BM2 // BN2
        end -= steps * (BN2 // SLICE)
        dq = _query_block_pass(dq, q, g, lse, K, V, Delta, stride_tok, mq, end, steps, BM2, BN2 // SLICE, D, True)
    steps = end // BN2
    dq = _query_block_pass(dq, q, g, lse, K, V, Delta, stride_tok, mq, end - steps * BN2, steps, BM2, BN2, D, False)
    kl.store(DQ + queries[:, None] * stride_tok + cols[None, :], (dq * LN2).to(kl.float16))


SIG = {"Q": "*fp16", "K": "*fp16", "V": "*fp16", "DO": "*fp16", "DQ": "*fp16", "DK": "*fp16", "DV": "*fp16",
       "LSE": "*fp32", "Delta": "*fp32", "sm_scale": "fp32", "stride_bh": "i32", "stride_tok": "i32", "N_CTX": "i32"}
# tutorial 06's backward configuration: 4 warps, 5 stages
CONFIG = dict(BM1=32, BN1=128, BM2=128, BN2=32, SLICE=2)


def reference(q, k, v, do, causal, sm_scale):
    """(dq, dk, dv) of softmax(q k^T * sm_scale) v by torch autograd in fp32."""
    import torch
    q, k, v = (t.detach().float().requires_grad_() for t in (q, k, v))
    s = q @ k.transpose(-1, -2) * sm_scale
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    o = torch.softmax(s, -1) @ v
    o.backward(do.float())
    return q.grad, k.grad, v.grad


def prepare(q, k, v, do, causal, sm_scale):
    """The kernel's arguments for q, k, v, do of shape [B, H, N, D] (fp16, contiguous): the base-2 LSE and
    Delta by torch, K pre-scaled, dQ/dK/dV allocated; ``launch`` runs it."""
    import math
    import torch
    B, H, N, D = q.shape
    c = sm_scale / math.log(2)
    s = (q.float() @ k.float().transpose(-1, -2)) * c
    if causal:
        s = s.masked_fill(torch.ones(N, N, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    lse = (torch.logsumexp(s * math.log(2), -1) / math.log(2)).contiguous()
    o = (torch.exp2(s - lse[..., None]) @ v.float()).to(torch.float16)
    del s
    delta = (o.float() * do.float()).sum(-1).contiguous()
    ks = (k * c).to(torch.float16)
    dq, dk, dv = (torch.empty_like(q) for _ in range(3))
    return dict(q=q, ks=ks, v=v, do=do, dq=dq, dk=dk, dv=dv, lse=lse, delta=delta, causal=causal,
                sm_scale=sm_scale)


def launch(a, num_warps=4, num_stages=5):
    """One launch on ``prepare``'s arguments; returns the compiled kernel (results in a['dq'], a['dk'], a['dv'])."""
    q = a["q"]
    B, H, N, D = q.shape
    grid = (N // CONFIG["BN1"], B * H)
    return fused_attn_bwd[grid](q, a["ks"], a["v"], a["do"], a["dq"], a["dk"], a["dv"], a["lse"], a["delta"],
                                a["sm_scale"], q.stride(1), q.stride(2), N, D=D, CAUSAL=a["causal"],
                                num_warps=num_warps, num_stages=num_stages, **CONFIG)


def run(q, k, v, do, causal, sm_scale, num_warps=4, num_stages=5):
    """The kernel's (dq, dk, dv) for q, k, v, do of shape [B, H, N, D] (fp16, contiguous)."""
    a = prepare(q, k, v, do, causal, sm_scale)
    launch(a, num_warps, num_stages)
    return a["dq"], a["dk"], a["dv"]
