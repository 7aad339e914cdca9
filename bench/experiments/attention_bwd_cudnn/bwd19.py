"""Nineteenth session: the backward's defaults with a compile knob off and on, interleaved in one process, against
cuDNN (SDPA's backward) and tutorial 06.

    python3 bench/experiments/attention_bwd_cudnn/bwd19.py --seq 16384 --head-dim 64 --causal 0 1 \\
        --entries def pdl pdl def --check --rep-ms 150 --out OUT.json

Entries (``KNOB_ENTRIES``) are the default ``attention_bwd`` call (on the saved O and LSE, as ``bwd18.py``) under a
set of compile knobs: ``def`` none, ``pdl`` KERNELC_PREFETCH_DOT_LOOPS=1 (a register prefetch of the rows that reach
a dot through arithmetic, LSE and Delta, in the loops ``num_stages`` pipelines); ``ds`` / ``ds_pdl`` the same with
``dq_mode="ds"`` (``CALL_ARGS``); ``gen`` the default through the general path (no launch plan: the host's work of a
call as before the fused mode's plans). Compile knobs are not in the
launcher's in-memory key, so switching entries swaps every loaded kernel's in-memory cache for the one compiled under
that entry's knobs (:func:`use_knobs`): each variant compiles once and an entry listed twice (A B B A) times the same
kernels again. Names repeat in the output with their position (``def#0``, ``pdl#1``, ...).
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

#: entry -> the compile knobs it runs under (every other KERNELC_* knob as the process has it)
KNOB_ENTRIES = {
    "def": {"KERNELC_PREFETCH_DOT_LOOPS": "0"},
    "pdl": {"KERNELC_PREFETCH_DOT_LOOPS": "1"},
    "ds": {"KERNELC_PREFETCH_DOT_LOOPS": "0"},
    "ds_pdl": {"KERNELC_PREFETCH_DOT_LOOPS": "1"},
    "gen": {"KERNELC_PREFETCH_DOT_LOOPS": "0"},
}
#: entry -> attention_bwd's keyword arguments (default: none)
CALL_ARGS = {"ds": dict(dq_mode="ds"), "ds_pdl": dict(dq_mode="ds"),
             # the default through attention_bwd's general path (an empty dq_config: no launch plan), the same kernels
             "gen": dict(dq_config={})}

_caches = {}      # knob set -> {fn: its saved in-memory cache}
_current = [None]  # the knob set the loaded kernels were compiled under


def use_knobs(name):
    """Set entry ``name``'s knobs and give every loaded kernel the in-memory cache compiled under them (the fast
    path holds the dict itself, so it is refilled in place, not replaced)."""
    from kernelc.runtime import launcher
    knobs = tuple(sorted(KNOB_ENTRIES[name].items()))
    if _current[0] == knobs:
        return
    if _current[0] is not None:
        _caches[_current[0]] = {fn: dict(launcher.get_state(fn)["cache"]) for fn in list(launcher._with_state)}
    saved = _caches.get(knobs, {})
    for fn in list(launcher._with_state):
        st = launcher.get_state(fn)
        st["cache"].clear()
        st["cache"].update(saved.get(fn, {}))
        st.pop("failed", None)
    os.environ.update(dict(knobs))
    _current[0] = knobs


def loaded_kernels():
    """The backward's kernels loaded under the current knobs: name, registers, spills, shared memory."""
    from kernelc.runtime import launcher
    out = []
    for fn in list(launcher._with_state):
        if getattr(fn, "__module__", None) != B.__name__:
            continue
        for ent in launcher.get_state(fn)["cache"].values():
            ck = ent.compiled
            out.append(dict(name=getattr(fn, "__name__", str(fn)), regs=getattr(ck, "n_regs", None),
                            spills=getattr(ck, "n_spills", None), shared=getattr(ck, "shared", 0) or 0,
                            key=str(getattr(ck, "cache_key", ""))[:12]))
    return sorted(out, key=lambda k: k["name"])


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

    def record(name, fn):
        try:
            r = res[name] = BA.timeit(fn, args.rep_ms)
        except Exception as e:  # one failing entry must not hide the others
            print(f"{name} {tag}: {type(e).__name__}: {str(e)[:300]}", flush=True)
            timings.append(dict(tag, variant=name, error=f"{type(e).__name__}: {str(e)[:300]}"))
            save()
            return
        timings.append(dict(tag, variant=name, **r))
        base = res.get("sdpa_cudnn_bwd", {}).get("ms")
        ratio = f"  cuDNN/this {base / r['ms']:.3f}" if base else ""
        t06 = res.get("tutorial06_bwd", {}).get("ms")
        ratio += f"  t06/this {t06 / r['ms']:.3f}" if t06 and name != "tutorial06_bwd" else ""
        print(f"N={N} D={D} causal={int(causal)} {name:16s} {r['ms']:8.3f} ms  [{r['p20_ms']:.3f}, "
              f"{r['p80_ms']:.3f}]{ratio}", flush=True)
        save()

    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]

    def clear():
        for t in leaves:
            t.grad = None

    SDPA = torch.nn.functional.scaled_dot_product_attention
    ref = None
    auto = [("sdpa_cudnn_bwd", lambda a, b, c: _cudnn(SDPA, a, b, c, causal, scale))]
    if args.tut06 is not None and dtype == torch.float16 and (causal or not args.tut06_causal_only):
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
        try:
            r = res[name] = BA.timeit(lambda o=o: o.backward(do, retain_graph=True), args.rep_ms, clear)
            timings.append(dict(tag, variant=name, **r))
            print(f"N={N} D={D} causal={int(causal)} {name:16s} {r['ms']:8.3f} ms  [{r['p20_ms']:.3f}, "
                  f"{r['p80_ms']:.3f}]", flush=True)
        except Exception as e:
            print(f"{name} {tag}: {type(e).__name__}: {str(e)[:300]}", flush=True)
        del o
    clear()
    use_knobs("def")
    o, lse = attention_fwd(q, k, v, causal, scale, return_lse=True)
    for i, name in enumerate(args.entries):
        use_knobs(name)
        label = f"{name}#{i}"
        fn = (lambda kw=CALL_ARGS.get(name, {}): B.attention_bwd(do, q, k, v, o, lse, causal, scale, **kw))
        if args.check and ref is not None and f"check_{name}" not in row:
            try:
                err = max(BA._err(a, b) for a, b in zip(fn(), ref))
            except Exception as e:
                print(f"{label} {tag}: {type(e).__name__}: {str(e)[:300]}", flush=True)
                timings.append(dict(tag, variant=label, error=f"{type(e).__name__}: {str(e)[:300]}"))
                continue
            row[f"check_{name}"] = err
            if err > tol:
                failures.append(f"{tag} {name}: relative max error {err:.3g} > {tol}")
            row[f"kernels_{name}"] = kernels = loaded_kernels()
            print(f"N={N} D={D} causal={int(causal)} {name}: " + "; ".join(
                f"{k['name']} {k['regs']} regs {k['spills']} spills {k['shared'] // 1024} KB {k['key']}"
                for k in kernels), flush=True)
        record(label, fn)
    use_knobs("def")
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
    p.add_argument("--entries", nargs="+", default=["def", "pdl", "pdl", "def"])
    p.add_argument("--tutorial06", default=BA.TUTORIAL06 if os.path.isfile(BA.TUTORIAL06) else None)
    p.add_argument("--no-tutorial06", action="store_true")
    p.add_argument("--tut06-causal-only", action="store_true", help="time tutorial 06 only where causal")
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
    unknown = [e for e in args.entries if e not in KNOB_ENTRIES]
    if unknown:
        p.error(f"unknown entries {unknown} (known: {sorted(KNOB_ENTRIES)})")
    args.tut06 = None
    if args.tutorial06 and not args.no_tutorial06 and args.device == "cuda":
        try:
            args.tut06 = BA.load_tutorial06(args.tutorial06)
        except Exception as e:
            print(f"bwd19: tutorial 06 not timed: {type(e).__name__}: {str(e)[:200]}", file=sys.stderr)
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
