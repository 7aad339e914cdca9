"""(d64c28) D=64 causal's default backward from N 16384 on (the separate pass in D=128's form: dK/dV's two loops with
the producer for the unmasked one, ``WS=2``, both loops' async tails; ``DEFAULT_DQ_MODES_LONG``) against cuDNN and
Triton's tutorial 06 backward, through the public paths, interleaved round by round (order reversed each round).

Entries (``ENTRIES`` and two autograd ones):

- ``cudnn``: SDPA's cuDNN backend, its backward through autograd (``out.backward(do, retain_graph=True)``, grads
  cleared untimed), as the Issue-27 cells take it;
- ``t06``: Triton 3.6's ``06-fused-attention.py`` through autograd, its own forward (pinned to one config as
  ``bench attention`` does);
- ``ag``: ours through autograd (``attention_bwd.attention``, the example's ``AttentionFunction``): what a user calls;
- ``def``: ``attention_bwd`` called directly on the saved O and LSE with no mode or config (its launch plan): the default;
- ``fused``: ``dq_mode="fused"``, the default before d64c28 (and still below N 16384);
- ``sep``: ``dq_mode="separate"``, which takes the new form's tables at any length (the question at N 8192 / 12288);
  ``sep_k4``, ``sep_q4``, ``sep_g4``, ``sep_g16``: variants of it (below).

Every entry's gradients are checked against the first of ours listed and cuDNN's. ``--prof``: instead of the rounds,
each entry's calls under torch.profiler, its kernels' GPU time a call beside the call's time by CUDA events (what a path
adds around the same kernels: ``ag`` against ``def``).

    python3 bench/experiments/d64c28/bwd_ab.py --seq 16384 --entries cudnn def ag fused t06 --rounds 6 --rep-ms 100 \\
        --out OUT.json [--warm] [--tutorial06 PATH] [--device cpu]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(HERE))))

import torch  # noqa: E402

from bench import bench_attention as BA  # noqa: E402

#: name -> attention_bwd keyword arguments (called directly on the saved O and LSE)
ENTRIES = {"def": {}, "fused": dict(dq_mode="fused"), "sep": dict(dq_mode="separate"),
           # the new form with another stage on the dK/dV rings (197632 B of shared memory on sm_90a, the same loops) or
           # the dQ ring (165888 B), or causal's grids ordered longest first across groups of 4 / 16 heads (8: CAUSAL_GROUP)
           "sep_k4": dict(dq_mode="separate", dkdv_config=dict(num_stages=4)),
           "sep_q4": dict(dq_mode="separate", dq_config=dict(num_stages=4)),
           "sep_g4": dict(dq_mode="separate", dkdv_config=dict(GROUP=4), dq_config=dict(GROUP=4)),
           "sep_g16": dict(dq_mode="separate", dkdv_config=dict(GROUP=16), dq_config=dict(GROUP=16))}
AUTOGRAD = ("cudnn", "t06", "ag")


def rel(a, b):
    return float((a.float() - b.float()).abs().max() / b.float().abs().max().clamp(min=1e-6))


def main():
    from examples.kernels import attention as A
    from examples.kernels import attention_bwd as B
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=16384)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--causal", type=int, default=1)
    ap.add_argument("--entries", nargs="+", default=["cudnn", "def", "ag", "fused", "t06"])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--rep-ms", type=float, default=100.0)
    ap.add_argument("--batch", type=int, default=BA.Z)
    ap.add_argument("--heads", type=int, default=BA.H)
    ap.add_argument("--warm", action="store_true", help="one call of each entry (compiles), no timing")
    ap.add_argument("--prof", action="store_true", help="kernels' GPU time a call under torch.profiler, no rounds")
    ap.add_argument("--rotate", action="store_true",
                    help="round r starts at entry r (each entry in each place of the order as often), not reversed")
    ap.add_argument("--shuffle", type=int, default=None, metavar="SEED",
                    help="round r in a fresh order drawn with seed SEED + r (s29: mc29 found fixed orders biased)")
    ap.add_argument("--settle-ms", type=float, default=0.0, help="every entry called untimed this long before round 1")
    ap.add_argument("--tutorial06", default=BA.TUTORIAL06)
    ap.add_argument("--out", default=None)
    ap.add_argument("--device", default="cuda", help="cpu: the interpreter at a tiny size (a smoke run; no cuDNN, t06)")
    a = ap.parse_args()
    dev = BA.DEVICE = a.device
    Z, H, N, D, causal = a.batch, a.heads, a.seq, a.head_dim, bool(a.causal)
    cuda = dev == "cuda"
    names = [n for n in a.entries if cuda or n not in ("cudnn", "t06")]
    tut06 = BA.load_tutorial06(a.tutorial06) if "t06" in names else None
    t0 = time.time()
    g = torch.Generator(device=dev).manual_seed(0)
    q, k, v, do = (torch.randn(Z, H, N, D, device=dev, dtype=torch.float16, generator=g) for _ in range(4))
    scale = D ** -0.5
    o, lse = A.attention_fwd(q, k, v, causal, scale, return_lse=True)
    fns, grads = {}, {}
    for name in names:
        if name in AUTOGRAD:
            leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
            if name == "cudnn":
                from torch.nn.attention import SDPBackend, sdpa_kernel
                with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                    out = torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=causal, scale=scale)
            elif name == "t06":
                out = tut06.attention(*leaves, causal, scale, False)
            else:
                out = B.attention(*leaves, causal, scale)

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
    if cuda:
        torch.cuda.synchronize()
    if a.warm:
        print(f"warm N={N} {names} {time.time() - t0:.1f}s", flush=True)
        return
    if a.prof:
        return _prof(a, names, fns, N, cuda, t0)
    first = next(n for n in names if n not in ("cudnn", "t06"))
    ref, cud = grads[first], grads.get("cudnn")
    times = {n: [] for n in names}
    if a.settle_ms and cuda:  # the clocks under load before round 1 (R2/R3: the first entries of round 1 ran faster)
        end = time.time() + a.settle_ms / 1e3
        while time.time() < end:
            for name in names:
                fns[name]()
            torch.cuda.synchronize()
    orders = []
    for r in range(a.rounds):
        order = names[r % len(names):] + names[:r % len(names)] if a.rotate else \
            (names if r % 2 == 0 else list(reversed(names)))
        if a.shuffle is not None:
            import random
            order = list(names)
            random.Random(a.shuffle + r).shuffle(order)
        orders.append(order)
        for name in order:
            times[name].append(BA.timeit(fns[name], a.rep_ms))
    rows = []
    for name in names:
        ms = [t["ms"] for t in times[name]]
        row = dict(seq=N, head_dim=D, causal=causal, entry=name, ms=ms, p20=[t["p20_ms"] for t in times[name]],
                   p80=[t["p80_ms"] for t in times[name]], reps=[t["reps"] for t in times[name]],
                   err_vs_first=max(rel(x, y) for x, y in zip(grads[name], ref)),
                   err_vs_cudnn=max(rel(x, y) for x, y in zip(grads[name], cud)) if cud else None)
        for other, key in (("cudnn", "cudnn_over_this"), ("t06", "t06_over_this")):
            if other in times:
                row[key] = [c["ms"] / m for c, m in zip(times[other], ms)]
        rows.append(row)
        ratios = "  ".join(f"{key.split('_')[0]}/this " + " ".join(f"{x:.3f}" for x in row[key])
                           for key in ("cudnn_over_this", "t06_over_this") if key in row)
        print(f"N={N} {name:5s} ms {' '.join(f'{x:.3f}' for x in ms)}  {ratios}  err {first} "
              f"{row['err_vs_first']:.1e} cudnn {row['err_vs_cudnn'] or 0:.1e}", flush=True)
    if a.out:
        json.dump(dict(rows=rows, orders=orders, device=torch.cuda.get_device_name() if cuda else dev,
                       elapsed_s=time.time() - t0, argv=sys.argv), open(a.out, "w"), indent=1)


def _prof(a, names, fns, N, cuda, t0):
    """Each entry's kernels under torch.profiler (``a.rounds`` calls): GPU time a call by kernel, beside the call's
    time by CUDA events around the same calls."""
    from torch.profiler import ProfilerActivity, profile
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    rows = []
    for name in names:
        fns[name]()
        sync()
        with profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
            ev = BA.timeit(fns[name], a.rep_ms, min_reps=a.rounds, max_reps=a.rounds)
            sync()
        calls = ev["reps"] + 2  # timeit's two warm-up calls ran under the profiler too
        per = {}
        for e in prof.events():
            if "CUDA" not in str(getattr(e, "device_type", "")):
                continue
            if e.device_time_total:
                per.setdefault(e.name, [0.0, 0])
                per[e.name][0] += e.device_time_total
                per[e.name][1] += 1
        tot = sum(v[0] for v in per.values()) / calls / 1e3
        print(f"N={N} {name:5s} kernels {tot:.3f} ms a call, CUDA events {ev['ms']:.3f} ms (median of {ev['reps']})",
              flush=True)
        for kn, (us, cnt) in sorted(per.items(), key=lambda kv: -kv[1][0])[:6]:
            print(f"    {us / calls / 1e3:9.3f} ms  x{cnt / calls:g}  {kn[:100]}", flush=True)
        rows.append(dict(entry=name, kernels_ms=tot, events_ms=ev["ms"], calls=calls,
                         by_kernel={k: v[0] / calls / 1e3 for k, v in per.items()}))
    if a.out:
        json.dump(dict(rows=rows, seq=N, elapsed_s=time.time() - t0, argv=sys.argv), open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
