"""The attention backward's variants against cuDNN's backward in one process, without the forward's rows: what
``python3 -m bench attention --sweep`` times for the backward (``bench_attention.sweep``, called directly on the
saved O and LSE, its entries picked by ``--filter``), plus our ``dq_mode``s, SDPA's cuDNN backend and Triton's tutorial 06 (``--tutorial06``) through autograd
(``o.backward(do)``, grads cleared untimed), timed alike (``bench_attention.timeit``, CUDA events per call from an
idle GPU). ``--check`` compares every timed entry's gradients with the default config's (the sweep's check) and
our autograd modes' with cuDNN's.

    python3 bench/experiments/attention_bwd_cudnn/bwd10.py --seq 4096 --head-dim 128 --causal 0 1 \\
        --filter 'sweep_bwd_default$' 'ds_default$' part_ds_ --modes separate ds --check --out OUT.json

Prints one line per configuration and entry: ms, p20-p80, and cuDNN's autograd ms over it (>= 0.9 is the issue's
target for the autograd rows; a direct row's ratio leaves out the autograd path's host time). docs/attention.md,
"dS^T from registers, bounded workspaces, the async tail".
"""
from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)

import torch  # noqa: E402

from bench import bench_attention as BA  # noqa: E402


def run(N, D, causal, args, failures, rows, timings, save):
    """One configuration: its row appended to ``rows`` at once (filled as entries finish), every timing to
    ``timings`` and printed as it is taken, ``save()`` after each."""
    from examples.kernels import attention_bwd as B
    SDPA = torch.nn.functional.scaled_dot_product_attention
    dtype = BA.DTYPES[args.dtype]
    scale = D ** -0.5
    g = torch.Generator(device=BA.DEVICE).manual_seed(0)
    q, k, v, do = (torch.randn(BA.Z, BA.H, N, D, device=BA.DEVICE, dtype=dtype, generator=g) for _ in range(4))
    tag = dict(seq=N, head_dim=D, dtype=args.dtype, causal=causal)
    row, res = dict(tag), {}
    rows.append(row)
    tol = 2e-2 if dtype == torch.float16 else 5e-2

    def record(name, fn, before=None):
        try:
            r = res[name] = BA.timeit(fn, args.rep_ms, before)
            timings.append(dict(tag, variant=name, **r))
            base = res.get("sdpa_cudnn_bwd", {}).get("ms")
            ratio = f"  cuDNN/this {base / r['ms']:.3f}" if base else ""
            print(f"N={N} D={D} causal={int(causal)} {name:48s} {r['ms']:8.3f} ms  [{r['p20_ms']:.3f}, "
                  f"{r['p80_ms']:.3f}]{ratio}", flush=True)
        except Exception as e:  # one failing entry must not hide the others
            print(f"{name} {tag}: {type(e).__name__}: {str(e)[:300]}", flush=True)
            timings.append(dict(tag, variant=name, error=f"{type(e).__name__}: {str(e)[:300]}"))
        save()

    def check(name, err, tol):
        row[f"check_{name}"] = err
        if err > tol:
            failures.append(f"{tag} {name}: relative max error {err:.3g} > {tol}")

    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]

    def clear():
        for t in leaves:
            t.grad = None

    variants = [(f"ours_bwd_{m}", lambda a, b, c, m=m: B.attention(a, b, c, causal, scale, dq_mode=m))
                for m in args.modes]
    for name, ctx in BA.sdpa_backends():
        if name in args.sdpa:
            variants.append((name + "_bwd", lambda a, b, c, ctx=ctx: _in(ctx, SDPA, a, b, c, is_causal=causal,
                                                                          scale=scale)))
    if args.tut06 is not None and dtype == torch.float16:  # Triton's tutorial 06 under real Triton (fp16 only)
        variants.append(("tutorial06_bwd", lambda a, b, c: args.tut06.attention(a, b, c, causal, scale, False)))
    grads = {}
    for name, forward in variants:
        clear()
        try:
            o = forward(*leaves)
            step = (lambda o=o: o.backward(do, retain_graph=True))
            if args.check:
                step()
                grads[name] = [t.grad.clone() for t in leaves]
        except Exception as e:
            print(f"{name} {tag}: {type(e).__name__}: {str(e)[:300]}", flush=True)
            continue
        record(name, step, before=clear)
        del o
    ref = grads.get("sdpa_cudnn_bwd", grads.get("sdpa_flash_bwd"))
    for name in [n for n in grads if n.startswith("ours")]:
        if ref is not None:
            check(name, max(BA._err(a, b) for a, b in zip(grads[name], ref)), tol)
    if args.direct:  # attention_bwd called directly on saved O and LSE, each NAME=MODE[:JSON dkdv_config]
        from examples.kernels.attention import attention_fwd
        dref = ref if ref is not None else next((g for n, g in grads.items() if n.startswith("ours")), None)
        o, lse = attention_fwd(q, k, v, causal, scale, return_lse=True)
        for spec in args.direct:
            name, _, rest = spec.partition("=")
            mode, _, cfg = rest.partition(":")
            cfg = json.loads(cfg) if cfg else None
            fn = (lambda m=mode, c=cfg: B.attention_bwd(do, q, k, v, o, lse, causal, scale, dq_mode=m or None,
                                                        dkdv_config=c))
            if args.check and dref is not None:
                try:
                    check(f"direct_{name}", max(BA._err(a, b) for a, b in zip(fn(), dref)), tol)
                except Exception as e:
                    print(f"direct_{name} {tag}: {type(e).__name__}: {str(e)[:300]}", flush=True)
                    continue
            record(f"direct_{name}", fn)
        del o, lse
    # the sweep after the autograd rows (cuDNN's is every ratio's base: timed last of them, in case time runs out)
    if args.filter:
        BA.sweep(N, D, q, k, v, do, causal, scale, record, res, row, check if args.check else None, fwd=False,
                 only=args.filter)
    del grads
    save()


