"""KERNELC_SMEM_REUSE off/on on the GPU: tutorial 06's backward shape (tests/compiler/fused_bwd_kernels.py, our
own text of it) at its configuration (4 warps, 5 stages), checked against torch autograd and timed.

    python3 bench/experiments/tutorial_gaps/smem_reuse_bwd.py [--out FILE.json] [--n-ctx 4096]

Per (HEAD_DIM, causal, knob): shared memory, registers, spills, blocks per SM the shared memory allows, the
largest error against torch, and the median time of the kernel (``do_bench``). A config that does not fit
(``OutOfResources``: d128 causal without the knob) is recorded as such. Nothing here is a test.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="smem_reuse_bwd.json")
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--heads", type=int, default=8)
    args = ap.parse_args(argv)
    import torch
    from kernelc.errors import OutOfResources
    from kernelc.runtime.launcher import get_state
    from kernelc.runtime.timing import do_bench
    from tests.compiler import fused_bwd_kernels as FB

    rows = []
    torch.manual_seed(0)
    B, H, N = args.batch, args.heads, args.n_ctx
    for D in (64, 128):
        for causal in (True, False):
            q, k, v, do = (torch.randn(B, H, N, D, device="cuda", dtype=torch.float16) * 0.5 for _ in range(4))
            sm_scale = D ** -0.5
            small = [t[:1, :2, :1024].contiguous() for t in (q, k, v, do)]
            ref = FB.reference(*small, causal, sm_scale)
            full = FB.prepare(q, k, v, do, causal, sm_scale)
            for knob in ("0", "1"):
                os.environ["KERNELC_SMEM_REUSE"] = knob
                get_state(FB.fused_attn_bwd)["cache"].clear()  # the knob is read at compile time
                row = dict(head_dim=D, causal=causal, smem_reuse=knob == "1", n_ctx=N, batch=B, heads=H)
                try:
                    got = FB.run(*small, causal, sm_scale)
                    torch.cuda.synchronize()
                    row["max_abs_err"] = max(float((g.float() - r).abs().max()) for g, r in zip(got, ref))
                    ck = FB.launch(full)
                    for a in ("shared", "n_regs", "n_spills"):
                        row[a] = getattr(ck, a, None)
                    row["ms"] = do_bench(lambda: FB.launch(full), warmup=25, rep=200, return_mode="median")
                    # the backward's five matmuls (2.5x the forward's two), half of them when causal
                    flops = 2.5 * 4 * B * H * N * N * D * (0.5 if causal else 1.0)
                    row["tflops"] = flops / row["ms"] * 1e-9
                except OutOfResources as e:
                    row["error"] = str(e)
                print(json.dumps(row), flush=True)
                rows.append(row)
            del full
    os.environ.pop("KERNELC_SMEM_REUSE", None)
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
