"""(att23: a copy of att22's bwd_ab.py with its own entries: ds under bounded workspaces.) The attention backward's
variants against cuDNN in one process, interleaved round by round (A B ... then reversed): ``attention_bwd`` called
directly on the saved O and LSE (no autograd), cuDNN's backward through autograd (SDPA's cuDNN backend, grads cleared
untimed). Every variant's gradients are checked against the default's and cuDNN's (relative max error).

    python3 bench/experiments/att23/bwd_ab.py --seq 4096 --head-dim 128 --causal 0 1 --entries cudnn def ds dsx2 \\
        --rounds 2 --rep-ms 40 --out OUT.json [--warm]

Entries (``ENTRIES``): name -> attention_bwd keyword arguments. ``--warm``: one call of each entry (compiles), no
timing: run several in parallel processes first so the timed process finds every kernel in the disk cache.
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

#: name -> attention_bwd keyword arguments (None: cuDNN through autograd); "ws_x": ds's workspace at most this many
#: times dQ's bytes (2: the size of FlashAttention-3's fp32 dQ accumulator), set per shape. R1 (commit 585349a) also
#: ran ds_overlap=True / 2 (the dQ GEMMs on a second stream, at normal / high priority) and R2 (0ca767b) "dsk2" (one
#: head's keys in chunks under half its dS^T, attn_bwd_dq_from_ds_chunk_kernel): both slower, removed
#: (docs/attention.md, "att23")
ENTRIES = {
    "cudnn": None,
    "def": {},                                                    # the default mode
    "sep": dict(dq_mode="separate"),                              # the separate pass (the default before att23)
    "ds": dict(dq_mode="ds", ds_workspace_bytes=8 << 30),         # ds at 8 GiB (DS_WORKSPACE_BYTES)
    "dsx2": dict(dq_mode="ds", ws_x=2),                           # heads in groups under 2 x dQ's bytes
    "dsx4": dict(dq_mode="ds", ws_x=4),
    "dsx8": dict(dq_mode="ds", ws_x=8),
}
ENV_ENTRIES = {}


def _resolve(kw, q):
    """An entry's ws_x as ds_workspace_bytes for q's shape."""
    kw = dict(kw)
    x = kw.pop("ws_x", None)
    if x is not None:
        kw["ds_workspace_bytes"] = int(x * q.numel() * q.element_size())
    return kw


def _with_env(name, kw):
    """attention_bwd's keyword arguments for ``name`` and a wrapper that sets its knobs around a call."""
    env = ENV_ENTRIES.get(name)
    if not env:
        return kw, lambda f: f
    import kernelc
    from examples.kernels import attention_bwd as B
    # only the dK/dV kernel is a copy: the dQ kernel (or ds's GEMM) is the module's, loaded without the knobs
    # before any entry runs (main's first call), so the entry differs from "ws" / "dsws" in the dK/dV kernel only
    kw = dict(kw, kernels=dict(dkdv=kernelc.jit(B.attn_bwd_dkdv_kernel.fn)))

    def wrap(f):
        def g():
            old = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
            try:
                return f()
            finally:
                for k, v in old.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
        return g
    return kw, wrap


def _report_kernels(name, kw):
    """Registers, spills and the setmaxnreg counts of the dK/dV kernel an entry launched (the entry's copy, or the
    module's kernel): shows that an ENV_ENTRIES' knob reached its compile."""
    import re
    try:
        from kernelc.runtime import launcher
        from examples.kernels import attention_bwd as B
        fn = (kw.get("kernels") or {}).get("dkdv", B.attn_bwd_dkdv_kernel)
        for ent in launcher.get_state(fn)["cache"].values():
            ck = ent.compiled
            regs = re.findall(r"setmaxnreg\.(\w+)\.sync\.aligned\.u32 (\d+)", ck.asm.get("ptx", "") or "")
            print(f"  {name}: dkdv regs {ck.n_regs} spills {ck.n_spills} shared {ck.shared} setmaxnreg {regs}",
                  flush=True)
    except Exception as e:  # a diagnostic only
        print(f"  {name}: no kernel report ({type(e).__name__}: {e})", flush=True)


def rel(a, b):
    return float((a.float() - b.float()).abs().max() / b.float().abs().max().clamp(min=1e-6))


