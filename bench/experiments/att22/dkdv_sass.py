"""The D=128 dK/dV kernel's variants of att22 compiled on CPU for sm_90a: registers, spills, shared memory, the
setmaxnreg split and per MMA loop its SASS a trip, local-memory accesses and wgmma waits (``DEPBAR.LE gsb0, N``).

    PYTHONPATH=$PWD python3 bench/experiments/att22/dkdv_sass.py [--json OUT]

KERNELC_WS_CONSUMER_REGS is set per variant in a child process (a compile knob: in the disk cache's key).
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

# name, kernel (bwd_sass's: dkdv, dkdv_ds; flat: the flat dQ), config, constexprs, KERNELC_WS_CONSUMER_REGS
VARIANTS = [
    ("sep", "dkdv", (64, 128, 8, 3), {}, "232"),
    ("sep even", "dkdv", (64, 128, 8, 3), {"EVEN_M": True}, "232"),
    ("sep WS", "dkdv", (64, 128, 8, 3), {"WS": 1, "EVEN_M": True}, "232"),
    ("sep WS 240", "dkdv", (64, 128, 8, 3), {"WS": 1, "EVEN_M": True}, "240"),
    ("sep WS 2 stages 240", "dkdv", (64, 128, 8, 2), {"WS": 1, "EVEN_M": True}, "240"),
    ("sep WS unmasked only, 2 stages", "dkdv", (64, 128, 8, 2), {"WS": 2, "EVEN_M": True}, "232"),
    ("ds", "dkdv_ds", (64, 128, 8, 3), {"EVEN_M": True}, "232"),
    ("ds WS", "dkdv_ds", (64, 128, 8, 3), {"WS": 1, "EVEN_M": True}, "232"),
    ("ds WS 240", "dkdv_ds", (64, 128, 8, 3), {"WS": 1, "EVEN_M": True}, "240"),
    ("ds WS 2 stages 240", "dkdv_ds", (64, 128, 8, 2), {"WS": 1, "EVEN_M": True}, "240"),
    ("flat (64, 128)", "flat", (64, 128, 8, 2), {"EVEN_M": True}, "232"),
    ("flat (64, 128) DQ_FIRST", "flat", (64, 128, 8, 2), {"EVEN_M": True, "DQ_FIRST": True}, "232"),
    ("flat (64, 128) WS 240", "flat", (64, 128, 8, 2), {"EVEN_M": True, "WS": 1}, "240"),
    ("flat (32, 128) WS DQ_FIRST", "flat", (32, 128, 8, 3), {"EVEN_M": True, "WS": 1, "DQ_FIRST": True}, "232"),
]


def one(kernel, cfg, extra, causal):
    sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "attention_bwd_cudnn"))
    sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "tutorial_gaps"))
    sys.path.insert(0, ROOT)
    import kernelc
    from bwd06_sass import mma_loops
    from bwd_sass import compile_kernel
    from examples.kernels import attention_bwd as B
    if kernel == "flat":
        P = lambda t: "*" + t  # noqa: E731
        sig = dict(Q=P("fp16"), K=P("fp16"), V=P("fp16"), DO=P("fp16"), DK=P("fp16"), DV=P("fp16"), DQ=P("fp32"),
                   LSE=P("fp32"), Delta=P("fp32"), sm_scale="fp32", stride_z="i32", stride_h="i32", stride_m="i32",
                   stride_k="i32", dq_stride_z="i32", dq_stride_h="i32", dq_stride_m="i32", H="i32", N_CTX="i32")
        bm, bn, w, s = cfg
        ck = kernelc.compile(B.attn_bwd_dkdv_kernel, sig, dict(ATOMIC_DQ=True, FLAT_DQ=True, HEAD_DIM=128,
                             CAUSAL=causal, BLOCK_M=bm, BLOCK_N=bn, **extra), target="sm_90a", num_warps=w,
                             num_stages=s, divisibility={n: 16 for n in sig}, equal_to_1=("stride_k",))
    else:
        ck = compile_kernel(128, causal, kernel, cfg, extra=dict(extra, **({"GROUP": 8} if causal and kernel ==
                                                                           "dkdv_ds" else {})))
    loops = mma_loops(ck.asm["sass"])
    return dict(regs=ck.n_regs, spills=ck.n_spills, shared=ck.shared, warps=ck.launch_warps,
                setmaxnreg=re.findall(r"setmaxnreg\.\w+\.sync\.aligned\.u32 (\d+)", ck.asm["ptx"]),
                serialised="C7512" in (getattr(ck.artifacts, "ptxas_log", "") or ""),
                loops=[dict(sass=lp["total"], LDL=lp["LDL"], STL=lp["STL"],
                            waits="".join(a[-1] for a in lp["DEPBAR_args"])) for lp in loops])


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        kernel, cfg, extra, causal = json.loads(sys.argv[2])
        print(json.dumps(one(kernel, tuple(cfg), extra, causal)))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rows = []
    for name, kernel, cfg, extra, regs in VARIANTS:
        for causal in (False, True):
            env = dict(os.environ, KERNELC_WS_CONSUMER_REGS=regs, PYTHONPATH=ROOT)
            r = subprocess.run([sys.executable, __file__, "--one", json.dumps([kernel, cfg, extra, causal])],
                               capture_output=True, text=True, env=env)
            try:
                res = json.loads(r.stdout.strip().splitlines()[-1])
            except (IndexError, ValueError):
                res = dict(error=(r.stderr.strip().splitlines() or ["?"])[-1][:200])
            row = dict(name=name, causal=causal, config=list(cfg), consumer_regs=regs, **res)
            rows.append(row)
            if "error" in res:
                print(f"{name:32s} causal={int(causal)}  {res['error']}", flush=True)
            else:
                lp = " / ".join(f"{x['sass']} ({x['waits']}{', LDL ' + str(x['LDL']) if x['LDL'] else ''})"
                                for x in res["loops"])
                print(f"{name:32s} causal={int(causal)}  regs {res['regs']:3d} spills {res['spills']:3d} smem "
                      f"{res['shared'] // 1024:3d} KB setmaxnreg {','.join(res['setmaxnreg']) or '-':7s} "
                      f"{'C7512 ' if res['serialised'] else ''}loops {lp}", flush=True)
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
