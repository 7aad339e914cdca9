"""(d64c27) D=64 causal long-sequence candidates compiled on CPU for sm_90a: the separate pass's dK/dV kernel in
D=128's form with causal's one loop (ONE_LOOP, a producer warpgroup, the LSE/delta rows ringed by TMA) with and
without its async tail (TAIL) or in two loops with the producer for the unmasked one (WS=2), the causal dQ kernel
at 128 x 128 on 8 warps with and without TAIL, against the fused
causal default (d64b27's ``fused_c``). Registers, spills, shared memory, setmaxnreg, the compiler's tail notes, and
per MMA loop the instruction total, HGMMA, MUFU and the waits. Nothing timed.

    PYTHONPATH=$PWD python3 bench/experiments/d64c27/sass_cpu.py [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "d64b27"))

import d64_sass as S  # noqa: E402  (puts the repository root on sys.path)

ONE = dict(EVEN_M=True, WS=1, ROWS_TMA=True, ONE_LOOP=True, GROUP=8)
# name, kernel, (BLOCK_M, BLOCK_N, num_warps, num_stages), constexprs; keys x queries a loop trip
VARIANTS = [
    ("fused_c (default)", "fused", None, {}),
    ("dkdv one", "dkdv", (64, 128, 8, 3), ONE),
    ("dkdv one tail", "dkdv", (64, 128, 8, 3), dict(ONE, TAIL=True)),
    ("dkdv one tail s4", "dkdv", (64, 128, 8, 4), dict(ONE, TAIL=True)),
    ("dkdv one tail norows", "dkdv", (64, 128, 8, 3), dict(ONE, TAIL=True, ROWS_TMA=False)),
    # two loops, the producer for the unmasked one (WS=2; the diagonal's two trips without it)
    ("dkdv 2l ws2", "dkdv", (64, 128, 8, 3), dict(ONE, ONE_LOOP=False, WS=2)),
    ("dkdv 2l ws2 tail", "dkdv", (64, 128, 8, 3), dict(ONE, ONE_LOOP=False, WS=2, TAIL=True)),
    ("dq c s2", "dq", (128, 128, 8, 2), dict(GROUP=8)),
    ("dq c s3", "dq", (128, 128, 8, 3), dict(GROUP=8)),
    ("dq c tail s3", "dq", (128, 128, 8, 3), dict(GROUP=8, TAIL=True)),
    ("dq c 128x64 tail s3", "dq", (128, 64, 8, 3), dict(GROUP=8, TAIL=True)),
]
# the fused causal default's loops: dK/dV diagonal and below (BLOCK_M1 x BLOCK_N1), dQ left of and on the diagonal
# (BLOCK_M2 x BLOCK_N2), 4 warps
FUSED_TILES = (32 * 64, 32 * 64, 64 * 64, 64 * 64)


def main():
    from bwd06_sass import blocks_per_sm
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    for name, kernel, cfg, cx in VARIANTS:
        try:
            ck = S.compile_variant(kernel, True, cfg, cx)
        except Exception as e:  # a candidate that does not compile is a result
            rows.append(dict(variant=name, error=f"{type(e).__name__}: {e}"[:400]))
            print(f"{name:22s} does not compile: {rows[-1]['error']}", flush=True)
            continue
        sass = ck.asm["sass"]
        loops = S.loops_of(sass)
        warps = cfg[2] if cfg else 4  # consumer warps (the producer's own loop is not counted)
        tiles = [cfg[0] * cfg[1]] * len(loops) if cfg else list(FUSED_TILES[:len(loops)])
        per_el = [round(lp["total"] * warps / t, 3) for lp, t in zip(loops, tiles)]
        r = dict(variant=name, kernel=kernel, config=cfg, constexprs=cx, regs=ck.n_regs, spills=ck.n_spills,
                 shared=ck.shared, warps=ck.launch_warps,
                 per_sm=blocks_per_sm(ck.n_regs, ck.shared, warps=ck.launch_warps)["blocks"],
                 setmaxnreg=re.findall(r"USETMAXREG\S*\s+\S+", sass), c7508="C7508" in "\n".join(ck.compile_log or []),
                 loops=loops, per_element=per_el,
                 notes=[n for n in (ck.compile_log or []) if "tail" in n or "C7508" in n or "fall" in n][:4])
        rows.append(r)
        print(f"{name:22s} regs {ck.n_regs} spills {ck.n_spills} smem {ck.shared} warps {ck.launch_warps} per_sm "
              f"{r['per_sm']} {r['setmaxnreg']} C7508 {r['c7508']} {r['notes']}", flush=True)
        for i, (lp, pe) in enumerate(zip(loops, per_el)):
            print(f"   loop {i}: SASS {lp['total']} HGMMA {lp['HGMMA']} MUFU {lp['MUFU.EX2']} LDG {lp['LDG']} "
                  f"STL {lp['STL']} LDL {lp['LDL']} per element {pe} waits "
                  + ",".join(w.replace("gsb0, ", "") for w in lp["waits"]), flush=True)
    if a.json:
        json.dump(dict(target="sm_90a", head_dim=64, causal=True, rows=rows), open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
