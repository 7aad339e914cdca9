"""KERNELC_WGMMA_ZERO_ACC off / on, compiled on CPU for sm_90a: the attention kernels with zero-started wgmma dots under a
producer warpgroup or not -- registers, spills, shared memory, SASS instructions, the ``WARPGROUP.DEPBAR.LE gsb0``
waits in order, the HGMMAs that start from ``RZ`` (scale-d false) and the ``MOV``s. Each (variant, knob) compiles in a
child process (the knob is read at compile time and is in the cache key).

    PYTHONPATH=$PWD python3 bench/experiments/att24/zero_acc_sass.py [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))

# name, kernel, causal, constexprs beside the config's (the config: the kernel's table at D=128)
VARIANTS = [
    ("ds dK/dV, producer warpgroup (the non-causal default)", "dkdv_ds", False, {"WS": 1, "EVEN_M": True}),
    ("ds dK/dV (the causal default)", "dkdv_ds", True, {"EVEN_M": True, "GROUP": 8}),
    ("ds dK/dV causal, producer warpgroup (dswsc)", "dkdv_ds", True, {"WS": 1, "EVEN_M": True, "GROUP": 8}),
    ("separate dK/dV, producer warpgroup (DKDV_WS)", "dkdv", False, {"WS": 1}),
    ("FA3-order forward (attention_fa3)", "fa3", False, {}),
]


def one(kernel, causal, extra):
    sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "attention_bwd_cudnn"))
    sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "tutorial_gaps"))
    sys.path.insert(0, ROOT)
    if kernel == "fa3":
        from examples.kernels import attention_fa3 as AF
        from tests.compiler.test_fa3_configs import _compile
        bm, bn, w, st = AF.config(128, causal)
        ck = _compile(128, False, causal, bm, bn, w, st)
    else:
        from bwd_sass import compile_kernel
        from examples.kernels import attention_bwd as B
        ck = compile_kernel(128, causal, kernel, (B.DS_DKDV_CONFIGS if kernel == "dkdv_ds" else B.DKDV_CONFIGS)[128],
                            extra=extra)
    lines = [ln for ln in ck.asm["sass"].splitlines() if ln.strip().startswith("/*")]
    return dict(regs=ck.n_regs, spills=ck.n_spills, shared=ck.shared, sass=len(lines),
                waits=re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x[0-9a-f]+)", ck.asm["sass"]),
                hgmma_rz=sum("HGMMA" in ln and "RZ, !UPT" in ln for ln in lines),
                movs=sum(bool(re.search(r"\b(IMAD\.)?MOV(\.U32)? ", ln)) for ln in lines))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        i, knob = int(args.child[0]), args.child[1]
        _, kernel, causal, extra = VARIANTS[i]
        print(json.dumps(one(kernel, causal, extra)))
        return
    rows = []
    for i, (name, kernel, causal, extra) in enumerate(VARIANTS):
        for knob in ("off", "ws", "on"):
            env = dict(os.environ, KERNELC_WGMMA_ZERO_ACC=knob, PYTHONPATH=ROOT)
            out = subprocess.run([sys.executable, __file__, "--child", str(i), knob, "x"], env=env, check=True,
                                 capture_output=True, text=True).stdout.strip().splitlines()[-1]
            r = dict(variant=name, causal=causal, zero_acc=knob, **json.loads(out))
            rows.append(r)
            print(f"{name:55s} zero_acc={knob} regs {r['regs']} spills {r['spills']} smem {r['shared']} SASS {r['sass']}"
                  f" movs {r['movs']} HGMMA from RZ {r['hgmma_rz']} waits {' '.join(r['waits'])}", flush=True)
    if args.json:
        json.dump(dict(target="sm_90a", rows=rows), open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
