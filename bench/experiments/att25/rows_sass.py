"""ROWS_TMA off / on, compiled on CPU for sm_90a: ds's D=128 dK/dV kernel (the non-causal default with its producer
warpgroup, the causal default without one) -- registers, spills, shared memory, and per MMA loop (bwd06_sass's
``mma_loops``: the body between a label and its backward branch) the global loads (LDG), shared loads (LDS), TMA
copies (UTMALDG), barriers and the instruction total.

    PYTHONPATH=$PWD python3 bench/experiments/att25/rows_sass.py [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "attention_bwd_cudnn"))
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "tutorial_gaps"))
sys.path.insert(0, ROOT)

# name, causal, constexprs beside the config's (DS_DKDV_CONFIGS[128]) as the wrapper passes them at N 4096
VARIANTS = [
    ("ds dK/dV, producer warpgroup (the non-causal default)", False, {"WS": 1, "EVEN_M": True}),
    ("ds dK/dV (the causal default)", True, {"EVEN_M": True, "GROUP": 8}),
]
KEYS = ("LDG", "LDS", "UTMALDG", "SYNCS", "BAR.SYNC", "HGMMA", "MUFU.EX2", "total")


def main():
    from bwd_sass import compile_kernel
    from bwd06_sass import mma_loops
    from examples.kernels import attention_bwd as B
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = []
    for name, causal, extra in VARIANTS:
        for on in (False, True):
            ck = compile_kernel(128, causal, "dkdv_ds", B.DS_DKDV_CONFIGS[128], extra=dict(extra, ROWS_TMA=on))
            loops = [{k: lp.get(k, 0) for k in KEYS} for lp in mma_loops(ck.asm["sass"])]
            r = dict(variant=name, causal=causal, rows_tma=on, regs=ck.n_regs, spills=ck.n_spills, shared=ck.shared,
                     loops=loops)
            rows.append(r)
            print(f"{name:55s} ROWS_TMA={int(on)} regs {ck.n_regs} spills {ck.n_spills} smem {ck.shared} loops "
                  + "; ".join(" ".join(f"{k} {lp[k]}" for k in KEYS) for lp in loops), flush=True)
    if args.json:
        json.dump(dict(target="sm_90a", rows=rows), open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