def main():
    from examples.kernels import attention as A
    from examples.kernels import attention_bwd as B
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--causal", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--entries", nargs="+", default=["cudnn", "def", "ws"])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--rep-ms", type=float, default=40.0)
    ap.add_argument("--batch", type=int, default=BA.Z)
    ap.add_argument("--heads", type=int, default=BA.H)
    ap.add_argument("--warm", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument("--device", default="cuda", help="cpu: the interpreter at a tiny size (a smoke run; no cuDNN)")
    args = ap.parse_args()
    dev = BA.DEVICE = args.device
    Z, H, N, D = args.batch, args.heads, args.seq, args.head_dim
    SDPA = torch.nn.functional.scaled_dot_product_attention
    from torch.nn.attention import SDPBackend, sdpa_kernel
    rows = []
    t0 = time.time()
    for causal in map(bool, args.causal):
        g = torch.Generator(device=dev).manual_seed(0)
        q, k, v, do = (torch.randn(Z, H, N, D, device=dev, dtype=torch.float16, generator=g) for _ in range(4))
        scale = D ** -0.5
        o, lse = A.attention_fwd(q, k, v, causal, scale, return_lse=True)
        leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        if any(n in ENV_ENTRIES for n in args.entries):  # the module's kernels loaded without the entries' knobs
            for mode in ("separate", "ds"):
                B.attention_bwd(do, q, k, v, o, lse, causal, scale, dq_mode=mode, dkdv_config=dict(EVEN_M=False))
        fns, grads = {}, {}
        for name in args.entries:
            kw = ENTRIES[name]
            if kw is None:
                if dev != "cuda":
                    continue
                with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                    out = SDPA(*leaves, is_causal=causal, scale=scale)

                def fn(out=out):
                    for t in leaves:
                        t.grad = None
                    out.backward(do, retain_graph=True)
                fns[name] = fn
                if not args.warm:
                    fn()
                    grads[name] = tuple(t.grad.clone() for t in leaves)
            else:
                kw, wrap = _with_env(name, _resolve(kw, q))
                fns[name] = wrap(lambda kw=kw: B.attention_bwd(do, q, k, v, o, lse, causal, scale, **kw))
                grads[name] = fns[name]()
                if dev == "cuda":
                    _report_kernels(name, kw)
        if dev == "cuda":
            torch.cuda.synchronize()
        if args.warm:
            print(f"warm causal={int(causal)} {args.entries} {time.time() - t0:.1f}s", flush=True)
            continue
        ref = grads.get("def") or grads[next(n for n in args.entries if ENTRIES[n] is not None)]
        cud = grads.get("cudnn")
        names = [n for n in args.entries if n in fns]
        times = {n: [] for n in names}
        for r in range(args.rounds):
            order = names if r % 2 == 0 else list(reversed(names))
            for name in order:
                res = BA.timeit(fns[name], args.rep_ms)
                times[name].append(res)
        base = times["cudnn"][0]["ms"] if "cudnn" in times else None
        for name in names:
            ms = [t["ms"] for t in times[name]]
            row = dict(seq=N, head_dim=D, causal=causal, entry=name, ms=ms, p20=[t["p20_ms"] for t in times[name]],
                       p80=[t["p80_ms"] for t in times[name]], reps=[t["reps"] for t in times[name]],
                       err_vs_def=max(rel(a, b) for a, b in zip(grads[name], ref)),
                       err_vs_cudnn=max(rel(a, b) for a, b in zip(grads[name], cud)) if cud else None)
            if "cudnn" in times:
                cms = [t["ms"] for t in times["cudnn"]]
                row["cudnn_over_this"] = [c / m for c, m in zip(cms, ms)]
            rows.append(row)
            ratio = " ".join(f"{x:.3f}" for x in row.get("cudnn_over_this", []))
            print(f"N={N} D={D} causal={int(causal)} {name:10s} ms {' '.join(f'{x:.3f}' for x in ms)}  "
                  f"cuDNN/this {ratio}  err def {row['err_vs_def']:.1e} cudnn {row['err_vs_cudnn'] or 0:.1e}",
                  flush=True)
        if args.out:
            json.dump(dict(rows=rows, device=torch.cuda.get_device_name() if dev == "cuda" else dev,
                           elapsed_s=time.time() - t0),
                      open(args.out, "w"), indent=1)
        del q, k, v, do, o, lse, leaves, fns, grads
        if dev == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
