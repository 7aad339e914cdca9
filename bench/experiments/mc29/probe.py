"""mc29's probes (issue 27): where the fp8 forward's time goes at N 16384, D=128, non-causal, in one process.

R1 (the L2 -> SM ceiling): K and V^T of every head streamed by the default's grid (256 x 128 programs) through plain
loads (``ldg_*``: int32 words xor-folded into registers, nothing but the bytes) and through the default's TMA ring with
the forward's two dots but no softmax (``dots_*``: S = Q K^T, P = S in e4m3, O += P V), 64- and 128-row programs, and
the fp8 default itself (``fp8_default``; ``fp8_top``: its copies at the top of a trip), as TB/s from L2.
R2 (the softmax's pieces): ``soft0``..``soft4``: the default's key loop (64x128, 4 warps, 2 stages, V^T in key order,
the scale folded into the exponent) built up a piece of the online softmax at a time (``kv_soft_kernel``).

    python3 bench/experiments/mc29/probe.py --out OUT.jsonl [--seq 16384] [--reps 10] [--only a,b] [--dry]

Nothing here is a test.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)

import kernelc as triton  # noqa: E402
import kernelc.language as tl  # noqa: E402
from examples.kernels.attention import fp8_key_order  # noqa: E402


@triton.jit
def kv_dots_kernel(Q, K, V, Out, N_CTX, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr):
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    k_row = off_hz * N_CTX
    v_row = off_hz * HEAD_DIM
    q = Q.load([k_row + start_m * BLOCK_M, 0])
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    for start_n in tl.range(0, N_CTX, BLOCK_N, refill_top=True):
        k = K.load([k_row + start_n, 0]).T
        s = tl.dot(q, k)
        v = V.load([v_row, start_n]).T
        acc = tl.dot(s.to(v.dtype), v, acc)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    tl.store(Out + (k_row + offs_m)[:, None] * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :], acc.to(tl.float16))


@triton.jit
def kv_soft_kernel(Q, K, V, Out, N_CTX, qk_scale, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   HEAD_DIM: tl.constexpr, STEP: tl.constexpr, REFILL_TOP: tl.constexpr):
    """The fp8 default's key loop (64x128, V^T in key order, the scale folded into the exponent) built up a piece at a
    time, to see what each piece of the online softmax costs on top of the two dots. STEP 0: P = S in e4m3 (the dots
    and the conversion); 1: + the row max (FMNMX, shuffles) and S * scale - max (FFMA); 2: + exp2 (MUFU); 3: + the row
    sum l (FADD, shuffles); 4: + the rescale of l and O by exp2(m_old - m_new) (the whole online softmax: the
    default's loop). STEP 3 is what a loop that never rescales costs: the upper bound of skipping the rescale."""
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    k_row = off_hz * N_CTX
    v_row = off_hz * HEAD_DIM
    q = Q.load([k_row + start_m * BLOCK_M, 0])
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    for start_n in tl.range(0, N_CTX, BLOCK_N, refill_top=REFILL_TOP):
        k = K.load([k_row + start_n, 0]).T
        qk = tl.dot(q, k)
        if STEP >= 1:
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            p = qk * qk_scale - m_ij[:, None]
            if STEP >= 2:
                p = tl.math.exp2(p)
            if STEP >= 4:
                alpha = tl.math.exp2(m_i - m_ij)
                l_i = l_i * alpha + tl.sum(p, 1)
                acc = acc * alpha[:, None]
            elif STEP >= 3:
                l_i = l_i + tl.sum(p, 1)
            m_i = m_ij
        else:
            p = qk
        v = V.load([v_row, start_n]).T
        acc = tl.dot(fp8_key_order(p.to(v.dtype), BLOCK_M, BLOCK_N), v, acc)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    acc = acc / l_i[:, None] + m_i[:, None]
    tl.store(Out + (k_row + offs_m)[:, None] * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :], acc.to(tl.float16))


@triton.jit
def kv_ldg_kernel(K, V, Out, N_CTX, BLOCK_N: tl.constexpr, W: tl.constexpr):
    """The same bytes through plain loads (no TMA, no shared memory): K and V of a head as int32 words, W a row,
    BLOCK_N rows a trip each, xor-folded into registers (one LOP3 a word: nothing but the loads costs)."""
    off_hz = tl.program_id(1)
    base = off_hz.to(tl.int64) * N_CTX * W
    offs = tl.arange(0, BLOCK_N)[:, None] * W + tl.arange(0, W)[None, :]
    acc = tl.zeros([BLOCK_N, W], dtype=tl.int32)
    for start_n in range(0, N_CTX, BLOCK_N):
        acc = acc ^ tl.load(K + base + start_n * W + offs)
        acc = acc ^ tl.load(V + base + start_n * W + offs)
    o = tl.program_id(0) * tl.num_programs(1) + off_hz
    tl.store(Out + o * BLOCK_N + tl.arange(0, BLOCK_N), tl.sum(acc, 1))


def _events_ms(fn, calls, dry=False):
    import torch
    if dry:  # the CPU interpreter: the code paths only
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        return (time.perf_counter() - t) * 1e3 / calls
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(calls):
        fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) / calls


