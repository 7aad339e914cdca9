"""ds's dQ GEMM (attn_bwd_dq_from_ds_kernel) alone at other configs, on one dS^T workspace: the dK/dV kernel runs once
(ds's default), then each variant's GEMM over the same dS^T, interleaved round by round (order reversed each round),
timed with CUDA events; every variant's dQ against the default's (relative max error).

    python3 bench/experiments/att23/gemm_ab.py --seq 4096 --batch 4 --heads 32 --causal 0 1 --rounds 3 --out OUT.json

Variants (``VARIANTS``): name -> (BLOCK_M, BLOCK_N, num_warps, num_stages, extra constexprs). The GEMM reads
``N^2 * 2`` bytes of dS^T a head; its TB/s is that over its time.
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

VARIANTS = {
    "base": (128, 64, 8, 3, {}),             # DQ_FROM_DS_CONFIGS[128]: 90 registers, 98 KB (2 programs an SM)
    "s4": (128, 64, 8, 4, {}),               # 130 KB, 1 an SM
    "s2": (128, 64, 8, 2, {}),
    "n128s2": (128, 128, 8, 2, {}),          # 128 keys a step: 130 KB
    "n128s3": (128, 128, 8, 3, {}),          # 194 KB
    "m256": (256, 64, 8, 2, {}),             # non-causal only (causal: BLOCK_M is the dK/dV kernel's BLOCK_N)
}
# R1 (commit 585349a) also ran the loop with a producer warp (the kernel's WS, then; "ws", "wss4", "wsn128"): 7-20%
# slower than base (removed); every variant above was slower than base too (docs/attention.md, "att23")


def main():
    from examples.kernels import attention as A
    from examples.kernels import attention_bwd as B
    import kernelc as triton
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--batch", type=int, default=BA.Z)
    ap.add_argument("--heads", type=int, default=BA.H)
    ap.add_argument("--causal", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rep-ms", type=float, default=40.0)
    ap.add_argument("--warm", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument("--device", default="cuda", help="cpu: the interpreter at a tiny size (a smoke run)")
    args = ap.parse_args()
    dev = BA.DEVICE = args.device
    Z, H, N, D = args.batch, args.heads, args.seq, args.head_dim
    rows, t0 = [], time.time()
    for causal in map(bool, args.causal):
        g = torch.Generator(device=dev).manual_seed(0)
        q, k, v, do = (torch.randn(Z, H, N, D, device=dev, dtype=torch.float16, generator=g) for _ in range(4))
        scale = D ** -0.5
        o, lse = A.attention_fwd(q, k, v, causal, scale, return_lse=True)
        grads, steps = B.attention_bwd_steps(do, q, k, v, o, lse, causal, scale, dq_mode="ds",
                                             ds_workspace_bytes=Z * H * N * N * 2)
        assert [n for n, _ in steps] == ["preprocess", "dkdv", "dq"], [n for n, _ in steps]
        for _, f in steps:
            f()
        ref = grads()[0].clone()
        # the workspace the steps wrote: attention_bwd_steps' closure holds it; found as the [ZH, N, N] tensor
        dst = _find_workspace(steps[1][1], (Z * H, N, N))
        kf = k.view(Z * H, N, D)
        fns, outs = {}, {}
        for name in args.variants:
            bm, bn, w, st, extra = VARIANTS[name]
            if causal and bm != B.DS_DKDV_CONFIGS[D][1]:
                continue
            dq = torch.empty_like(q).view(Z * H, N, D)
            grid, cfg = B._grid(triton.cdiv(N, bm), Z * H, causal,
                                dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=w, num_stages=st,
                                     GROUP=B.CAUSAL_GROUP.get((D, "ds"), (0, 0))[1], **extra))

            def fn(dq=dq, grid=grid, cfg=cfg):
                B.attn_bwd_dq_from_ds_kernel[grid](dst, kf, dq, scale, Z * H * N * D, N * D, D, 1, Z * H, N, HEAD_DIM=D,
                                                   CAUSAL=causal, **cfg)
            fns[name] = fn
            fn()
            outs[name] = dq
        if dev == "cuda":
            torch.cuda.synchronize()
        if args.warm:
            print(f"warm causal={int(causal)} {list(fns)} {time.time() - t0:.1f}s", flush=True)
            continue
        times = {n: [] for n in fns}
        for r in range(args.rounds):
            for name in (list(fns) if r % 2 == 0 else list(reversed(list(fns)))):
                times[name].append(BA.timeit(fns[name], args.rep_ms))
        for name in fns:
            ms = [t["ms"] for t in times[name]]
            err = float((outs[name].view_as(ref).float() - ref.float()).abs().max() / ref.float().abs().max())
            tbs = [Z * H * (N * N * (0.5 if causal else 1.0)) * 2 / (m * 1e-3) / 1e12 for m in ms]
            rows.append(dict(seq=N, head_dim=D, causal=causal, variant=name, cfg=list(VARIANTS[name][:4]),
                             extra=VARIANTS[name][4], ms=ms, tbs=tbs, err_vs_ds=err))
            print(f"N={N} causal={int(causal)} {name:8s} ms {' '.join(f'{x:.3f}' for x in ms)}  dS^T TB/s "
                  f"{' '.join(f'{x:.2f}' for x in tbs)}  err {err:.1e}", flush=True)
        if args.out:
            json.dump(dict(rows=rows, batch=Z, heads=H, device=torch.cuda.get_device_name() if dev == "cuda" else dev,
                           elapsed_s=time.time() - t0), open(args.out, "w"), indent=1)
        del q, k, v, do, o, lse, fns, outs, grads, steps, dst
        if dev == "cuda":
            torch.cuda.empty_cache()


def _find_workspace(fn, shape):
    """The dS^T workspace a _ds_steps launch closes over (the tensor of that shape among its closure's cells)."""
    seen, todo = set(), [fn]
    while todo:
        f = todo.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        for x in [c.cell_contents for c in getattr(f, "__closure__", None) or ()] + list(getattr(f, "__defaults__",
                                                                                                  None) or ()):
            if isinstance(x, torch.Tensor) and tuple(x.shape) == shape:
                return x
            if isinstance(x, (list, tuple)):
                for y in x:
                    if isinstance(y, torch.Tensor) and tuple(y.shape) == shape:
                        return y
            if callable(x):
                todo.append(x)
    raise LookupError("no workspace in the steps' closures")


if __name__ == "__main__":
    main()
