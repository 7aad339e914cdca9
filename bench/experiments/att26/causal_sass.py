"""(att26) ds's D=128 causal dK/dV kernel compiled on CPU for sm_90a under the variants next session times
(request_s26_causal.sh): without / with a producer warpgroup (WS 0, 1: both loops, 2: the unmasked loop only) and
ROWS_TMA off / on; the non-causal default for comparison. Registers, spills, shared memory, and per MMA loop
(bwd06_sass's ``mma_loops``: the diagonal loop first, then the unmasked one) the loads, copies, barriers, the masking
work (ISETP / FSEL / SEL) and the instruction total. Nothing timed.

    PYTHONPATH=$PWD python3 bench/experiments/att26/causal_sass.py [--json OUT] [--only NAME ...]
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

# name, causal, constexprs beside DS_DKDV_CONFIGS[128] as the wrapper passes them at N 4096 (EVEN_M; causal GROUP 8)
VARIANTS = [
    ("def", True, {"EVEN_M": True, "GROUP": 8}),                       # the causal default
    ("rows", True, {"EVEN_M": True, "GROUP": 8, "ROWS_TMA": True}),
    ("ws1", True, {"EVEN_M": True, "GROUP": 8, "WS": 1}),              # att24's dswsc
    ("ws1rows", True, {"EVEN_M": True, "GROUP": 8, "WS": 1, "ROWS_TMA": True}),
    ("ws2", True, {"EVEN_M": True, "GROUP": 8, "WS": 2}),
    ("ws2rows", True, {"EVEN_M": True, "GROUP": 8, "WS": 2, "ROWS_TMA": True}),
    ("ws2rows_s2", True, {"EVEN_M": True, "GROUP": 8, "WS": 2, "ROWS_TMA": True, "num_stages": 2}),
    ("one", True, {"EVEN_M": True, "GROUP": 8, "ONE_LOOP": True}),
    ("onerows", True, {"EVEN_M": True, "GROUP": 8, "ONE_LOOP": True, "ROWS_TMA": True}),
    ("onews", True, {"EVEN_M": True, "GROUP": 8, "ONE_LOOP": True, "WS": 1}),
    ("onewsrows", True, {"EVEN_M": True, "GROUP": 8, "ONE_LOOP": True, "WS": 1, "ROWS_TMA": True}),
    ("nc_default", False, {"EVEN_M": True, "WS": 1, "ROWS_TMA": True}),  # the non-causal default
]
KEYS = ("LDG", "LDS", "UTMALDG", "SYNCS", "BAR.SYNC", "BAR.ARV", "HGMMA", "MUFU.EX2", "STL", "LDL", "total")


def _count(body, prefix):
    return sum(1 for x in body if x.split()[0].startswith(prefix))


def loops_of(sass):
    from bwd06_sass import mma_loops, parse_sass
    instrs, _ = parse_sass(sass)
    out = []
    for lp in mma_loops(sass):
        body = instrs[lp["start"]:lp["end"] + 1]
        d = {k: lp.get(k, 0) for k in KEYS}
        # masking work: the compares and selects of tl.where (the diagonal loop's causal mask)
        d.update(ISETP=_count(body, "ISETP"), FSEL=_count(body, "FSEL"), SEL=sum(1 for x in body
                 if x.split()[0] == "SEL"), waits=lp.get("DEPBAR_args", []))
        out.append(d)
    return out


def main():
    from bwd_sass import compile_kernel
    from examples.kernels import attention_bwd as B
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()
    rows = []
    for name, causal, extra in VARIANTS:
        if args.only and name not in args.only:
            continue
        extra = dict(extra)
        bm, bn, w, st = B.DS_DKDV_CONFIGS[128]
        st = extra.pop("num_stages", st)
        try:
            ck = compile_kernel(128, causal, "dkdv_ds", (bm, bn, w, st), extra=extra)
        except Exception as e:  # e.g. out of shared memory: recorded, not timed next session
            rows.append(dict(variant=name, causal=causal, constexprs=extra, num_stages=st, error=str(e)))
            print(f"{name:10s} does not compile: {e}", flush=True)
            continue
        sass = ck.asm["sass"]
        r = dict(variant=name, causal=causal, constexprs=extra, num_stages=st, regs=ck.n_regs, spills=ck.n_spills,
                 shared=ck.shared, setmaxnreg=re.findall(r"USETMAXREG\S*\s+\S+", sass), sass_total=sass.count("\n"),
                 loops=loops_of(sass))
        rows.append(r)
        print(f"{name:10s} regs {ck.n_regs} spills {ck.n_spills} smem {ck.shared} setmaxnreg {r['setmaxnreg']}",
              flush=True)
        for i, lp in enumerate(r["loops"]):
            print("   loop %d: " % i + " ".join(f"{k} {lp[k]}" for k in KEYS + ("ISETP", "FSEL", "SEL"))
                  + " waits " + ",".join(a.replace("gsb0, ", "") for a in lp["waits"]), flush=True)
    if args.json:
        json.dump(dict(target="sm_90a", kernel="attn_bwd_dkdv_kernel STORE_DS, D=128, DS_DKDV_CONFIGS[128]",
                       rows=rows), open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
