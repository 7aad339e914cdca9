"""The dK/dV loop of the attention backward (sm_90a SASS, CPU compile) with each instruction's position, to see where
the LSE/delta loads (LDG) sit against the wgmmas and their waits.

    PYTHONPATH=$PWD python3 bench/experiments/att21/loop_sass.py [--kernel dkdv|dkdv_ds] [--causal 0] [--grep LDG ...]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "attention_bwd_cudnn"))
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "tutorial_gaps"))
sys.path.insert(0, ROOT)


def main():
    from bwd_sass import compile_kernel
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel", default="dkdv_ds")
    ap.add_argument("--causal", type=int, default=0)
    ap.add_argument("--config", default="64,128,8,3")
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--extra", default="{}", help="more constexprs, JSON (e.g. '{\"L1_PF\": true}')")
    ap.add_argument("--grep", nargs="*", default=["LDG", "HGMMA", "DEPBAR", "SYNCS", "BAR", "UTMA", "MUFU.EX2", "STSM",
                                                  "BRA", "WARPGROUP"])
    args = ap.parse_args()
    ck = compile_kernel(args.head_dim, bool(args.causal), args.kernel, tuple(int(x) for x in args.config.split(",")),
                        extra=json.loads(args.extra))
    sass = ck.asm["sass"].splitlines()
    print(f"regs {ck.n_regs} spills {ck.n_spills} shared {ck.shared}")
    n = 0
    for ln in sass:
        m = re.search(r"/\*([0-9a-f]{4,})\*/\s+(.*?);", ln)
        if not m:
            if re.match(r"\s*\.L", ln):
                print(ln.strip())
            continue
        n += 1
        ins = m.group(2)
        if any(g in ins for g in args.grep):
            print(f"{n:5d} {m.group(1)} {ins[:110]}")


if __name__ == "__main__":
    main()
