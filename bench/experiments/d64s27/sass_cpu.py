"""(d64s27) sepwsq's two kernels (D=64 non-causal: dK/dV at (64, 128, 8, 3) with a producer warpgroup and the rows
ringed by TMA; dQ at (128, 128, 8, 2), auto producer) compiled on CPU for sm_90a under the candidates ``bwd_ab.py``
times: KERNELC_WGMMA_ZERO_ACC=ws, ping-pong, the loops' own async tail (TAIL), stage counts. Registers, spills, shared
memory, setmaxnreg, and per MMA loop the instruction total, HGMMA, MUFU and the waits (``WARPGROUP.DEPBAR.LE gsb0``
in order). Nothing timed.

    PYTHONPATH=$PWD python3 bench/experiments/d64s27/sass_cpu.py [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "d64b27"))

import d64_sass as S  # noqa: E402  (puts the repository root on sys.path)
from bench.common import env_vars  # noqa: E402

W = dict(EVEN_M=True, WS=1, ROWS_TMA=True)
ZA = {"KERNELC_WGMMA_ZERO_ACC": "ws"}
PP = {"KERNELC_WS_PINGPONG": "1"}
# name, kernel, (BLOCK_M, BLOCK_N, num_warps, num_stages), constexprs, knobs
VARIANTS = [
    ("dkdv", "dkdv", (64, 128, 8, 3), W, {}),
    ("dkdv za", "dkdv", (64, 128, 8, 3), W, ZA),
    ("dkdv pp", "dkdv", (64, 128, 8, 3), W, PP),
    ("dkdv tail", "dkdv", (64, 128, 8, 3), dict(W, TAIL=True), {}),
    ("dkdv za tail", "dkdv", (64, 128, 8, 3), dict(W, TAIL=True), ZA),
    ("dkdv za tail s4", "dkdv", (64, 128, 8, 4), dict(W, TAIL=True), ZA),
    ("dkdv s4", "dkdv", (64, 128, 8, 4), W, {}),
    ("dq", "dq", (128, 128, 8, 2), {}, {}),
    ("dq za", "dq", (128, 128, 8, 2), {}, ZA),
    ("dq pp", "dq", (128, 128, 8, 2), {}, PP),
    ("dq s3", "dq", (128, 128, 8, 3), {}, {}),
    ("dq tail s3", "dq", (128, 128, 8, 3), dict(TAIL=True), {}),
    ("dq za tail s3", "dq", (128, 128, 8, 3), dict(TAIL=True), ZA),
    ("dq tail s2 (dropped)", "dq", (128, 128, 8, 2), dict(TAIL=True), {}),
]


def main():
    from bwd06_sass import blocks_per_sm
    import re
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    for name, kernel, cfg, cx, env in VARIANTS:
        with env_vars(env):
            ck = S.compile_variant(kernel, False, cfg, cx)
        sass = ck.asm["sass"]
        loops = S.loops_of(sass)
        r = dict(variant=name, kernel=kernel, config=cfg, constexprs=cx, knobs=env, regs=ck.n_regs,
                 spills=ck.n_spills, shared=ck.shared, per_sm=blocks_per_sm(ck.n_regs, ck.shared,
                                                                          warps=ck.launch_warps)["blocks"],
                 setmaxnreg=re.findall(r"USETMAXREG\S*\s+\S+", sass), loops=loops,
                 notes=[n for n in (ck.compile_log or []) if "tail" in n][:2])
        rows.append(r)
        lp = loops[0] if loops else {}
        print(f"{name:22s} regs {ck.n_regs} spills {ck.n_spills} smem {ck.shared} per_sm {r['per_sm']} "
              f"loop SASS {lp.get('total')} HGMMA {lp.get('HGMMA')} MUFU {lp.get('MUFU.EX2')} waits "
              + ",".join(w.replace("gsb0, ", "") for w in lp.get("waits", [])) + (f" {r['notes']}" if r["notes"]
                                                                                   else ""), flush=True)
    if a.json:
        json.dump(dict(target="sm_90a", head_dim=64, rows=rows), open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
