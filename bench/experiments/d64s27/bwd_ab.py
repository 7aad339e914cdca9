"""(d64s27) The D=64 non-causal backward at N 16384: where ``sepwsq``'s time goes, and candidates against it.

``sepwsq`` (d64b27): the separate pass, its dK/dV kernel at (64, 128, 8, 3) with a producer warpgroup (``WS=1``) and the
LSE/delta rows ringed by TMA (``ROWS_TMA``), its dQ kernel at (128, 128, 8, 2) (the compiler's auto rule gives that
loop a producer warpgroup too).

Three parts, one process each (``--part``):

- ``ab``: entries interleaved round by round (order reversed each round; d64b27's ``bwd_ab.py`` through att23's):
  ``attention_bwd`` called directly on the saved O and LSE, cuDNN's backward through autograd, every entry's gradients
  against the first entry's and cuDNN's.
- ``kernels``: each launch of an entry's backward (``attention_bwd_steps``: preprocess, dK/dV, dQ) timed alone with CUDA
  events, and TFLOP/s at the matmuls it runs (dK/dV 4, dQ 3, each ``2 N^2 D`` a head).
- ``prof``: cuDNN's backward (and the listed entries') under torch.profiler: each kernel's GPU time a call.

Entries beyond d64b27's (``ENTRIES``): compile knobs on copies of the kernels (``ENV``: the knob set around their
calls, the copies compiled under it), other stage counts, and ``two_streams`` (the dQ kernel on a second stream beside
the dK/dV kernel: both wait only for the preprocess kernel).

    python3 bench/experiments/d64s27/bwd_ab.py --part ab --seq 16384 --entries cudnn def sepwsq sepwsq_pp ...
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)
from bench.common import env_vars  # noqa: E402
_spec = importlib.util.spec_from_file_location("d64b27_bwd_ab", os.path.join(HERE, "..", "d64b27", "bwd_ab.py"))
D64 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(D64)
AB = D64.AB  # att23's module: ENTRIES (d64b27's added), rel, BA (bench_attention)
BA = AB.BA

# TAIL=False unless an entry asks for it: since d64s27 the tables give the separate pass at D=64 non-causal its tails
_WS = dict(BLOCK_M=64, BLOCK_N=128, num_warps=8, num_stages=3, WS=1, ROWS_TMA=True, TAIL=False)
_Q = dict(BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=2, TAIL=False)


def _sep(dkdv=None, dq=None, **kw):
    return dict(dq_mode="separate", dkdv_config=dict(_WS, **(dkdv or {})), dq_config=dict(_Q, **(dq or {})), **kw)


ENTRIES = dict(AB.ENTRIES)
ENTRIES.update({
    "sepwsq": _sep(),
    # stage counts: dQ's K/V ring at 3 (148 KB of shared memory), dK/dV's Q/dO/rows ring at 4 (124 KB) / 2 (87 KB)
    "sepwsq_q3": _sep(dq=dict(num_stages=3)),
    "sepwsq_k4": _sep(dkdv=dict(num_stages=4)),
    "sepwsq_k2": _sep(dkdv=dict(num_stages=2)),
    # the consumer warpgroups in ping-pong (KERNELC_WS_PINGPONG=1 on the named kernels' copies): the two logit dots
    # of one warpgroup issued in its turn, so one warpgroup's exp2 runs beside the other's wgmmas
    "sepwsq_pp": _sep(),
    "sepwsq_ppk": _sep(),
    "sepwsq_ppq": _sep(),
    # the logit dots started from wgmma's scale-d instead of zeroed accumulator registers (KERNELC_WGMMA_ZERO_ACC=ws,
    # att24: under a producer warpgroup ptxas otherwise zeroes the second logit dot's registers between the two dots
    # and waits for the first: sm_90a, 314 SASS a dK/dV trip against 347, the dQ loop 425 against 491); with ping-pong
    "sepwsq_za": _sep(),
    "sepwsq_zapp": _sep(),
    # the loops' last dot (dK += dS^T Q, dQ += dS K) left in flight across the back edge under the producer warpgroup
    # (the kernels' TAIL: tl.range(async_tail=True), kept by the compiler with the stages released a trip late; the
    # dQ kernel then at 3 stages, its 2 would leave the producer no lookahead): both kernels, dK/dV only, dQ only;
    # with KERNELC_WGMMA_ZERO_ACC=ws; and the dK/dV kernel at 4 stages with it
    "sepwsq_t": _sep(dkdv=dict(TAIL=True), dq=dict(TAIL=True, num_stages=3)),
    "sepwsq_tk": _sep(dkdv=dict(TAIL=True)),
    "sepwsq_tq3": _sep(dq=dict(TAIL=True, num_stages=3)),
    "sepwsq_zat": _sep(dkdv=dict(TAIL=True), dq=dict(TAIL=True, num_stages=3)),
    "sepwsq_zat4": _sep(dkdv=dict(TAIL=True, num_stages=4), dq=dict(TAIL=True, num_stages=3)),
    # the dQ kernel on a second stream beside the dK/dV kernel
    "sepwsq_2s": _sep(two_streams=True),
    # the default mode with its dK/dV kernel compiled under KERNELC_WGMMA_ZERO_ACC=ws (D=128: ds's producer warpgroup)
    "def_za": {},
})
#: entry -> (compile knobs set around its calls, the kernels that get copies compiled under them)
ENV = {
    "sepwsq_pp": ({"KERNELC_WS_PINGPONG": "1"}, ("dkdv", "dq")),
    "sepwsq_ppk": ({"KERNELC_WS_PINGPONG": "1"}, ("dkdv",)),
    "sepwsq_ppq": ({"KERNELC_WS_PINGPONG": "1"}, ("dq",)),
    "sepwsq_za": ({"KERNELC_WGMMA_ZERO_ACC": "ws"}, ("dkdv", "dq")),
    "def_za": ({"KERNELC_WGMMA_ZERO_ACC": "ws"}, ("dkdv",)),
    "sepwsq_zat": ({"KERNELC_WGMMA_ZERO_ACC": "ws"}, ("dkdv", "dq")),
    "sepwsq_zat4": ({"KERNELC_WGMMA_ZERO_ACC": "ws"}, ("dkdv", "dq")),
    "sepwsq_zapp": ({"KERNELC_WGMMA_ZERO_ACC": "ws", "KERNELC_WS_PINGPONG": "1"}, ("dkdv", "dq")),
}
MATMULS = {"dkdv": 4, "dq": 3}


def _with_env(B, name, kw):
    """(kw with the entry's kernel copies, a wrapper that sets its knobs around a call)."""
    env, which = ENV.get(name, ({}, ()))
    if not env:
        return kw, lambda f: f
    import kernelc
    src = {"dkdv": B.attn_bwd_dkdv_kernel, "dq": B.attn_bwd_dq_kernel}
    kw = dict(kw, kernels={k: kernelc.jit(src[k].fn) for k in which})

    def wrap(f):
        def g(*a):
            with env_vars(env):
                return f(*a)
        return g
    return kw, wrap


def _steps(B, args, kw):
    """attention_bwd_steps for an entry's keyword arguments (two_streams: the dQ step on a side stream)."""
    import torch
    kw = dict(kw)
    two = kw.pop("two_streams", False)
    grads, steps = B.attention_bwd_steps(*args, **kw)
    if not two:
        return grads, steps
    side = torch.cuda.Stream()
    named = dict(steps)

    def both():
        main = torch.cuda.current_stream()
        side.wait_stream(main)          # the preprocess kernel's delta
        named["dkdv"]()
        with torch.cuda.stream(side):
            named["dq"]()
        main.wait_stream(side)
    return grads, [("preprocess", named["preprocess"]), ("dkdv+dq", both)]


def _call(B, args, kw):
    grads, steps = _steps(B, args, kw)
    for _, launch in steps:
        launch()
    return grads()


def main():
    import torch
    from examples.kernels import attention as A
    from examples.kernels import attention_bwd as B
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=("ab", "kernels", "prof"), default="ab")
    ap.add_argument("--seq", type=int, default=16384)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--entries", nargs="+", default=["cudnn", "def", "sepwsq"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rep-ms", type=float, default=100.0)
    ap.add_argument("--batch", type=int, default=BA.Z)
    ap.add_argument("--heads", type=int, default=BA.H)
    ap.add_argument("--warm", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument("--device", default="cuda", help="cpu: the interpreter at a tiny size (a smoke run; no cuDNN)")
    ap.add_argument("--causal", action="store_true", help="the causal mask (d64c27; default: non-causal)")
    a = ap.parse_args()
    dev = BA.DEVICE = a.device
    Z, H, N, D = a.batch, a.heads, a.seq, a.head_dim
    causal = a.causal
    t0 = time.time()
    g = torch.Generator(device=dev).manual_seed(0)
    q, k, v, do = (torch.randn(Z, H, N, D, device=dev, dtype=torch.float16, generator=g) for _ in range(4))
    scale = D ** -0.5
    o, lse = A.attention_fwd(q, k, v, causal, scale, return_lse=True)
    bargs = (do, q, k, v, o, lse, causal, scale)
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    fns, grads, kws = {}, {}, {}
    for name in a.entries:
        kw = ENTRIES[name]
        if kw is None:
            if dev != "cuda":
                continue
            from torch.nn.attention import SDPBackend, sdpa_kernel
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                out = torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=causal, scale=scale)

            def fn(out=out):
                for t in leaves:
                    t.grad = None
                out.backward(do, retain_graph=True)
            fns[name] = fn
            if not a.warm:
                fn()
                grads[name] = tuple(t.grad.clone() for t in leaves)
            continue
        kw, wrap = _with_env(B, name, kw)
        kws[name] = (kw, wrap)
        if "two_streams" in kw or kw.get("kernels"):
            fns[name] = wrap(lambda kw=kw: _call(B, bargs, kw))
        else:
            fns[name] = wrap(lambda kw=kw: B.attention_bwd(*bargs, **kw))
        grads[name] = fns[name]()
    if dev == "cuda":
        torch.cuda.synchronize()
    if a.warm:
        print(f"warm {a.entries} N={N} D={D} {time.time() - t0:.1f}s", flush=True)
        return
    names = [n for n in a.entries if n in fns]
    ref = grads[next(n for n in names if ENTRIES[n] is not None)]
    cud = grads.get("cudnn")
    flop1 = 2.0 * Z * H * N * N * D * (0.5 if causal else 1.0)  # one matmul over N x N (causal: half of it)
    res = dict(part=a.part, seq=N, head_dim=D, batch=Z, heads=H, causal=causal, rows=[],
               device=torch.cuda.get_device_name() if dev == "cuda" else dev)
    if a.part == "ab":
        times = {n: [] for n in names}
        for r in range(a.rounds):
            for name in (names if r % 2 == 0 else list(reversed(names))):
                times[name].append(BA.timeit(fns[name], a.rep_ms))
        for name in names:
            ms = [t["ms"] for t in times[name]]
            row = dict(entry=name, ms=ms, p20=[t["p20_ms"] for t in times[name]],
                       p80=[t["p80_ms"] for t in times[name]], reps=[t["reps"] for t in times[name]],
                       err_vs_first=max(AB.rel(x, y) for x, y in zip(grads[name], ref)),
                       err_vs_cudnn=max(AB.rel(x, y) for x, y in zip(grads[name], cud)) if cud else None)
            if "cudnn" in times:
                row["cudnn_over_this"] = [c["ms"] / m for c, m in zip(times["cudnn"], ms)]
            res["rows"].append(row)
            print(f"N={N} {name:11s} ms {' '.join(f'{x:.3f}' for x in ms)}  cuDNN/this "
                  f"{' '.join(f'{x:.3f}' for x in row.get('cudnn_over_this', []))}  err first "
                  f"{row['err_vs_first']:.1e} cudnn {row['err_vs_cudnn'] or 0:.1e}", flush=True)
    elif a.part == "kernels":
        for name in names:
            if ENTRIES[name] is None:
                continue
            kw, wrap = kws[name]
            _, steps = _steps(B, bargs, kw)
            for r in range(a.rounds):
                for step, launch in steps:
                    t = BA.timeit(wrap(launch), a.rep_ms)
                    mm = MATMULS.get(step, 7 if step in ("dkdv_dq", "dkdv+dq") else 0)
                    tf = mm * flop1 / t["ms"] / 1e9 if mm else None
                    res["rows"].append(dict(entry=name, step=step, round=r, ms=t["ms"], p20=t["p20_ms"],
                                            p80=t["p80_ms"], reps=t["reps"], matmuls=mm, tflops=tf))
                    print(f"N={N} D={D} {name:11s} {step:10s} r{r} ms {t['ms']:.3f}"
                          + (f"  {tf:.1f} TFLOP/s ({mm} matmuls)" if tf else ""), flush=True)
    else:  # prof
        from torch.profiler import ProfilerActivity, profile
        calls = max(1, a.rounds)
        sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
        for name in names:
            fns[name]()
            sync()
            with profile(activities=[ProfilerActivity.CUDA if dev == "cuda" else ProfilerActivity.CPU]) as prof:
                for _ in range(calls):
                    fns[name]()
                sync()
            per = {}
            for e in prof.events():
                if "CUDA" not in str(getattr(e, "device_type", "")):  # kernels only (CPU ops sum their kernels)
                    continue
                t = e.device_time_total  # us
                if t:
                    per.setdefault(e.name, [0.0, 0])
                    per[e.name][0] += t
                    per[e.name][1] += 1
            tot = sum(v[0] for v in per.values()) / calls / 1e3
            print(f"N={N} D={D} {name:11s} GPU kernels {tot:.3f} ms a call", flush=True)
            for kn, (us, cnt) in sorted(per.items(), key=lambda kv: -kv[1][0]):
                print(f"    {us / calls / 1e3:9.3f} ms a call  x{cnt / calls:g}  {kn[:110]}", flush=True)
                res["rows"].append(dict(entry=name, kernel=kn, ms_per_call=us / calls / 1e3, launches=cnt / calls))
            res["rows"].append(dict(entry=name, kernel="(all)", ms_per_call=tot))
    res["elapsed_s"] = time.time() - t0
    if a.out:
        json.dump(res, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
