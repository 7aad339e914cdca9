"""Launch the attention backward (``examples/kernels/attention_bwd.py``) a few times at one shape, for Nsight Compute
to profile one launch of one of its kernels; compile knobs come from the environment (``KERNELC_*``).

    ncu --clock-control none --set full --import-source yes -k regex:attn_bwd_dkdv --launch-skip 2 \\
        --launch-count 1 -f -o OUT python3 bench/experiments/attention_bwd_cudnn/ncu_bwd.py --mode ds

Each call of the backward launches the preprocess, dK/dV and dQ kernels once (ds: the dQ GEMM); ``--calls`` calls
(default 3) after one forward. Nothing here is a test (docs/attention.md, "The dS^T stage published by the ring's
barrier").
"""
from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(HERE))))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", default="ds", choices=["separate", "atomic", "ds"])
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--causal", type=int, choices=[0, 1], default=0)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--calls", type=int, default=3)
    args = p.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        print("ncu_bwd: needs a CUDA GPU", file=sys.stderr)
        return 2
    from examples.kernels import attention as A
    from examples.kernels import attention_bwd as B
    g = torch.Generator(device="cuda").manual_seed(0)
    shape = (args.batch, args.heads, args.seq, args.head_dim)
    q, k, v, do = (torch.randn(shape, device="cuda", dtype=torch.float16, generator=g) for _ in range(4))
    scale = args.head_dim ** -0.5
    o, lse = A.attention_fwd(q, k, v, bool(args.causal), scale, return_lse=True)
    for _ in range(args.calls):
        B.attention_bwd(do, q, k, v, o, lse, bool(args.causal), scale, dq_mode=args.mode)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
