"""The forwards' host time a call (issue 27's per-call cells): each call timed on the host (perf_counter) while the
GPU is still busy with a queued sleep, so the time is the Python and launch path alone -- the fp8 default against our
fp16 defaults, cuDNN, and the fp8 call's pieces (its launch plan's ``launch`` with the output and scales made
beforehand; ``torch.empty`` of the output; the three scale checks).

    python3 bench/experiments/fp828/host_probe.py [--out OUT.json] [--calls 60] [--dry]

Nothing here is a test.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--calls", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dry", action="store_true")
    args = ap.parse_args(argv)
    if args.dry:
        os.environ["KERNELC_INTERPRET"] = "1"
    import torch
    from examples.kernels import attention as A
    from examples.kernels import attention_fa3 as AF
    dev = "cpu" if args.dry else "cuda"
    Z, H, N = (1, 1, 128) if args.dry else (4, 32, 4096)
    sync = (lambda: None) if args.dry else torch.cuda.synchronize
    sleep = (lambda c: None) if args.dry else torch.cuda._sleep
    rows = []
    for D, causal in ((128, True), (64, True), (128, False)):
        g = torch.Generator(device=dev).manual_seed(0)
        q, k, v = (torch.randn(Z, H, N, D, device=dev, dtype=torch.float16, generator=g) for _ in range(3))
        (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in (q, k, v))
        v8t = A.fp8_v_key_order(v8.transpose(-1, -2).contiguous())
        fp8 = (q8, k8, v8t, qs, ks, vs, causal, D ** -0.5)
        A.attention_fp8(*fp8, key_order=True)
        plan = [p for key, p in A._PLANS.items() if key[0] == "fp8" and key[1] == q8.shape and key[11] == causal][-1]
        o = torch.empty(plan.out_shape, device=dev, dtype=plan.out_dtype)
        cands = {
            "fp8_default": lambda: A.attention_fp8(*fp8, key_order=True),
            "fp8_plan_launch": lambda: plan.launch(q8, k8, v8t, o, o, qs, ks, vs),
            "fp8_empty": lambda: torch.empty(plan.out_shape, device=dev, dtype=plan.out_dtype),
            "fp8_scale_args": lambda: (A._scale_arg(qs, q8.device), A._scale_arg(ks, q8.device),
                                       A._scale_arg(vs, q8.device)),
            "fp16_ptr": lambda: A.attention_fwd(q, k, v, causal, D ** -0.5),
            "fp16_fa3": lambda: AF.attention(q, k, v, causal, D ** -0.5),
        }
        if not args.dry:
            from torch.nn.attention import SDPBackend, sdpa_kernel
            ctx = sdpa_kernel([SDPBackend.CUDNN_ATTENTION])
            ctx.__enter__()
            cands["cudnn"] = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                                                      scale=D ** -0.5)
        for fn in cands.values():
            fn()
        sync()
        res = {n: [] for n in cands}
        for r in range(args.rounds):
            for name, fn in cands.items():
                sync()
                sleep(20_000_000)  # ~10 ms of queued GPU spin: every call below returns before the GPU gets to it
                for _ in range(args.calls if not args.dry else 2):
                    t = time.perf_counter()
                    fn()
                    res[name].append((time.perf_counter() - t) * 1e6)
                sync()
        if not args.dry:
            ctx.__exit__(None, None, None)
        for name, ts in res.items():
            row = dict(D=D, causal=causal, N=N, variant=name, median_us=round(statistics.median(ts), 2),
                       p10_us=round(sorted(ts)[len(ts) // 10], 2), calls=len(ts))
            rows.append(row)
            print(f"host D={D} causal={int(causal)} {name:16s} median {row['median_us']:7.2f} us  p10 "
                  f"{row['p10_us']:7.2f}", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
