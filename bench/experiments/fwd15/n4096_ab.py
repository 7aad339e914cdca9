"""(The persistent forward's variants need the tree at commit 4ad3dea: the kernel was deleted after it measured
-2% to +1% against the FA3 order; docs/attention.md "The forward at N 4096".)
The forwards at N 4096 (issue 27): launch configs of the pointer forward (``attention.py``) and the FA3-order
forward (``attention_fa3.py``) against the current defaults and SDPA's cuDNN, in ONE process on a GPU, the variants of
a point interleaved call by call (round robin, rotating), so that drift over the process falls on all alike.

    python3 bench/experiments/fwd15/n4096_ab.py --out OUT.jsonl [--reps 8] [--budget-s 90] [--points 64,0 ...]
    python3 bench/experiments/fwd15/n4096_ab.py --summarize OUT.jsonl

B=4, H=32, fp16 inputs (fp8: ``attention.quantize_fp8`` of them). Per variant and rep (fp814's percall_probe):
``slept``: the call after ``torch.cuda._sleep`` queued ~0.4 ms of GPU spinning, so the events hold its GPU work alone;
``percall``: the bench's method (an event, the call, an event, a synchronisation). Every output is checked first
(fp16 against cuDNN, fp8 against SDPA on the dequantised inputs of the first two heads). cuDNN's context is entered
once outside its timed calls (as the bench does since fp814). Nothing here is a test (docs/attention.md, "The forward
at N 4096").
"""
from __future__ import annotations

import argparse
import json
import random
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)

Z, H = 4, 32
DEVICE = "cuda"
SLEEP_CYCLES = 800_000


def cfg(bm, bn, w, s):
    return dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=w, num_stages=s)


# (D, causal) -> [(name, kind, kwargs)], most important first; kind: ptr16 fa3_16 ptr8 fa3_8 (the launchers of
# attention.py and attention_fa3.py), pers16 pers8 (attention_fa3.attention_persistent(_fp8)), bench:<a --fwd-variants
# name of the bench> (its own JIT, compiled under its knobs), cudnn
CANDIDATES = {
    # round 2 (call R2): the tree's defaults (fp16_ptr, fp16_fa3, fp8_ptr, fp8_fa3: this branch's tables) against the
    # configs they replace (``_was``) and the remaining candidates; round 1 (call R1, commit 29ad2bf) timed the others
    (64, False): [
        ("fp16_ptr", "ptr16", {}),
        ("fp16_ptr_was_128x64_s3", "ptr16", cfg(128, 64, 4, 3)),
        ("cudnn", "cudnn", {}),
        ("fp16_fa3", "fa3_16", {}),
        ("fp16_fa3_64x128", "fa3_16", cfg(64, 128, 4, 2)),
        ("fp8_ptr", "ptr8", {}),
        ("fp8_ptr_64x64_s2", "ptr8", cfg(64, 64, 4, 2)),
        ("fp8_ptr_64x64_s3", "ptr8", cfg(64, 64, 4, 3)),
        ("fp8_ptr_64x128_s2", "ptr8", cfg(64, 128, 4, 2)),
        ("fp16_ptr_64x64_s3", "ptr16", cfg(64, 64, 4, 3)),
    ],
    (64, True): [
        ("fp16_fa3", "fa3_16", {}),
        ("fp16_fa3_was_128x128", "fa3_16", cfg(128, 128, 8, 2)),
        ("cudnn", "cudnn", {}),
        ("fp16_ptr", "ptr16", {}),
        ("fp16_ptr_was_128x64_s3", "ptr16", cfg(128, 64, 4, 3)),
        ("fp16_ptr_64x64_s3", "ptr16", cfg(64, 64, 4, 3)),
        ("fp8_ptr", "ptr8", {}),
        ("fp8_ptr_64x64_s2", "ptr8", cfg(64, 64, 4, 2)),
        ("fp8_ptr_64x64_s3", "ptr8", cfg(64, 64, 4, 3)),
        ("fp16_fa3_64x64_s3", "fa3_16", cfg(64, 64, 4, 3)),
    ],
    (128, False): [
        ("fp16_fa3", "fa3_16", {}),
        ("cudnn", "cudnn", {}),
        ("fp8_ptr", "ptr8", {}),
        ("fp8_ptr_was_128x128_w8", "ptr8", cfg(128, 128, 8, 2)),
        ("fp8_fa3", "fa3_8", {}),
        ("fp8_ptr_64x128_s3", "ptr8", cfg(64, 128, 4, 3)),
        ("fp8_ptr_64x64_s2", "ptr8", cfg(64, 64, 4, 2)),
        ("fp8_ptr_64x64_s4", "ptr8", cfg(64, 64, 4, 4)),
        ("fp16_ptr", "ptr16", {}),
    ],
    (128, True): [
        ("fp16_fa3", "fa3_16", {}),
        ("cudnn", "cudnn", {}),
        ("fp8_ptr", "ptr8", {}),
        ("fp8_ptr_was_128x128_w8", "ptr8", cfg(128, 128, 8, 2)),
        ("fp8_fa3", "fa3_8", {}),
        ("fp8_ptr_64x128_s3", "ptr8", cfg(64, 128, 4, 3)),
        ("fp8_ptr_64x64_s2", "ptr8", cfg(64, 64, 4, 2)),
        ("fp8_pers_ev", "pers8", dict(early_v=True)),
        ("fp16_ptr", "ptr16", {}),
    ],
}


