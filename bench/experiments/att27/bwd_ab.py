"""(att27) The D=128 causal backward's new default (ds, ``ONE_LOOP`` + ``WS=1`` + ``ROWS_TMA``: ``DS_ONE_LOOP``) against
cuDNN and Triton's tutorial 06 backward, interleaved round by round (order reversed each round), as att23's
``bwd_ab.py`` does: ``attention_bwd`` called directly on the saved O and LSE; cuDNN (SDPA's cuDNN backend) and tutorial 06
(Triton 3.6's ``06-fused-attention.py``, its own forward, pinned to one config as ``bench attention`` does) through
autograd, grads cleared untimed. Every entry's grads are checked against the default's and cuDNN's.

Entries: ``cudnn``, ``def`` (the default), ``old`` (``ONE_LOOP=False``: the two-loop kernel without producer or ringed
rows, the default before att27), ``t06`` (tutorial 06), ``onews`` (``ONE_LOOP`` + ``WS=1``, rows by loads), ``g4`` (the default in causal head groups of 4).

    python3 bench/experiments/att27/bwd_ab.py --seq 4096 --causal 1 --entries cudnn def old t06 --rounds 4 \\
        --rep-ms 30 --out OUT.json [--warm] [--tutorial06 PATH]
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

import torch  # noqa: E402

from bench import bench_attention as BA  # noqa: E402

_spec = importlib.util.spec_from_file_location("att23_bwd_ab", os.path.join(HERE, "..", "att23", "bwd_ab.py"))
AB = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(AB)

#: name -> attention_bwd keyword arguments; "cudnn" and "t06" run through autograd
ENTRIES = {
    "def": {},
    "old": dict(dkdv_config=dict(ONE_LOOP=False)),
    "onews": dict(dkdv_config=dict(ROWS_TMA=False)),
    "g4": dict(dkdv_config=dict(GROUP=4)),  # the default with causal head groups of 4 (CAUSAL_GROUP's 8: att24's tie)
}
AUTOGRAD = ("cudnn", "t06")


def main():
    from examples.kernels import attention as A
    from examples.kernels import attention_bwd as B
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--causal", type=int, nargs="+", default=[1])
    ap.add_argument("--entries", nargs="+", default=["cudnn", "def", "old", "t06"])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--rep-ms", type=float, default=30.0)
    ap.add_argument("--batch", type=int, default=BA.Z)
    ap.add_argument("--heads", type=int, default=BA.H)
    ap.add_argument("--warm", action="store_true", help="one call of each entry (compiles), no timing")
    ap.add_argument("--tutorial06", default=BA.TUTORIAL06)
    ap.add_argument("--out", default=None)
    ap.add_argument("--device", default="cuda", help="cpu: the interpreter at a tiny size (a smoke run; no cuDNN)")
    args = ap.parse_args()
    dev = BA.DEVICE = args.device
    Z, H, N, D = args.batch, args.heads, args.seq, args.head_dim
    tut06 = BA.load_tutorial06(args.tutorial06) if "t06" in args.entries else None
    SDPA = torch.nn.functional.scaled_dot_product_attention
    from torch.nn.attention import SDPBackend, sdpa_kernel
    rows = []
    t0 = time.time()
    for causal in map(bool, args.causal):
        g = torch.Generator(device=dev).manual_seed(0)
        q, k, v, do = (torch.randn(Z, H, N, D, device=dev, dtype=torch.float16, generator=g) for _ in range(4))
        scale = D ** -0.5
        o, lse = A.attention_fwd(q, k, v, causal, scale, return_lse=True)
        fns, grads = {}, {}
        for name in args.entries:
            if name in AUTOGRAD:
                if name == "cudnn" and dev != "cuda":
                    continue
                leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
                if name == "cudnn":
                    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                        out = SDPA(*leaves, is_causal=causal, scale=scale)
                else:
                    out = tut06.attention(*leaves, causal, scale, False)

                def fn(out=out, leaves=leaves):
                    for t in leaves:
                        t.grad = None
                    out.backward(do, retain_graph=True)
                fns[name] = fn
                fn()
                grads[name] = tuple(t.grad.clone() for t in leaves)
            else:
                kw = ENTRIES[name]
                fns[name] = lambda kw=kw: B.attention_bwd(do, q, k, v, o, lse, causal, scale, **kw)
                grads[name] = fns[name]()
                if dev == "cuda":
                    AB._report_kernels(name, kw)
        if dev == "cuda":
            torch.cuda.synchronize()
        if args.warm:
            print(f"warm causal={int(causal)} {args.entries} {time.time() - t0:.1f}s", flush=True)
            continue
        ref = grads.get("def") or grads[next(n for n in args.entries if n in grads)]
        cud = grads.get("cudnn")
        names = [n for n in args.entries if n in fns]
        times = {n: [] for n in names}
        for r in range(args.rounds):
            for name in (names if r % 2 == 0 else list(reversed(names))):
                times[name].append(BA.timeit(fns[name], args.rep_ms))
        for name in names:
            ms = [t["ms"] for t in times[name]]
            row = dict(seq=N, head_dim=D, causal=causal, entry=name, ms=ms, p20=[t["p20_ms"] for t in times[name]],
                       p80=[t["p80_ms"] for t in times[name]], reps=[t["reps"] for t in times[name]],
                       err_vs_def=max(AB.rel(a, b) for a, b in zip(grads[name], ref)),
                       err_vs_cudnn=max(AB.rel(a, b) for a, b in zip(grads[name], cud)) if cud else None)
            for other, key in (("cudnn", "cudnn_over_this"), ("t06", "t06_over_this")):
                if other in times:
                    row[key] = [c["ms"] / m for c, m in zip(times[other], ms)]
            rows.append(row)
            ratios = "  ".join(f"{key.split('_')[0]}/this " + " ".join(f"{x:.3f}" for x in row[key])
                               for key in ("cudnn_over_this", "t06_over_this") if key in row)
            print(f"N={N} D={D} causal={int(causal)} {name:6s} ms {' '.join(f'{x:.3f}' for x in ms)}  {ratios}  "
                  f"err def {row['err_vs_def']:.1e} cudnn {row['err_vs_cudnn'] or 0:.1e}", flush=True)
        if args.out:
            json.dump(dict(rows=rows, device=torch.cuda.get_device_name() if dev == "cuda" else dev,
                           elapsed_s=time.time() - t0, argv=sys.argv), open(args.out, "w"), indent=1)
        del q, k, v, do, o, lse, fns, grads
        if dev == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
