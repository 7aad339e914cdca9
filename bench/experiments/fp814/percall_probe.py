"""Where the bench's per-call time goes beyond GPU time (issue 27), in ONE process on a GPU, the variants interleaved
call by call (round robin) so that drift over the process (clocks, power) falls on all of them alike.

    python3 bench/experiments/fp814/percall_probe.py --out OUT.jsonl [--reps 25] [--budget-s 60]
    python3 bench/experiments/fp814/percall_probe.py --summarize OUT.jsonl

B=4, H=32, N=4096, D 64 and 128, causal and not: this tree's four forwards (pointer and FA3 order, fp16 and fp8) and
SDPA's cuDNN (its context entered inside the timed call, as the bench does, and once outside). Per variant and rep:
- ``percall``: the bench's method (an event, the call, an event, a synchronisation; the GPU idle while the host
  works);
- ``slept``: the same after ``torch.cuda._sleep`` has queued ~0.4 ms of GPU spinning: the host's work and the launch
  happen under the spin, so the events hold the kernel(s) alone, launched into a busy GPU;
- ``b2b``: 5 calls back to back between two events, per call;
- ``host``: the host's time in one call after a synchronisation.
percall - slept is what the per-call method adds to the GPU time (host work, launch latency); slept - b2b what the
neighbouring calls change. Medians over reps. Each output is checked against SDPA first (fp8 on the dequantised
inputs). Nothing here is a test (docs/attention.md, "The forwards' host path").
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)

Z, H, N = 4, 32, 4096
DEVICE = "cuda"
SLEEP_CYCLES = 800_000  # ~0.4 ms at 1.98 GHz: longer than a call's host work


def variants(D, causal):
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
    backend = SDPBackend.CUDNN_ATTENTION if DEVICE == "cuda" else SDPBackend.MATH  # (--dry: the interpreter)
    ctx = lambda: sdpa_kernel([backend])  # noqa: E731

    def cudnn_in():
        with ctx():
            return SDPA(q, k, v, is_causal=causal, scale=scale)

    fp8 = (q8, k8, v8t, qs, ks, vs, causal, scale)
    var = {"fp16_ptr": (lambda: A.attention_fwd(q, k, v, causal, scale), None),
           "fp16_fa3": (lambda: AF.attention(q, k, v, causal, scale), None),
           "fp8_ptr": (lambda: A.attention_fp8(*fp8), None),
           "fp8_fa3": (lambda: AF.attention_fp8(*fp8), None),
           "sdpa_cudnn": (cudnn_in, None),
           "sdpa_cudnn_ctx_out": (lambda: SDPA(q, k, v, is_causal=causal, scale=scale), ctx)}
    err = lambda a, b: ((a.float() - b.float()).abs().max() / b.float().abs().max()).item()  # noqa: E731
    with torch.no_grad():
        want = cudnn_in()
        checks = {n: err(var[n][0](), want) for n in ("fp16_ptr", "fp16_fa3")}
        want8 = SDPA(*(t[:1, :2].float() * s for t, s in ((q8, qs), (k8, ks), (v8, vs))), is_causal=causal,
                     scale=scale)
        checks.update({n: err(var[n][0]()[:1, :2], want8) for n in ("fp8_ptr", "fp8_fa3")})
    return var, checks


def _call(fn, ctx):
    if ctx is None:
        return fn()
    with ctx():
        return fn()


def measure(fn, ctx):
    """One rep of each method for one variant (ms, ms, ms, us)."""
    import torch
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(6)]
    # the context of ctx_out variants is entered before the events (outside the timed region)
    cm = ctx() if ctx is not None else None
    if cm is not None:
        cm.__enter__()
    try:
        torch.cuda.synchronize()
        ev[0].record()
        fn()
        ev[1].record()
        ev[1].synchronize()
        torch.cuda._sleep(SLEEP_CYCLES)
        ev[2].record()
        fn()
        ev[3].record()
        ev[3].synchronize()
        ev[4].record()
        for _ in range(5):
            fn()
        ev[5].record()
        ev[5].synchronize()
        t = time.perf_counter()
        fn()
        host = (time.perf_counter() - t) * 1e6
        torch.cuda.synchronize()
    finally:
        if cm is not None:
            cm.__exit__(None, None, None)
    return ev[0].elapsed_time(ev[1]), ev[2].elapsed_time(ev[3]), ev[4].elapsed_time(ev[5]) / 5, host


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--reps", type=int, default=25)
    ap.add_argument("--budget-s", type=float, default=60.0)
    ap.add_argument("--summarize")
    ap.add_argument("--dry", action="store_true", help="CPU: N=128, one head, the interpreter, host-clock events")
    args = ap.parse_args(argv)
    if args.summarize:
        print(summarize(args.summarize))
        return 0
    import torch
    if args.dry:
        _dry(torch)
    t0 = time.time()
    out = open(args.out, "w")

    def emit(**row):
        out.write(json.dumps(row) + "\n")
        out.flush()

    for D in (64, 128):
        for causal in (False, True):
            tag = dict(N=N, D=D, causal=causal)
            if time.time() - t0 > args.budget_s:
                emit(**tag, error="budget")
                continue
            try:
                var, checks = variants(D, causal)
            except Exception as e:
                emit(**tag, error=f"setup: {type(e).__name__}: {str(e)[:300]}")
                continue
            emit(**tag, check=checks)
            for name, (fn, ctx) in var.items():  # warm up (and compile)
                for _ in range(2):
                    _call(fn, ctx)
            torch.cuda.synchronize()
            res = {n: [] for n in var}
            for r in range(args.reps):
                names = list(var)
                for name in names[r % len(names):] + names[:r % len(names)]:
                    res[name].append(measure(*var[name]))
            for name, rs in res.items():
                emit(**tag, variant=name, percall=[x[0] for x in rs], slept=[x[1] for x in rs],
                     b2b=[x[2] for x in rs], host=[x[3] for x in rs])
            del var
            torch.cuda.empty_cache()
    emit(total_s=time.time() - t0)
    out.close()
    print(summarize(args.out))
    return 0


def _dry(torch):
    """Stand-ins for the CUDA calls, so that the script's code paths run on a CPU-only machine."""
    global DEVICE, Z, H, N
    os.environ["KERNELC_INTERPRET"] = "1"
    DEVICE, Z, H, N = "cpu", 1, 1, 128

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
    lines = []
    pts = {}
    for r in rows:
        if "variant" in r:
            pts.setdefault((r["D"], r["causal"]), {})[r["variant"]] = r
        elif "check" in r or "error" in r:
            lines.append(json.dumps(r))
    for (D, causal), var in pts.items():
        flop = 4 * Z * H * N * N * D * (0.5 if causal else 1.0)
        tf = lambda ms: flop / ms / 1e9  # noqa: E731
        lines.append(f"== N={N} D={D} causal={int(causal)}: medians over reps; ms (TFLOP/s); host us")
        med = {}
        for name, r in var.items():
            m = med[name] = {k: statistics.median(r[k]) for k in ("percall", "slept", "b2b", "host")}
            lines.append(f"  {name:19s} percall {m['percall']:.4f} ({tf(m['percall']):5.1f})  slept {m['slept']:.4f} "
                         f"({tf(m['slept']):5.1f})  b2b {m['b2b']:.4f} ({tf(m['b2b']):5.1f})  host {m['host']:5.1f}"
                         f"  percall-slept {1e3 * (m['percall'] - m['slept']):6.1f} us")
        for how in ("percall", "slept", "b2b"):
            f16 = min(med[n][how] for n in ("fp16_ptr", "fp16_fa3") if n in med)
            f8 = min(med[n][how] for n in ("fp8_ptr", "fp8_fa3") if n in med)
            cu = med["sdpa_cudnn"][how] if "sdpa_cudnn" in med else float("nan")
            lines.append(f"  {how:8s} best fp8 / best fp16 {f16 / f8:.3f}; best fp16 / cuDNN {cu / f16:.3f}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