def setup(N, D, causal, names):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from examples.kernels import attention as A
    from examples.kernels import attention_fa3 as AF
    SDPA = torch.nn.functional.scaled_dot_product_attention
    scale = D ** -0.5
    g = torch.Generator(device=DEVICE).manual_seed(0)
    q, k, v = (torch.randn(Z, H, N, D, device=DEVICE, dtype=torch.float16, generator=g) for _ in range(3))
    (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in (q, k, v))
    v8t = v8.transpose(-1, -2).contiguous()
    backend = SDPBackend.CUDNN_ATTENTION if DEVICE == "cuda" else SDPBackend.MATH
    ctx = lambda: sdpa_kernel([backend])  # noqa: E731
    fp8 = (q8, k8, v8t, qs, ks, vs, causal, scale)

    def make(kind, kw):
        if kind == "ptr16":
            return lambda: A.attention_fwd(q, k, v, causal, scale, **kw)
        if kind == "fa3_16":
            return lambda: AF.attention(q, k, v, causal, scale, **kw)
        if kind == "ptr8":
            return lambda: A.attention_fp8(*fp8, **kw)
        if kind == "fa3_8":
            return lambda: AF.attention_fp8(*fp8, **kw)
        if kind in ("pers16", "pers8", "pers16_late", "pers8_late"):
            if kind.endswith("_late"):  # its own JIT, compiled with KERNELC_TMA_EARLY_ISSUE=0 (a tile's copies
                # issued and waited for one at a time, as before the pass took loop bodies)
                import kernelc
                from bench.bench_attention import _environ
                kern = kernelc.jit(AF.attn_fwd_fa3_persistent_kernel.fn)
                fwd = AF.attention_persistent if kind.startswith("pers16") else AF.attention_persistent_fp8
                args = (q, k, v, causal, scale) if kind.startswith("pers16") else fp8
                state = {}

                def late():
                    if not state:
                        state[0] = 1
                        with _environ({"KERNELC_TMA_EARLY_ISSUE": "0"}):
                            return fwd(*args, kernel=kern, **kw)
                    return fwd(*args, kernel=kern, **kw)
                return late
            if kind == "pers16":
                return lambda: AF.attention_persistent(q, k, v, causal, scale, **kw)
            return lambda: AF.attention_persistent_fp8(*fp8, **kw)
        if kind.startswith("bench:"):  # a --fwd-variants entry of the bench (its own JIT, compiled under its knobs)
            from bench.bench_attention import variant_forward
            fwd, first = variant_forward(kind[6:])
            args = fp8 if kind[6:].startswith("fp8") else (q, k, v, causal, scale)
            state = {}

            def call():
                if not state:
                    state[0] = 1
                    return first(*args)
                return fwd(*args)
            return call
        return lambda: SDPA(q, k, v, is_causal=causal, scale=scale)

    err = lambda a, b: ((a.float() - b.float()).abs().max() / b.float().abs().max()).item()  # noqa: E731
    with torch.no_grad(), ctx():
        want = SDPA(q, k, v, is_causal=causal, scale=scale)
    want8 = SDPA(*(t[:1, :2].float() * s for t, s in ((q8, qs), (k8, ks), (v8, vs))), is_causal=causal, scale=scale)
    return make, ctx, (lambda o: err(o, want)), (lambda o: err(o[:1, :2], want8))