def _in(ctx, fn, *a, **kw):
    with ctx():
        return fn(*a, **kw)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seq", type=int, nargs="+", default=[4096])
    p.add_argument("--head-dim", type=int, nargs="+", default=[128])
    p.add_argument("--causal", type=int, nargs="+", choices=[0, 1], default=[0, 1])
    p.add_argument("--dtype", choices=sorted(BA.DTYPES), default="fp16")
    p.add_argument("--filter", nargs="*", default=None, metavar="SUBSTR",
                   help="the sweep's backward entries whose name contains one of these (none: no sweep)")
    p.add_argument("--modes", nargs="*", default=["separate", "ds"], choices=list(BA.BWD_MODES),
                   help="our dq_modes timed through autograd")
    p.add_argument("--sdpa", nargs="*", default=["sdpa_cudnn"], help="SDPA backends timed through autograd")
    p.add_argument("--tutorial06", metavar="PATH", default=BA.TUTORIAL06 if os.path.isfile(BA.TUTORIAL06) else None,
                   help="Triton's python/tutorials/06-fused-attention.py: its backward timed through autograd too "
                        "(default: .ext/tutorials/ when there)")
    p.add_argument("--no-tutorial06", action="store_true")
    p.add_argument("--direct", nargs="*", default=[], metavar="NAME=MODE[:JSON]",
                   help="attention_bwd(dq_mode=MODE, dkdv_config=JSON) called directly on saved O and LSE "
                        "(MODE empty: the default mode)")
    p.add_argument("--check", action="store_true")
    p.add_argument("--rep-ms", type=float, default=100.0)
    p.add_argument("--batch", type=int, default=BA.Z)
    p.add_argument("--heads", type=int, default=BA.H)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: the interpreter (a smoke run)")
    p.add_argument("--out", default=None, help="JSON of the rows and timings (written after every configuration)")
    args = p.parse_args(argv)
    BA.Z, BA.H, BA.DEVICE = args.batch, args.heads, args.device
    if args.device == "cpu":
        os.environ["KERNELC_INTERPRET"] = "1"
    elif not torch.cuda.is_available():
        print("bwd10: needs a CUDA GPU", file=sys.stderr)
        return 2
    args.tut06 = None
    if args.tutorial06 and not args.no_tutorial06 and args.device == "cuda":
        try:
            args.tut06 = BA.load_tutorial06(args.tutorial06)
        except Exception as e:  # e.g. no Triton: the other rows still run
            print(f"bwd10: tutorial 06 not timed: {type(e).__name__}: {str(e)[:200]}", file=sys.stderr)
    rows, timings, failures = [], [], []

    def save():
        if args.out:
            with open(args.out, "w") as f:
                json.dump(dict(rows=rows, timings=timings, check_failures=failures), f, indent=1)

    for N in args.seq:
        for D in args.head_dim:
            for c in args.causal:
                run(N, D, bool(c), args, failures, rows, timings, save)
                if args.device == "cuda":
                    torch.cuda.empty_cache()
    for x in failures:
        print("CHECK FAILED:", x)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