def variants(Z, H, N, D, dry=False):
    """name -> (callable, bytes it reads from L2 a call, FLOPs a call or 0, a check or None)."""
    import torch
    from kernelc.tools.tensor_descriptor import TensorDescriptor as TD
    from examples.kernels import attention as A
    dev = "cpu" if dry else "cuda"
    g = torch.Generator(device=dev).manual_seed(29)
    q = torch.randn(Z, H, N, D, device=dev, dtype=torch.float16, generator=g)
    k = torch.randn(Z, H, N, D, device=dev, dtype=torch.float16, generator=g)
    v = torch.randn(Z, H, N, D, device=dev, dtype=torch.float16, generator=g)
    q8, qs = A.quantize_fp8(q)
    k8, ks = A.quantize_fp8(k)
    v8, vs = A.quantize_fp8(v)
    v8t = v8.transpose(-1, -2).contiguous()
    v8k = A.fp8_v_key_order(v8t)
    y = Z * H * N
    kv_head = 2 * N * D  # bytes of K and V^T a program streams
    out = {}

    def dots(bm, bn, w, s):
        dq, dk = TD(q8.view(y, D), [y, D], [D, 1], [bm, D]), TD(k8.view(y, D), [y, D], [D, 1], [bn, D])
        dv = TD(v8t.view(Z * H * D, N), [Z * H * D, N], [N, 1], [D, bn])
        o = torch.empty(y, D, device=dev, dtype=torch.float16)
        grid = (N // bm, Z * H, 1)
        return (lambda: kv_dots_kernel[grid](dq, dk, dv, o, N, BLOCK_M=bm, BLOCK_N=bn, HEAD_DIM=D, num_warps=w,
                                             num_stages=s),
                grid[0] * grid[1] * kv_head, 4 * Z * H * N * N * D, lambda: o)

    def ldg(bm, bn, w):
        ki, vi = k8.view(torch.int32), v8t.view(torch.int32)
        grid = (N // bm, Z * H, 1)
        o = torch.empty(grid[0] * grid[1] * bn, device=dev, dtype=torch.int32)
        return (lambda: kv_ldg_kernel[grid](ki, vi, o, N, BLOCK_N=bn, W=D // 4, num_warps=w, num_stages=1),
                grid[0] * grid[1] * kv_head, 0, None)

    ref = {}

    def default8(name, env=None, **kw):
        if env:  # its own JIT, compiled under env on its first call (compile knobs are read when a kernel compiles)
            kw["kernel"] = triton.jit(A.attn_fwd_lse_kernel.fn)

        def call():
            if env and name not in ref:
                saved = {k: os.environ.get(k) for k in env}
                os.environ.update(env)
                try:
                    ref[name] = A.attention_fp8(q8, k8, v8k, qs, ks, vs, causal=False, key_order=True, **kw)
                finally:
                    for k, v in saved.items():
                        if v is None:
                            os.environ.pop(k, None)
                        else:
                            os.environ[k] = v
                return
            ref[name] = A.attention_fp8(q8, k8, v8k, qs, ks, vs, causal=False, key_order=True, **kw)
        return call, (N // 64) * Z * H * kv_head, 4 * Z * H * N * N * D, lambda: ref[name]

    out["fp8_default"] = default8("fp8_default")
    out["fp8_top"] = default8("fp8_top", refill_top=True)
    # (R1 also ran fp8_mc, fp8_mc_top, fp8_mc_empty and dots_64x128_w4_s2_mc: num_ctas=2 clusters whose K/V copies
    # kernelc multicast, branch mc29 at c31d1895..6623a041; deleted after R1 measured them slower, docs/attention.md)

    def soft(step, top=False, env=None):
        dq, dk = TD(q8.view(y, D), [y, D], [D, 1], [64, D]), TD(k8.view(y, D), [y, D], [D, 1], [128, D])
        dv = TD(v8k.view(Z * H * D, N), [Z * H * D, N], [N, 1], [D, 128])
        o = torch.empty(y, D, device=dev, dtype=torch.float16)
        grid = (N // 64, Z * H, 1)
        scale = D ** -0.5 * 1.44269504
        kern = triton.jit(kv_soft_kernel.fn) if env else kv_soft_kernel
        first = [bool(env)]

        def call():
            saved = {k: os.environ.get(k) for k in (env or {})}
            if first[0]:  # compiled under env on its first call (compile knobs are read when a kernel compiles)
                os.environ.update(env)
            try:
                kern[grid](dq, dk, dv, o, N, scale, BLOCK_M=64, BLOCK_N=128, HEAD_DIM=D, STEP=step, REFILL_TOP=top,
                           num_warps=4, num_stages=2)
            finally:
                if first[0]:
                    first[0] = False
                    for k, v in saved.items():
                        if v is None:
                            os.environ.pop(k, None)
                        else:
                            os.environ[k] = v
        return call, grid[0] * grid[1] * kv_head, 4 * Z * H * N * N * D, lambda: o

    for step in range(5):  # the default's loop a piece of the softmax at a time (kv_soft_kernel)
        out[f"soft{step}"] = soft(step)
    # R3: the row max as a tree (KERNELC_REDUCE_TREE: 4 partial maxima a row, 10 FMNMX deep instead of 32)
    out["soft1_tree"] = soft(1, env={"KERNELC_REDUCE_TREE": "1"})
    out["soft4_tree"] = soft(4, env={"KERNELC_REDUCE_TREE": "1"})
    def ref_err(o):
        import torch.nn.functional as F
        sl = (slice(0, 1), slice(0, 2))
        qf, kf, vf = (q8[sl].float() * qs), (k8[sl].float() * ks), (v8[sl].float() * vs)
        r = F.scaled_dot_product_attention(qf, kf, vf)
        return (o[sl].float() - r).abs().max().item()

    out["ldg_64rows_bn128_w4"] = ldg(64, 128, 4)      # the default's grid: 256 x 128 programs
    out["ldg_64rows_bn64_w4"] = ldg(64, 64, 4)
    out["ldg_128rows_bn128_w4"] = ldg(128, 128, 4)    # half the programs, half the bytes
    out["dots_64x128_w4_s2"] = dots(64, 128, 4, 2)   # the default's shape, 3 an SM, no softmax
    out["dots_128x64_w8_s3"] = dots(128, 64, 8, 3)   # 128-row programs: half the L2 bytes, 2 an SM
    out["dots_128x128_w8_s2"] = dots(128, 128, 8, 2)  # 1 an SM
    return out, ref_err


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--seq", type=int, default=16384)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--calls", type=int, default=3)
    p.add_argument("--budget-s", type=float, default=100.0)
    p.add_argument("--only", default="", help="comma-separated variant names (default: all)")
    p.add_argument("--dry", action="store_true", help="CPU interpreter, N=256, one head: the code paths only")
    a = p.parse_args(argv)
    import torch
    t0 = time.time()
    Z, H, N, D = (1, 1, 256, 128) if a.dry else (4, 32, a.seq, 128)
    vs, ref_err = variants(Z, H, N, D, dry=a.dry)
    if a.only:
        keep = a.only.split(",")
        vs = {n: vs[n] for n in keep if n in vs}
    dev = "cpu (dry)" if a.dry else torch.cuda.get_device_name()
    ok = {}
    for name, (fn, nbytes, flops, _) in vs.items():
        try:
            t = time.time()
            fn()
            if not a.dry:
                torch.cuda.synchronize()
            ok[name] = True
            print(f"{name}: compiled+first call {time.time() - t:.1f}s", flush=True)
        except Exception as e:  # a variant that does not build is reported, the others still run
            print(f"{name}: FAILED {type(e).__name__}: {e}", flush=True)
    same = {}
    for x0, y0 in (("fp8_default", "fp8_top"),):
        if x0 in ok and y0 in ok:
            vs[x0][0]()
            x = vs[x0][3]().clone()
            vs[y0][0]()
            y = vs[y0][3]()
            if not x0.startswith("fp8"):
                x, y = x.view(torch.int16), y.view(torch.int16)
            same[y0] = bool(torch.equal(x, y))
            print(f"check {y0} == {x0} bit for bit: {same[y0]}"
                  + ("" if same[y0] else f" (max |diff| {(x.float() - y.float()).abs().nan_to_num(0).max().item()})"),
                  flush=True)
    if "fp8_default" in ok:  # the default against torch on two heads (the harness's call is right at all)
        err = ref_err(vs["fp8_default"][3]())
        print(f"check fp8_default against torch (two heads, fp32): max |diff| {err:.4f}", flush=True)
    rows = {n: [] for n in ok}
    for r in range(a.reps):
        if time.time() - t0 > a.budget_s:
            print(f"budget: stopped after {r} rounds", flush=True)
            break
        names = list(ok) if r % 2 == 0 else list(reversed(list(ok)))
        for n in names:
            rows[n].append(_events_ms(vs[n][0], a.calls, a.dry))
    with open(a.out, "w") as f:
        for n, ms in rows.items():
            if not ms:
                continue
            ms_sorted = sorted(ms)
            med = ms_sorted[len(ms) // 2]
            _, nbytes, flops, _ = vs[n]
            rec = dict(name=n, device=dev, bit_equal=same.get(n), N=N, Z=Z, H=H, D=D, ms=ms, median_ms=med, min_ms=ms_sorted[0],
                       l2_bytes=nbytes, tb_s_median=nbytes / med / 1e9, tb_s_best=nbytes / ms_sorted[0] / 1e9,
                       tflops_median=flops / med / 1e9 if flops else None,
                       date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            f.write(json.dumps(rec) + "\n")
            tf = f" {rec['tflops_median']:.0f} TFLOP/s" if flops else ""
            print(f"== {n}: median {med:.3f} ms (min {ms_sorted[0]:.3f}, n={len(ms)}), "
                  f"{rec['tb_s_median']:.2f} TB/s from L2 (best {rec['tb_s_best']:.2f}){tf}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
