"""CPU (sm_90a): the fp8 pointer forward's default build (64x128, 4 warps, host descriptors) against fp828's
candidates -- compile knobs (P V left in flight, exp2 partly on the FMA pipe) and launch shapes: registers, spills,
shared memory, programs an SM, SASS size, the key loops' waits.

    python3 bench/experiments/fp828/survey_cpu.py [--json OUT] [--only SUBSTR]

Nothing here is a test.
"""
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "bench", "experiments", "fp813"), os.path.join(ROOT, "bench", "experiments",
                                                                                      "att20")]

import sass_cpu as A20  # noqa: E402

DEF8 = dict(KEY_ORDER=True, DIAG_SPLIT=True, MASK_FOLD=True, EVEN_N=True, LPT=0)
ND = dict(KEY_ORDER=True, EVEN_N=True)
TAIL = {"KERNELC_WGMMA_ASYNC_TAIL": "rescaled"}
POLY = {"KERNELC_EXP2_POLY": "1/8"}
TOP = {"KERNELC_TMA_REFILL_TOP": "1", "KERNELC_WGMMA_ZERO_ACC": "on"}
ZERO = {"KERNELC_WGMMA_ZERO_ACC": "on"}
BUILDS = [  # name, D, causal, bm, bn, warps, stages, constexprs, env, compile kwargs
    ("causal default", 128, True, 64, 128, 4, 2, DEF8, {}, {}),
    ("default", 128, False, 64, 128, 4, 2, ND, {}, {}),
    ("causal tail", 128, True, 64, 128, 4, 2, DEF8, TAIL, {}),
    ("tail", 128, False, 64, 128, 4, 2, ND, TAIL, {}),
    ("causal poly18", 128, True, 64, 128, 4, 2, DEF8, POLY, {}),
    ("poly18", 128, False, 64, 128, 4, 2, ND, POLY, {}),
    ("causal 64x64 s2", 128, True, 64, 64, 4, 2, dict(DEF8, DIAG_SPLIT=False), {}, {}),
    ("64x64 s2", 128, False, 64, 64, 4, 2, ND, {}, {}),
    ("64x64 s2 maxnreg128", 128, False, 64, 64, 4, 2, ND, {}, dict(maxnreg=128)),
    ("causal 64x64 s2 tail", 128, True, 64, 64, 4, 2, dict(DEF8, DIAG_SPLIT=False), TAIL, {}),
    ("64x64 s2 tail", 128, False, 64, 64, 4, 2, ND, TAIL, {}),
    ("causal tail maxnreg168", 128, True, 64, 128, 4, 2, DEF8, TAIL, dict(maxnreg=168)),
    ("causal 64x64 s3", 128, True, 64, 64, 4, 3, dict(DEF8, DIAG_SPLIT=False), {}, {}),
    ("D64 causal 64x64 s2", 64, True, 64, 64, 4, 2, dict(DEF8, DIAG_SPLIT=False), {}, {}),
    ("causal one loop", 128, True, 64, 128, 4, 2, dict(DEF8, DIAG_SPLIT=False, ONE_LOOP=True), {}, {}),
    ("causal one loop tail", 128, True, 64, 128, 4, 2, dict(DEF8, DIAG_SPLIT=False, ONE_LOOP=True), TAIL, {}),
    ("causal one loop poly18", 128, True, 64, 128, 4, 2, dict(DEF8, DIAG_SPLIT=False, ONE_LOOP=True), POLY, {}),
    ("causal 64x64 one loop", 128, True, 64, 64, 4, 2, dict(DEF8, DIAG_SPLIT=False, ONE_LOOP=True), {}, {}),
    ("causal 64x64 one loop tail", 128, True, 64, 64, 4, 2, dict(DEF8, DIAG_SPLIT=False, ONE_LOOP=True), TAIL, {}),
    ("D64 causal one loop tail", 64, True, 64, 128, 4, 3, dict(DEF8, DIAG_SPLIT=False, ONE_LOOP=True), TAIL, {}),
    ("causal top", 128, True, 64, 128, 4, 2, DEF8, TOP, {}),
    ("top", 128, False, 64, 128, 4, 2, ND, TOP, {}),
    ("causal zero", 128, True, 64, 128, 4, 2, DEF8, ZERO, {}),
    ("causal one loop top", 128, True, 64, 128, 4, 2, dict(DEF8, DIAG_SPLIT=False, ONE_LOOP=True), TOP, {}),
    ("causal 64x64 one loop top", 128, True, 64, 64, 4, 2, dict(DEF8, DIAG_SPLIT=False, ONE_LOOP=True), TOP, {}),
    ("D64 causal top", 64, True, 64, 128, 4, 3, DEF8, TOP, {}),
    ("D64 causal one loop top", 64, True, 64, 128, 4, 3, dict(DEF8, DIAG_SPLIT=False, ONE_LOOP=True), TOP, {}),
    ("128x128 w8 s2 top", 128, False, 128, 128, 8, 2, dict(ND, REFILL_TOP=True), ZERO, {}),
    ("128x128 w8 s3 top", 128, False, 128, 128, 8, 3, dict(ND, REFILL_TOP=True), ZERO, {}),
    ("causal 128x128 w8 s2 one top", 128, True, 128, 128, 8, 2, dict(DEF8, DIAG_SPLIT=False, ONE_LOOP=True,
                                                                      REFILL_TOP=True), ZERO, {}),
    ("128x128 w8 s2", 128, False, 128, 128, 8, 2, ND, {}, {}),
    ("128x64 w8 s2 top", 128, False, 128, 64, 8, 2, dict(ND, REFILL_TOP=True), ZERO, {}),
    ("128x64 w8 s3 top", 128, False, 128, 64, 8, 3, dict(ND, REFILL_TOP=True), ZERO, {}),
    ("128x64 w8 s3 top maxnreg128", 128, False, 128, 64, 8, 3, dict(ND, REFILL_TOP=True), ZERO, dict(maxnreg=128)),
    ("causal 128x64 w8 s3 one top", 128, True, 128, 64, 8, 3, dict(DEF8, DIAG_SPLIT=False, ONE_LOOP=True,
                                                                    REFILL_TOP=True), ZERO, {}),
    ("D64 causal one loop", 64, True, 64, 128, 4, 3, dict(DEF8, DIAG_SPLIT=False, ONE_LOOP=True), {}, {}),
    ("D64 causal default", 64, True, 64, 128, 4, 3, DEF8, {}, {}),
    ("D64 causal tail", 64, True, 64, 128, 4, 3, DEF8, TAIL, {}),
]


