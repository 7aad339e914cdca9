"""Where the host time of the attention backward goes through autograd, step by step (docs/attention.md, "The
autograd path's extra time"): host clock stamps (``time.perf_counter``) taken in the calling thread and in the
thread that runs ``AttentionFunction.backward`` (torch's autograd device thread), per call:

- ``enter_us``: from ``o.backward(do)`` being called to ``attention_bwd`` being entered (the engine's dispatch);
- ``setup_us``: ``attention_bwd_steps`` (contiguity, allocations, configs) until the first launch is issued;
- ``launch_us``: each launch's host time (``preprocess``, ``dkdv``, ``dq``, ...);
- ``exit_us``: from the last launch returning to ``o.backward`` returning (gradient accumulation, engine exit);
- ``direct``: the same stamps for ``attention_bwd`` called in the calling thread.

The GPU is synchronised before each call (as the bench's timing starts from an idle GPU). Medians of ``--reps``.

    PYTHONPATH=$PWD python3 bench/experiments/attention_autograd/host_trace.py [--head-dim 64] [--causal 1]
        [--dq-mode separate] [--reps 20] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--head-dim", type=int, nargs="+", default=[64, 128])
    p.add_argument("--causal", type=int, nargs="+", default=[0, 1])
    p.add_argument("--dq-mode", default="separate")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--out", default=None)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                   help="cpu: the interpreter at a tiny size, a smoke run of this script (no meaningful times)")
    args = p.parse_args(argv)
    if args.device == "cpu":
        import os
        os.environ["KERNELC_INTERPRET"] = "1"
    import torch
    dev = args.device
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    from examples.kernels import attention_bwd as B
    stamps = []
    real_steps = B.attention_bwd_steps

    def traced_steps(*a, **k):
        stamps.append(("enter", time.perf_counter()))
        grads, steps = real_steps(*a, **k)
        stamps.append(("setup", time.perf_counter()))

        def wrap(name, launch):
            def run():
                launch()
                stamps.append((name, time.perf_counter()))
            return run
        return grads, [(n, wrap(n, f)) for n, f in steps]

    B.attention_bwd_steps = traced_steps
    rows = []
    for D in args.head_dim:
        for causal in map(bool, args.causal):
            Z, H, N = (4, 32, args.seq) if dev == "cuda" else (1, 1, 64)
            g = torch.Generator(device=dev).manual_seed(0)
            q, k, v, do = (torch.randn(Z, H, N, D, device=dev, dtype=torch.float16, generator=g) for _ in range(4))
            leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
            o = B.attention(*leaves, causal=causal, dq_mode=args.dq_mode)
            from examples.kernels.attention import attention_fwd
            o2, lse = attention_fwd(q, k, v, causal, D ** -0.5, return_lse=True)
            row = dict(seq=N, head_dim=D, causal=causal, dq_mode=args.dq_mode)
            for path in ("autograd", "direct"):
                per = {}
                for i in range(args.reps + 2):
                    for t in leaves:
                        t.grad = None
                    sync()
                    stamps.clear()
                    t0 = time.perf_counter()
                    if path == "autograd":
                        o.backward(do, retain_graph=True)
                    else:
                        B.attention_bwd(do, q, k, v, o2, lse, causal, D ** -0.5, args.dq_mode)
                    t1 = time.perf_counter()
                    if i < 2:
                        continue  # warm-up (compiles)
                    names = [n for n, _ in stamps]
                    ts = [t for _, t in stamps]
                    sample = {"enter_us": (ts[0] - t0) * 1e6, "setup_us": (ts[1] - ts[0]) * 1e6,
                              "exit_us": (t1 - ts[-1]) * 1e6, "total_us": (t1 - t0) * 1e6}
                    for j in range(2, len(ts)):
                        sample[f"launch_{names[j]}_us"] = (ts[j] - ts[j - 1]) * 1e6
                    for key, val in sample.items():
                        per.setdefault(key, []).append(val)
                row[path] = {key: round(statistics.median(vals), 1) for key, vals in per.items()}
            rows.append(row)
            print(json.dumps(row), flush=True)
    B.attention_bwd_steps = real_steps
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
