"""(d64b27) The D=64 backward's kernels compiled on CPU for sm_90a under the variants ``bwd_ab.py`` times: the fused
default, the separate pass's dK/dV kernel in D=128's form (64 x 128 blocks, 8 warps, a producer warpgroup, the
LSE/delta rows ringed by TMA), the separate dQ kernel's configs, flat. Registers, spills, shared memory, programs an
SM, and per MMA loop the loads, copies, HGMMA, MUFU and instruction total. Nothing timed.

    PYTHONPATH=$PWD python3 bench/experiments/d64b27/d64_sass.py [--json OUT] [--only NAME ...]
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

P = lambda t: "*" + t  # noqa: E731

# name, kernel, causal, (BLOCK_M, BLOCK_N, num_warps, num_stages), more constexprs (as the wrapper passes them, N 4096)
VARIANTS = [
    ("fused", "fused", False, None, {}),
    ("fused_c", "fused", True, None, {}),
    ("sep_dkdv", "dkdv", False, (32, 64, 4, 3), {"EVEN_M": True}),
    ("sep_dq", "dq", False, (64, 64, 4, 2), {}),
    ("dkdv128", "dkdv", False, (64, 128, 8, 3), {"EVEN_M": True}),
    ("dkdv128ws", "dkdv", False, (64, 128, 8, 3), {"EVEN_M": True, "WS": 1}),
    ("dkdv128wsrows", "dkdv", False, (64, 128, 8, 3), {"EVEN_M": True, "WS": 1, "ROWS_TMA": True}),
    ("dkdv128wskv", "dkdv", False, (64, 128, 8, 3), {"EVEN_M": True, "WS": 1, "ROWS_TMA": True, "KV_REGS": 2}),
    ("dkdv128wsm32", "dkdv", False, (32, 128, 8, 3), {"EVEN_M": True, "WS": 1, "ROWS_TMA": True}),
    ("dkdv128wsm128", "dkdv", False, (128, 128, 8, 2), {"EVEN_M": True, "WS": 1, "ROWS_TMA": True}),
    ("dkdv128ws_s2", "dkdv", False, (64, 128, 8, 2), {"EVEN_M": True, "WS": 1}),
    ("dkdv128wsrows_s2", "dkdv", False, (64, 128, 8, 2), {"EVEN_M": True, "WS": 1, "ROWS_TMA": True}),
    # causal: ONE_LOOP (the diagonal and the blocks below it in one loop) gives the producer every trip (att26)
    ("dkdv128wsc_one", "dkdv", True, (64, 128, 8, 3), {"EVEN_M": True, "WS": 1, "ROWS_TMA": True, "ONE_LOOP": True,
                                                       "GROUP": 8}),
    ("dkdv128wsc_one_norows", "dkdv", True, (64, 128, 8, 3), {"EVEN_M": True, "WS": 1, "ONE_LOOP": True,
                                                              "GROUP": 8}),
    ("dq128", "dq", False, (128, 64, 8, 2), {}),
    ("dq128x128", "dq", False, (128, 128, 8, 2), {}),
]
KEYS = ("LDG", "LDS", "UTMALDG", "HGMMA", "HMMA", "MUFU.EX2", "STL", "LDL", "total")


def compile_variant(kernel, causal, cfg, extra):
    import kernelc
    from examples.kernels import attention_bwd as B
    dt = "fp16"
    if kernel == "fused":
        c1, c2, cx, opts = B._fused_config(4096, 64, causal, None, None)
        sig = dict(Q=P(dt), K=P(dt), V=P(dt), DO=P(dt), DK=P(dt), DV=P(dt), DQ=P(dt), LSE=P("fp32"),
                   Delta=P("fp32"), sm_scale="fp32", stride_z="i32", stride_h="i32", stride_m="i32", stride_k="i32",
                   H="i32", N_CTX="i32")
        return kernelc.compile(B.attn_bwd_fused_kernel, sig, cx, target="sm_90a", divisibility={n: 16 for n in sig},
                               equal_to_1=("stride_k",), **opts)
    from bwd_sass import compile_kernel
    extra = dict(extra)
    return compile_kernel(64, causal, kernel, cfg, extra=extra)


def loops_of(sass):
    from bwd06_sass import mma_loops
    return [{k: lp.get(k, 0) for k in KEYS} | {"waits": lp.get("DEPBAR_args", [])} for lp in mma_loops(sass)]


def main():
    from bwd06_sass import blocks_per_sm
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()
    rows = []
    for name, kernel, causal, cfg, extra in VARIANTS:
        if args.only and name not in args.only:
            continue
        try:
            ck = compile_variant(kernel, causal, cfg, extra)
        except Exception as e:
            rows.append(dict(variant=name, error=f"{type(e).__name__}: {e}"[:400]))
            print(f"{name:22s} does not compile: {rows[-1]['error']}", flush=True)
            continue
        sass = ck.asm["sass"]
        occ = blocks_per_sm(ck.n_regs, ck.shared, warps=ck.launch_warps)
        r = dict(variant=name, kernel=kernel, causal=causal, config=cfg, constexprs=extra, regs=ck.n_regs,
                 spills=ck.n_spills, shared=ck.shared, warps=ck.launch_warps, per_sm=occ["blocks"],
                 setmaxnreg=re.findall(r"USETMAXREG\S*\s+\S+", sass), loops=loops_of(sass),
                 notes=[ln for ln in (ck.compile_log or []) if "fall" in ln or "not warp" in ln or "C7508" in ln][:4])
        rows.append(r)
        print(f"{name:22s} regs {ck.n_regs} spills {ck.n_spills} smem {ck.shared} warps {ck.launch_warps} "
              f"per_sm {occ['blocks']} {r['setmaxnreg']} {r['notes']}", flush=True)
        for i, lp in enumerate(r["loops"]):
            print("   loop %d: " % i + " ".join(f"{k} {lp[k]}" for k in KEYS)
                  + " waits " + ",".join(a.replace("gsb0, ", "") for a in lp["waits"]), flush=True)
    if args.json:
        json.dump(dict(target="sm_90a", head_dim=64, rows=rows), open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
