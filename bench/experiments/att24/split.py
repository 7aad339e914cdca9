"""(att24) Where the D=128 backward's time goes, kernel by kernel, against cuDNN's: ds's dK/dV kernel (with its dS^T
store) and its dQ GEMM, the separate pass's dK/dV kernel at the same config without the store (``EVEN_M`` as ds's) and
its dQ kernel, each launched alone on buffers the backward wrote once (CUDA events, interleaved round by round, order
reversed each round); cuDNN's backward whole (autograd) and, once, its kernels by name (torch.profiler, CUPTI).

    python3 bench/experiments/att24/split.py --seq 16384 --batch 1 --heads 16 --causal 0 --rounds 2 --out OUT.json

ds runs as one group (its workspace sized to every head: B=1, H=16 at N 16384 is 8 GiB) so that its two kernels are
steps of their own. ``--device cpu``: the interpreter at a tiny size (a smoke run; no cuDNN, no profiler).
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

import torch  # noqa: E402

from bench import bench_attention as BA  # noqa: E402


def rel(a, b):
    return float((a.float() - b.float()).abs().max() / b.float().abs().max().clamp(min=1e-6))


def main():
    from examples.kernels import attention as A
    from examples.kernels import attention_bwd as B
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--causal", type=int, nargs="+", default=[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--rep-ms", type=float, default=40.0)
    ap.add_argument("--batch", type=int, default=BA.Z)
    ap.add_argument("--heads", type=int, default=BA.H)
    ap.add_argument("--warm", action="store_true")
    ap.add_argument("--no-prof", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    dev = BA.DEVICE = args.device
    Z, H, N, D = args.batch, args.heads, args.seq, args.head_dim
    rows, t0 = [], time.time()
    for causal in map(bool, args.causal):
        g = torch.Generator(device=dev).manual_seed(0)
        q, k, v, do = (torch.randn(Z, H, N, D, device=dev, dtype=torch.float16, generator=g) for _ in range(4))
        scale = D ** -0.5
        o, lse = A.attention_fwd(q, k, v, causal, scale, return_lse=True)
        fns, grads = {}, {}
        # ds as one group; the separate pass with ds's EVEN_M, so that its dK/dV kernel differs from ds's by the store
        for tag, kw in (("ds", dict(dq_mode="ds", ds_workspace_bytes=Z * H * N * N * 2)),
                        ("sep", dict(dq_mode="separate", dkdv_config=dict(EVEN_M=True)))):
            gr, steps = B.attention_bwd_steps(do, q, k, v, o, lse, causal, scale, **kw)
            for _, launch in steps:  # once in order: the later steps read what the earlier ones wrote
                launch()
            grads[tag] = tuple(t.clone() for t in gr())
            for name, launch in steps:
                if name != "preprocess" or tag == "ds":
                    fns[f"{tag}_{name}"] = launch
            fns[f"{tag}_all"] = lambda steps=steps: [launch() for _, launch in steps]
        print(f"grads ds vs sep: {max(rel(a, b) for a, b in zip(grads['ds'], grads['sep'])):.1e}", flush=True)
        prof = {}
        if dev == "cuda":
            from torch.nn.attention import SDPBackend, sdpa_kernel
            leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                out = torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=causal, scale=scale)

            def cud():
                for t in leaves:
                    t.grad = None
                out.backward(do, retain_graph=True)
            cud()
            print(f"grads ds vs cuDNN: {max(rel(a, t.grad) for a, t in zip(grads['ds'], leaves)):.1e}", flush=True)
            fns["cudnn_all"] = cud
            torch.cuda.synchronize()
            if not args.no_prof and not args.warm:
                from torch.profiler import ProfilerActivity, profile
                reps = 3
                with profile(activities=[ProfilerActivity.CUDA]) as p:
                    for _ in range(reps):
                        cud()
                        fns["ds_all"]()
                    torch.cuda.synchronize()
                for ev in p.key_averages():
                    if ev.device_type.name == "CUDA" and ev.count:
                        us = getattr(ev, "device_time_total", None) or getattr(ev, "cuda_time_total", 0)
                        prof[ev.key[:90]] = dict(ms_a_call=us / 1e3 / reps, count=ev.count)
                for name, r in sorted(prof.items(), key=lambda x: -x[1]["ms_a_call"])[:12]:
                    print(f"  prof {r['ms_a_call']:8.3f} ms/call x{r['count'] // reps}  {name}", flush=True)
        if args.warm:
            print(f"warm causal={int(causal)} {time.time() - t0:.1f}s", flush=True)
            continue
        names = list(fns)
        times = {n: [] for n in names}
        for r in range(args.rounds):
            for name in (names if r % 2 == 0 else names[::-1]):
                times[name].append(BA.timeit(fns[name], args.rep_ms)["ms"])
        for name in names:
            rows.append(dict(seq=N, head_dim=D, batch=Z, heads=H, causal=causal, entry=name, ms=times[name]))
            print(f"N={N} Z={Z} H={H} causal={int(causal)} {name:14s} ms {' '.join(f'{x:.3f}' for x in times[name])}",
                  flush=True)
        rows.append(dict(seq=N, causal=causal, cudnn_kernels=prof))
        if args.out:
            json.dump(dict(rows=rows, device=torch.cuda.get_device_name() if dev == "cuda" else dev,
                           elapsed_s=time.time() - t0), open(args.out, "w"), indent=1)
        del q, k, v, do, o, lse, fns, grads
        if dev == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
