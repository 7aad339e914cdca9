"""(att25) ds's D=128 backward kernel by kernel, ROWS_TMA off (the default before att25) against on (its LSE/delta rows ringed by TMA): each
variant's whole backward (``attention_bwd_steps``, ds in one group) profiled by CUPTI (torch.profiler) for ``--calls``
calls, the variants alternated ``--rounds`` times; the kernels' device time a call by name. Gradients of both
compared.

    python3 bench/experiments/att25/kernels.py --seq 4096 --causal 0 --rounds 2 --calls 3 --out OUT.json

``--device cpu``: the interpreter at a tiny size (a smoke run; no profiler).
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

VARIANTS = (("norows", dict(ROWS_TMA=False)), ("rows", dict(ROWS_TMA=True)))  # ROWS_TMA=True is the default since att25


def main():
    from examples.kernels import attention as A
    from examples.kernels import attention_bwd as B
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--causal", type=int, default=0)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--out", default=None)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    dev = args.device
    Z, H, N, D = args.batch, args.heads, args.seq, args.head_dim
    causal, t0 = bool(args.causal), time.time()
    g = torch.Generator(device=dev).manual_seed(0)
    q, k, v, do = (torch.randn(Z, H, N, D, device=dev, dtype=torch.float16, generator=g) for _ in range(4))
    scale = D ** -0.5
    o, lse = A.attention_fwd(q, k, v, causal, scale, return_lse=True)
    calls, grads = {}, {}
    for tag, cfg in VARIANTS:
        gr, steps = B.attention_bwd_steps(do, q, k, v, o, lse, causal, scale, dq_mode="ds", dkdv_config=cfg,
                                          ds_workspace_bytes=Z * H * N * N * 2)
        calls[tag] = lambda steps=steps: [launch() for _, launch in steps]
        calls[tag]()
        grads[tag] = tuple(t.clone() for t in gr())
    err = max(float((a.float() - b.float()).abs().max()) for a, b in zip(grads["norows"], grads["rows"]))
    print(f"N={N} causal={int(causal)} grads rows vs norows: max abs diff {err:.1e}", flush=True)
    rows = []
    if dev == "cuda":
        from torch.profiler import ProfilerActivity, profile
        torch.cuda.synchronize()
        for r in range(args.rounds):
            for tag, _ in (VARIANTS if r % 2 == 0 else VARIANTS[::-1]):
                with profile(activities=[ProfilerActivity.CUDA]) as p:
                    for _ in range(args.calls):
                        calls[tag]()
                    torch.cuda.synchronize()
                ks = {}
                for ev in p.key_averages():
                    if ev.device_type.name == "CUDA" and ev.count:
                        us = getattr(ev, "device_time_total", None) or getattr(ev, "cuda_time_total", 0)
                        ks[ev.key[:60]] = us / 1e3 / args.calls
                rows.append(dict(round=r, entry=tag, kernels_ms_a_call=ks, total=sum(ks.values())))
                print(f"N={N} causal={int(causal)} round {r} {tag:5s} total {sum(ks.values()):.3f} ms: "
                      + ", ".join(f"{n.split('(')[0][:28]} {t:.3f}" for n, t in sorted(ks.items(), key=lambda x: -x[1])),
                      flush=True)
    if args.out:
        json.dump(dict(rows=rows, seq=N, causal=causal, batch=Z, heads=H, grads_max_abs_diff=err,
                       device=torch.cuda.get_device_name() if dev == "cuda" else dev, elapsed_s=time.time() - t0),
                  open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
