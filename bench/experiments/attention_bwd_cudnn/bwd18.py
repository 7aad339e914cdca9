"""Eighteenth session's backward candidates against cuDNN (SDPA's backward) and tutorial 06 in one process.

    python3 bench/experiments/attention_bwd_cudnn/bwd18.py --seq 16384 --head-dim 64 --causal 0 \\
        --entries def f6432 cap_f6432 --check --rep-ms 100 --out OUT.json

Each entry calls ``attention_bwd`` directly on the saved O and LSE (cuDNN and tutorial 06 run through autograd, as in
``bwd10.py``; every ratio is cuDNN's time over the entry's). ``--check`` compares each entry's gradients with cuDNN's.
Entries (:func:`entries`):
- ``def``: the default mode and configs; ``sep``: the separate pass; ``ds``: ``dq_mode="ds"``.
- ``f6432``: the fused kernel with its dQ loop at 32 keys a step (``(64, 32)``; fewer registers in that loop).
- ``late``: the default again (timed last: drift within the process).
- ``cap_*``: the fused kernel launched with ``maxnreg=128`` (``FUSED_MAXNREG``), where its 4-warp programs fit 4 an
  SM instead of 3 (ptxas then waits for every wgmma at 0: the question is whether the fourth program pays for that).
- ``sep4``: the separate pass with both kernels at 4 programs an SM (D=64); ``ds_g32``: ds's dQ GEMM at 3 an SM.
  Since 9de6d9d ``sep4``'s configs are the separate pass's defaults (``sep``, ``sep_dqs2`` and ``sep4`` run alike at
  D=64 where N is a multiple of 32).
- (At cf991cc also ``ovl1`` / ``ovl2`` / ``ovl2_16``: ds with each head group's dQ GEMM on a second stream beside the
  next group's dK/dV kernel; no faster, removed: docs/attention.md, "bwd18".)
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
from examples.kernels import attention_bwd as B  # noqa: E402


def entries(D, causal):
    """name -> kwargs of attention_bwd (besides the tensors)."""
    out = {
        "def": {},
        "sep": dict(dq_mode="separate"),
        "fused": dict(dq_mode="fused"),
        "ds": dict(dq_mode="ds"),
        "f6432": dict(dq_mode="fused", dq_config=dict(BLOCK_N=32)),
        "cap_f6432": dict(dq_mode="fused", dkdv_config=dict(maxnreg=128), dq_config=dict(BLOCK_N=32)),
        # causal: K as a register A operand (FUSED_KV_REGS) spills under the ceiling, so without it
        "cap_f6432kv0": dict(dq_mode="fused", dkdv_config=dict(KV_REGS=0, maxnreg=128), dq_config=dict(BLOCK_N=32)),
        "cap_fs2kv0": dict(dq_mode="fused", dkdv_config=dict(num_stages=2, KV_REGS=0, maxnreg=128)),
        "late": {},  # the default again, last: the process's drift
        "ds_late": dict(dq_mode="ds"),
        # the separate pass with its dQ kernel at 32 keys a step (90 registers, 42 KB: 5 programs an SM) or 2 stages
        # (50 KB: 4 an SM, against 3 at 3 stages)
        "sep_dq6432": dict(dq_mode="separate", dq_config=dict(BLOCK_N=32)),
        "sep_dqs2": dict(dq_mode="separate", dq_config=dict(num_stages=2)),
        # both separate kernels at 4 programs an SM with their waits deferred (D=64: dK/dV with unmasked LSE/delta
        # loads 126 registers, 42 KB; dQ at 2 stages 122, 50 KB)
        "sep4": dict(dq_mode="separate", dkdv_config=dict(EVEN_M=True), dq_config=dict(num_stages=2)),
        # ds's dQ GEMM at 32 keys a step, 4 stages: 66 KB, 3 programs an SM (D=128; the default (128, 64, 8, 3) 2)
        "ds_g32": dict(dq_mode="ds", dq_config=dict(BLOCK_N=32, num_stages=4)),
    }
    return out


def run(N, D, causal, args, rows, timings, failures, save):
    from examples.kernels.attention import attention_fwd
    dtype = BA.DTYPES[args.dtype]
    scale = D ** -0.5
    g = torch.Generator(device=BA.DEVICE).manual_seed(0)
    q, k, v, do = (torch.randn(BA.Z, BA.H, N, D, device=BA.DEVICE, dtype=dtype, generator=g) for _ in range(4))
    tag = dict(seq=N, head_dim=D, dtype=args.dtype, causal=causal)
    row, res = dict(tag), {}
    rows.append(row)
    tol = 2e-2

    def record(name, fn, before=None):
        try:
            r = res[name] = BA.timeit(fn, args.rep_ms, before)
        except Exception as e:  # one failing entry must not hide the others
            print(f"{name} {tag}: {type(e).__name__}: {str(e)[:300]}", flush=True)
            timings.append(dict(tag, variant=name, error=f"{type(e).__name__}: {str(e)[:300]}"))
            save()
            return
        timings.append(dict(tag, variant=name, **r))
        base = res.get("sdpa_cudnn_bwd", {}).get("ms")
        ratio = f"  cuDNN/this {base / r['ms']:.3f}" if base else ""
        print(f"N={N} D={D} causal={int(causal)} {name:24s} {r['ms']:8.3f} ms  [{r['p20_ms']:.3f}, "
              f"{r['p80_ms']:.3f}]{ratio}", flush=True)
        save()

    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]

    def clear():
        for t in leaves:
            t.grad = None

    SDPA = torch.nn.functional.scaled_dot_product_attention
    ref = None
    auto = [("sdpa_cudnn_bwd", lambda a, b, c: _cudnn(SDPA, a, b, c, causal, scale))]
    if args.tut06 is not None and dtype == torch.float16:
        auto.append(("tutorial06_bwd", lambda a, b, c: args.tut06.attention(a, b, c, causal, scale, False)))
    for name, forward in auto:
        clear()
        try:
            o = forward(*leaves)
            o.backward(do, retain_graph=True)
            if name == "sdpa_cudnn_bwd":
                ref = [t.grad.clone() for t in leaves]
        except Exception as e:
            print(f"{name} {tag}: {type(e).__name__}: {str(e)[:300]}", flush=True)
            continue
        record(name, lambda o=o: o.backward(do, retain_graph=True), before=clear)
        del o
    clear()
    o, lse = attention_fwd(q, k, v, causal, scale, return_lse=True)
    table = entries(D, causal)
    for name in args.entries:
        kw = table[name]
        fn = (lambda kw=kw: B.attention_bwd(do, q, k, v, o, lse, causal, scale, **kw))
        if args.check and ref is not None:
            try:
                err = max(BA._err(a, b) for a, b in zip(fn(), ref))
            except Exception as e:
                print(f"{name} {tag}: {type(e).__name__}: {str(e)[:300]}", flush=True)
                timings.append(dict(tag, variant=name, error=f"{type(e).__name__}: {str(e)[:300]}"))
                continue
            row[f"check_{name}"] = err
            if err > tol:
                failures.append(f"{tag} {name}: relative max error {err:.3g} > {tol}")
        record(name, fn)
    del o, lse
    save()


def _cudnn(SDPA, a, b, c, causal, scale):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        return SDPA(a, b, c, is_causal=causal, scale=scale)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seq", type=int, nargs="+", default=[16384])
    p.add_argument("--head-dim", type=int, nargs="+", default=[64])
    p.add_argument("--causal", type=int, nargs="+", choices=[0, 1], default=[0])
    p.add_argument("--dtype", choices=sorted(BA.DTYPES), default="fp16")
    p.add_argument("--entries", nargs="+", default=["def"])
    p.add_argument("--tutorial06", default=BA.TUTORIAL06 if os.path.isfile(BA.TUTORIAL06) else None)
    p.add_argument("--no-tutorial06", action="store_true")
    p.add_argument("--check", action="store_true")
    p.add_argument("--rep-ms", type=float, default=100.0)
    p.add_argument("--out", default=None)
    p.add_argument("--batch", type=int, default=BA.Z)
    p.add_argument("--heads", type=int, default=BA.H)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: the interpreter (a smoke run)")
    args = p.parse_args(argv)
    BA.Z, BA.H, BA.DEVICE = args.batch, args.heads, args.device
    if args.device == "cpu":
        os.environ["KERNELC_INTERPRET"] = "1"
    unknown = [e for e in args.entries if e not in entries(64, False)]
    if unknown:
        p.error(f"unknown entries {unknown} (known: {sorted(entries(64, False))})")
    args.tut06 = None
    if args.tutorial06 and not args.no_tutorial06 and args.device == "cuda":
        try:
            args.tut06 = BA.load_tutorial06(args.tutorial06)
        except Exception as e:
            print(f"bwd18: tutorial 06 not timed: {type(e).__name__}: {str(e)[:200]}", file=sys.stderr)
    rows, timings, failures = [], [], []

    def save():
        if args.out:
            with open(args.out, "w") as f:
                json.dump(dict(rows=rows, timings=timings, check_failures=failures), f, indent=1)

    for N in args.seq:
        for D in args.head_dim:
            for c in args.causal:
                run(N, D, bool(c), args, rows, timings, failures, save)
                if args.device == "cuda":
                    torch.cuda.empty_cache()
    for x in failures:
        print("CHECK FAILED:", x)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
