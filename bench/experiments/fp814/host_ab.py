"""The forwards' host path per call (issue 27): old wrappers (main's ``examples/kernels/attention*.py``, loaded from
``--old-root``) against this tree's, three ways of timing each, in ONE process on a GPU.

    python3 bench/experiments/fp814/host_ab.py --old-root $MAIN --out OUT.jsonl [--rounds 2] [--budget-s 100]
    python3 bench/experiments/fp814/host_ab.py --summarize OUT.jsonl

B=4, H=32. Part A (N 4096, D 64 and 128, causal and not; every variant): ``percall_ms`` is the bench's own
``timeit`` (an event, the call, an event, a synchronisation: host work before the launch is inside it), ``b2b_ms``
the same calls back to back between two events (the host runs ahead: GPU time when the host keeps up), ``host_us``
the host's time in one call after a synchronisation (perf_counter; the GPU idle). Variants rotate order each round.
Part B (N 16384, D 64 and 128, causal and not): this tree's forwards and SDPA's cuDNN by ``percall_ms`` only. SDPA
is timed as the bench does (its backend context entered inside the timed call) and with the context entered once
outside (``sdpa_cudnn_ctx_out``). Each output is checked first (fp16 against SDPA; fp8 old against new, which must
agree: the kernels differ only in how the scales arrive). Each JSON line: part, round, N, D, causal, variant and the
timings, or check / error. Nothing here is a test (docs/attention.md, "The forwards' host path").
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)

Z, H = 4, 32
DEVICE = "cuda"
SIZES = {"A": 4096, "B": 16384}


def load_old(root, name):
    """main's ``examples/kernels/<name>.py`` as module ``old_<name>`` (its own JIT functions and caches)."""
    spec = importlib.util.spec_from_file_location(f"old_{name}", os.path.join(root, "examples", "kernels",
                                                                               f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _sync():
    import torch
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def host_us(fn, n=15):
    out = []
    for _ in range(n if DEVICE == "cuda" else 1):
        _sync()
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1e6)
    _sync()
    return statistics.median(out)


def b2b_ms(fn, calls):
    import torch
    if DEVICE != "cuda":
        return float("nan")
    fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(calls):
        fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) / calls


