"""att19 (issue 27, the fp8 forward per call): the forwards launched through prepared launches (``kernel.prepare``:
this tree's plans) against the same plans launched through the binder (``kernel[grid](*all arguments)``: the plans as
they were), the same compiled kernels, interleaved call by call in ONE process.

    python3 bench/experiments/att19/host_ab.py --out OUT.jsonl [--rounds 6] [--points 128,1 128,0]

B=4, H=32, N 4096 (``--seq``). Each variant and round: ``slept`` (GPU time: the call queued behind ~0.4 ms of
``torch.cuda._sleep``, so the events hold its GPU work alone), ``percall`` (the bench's method: an event, the call, an
event, a synchronisation, from an idle GPU: the host path is inside it) and ``host_us`` (perf_counter around one call
after a synchronisation); also the method's floor (``tiny_kc``: a one-program kernelc kernel through a prepared launch;
``tiny_torch``: a 64-element fill), whose per call minus GPU time is what the method adds to any call. Prints
medians over rounds and fp8 / best fp16 both ways. Nothing here is a test
(docs/attention.md, "att19").
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)

Z, H = 4, 32
SLEEP_CYCLES = 800_000  # ~0.4 ms at the H200's clock


def _binder_launch(self, *tensors):
    """The pointer forwards' plan launch as before prepared launches: the binder over every argument."""
    return self.kernel[self.grid](*tensors, *self.tail, **self.opts)


def _binder_launch_fa3(plan, q, k, v, o, scales):
    AF = sys.modules["examples.kernels.attention_fa3"]
    dq, dk, dv, do = plan.descs
    plan.kernel[plan.grid](plan.sm_scale, AF._rebased(dq, q), AF._rebased(dk, k), AF._rebased(dv, v),
                           AF._rebased(do, o), plan.N, *scales, *plan.tail, **plan.opts)
    return o


class Switch:
    def __init__(self):
        from examples.kernels import attention as A
        from examples.kernels import attention_fa3 as AF
        self.A, self.AF = A, AF
        self.prep = (A._Plan.launch, AF._launch)

    def set(self, how):
        if how == "prep":
            self.A._Plan.launch, self.AF._launch = self.prep
        else:
            self.A._Plan.launch, self.AF._launch = _binder_launch, _binder_launch_fa3


def _tiny_kernel():
    import kernelc
    import kernelc.language as kl

    @kernelc.jit
    def tiny(x_ptr, v):
        kl.store(x_ptr + kl.program_id(0), v)
    return tiny


def measure(torch, fn):
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
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
    t = time.perf_counter()
    fn()
    host = (time.perf_counter() - t) * 1e6
    torch.cuda.synchronize()
    return ev[0].elapsed_time(ev[1]), ev[2].elapsed_time(ev[3]), host


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--points", nargs="+", default=["128,1", "128,0"], help="D,causal")
    ap.add_argument("--budget-s", type=float, default=10.0, help="seconds of timing rounds a point")
    ap.add_argument("--variants", nargs="+", default=["fp8_ptr", "fp16_fa3"],
                    choices=["fp8_ptr", "fp16_fa3", "fp16_ptr"])
    args = ap.parse_args(argv)
    import torch
    from bench import bench_attention as BA
    sw = Switch()
    A, AF = sw.A, sw.AF
    SDPA = torch.nn.functional.scaled_dot_product_attention
    from torch.nn.attention import SDPBackend, sdpa_kernel
    t0 = time.time()
    out = open(args.out, "w") if args.out else None
    lines = []
    for pt in args.points:
        D, causal = (int(x) for x in pt.split(","))
        causal = bool(causal)
        N, scale = args.seq, D ** -0.5
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn(Z, H, N, D, device="cuda", dtype=torch.float16, generator=g) for _ in range(3))
        (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in (q, k, v))
        vko = A.fp8_v_key_order(v8.transpose(-1, -2).contiguous())
        calls = {
            "fp8_ptr": lambda: A.attention_fp8(q8, k8, vko, qs, ks, vs, causal, scale, key_order=True),
            "fp16_fa3": lambda: AF.attention(q, k, v, causal, scale),
            "fp16_ptr": lambda: A.attention_fwd(q, k, v, causal, scale),
        }
        calls = {n: f for n, f in calls.items() if n in args.variants}
        # the floor of the per-call method: one tiny program (kernelc, prepared) and a tiny torch kernel
        tiny, small = _tiny_kernel(), torch.zeros(64, device="cuda")
        tiny_launch = tiny.prepare((1,), small, 1.0)
        floors = {"tiny_kc": lambda: tiny_launch(small), "tiny_torch": lambda: small.fill_(1.0)}
        ref = SDPA(q, k, v, is_causal=causal, scale=scale)
        want8 = SDPA(*(t[:1, :2].float() * s for t, s in ((q8, qs), (k8, ks), (v8, vs))), is_causal=causal,
                     scale=scale)
        for how in ("prep", "bind"):  # each output checked both ways (and the kernels compiled once)
            sw.set(how)
            for name, f in calls.items():
                o = f()
                err = (BA._err(o[:1, :2], want8) if name.startswith("fp8") else BA._err(o, ref))
                lines.append(f"check D={D} causal={int(causal)} {name} {how}: {err:.3g}")
                print(lines[-1], flush=True)
        res = {}
        t0 = time.time()  # the budget is the rounds' (after this point's compiles and checks)
        variants = [(n, h) for n in calls for h in ("prep", "bind")] + [("cudnn", "-")] + [(n, "-") for n in floors]
        for r in range(args.rounds):
            if time.time() - t0 > args.budget_s:
                break
            order = variants if r % 2 == 0 else variants[::-1]
            for name, how in order:
                if name == "cudnn":
                    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                        m = measure(torch, lambda: SDPA(q, k, v, is_causal=causal, scale=scale))
                elif name in floors:
                    m = measure(torch, floors[name])
                else:
                    sw.set(how)
                    m = measure(torch, calls[name])
                res.setdefault((name, how), []).append(m)
                if out:
                    out.write(json.dumps(dict(N=N, D=D, causal=causal, variant=name, how=how, round=r,
                                              slept=m[0], percall=m[1], host_us=m[2])) + "\n")
        sw.set("prep")
        if not res:
            continue
        flop = 4 * Z * H * N * N * D * (0.5 if causal else 1.0)
        med = {k: [statistics.median(x[i] for x in v) for i in range(3)] for k, v in res.items()}
        lines.append(f"== N={N} D={D} causal={int(causal)}: medians over {len(next(iter(res.values())))} rounds: "
                     f"TFLOP/s slept / percall, host us")
        for (name, how), (sl, pc, hu) in med.items():
            lines.append(f"  {name:9s} {how:4s} {flop / sl / 1e9:7.1f} / {flop / pc / 1e9:7.1f}  host {hu:6.1f} us  "
                         f"(ms {sl:.4f} / {pc:.4f})")
        for how in ("prep", "bind"):
            f16s = [med[(n, how)] for n in ("fp16_fa3", "fp16_ptr") if (n, how) in med]
            if ("fp8_ptr", how) not in med or not f16s:
                continue
            f8 = med[("fp8_ptr", how)]
            f16 = min(f16s, key=lambda m: m[0])
            f16p = min(m[1] for m in f16s)
            lines.append(f"  fp8/best fp16 ({how}): slept {f16[0] / f8[0]:.3f}  percall {f16p / f8[1]:.3f}")
        print("\n".join(lines[-(len(med) + 3):]), flush=True)
        del q, k, v, q8, k8, v8, vko, ref
        torch.cuda.empty_cache()
    if out:
        out.close()
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