def measure(fn, ctx):
    import torch
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
    cm = ctx() if ctx is not None else None
    if cm is not None:
        cm.__enter__()
    try:
        torch.cuda.synchronize()
        torch.cuda._sleep(SLEEP_CYCLES)
        ev[0].record()
        fn()
        ev[1].record()
        ev[1].synchronize()
        ev[2].record()
        fn()
        ev[3].record()
        ev[3].synchronize()
    finally:
        if cm is not None:
            cm.__exit__(None, None, None)
    return ev[0].elapsed_time(ev[1]), ev[2].elapsed_time(ev[3])


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--reps", type=int, default=8)
    ap.add_argument("--budget-s", type=float, default=90.0)
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--points", nargs="*", default=["64,0", "64,1", "128,0", "128,1"], help="D,causal")
    ap.add_argument("--only", nargs="*", default=None, help="variant names (all when not given)")
    ap.add_argument("--exclude", nargs="*", default=[], help="leave out variants whose name holds one of these")
    ap.add_argument("--summarize")
    ap.add_argument("--dry", action="store_true", help="CPU: N=128, one head, the interpreter, host-clock events")
    # s29: a fresh seeded order every round by default; the cyclic order (each variant always after the same one)
    # biased a kernel against its own repeat in 27 of 30 rounds at N 16384 (docs/attention.md, "mc29")
    ap.add_argument("--rotate", action="store_true", help="the old cyclic order (round r starts at variant r)")
    ap.add_argument("--shuffle", action="store_true", help="(the default; kept for older request scripts)")
    ap.add_argument("--seed", type=int, default=29, help="round r's order is drawn with seed + r")
    args = ap.parse_args(argv)
    if args.summarize:
        print(summarize(args.summarize))
        return 0
    import torch
    if args.dry:
        _dry(torch)
        args.seq = 128
    t0 = time.time()
    out = open(args.out, "a")

    def emit(**row):
        out.write(json.dumps(row) + "\n")
        out.flush()

    N = args.seq
    for i, pt in enumerate(args.points):
        # each point's compiles get their share of the budget (the timing itself takes a second or two)
        deadline = t0 + args.budget_s * (i + 1) / len(args.points)
        D, causal = int(pt.split(",")[0]), bool(int(pt.split(",")[1]))
        tag = dict(N=N, D=D, causal=causal)
        cands = [c for c in CANDIDATES[(D, causal)] if (args.only is None or c[0] in args.only)
                 and not any(x in c[0] for x in args.exclude)]
        make, ctx, err16, err8 = setup(N, D, causal, [c[0] for c in cands])
        var = {}
        for name, kind, kw in cands:  # compile, check, warm up
            if time.time() > deadline and kind != "cudnn":
                emit(**tag, variant=name, error="budget")
                continue
            fn = make(kind, kw)
            c = ctx if kind == "cudnn" else None
            try:
                t = time.time()
                if c is not None:
                    with c():
                        o = fn()
                else:
                    o = fn()
                torch.cuda.synchronize()
                e = err8(o) if kind.endswith(("8", "8_late")) or kind.startswith("bench:fp8") else err16(o)
                emit(**tag, variant=name, check=e, first_s=round(time.time() - t, 2))
                var[name] = (fn, c)
            except Exception as ex:
                emit(**tag, variant=name, error=f"{type(ex).__name__}: {str(ex)[:300]}")
        res = {n: [] for n in var}
        orders = []
        for r in range(args.reps):
            names = list(var)
            if args.rotate:
                names = names[r % len(names):] + names[:r % len(names)]
            else:
                random.Random(args.seed + r).shuffle(names)
            orders.append(names)
            for name in names:
                res[name].append(measure(*var[name]))
        for name, rs in res.items():
            emit(**tag, variant=name, slept=[x[0] for x in rs], percall=[x[1] for x in rs])
        emit(**tag, orders=orders, shuffled=not args.rotate)
        del var, make
        torch.cuda.empty_cache()
    emit(total_s=time.time() - t0)
    out.close()
    print(summarize(args.out))
    return 0


