"""SDPA's cuDNN forward timed by the bench's own ``timeit`` with its backend context entered inside every timed call
(the bench until fp814) or once around the timing (the bench now), alternating, in ONE process on a GPU.

    python3 bench/experiments/fp814/sdpa_ctx_ab.py --out OUT.json [--rounds 3] [--rep-ms 30]

B=4, H=32, N=4096, D 64 and 128, causal and not; FlashAttention's backend too. Prints per point the medians over
rounds of each way's median ms and their ratio. Nothing here is a test (docs/attention.md, "The forwards' host path").
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rep-ms", type=float, default=30.0)
    args = ap.parse_args(argv)
    import torch
    from bench.bench_attention import sdpa_backends, timeit
    SDPA = torch.nn.functional.scaled_dot_product_attention
    rows = []
    for D in (64, 128):
        for causal in (False, True):
            g = torch.Generator(device="cuda").manual_seed(0)
            q, k, v = (torch.randn(4, 32, 4096, D, device="cuda", dtype=torch.float16, generator=g)
                       for _ in range(3))
            for name, ctx in sdpa_backends():
                def inside(ctx=ctx):
                    with ctx():
                        return SDPA(q, k, v, is_causal=causal, scale=D ** -0.5)

                def outside():
                    return SDPA(q, k, v, is_causal=causal, scale=D ** -0.5)
                res = {"inside": [], "outside": []}
                for r in range(args.rounds):
                    for way in (("inside", "outside") if r % 2 == 0 else ("outside", "inside")):
                        if way == "inside":
                            res[way].append(timeit(inside, args.rep_ms)["ms"])
                        else:
                            with ctx():
                                res[way].append(timeit(outside, args.rep_ms)["ms"])
                row = dict(D=D, causal=causal, backend=name, **res)
                rows.append(row)
                i, o = statistics.median(res["inside"]), statistics.median(res["outside"])
                print(f"D={D} causal={int(causal)} {name:11s} inside {i:.4f} ms  outside {o:.4f} ms  "
                      f"inside/outside {i / o:.3f}  (rounds: {res})", flush=True)
    json.dump(rows, open(args.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
