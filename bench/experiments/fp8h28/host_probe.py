"""fp8h28's host probe (issue 27, the fp8 forward's per-call cost): each call timed on the host (perf_counter) while the
GPU is busy with a queued sleep (fp828's host_probe.py method), in ONE process, rounds alternating the variants: the
fp8 forward as main called it (``mainpath.main_fp8``: main's wrapper body and the prepared launch's descriptor body)
against this tree's (``attention_fp8``), our fp16 pointer forward, cuDNN; and the new call's pieces.

    python3 bench/experiments/fp8h28/host_probe.py [--out OUT.json] [--calls 60] [--rounds 8] [--dry]

Nothing here is a test.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path[:0] = [ROOT, HERE]


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--calls", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--points", nargs="*", default=["64,1", "128,1"])
    ap.add_argument("--dry", action="store_true")
    args = ap.parse_args(argv)
    if args.dry:
        os.environ["KERNELC_INTERPRET"] = "1"
    import torch
    from examples.kernels import attention as A
    import mainpath
    dev = "cpu" if args.dry else "cuda"
    Z, H, N = (1, 1, 128) if args.dry else (4, 32, 4096)
    sync = (lambda: None) if args.dry else torch.cuda.synchronize
    sleep = (lambda c: None) if args.dry else torch.cuda._sleep
    main8 = mainpath.main_fp8(A)
    rows = []
    for pt in args.points:
        D, causal = int(pt.split(",")[0]), bool(int(pt.split(",")[1]))
        g = torch.Generator(device=dev).manual_seed(0)
        q, k, v = (torch.randn(Z, H, N, D, device=dev, dtype=torch.float16, generator=g) for _ in range(3))
        (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in (q, k, v))
        v8t = A.fp8_v_key_order(v8.transpose(-1, -2).contiguous())
        fp8 = (q8, k8, v8t, qs, ks, vs, causal, D ** -0.5)
        o_new = A.attention_fp8(*fp8, key_order=True)
        main8(*fp8, key_order=True)
        o_main = main8(*fp8, key_order=True)
        plan = [p for key, p in A._PLANS.items() if key[0] == "fp8" and key[1] == q8.shape and key[11] == causal
                and key[21] is None][-1]
        o = torch.empty(plan.out_shape, device=dev, dtype=plan.out_dtype)
        cands = {
            "fp8_main": lambda: main8(*fp8, key_order=True),
            "fp8_new": lambda: A.attention_fp8(*fp8, key_order=True),
            "fp8_new_fast": lambda: plan.fast(q8, k8, v8t, o, o, qs, ks, vs),
            "fp8_new_empty": lambda: torch.empty_like(q8, dtype=plan.out_dtype),
            "fp8_new_scales": lambda: A._scale_args(qs, ks, vs, q8.device),
            "fp16_ptr": lambda: A.attention_fwd(q, k, v, causal, D ** -0.5),
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
        same = bool(torch.equal(o_new, o_main))
        res = {n: [] for n in cands}
        names = list(cands)
        for r in range(args.rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                fn = cands[name]
                sync()
                sleep(20_000_000)  # ~10 ms of queued GPU spin: every call below returns before the GPU gets to it
                for _ in range(args.calls if not args.dry else 2):
                    t = time.perf_counter()
                    fn()
                    res[name].append((time.perf_counter() - t) * 1e6)
                sync()
        if not args.dry:
            ctx.__exit__(None, None, None)
            # what a call runs on the GPU: the kernels, memsets and copies of 3 calls each (the forward alone: 3)
            from torch.profiler import ProfilerActivity, profile
            for name in ("fp8_main", "fp8_new", "fp16_ptr"):
                sync()
                try:
                    with profile(activities=[ProfilerActivity.CUDA]) as prof:
                        for _ in range(3):
                            cands[name]()
                        sync()
                    ev = [e.name for e in prof.events() if e.device_type.name == "CUDA"]
                except Exception as ex:  # the probe's timings above stand without it
                    print(f"gpu work D={D} {name}: profiler failed: {type(ex).__name__}: {ex}"[:300], flush=True)
                    continue
                print(f"gpu work D={D} causal={int(causal)} {name}: {len(ev)} events in 3 calls: "
                      f"{sorted(set(n[:60] for n in ev))}", flush=True)
                rows.append(dict(D=D, causal=causal, N=N, variant=name, gpu_events_3_calls=len(ev),
                                 gpu_event_names=sorted(set(ev))))
        print(f"D={D} causal={int(causal)}: fp8 main's and new outputs bit-identical: {same}; main's plan kept its "
              f"descriptor launch: {main8.still_off()}", flush=True)
        for name, ts in res.items():
            row = dict(D=D, causal=causal, N=N, variant=name, median_us=round(statistics.median(ts), 2),
                       p10_us=round(sorted(ts)[len(ts) // 10], 2), p90_us=round(sorted(ts)[len(ts) * 9 // 10], 2),
                       calls=len(ts), same_output=same)
            rows.append(row)
            print(f"host D={D} causal={int(causal)} {name:15s} median {row['median_us']:7.2f} us  p10 "
                  f"{row['p10_us']:7.2f}  p90 {row['p90_us']:7.2f}", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