def _dry(torch):
    """Stand-ins for the CUDA calls, so that the script's code paths run on a CPU-only machine."""
    global DEVICE, Z, H
    os.environ["KERNELC_INTERPRET"] = "1"
    DEVICE, Z, H = "cpu", 1, 1

    class Event:
        def __init__(self, enable_timing=False):
            self.t = None

        def record(self):
            self.t = time.perf_counter()

        def synchronize(self):
            pass

        def elapsed_time(self, end):
            return (end.t - self.t) * 1e3
    torch.cuda.Event = Event
    torch.cuda.synchronize = lambda: None
    torch.cuda._sleep = lambda cycles: None
    torch.cuda.empty_cache = lambda: None


def summarize(path):
    rows = [json.loads(ln) for ln in open(path) if ln.strip()]
    lines, pts, checks = [], {}, {}
    for r in rows:
        key = (r.get("N"), r.get("D"), r.get("causal"))
        if "slept" in r:
            pts.setdefault(key, {})[r["variant"]] = r
        elif "check" in r:
            checks.setdefault(key, {})[r["variant"]] = r["check"]
        elif "error" in r:
            lines.append(json.dumps(r))
    for (N, D, causal), var in pts.items():
        flop = 4 * Z * H * N * N * D * (0.5 if causal else 1.0)
        tf = lambda ms: flop / ms / 1e9  # noqa: E731
        lines.append(f"== N={N} D={D} causal={int(causal)}: TFLOP/s from medians over reps (slept = GPU time; "
                     f"percall = the bench's method); spread = max/min slept")
        med = {n: {k: statistics.median(r[k]) for k in ("slept", "percall")} for n, r in var.items()}
        for name in sorted(med, key=lambda n: med[n]["slept"]):
            m, sl = med[name], var[name]["slept"]
            lines.append(f"  {name:22s} slept {tf(m['slept']):6.1f}  percall {tf(m['percall']):6.1f}  spread "
                         f"{max(sl) / min(sl):.3f}  check {checks.get((N, D, causal), {}).get(name, float('nan')):.2g}")
        for how in ("slept", "percall"):
            cu = med["cudnn"][how] if "cudnn" in med else float("nan")
            d16 = [med[n][how] for n in ("fp16_ptr", "fp16_fa3") if n in med]
            a16 = [m[how] for n, m in med.items() if n.startswith("fp16")]
            a8 = [m[how] for n, m in med.items() if n.startswith("fp8")]
            d8 = [med[n][how] for n in ("fp8_ptr", "fp8_fa3") if n in med]
            if d16 and a16:
                lines.append(f"  {how:7s} fp16/cuDNN: defaults {cu / min(d16):.3f}, best {cu / min(a16):.3f}"
                             + (f"; fp8/fp16: defaults {min(d16) / min(d8):.3f}, best {min(a16) / min(a8):.3f}"
                                if d8 and a8 else ""))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