def make_variants(N, D, causal, old, new, part):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    A, AF = new
    SDPA = torch.nn.functional.scaled_dot_product_attention
    scale = D ** -0.5
    g = torch.Generator(device=DEVICE).manual_seed(0)
    q, k, v = (torch.randn(Z, H, N, D, device=DEVICE, dtype=torch.float16, generator=g) for _ in range(3))
    (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in (q, k, v))
    v8t = v8.transpose(-1, -2).contiguous()
    del v8
    backend = SDPBackend.CUDNN_ATTENTION if DEVICE == "cuda" else SDPBackend.MATH  # (--dry: the interpreter)
    ctx = lambda: sdpa_kernel([backend])  # noqa: E731

    def cudnn_in():
        with ctx():
            return SDPA(q, k, v, is_causal=causal, scale=scale)

    def cudnn_out():
        return SDPA(q, k, v, is_causal=causal, scale=scale)

    fp8 = (q8, k8, v8t, qs, ks, vs, causal, scale)
    var = {
        "fp16_ptr_new": lambda: A.attention_fwd(q, k, v, causal, scale),
        "fp16_fa3_new": lambda: AF.attention(q, k, v, causal, scale),
        "fp8_ptr_new": lambda: A.attention_fp8(*fp8),
        "fp8_fa3_new": lambda: AF.attention_fp8(*fp8),
        "sdpa_cudnn": cudnn_in,
        "sdpa_cudnn_ctx_out": (cudnn_out, ctx),
    }
    if part == "A":
        OA, OAF = old
        var.update({
            "fp16_ptr_old": lambda: OA.attention_fwd(q, k, v, causal, scale),
            "fp16_fa3_old": lambda: OAF.attention(q, k, v, causal, scale),
            "fp8_ptr_old": lambda: OA.attention_fp8(*fp8),
            "fp8_fa3_old": lambda: OAF.attention_fp8(*fp8),
            # the pieces: the old wrappers' torch.cat of the scales, alone
            "piece_cat_scales": lambda: torch.cat([s.reshape(1).float() for s in (qs, ks, vs)]),
        })
    checks = {}
    with torch.no_grad():
        with ctx():
            want = SDPA(q, k, v, is_causal=causal, scale=scale)
        err = lambda a, b: ((a.float() - b.float()).abs().max() / b.float().abs().max()).item()  # noqa: E731
        for name in [n for n in var if n.startswith("fp16")]:
            checks[name] = err(var[name](), want)
        if part == "A":
            for kind in ("ptr", "fa3"):
                checks[f"fp8_{kind}_old_vs_new"] = err(var[f"fp8_{kind}_old"](), var[f"fp8_{kind}_new"]())
        # fp8 against fp32 SDPA on the dequantised inputs of the first two heads
        want8 = SDPA(*(t[:1, :2].float() * s for t, s in ((q8, qs), (k8, ks), (v8t.transpose(-1, -2), vs))),
                     is_causal=causal, scale=scale)
        for name in ("fp8_ptr_new", "fp8_fa3_new"):
            checks[name] = err(var[name]()[:1, :2], want8)
    return var, checks


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--old-root", default=os.environ.get("MAIN"))
    ap.add_argument("--out")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--budget-s", type=float, default=100.0)
    ap.add_argument("--rep-ms", type=float, default=30.0)
    ap.add_argument("--summarize")
    ap.add_argument("--dry", action="store_true", help="CPU: tiny sizes through the interpreter (the code paths only)")
    args = ap.parse_args(argv)
    global DEVICE, Z, H
    if args.dry:
        os.environ["KERNELC_INTERPRET"] = "1"
        DEVICE, Z, H = "cpu", 1, 1
        SIZES.update(A=128, B=256)
        import bench.bench_attention as BA
        BA.DEVICE = "cpu"
    if args.summarize:
        print(summarize(args.summarize))
        return 0
    import torch
    from bench.bench_attention import timeit
    from examples.kernels import attention as A
    from examples.kernels import attention_fa3 as AF
    old = (load_old(args.old_root, "attention"), load_old(args.old_root, "attention_fa3"))
    t0 = time.time()
    out = open(args.out, "w")

    def emit(**row):
        out.write(json.dumps(row) + "\n")
        out.flush()

    points = [("A", SIZES["A"], D, c) for D in (64, 128) for c in (False, True)]
    points += [("B", SIZES["B"], D, c) for D in (128, 64) for c in (False, True)]
    for part, N, D, causal in points:
        if time.time() - t0 > args.budget_s:
            emit(part=part, N=N, D=D, causal=causal, error="budget")
            continue
        tag = dict(part=part, N=N, D=D, causal=causal)
        try:
            var, checks = make_variants(N, D, causal, old, (A, AF), part)
        except Exception as e:  # one point failing must not hide the others
            emit(**tag, error=f"setup: {type(e).__name__}: {str(e)[:300]}")
            continue
        emit(**tag, check=checks)
        names = list(var)
        rounds = args.rounds if part == "A" else 1
        for r in range(rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                fn, ctx = var[name] if isinstance(var[name], tuple) else (var[name], None)
                try:
                    if ctx is not None:
                        with ctx():
                            res = _time(fn, part, args.rep_ms, timeit)
                    else:
                        res = _time(fn, part, args.rep_ms, timeit)
                    emit(**tag, round=r, variant=name, **res)
                except Exception as e:
                    emit(**tag, round=r, variant=name, error=f"{type(e).__name__}: {str(e)[:300]}")
        del var
        if DEVICE == "cuda":
            torch.cuda.empty_cache()
    emit(total_s=time.time() - t0)
    out.close()
    print(summarize(args.out))
    return 0


def _time(fn, part, rep_ms, timeit):
    pc = timeit(fn, rep_ms)
    res = dict(percall_ms=pc["ms"], percall_p20=pc["p20_ms"], percall_p80=pc["p80_ms"], reps=pc["reps"])
    if part == "A":
        res["b2b_ms"] = b2b_ms(fn, 20)
        res["host_us"] = host_us(fn)
    return res


def summarize(path):
    rows = [json.loads(ln) for ln in open(path) if ln.strip()]
    lines = []
    pts = {}
    for r in rows:
        if "variant" in r and "error" not in r:
            pts.setdefault((r["part"], r["N"], r["D"], r["causal"]), {}).setdefault(r["variant"], []).append(r)
        elif "error" in r or "check" in r:
            lines.append(json.dumps(r))
    for (part, N, D, causal), var in pts.items():
        flop = 4 * Z * H * N * N * D * (0.5 if causal else 1.0)
        lines.append(f"== part {part} N={N} D={D} causal={int(causal)}: median over rounds; TFLOP/s per call / "
                     f"back to back; host us")
        med = {}
        for name, rs in var.items():
            m = {k: statistics.median(x[k] for x in rs) for k in ("percall_ms", "b2b_ms", "host_us") if k in rs[0]}
            med[name] = m
            tf = lambda ms: flop / ms / 1e9  # noqa: E731
            lines.append(f"  {name:22s} percall {m['percall_ms']:.4f} ms ({tf(m['percall_ms']):6.1f})"
                         + (f"  b2b {m['b2b_ms']:.4f} ms ({tf(m['b2b_ms']):6.1f})  host {m['host_us']:6.1f} us"
                            if "b2b_ms" in m else ""))
        for which in ("old", "new"):
            f16 = [med[n]["percall_ms"] for n in (f"fp16_ptr_{which}", f"fp16_fa3_{which}") if n in med]
            f8 = [med[n]["percall_ms"] for n in (f"fp8_ptr_{which}", f"fp8_fa3_{which}") if n in med]
            if f16 and f8:
                s = f"  {which}: best fp8 / best fp16 per call {min(f16) / min(f8):.3f}"
                b16 = [med[n]["b2b_ms"] for n in (f"fp16_ptr_{which}", f"fp16_fa3_{which}")
                       if "b2b_ms" in med.get(n, {})]
                b8 = [med[n]["b2b_ms"] for n in (f"fp8_ptr_{which}", f"fp8_fa3_{which}") if "b2b_ms" in med.get(n, {})]
                if b16 and b8:
                    s += f", back to back {min(b16) / min(b8):.3f}"
                if "sdpa_cudnn" in med:
                    s += f"; best fp16 / cuDNN per call {med['sdpa_cudnn']['percall_ms'] / min(f16):.3f}"
                lines.append(s)
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
