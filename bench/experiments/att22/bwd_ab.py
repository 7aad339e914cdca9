"""(att22: a copy of att21's bwd_ab.py with its own entries.) The attention backward's variants against cuDNN in
one process, interleaved round by round (A B ... then reversed): ``attention_bwd`` called directly on the saved O and
LSE (no autograd), cuDNN's backward through autograd (SDPA's cuDNN backend, grads cleared untimed). Every variant's
gradients are checked against the default's and cuDNN's (relative max error).

    python3 bench/experiments/att22/bwd_ab.py --seq 4096 --head-dim 128 --causal 0 1 --entries cudnn def ws ds dsws \\
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

WS = dict(WS=1, EVEN_M=True)       # a producer warpgroup for both dK/dV loops (setmaxnreg), LSE/delta unmasked
WSU = dict(WS=2, EVEN_M=True)      # ... for the unmasked loop only (causal: the diagonal loop without it)
#: name -> attention_bwd keyword arguments (None: cuDNN through autograd)
ENTRIES = {
    "cudnn": None,
    "def": {},                                                         # the default mode (launch plan)
    "gen": dict(dq_mode="separate", dkdv_config=dict(EVEN_M=False)),  # the default kernels through the general path
    "even": dict(dq_mode="separate", dkdv_config=dict(EVEN_M=True)),  # ... with the LSE/delta rows unmasked
    "ws": dict(dq_mode="separate", dkdv_config=WS),
    "ws2": dict(dq_mode="separate", dkdv_config=dict(WS, num_stages=2)),
    "wsu": dict(dq_mode="separate", dkdv_config=dict(WSU, num_stages=2)),
    "ds": dict(dq_mode="ds"),
    "dsws": dict(dq_mode="ds", dkdv_config=WS),
    "dsws2": dict(dq_mode="ds", dkdv_config=dict(WS, num_stages=2)),
    "dswsu": dict(dq_mode="ds", dkdv_config=dict(WSU, num_stages=2)),
    # dq_mode="flat": 5 matmuls, dQ^T's tile added by a 1-D bulk reduction (kl.bulk_add) from the dK/dV loop
    "flat": dict(dq_mode="flat", dkdv_config=dict(EVEN_M=True)),                      # (64, 128, 8, 2)
    "flatf": dict(dq_mode="flat", dkdv_config=dict(EVEN_M=True, DQ_FIRST=True)),      # dQ^T's product first
    "flat32w": dict(dq_mode="flat", dkdv_config=dict(BLOCK_M=32, num_stages=3, WS=1, DQ_FIRST=True, EVEN_M=True)),
    # the producer warpgroup keeping 24 registers, the consumers 240 (KERNELC_WS_CONSUMER_REGS=240; compile knobs:
    # ENV_ENTRIES' kernels are copies compiled and launched under them)
    "ws240": dict(dq_mode="separate", dkdv_config=WS),
    "ws2_240": dict(dq_mode="separate", dkdv_config=dict(WS, num_stages=2)),
    "dsws240": dict(dq_mode="ds", dkdv_config=WS),
    "dsws2_240": dict(dq_mode="ds", dkdv_config=dict(WS, num_stages=2)),
    # ... and the two consumer warpgroups taking turns on the tensor cores (KERNELC_WS_PINGPONG=1)
    "ws240pp": dict(dq_mode="separate", dkdv_config=WS),
    "dsws2_240pp": dict(dq_mode="ds", dkdv_config=dict(WS, num_stages=2)),
    # R2 (the branch's KERNELC_WS_CONSUMER_REGS=auto gives every WS entry above 240 without a knob)
    "dswspp": dict(dq_mode="ds", dkdv_config=WS),
    "flat32wpp": dict(dq_mode="flat", dkdv_config=dict(BLOCK_M=32, num_stages=3, WS=1, DQ_FIRST=True, EVEN_M=True)),
    "ds1g": dict(dq_mode="ds", ds_workspace_bytes=1 << 30),            # dS^T's workspace at most 1 GiB
    "ds2g": dict(dq_mode="ds", ds_workspace_bytes=2 << 30),
    "dsws1g": dict(dq_mode="ds", dkdv_config=WS, ds_workspace_bytes=1 << 30),
    # R3, the branch's defaults (DKDV_WS / DS_WS: WS non-causal at D=128; FLAT_KNOBS) against the same without WS
    "sepnows": dict(dq_mode="separate", dkdv_config=dict(WS=0)),
    "dsnows": dict(dq_mode="ds", dkdv_config=dict(WS=0)),
    "flatd": dict(dq_mode="flat"),
}
#: entry -> compile knobs its kernels are compiled under (copies of the kernels, the knobs set around its calls)
ENV_ENTRIES = {n: {"KERNELC_WS_CONSUMER_REGS": "240"} for n in ("ws240", "ws2_240", "dsws240", "dsws2_240")}
ENV_ENTRIES.update({n: {"KERNELC_WS_CONSUMER_REGS": "240", "KERNELC_WS_PINGPONG": "1"} for n in ("ws240pp",
                                                                                                 "dsws2_240pp")})
ENV_ENTRIES.update({n: {"KERNELC_WS_PINGPONG": "1"} for n in ("dswspp", "flat32wpp")})


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
                kw, wrap = _with_env(name, kw)
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