def build(D, causal, bm, bn, w, s, cx, env, kw):
    from bench.bench_attention import _environ
    import kernelc
    orig = kernelc.compile
    if kw:
        kernelc.compile = lambda *a, **k: orig(*a, **k, **kw)
    try:
        with _environ(env):
            return A20.desc_build(D, causal, True, bm, bn, w, s, **dict(cx))
    finally:
        kernelc.compile = orig


def summary(ck, warps):
    sass = ck.asm["sass"]
    ins = [x for x in sass.splitlines() if re.match(r"\s*/\*[0-9a-f]{4,}\*/", x)]
    smem = getattr(ck, "shared", None) or 0
    by_regs = 65536 // (32 * warps * max(ck.n_regs, 1))
    by_smem = (232448 // (smem + 1024)) if smem else 99
    waits = [re.search(r"gsb0, (0x\w+)", x).group(1) for x in ins if "WARPGROUP.DEPBAR" in x]
    return dict(regs=ck.n_regs, spills=ck.n_spills, smem=smem, programs_an_sm=min(by_regs, by_smem), sass=len(ins),
                mufu=sum("MUFU.EX2" in x for x in ins), waits=waits)


def main():
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    rows = []
    for name, D, causal, bm, bn, w, s, cx, env, kw in BUILDS:
        if only and only not in name:
            continue
        ck = build(D, causal, bm, bn, w, s, cx, env, kw)
        row = dict(build=name, D=D, causal=causal, cfg=[bm, bn, w, s], env=env, **kw, **summary(ck, w))
        rows.append(row)
        print(json.dumps(row), flush=True)
    if "--json" in sys.argv:
        with open(sys.argv[sys.argv.index("--json") + 1], "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
