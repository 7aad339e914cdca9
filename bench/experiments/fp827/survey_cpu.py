"""CPU (sm_90a): the fp8 D=128 forward's program shapes -- the 64-row default (pointer forward through host
descriptors, 4 warps) against the 128-row forms that share one K/V ring between two consumer warpgroups (the FA3-order
forward, its ping-pong, the pointer forward at 8 warps) and the fp16 FA3 order: registers, spills, shared memory,
warps, setmaxnreg, wgmma shapes, programs an SM (by registers and shared memory).

    python3 bench/experiments/fp827/survey_cpu.py [--json OUT]

Nothing here is a test.
"""
import collections
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "bench", "experiments", "fp813"), os.path.join(ROOT, "bench", "experiments",
                                                                                      "att20")]

import sass_d64 as S  # noqa: E402
import sass_cpu as A20  # noqa: E402

DEF8 = dict(KEY_ORDER=True, DIAG_SPLIT=True, MASK_FOLD=True, EVEN_N=True, LPT=16)
ND = dict(KEY_ORDER=True, EVEN_N=True)
PP = {"KERNELC_WS_PINGPONG": "1"}
BUILDS = [  # name, build, D, causal, fp8, bm, bn, warps, stages, constexprs, env
    ("fp8 causal default 64x128 w4 s2 DESC", A20.desc_build, 128, True, True, 64, 128, 4, 2, DEF8, {}),
    ("fp8 default 64x128 w4 s2 DESC", A20.desc_build, 128, False, True, 64, 128, 4, 2, ND, {}),
    ("fp8 causal ptr 128x128 w8 s2 DESC", A20.desc_build, 128, True, True, 128, 128, 8, 2,
     dict(KEY_ORDER=True, MASK_FOLD=True, EVEN_N=True, LPT=16), {}),
    ("fp8 ptr 128x128 w8 s2 DESC", A20.desc_build, 128, False, True, 128, 128, 8, 2, ND, {}),
    ("fp8 ptr 128x128 w8 s3 DESC", A20.desc_build, 128, False, True, 128, 128, 8, 3, ND, {}),
    ("fp8 causal FA3 128x128 w8 s4 ko", S.fa3, 128, True, True, 128, 128, 8, 4, dict(KEY_ORDER=True, LPT=16), {}),
    ("fp8 FA3 128x128 w8 s4 ko", S.fa3, 128, False, True, 128, 128, 8, 4, dict(KEY_ORDER=True), {}),
    ("fp8 FA3 128x128 w8 s4 ko pingpong", S.fa3, 128, False, True, 128, 128, 8, 4, dict(KEY_ORDER=True), PP),
    ("fp8 causal FA3 128x128 w8 s4 ko pingpong", S.fa3, 128, True, True, 128, 128, 8, 4,
     dict(KEY_ORDER=True, LPT=16), PP),
    ("fp8 FA3 128x128 w8 s2 ko", S.fa3, 128, False, True, 128, 128, 8, 2, dict(KEY_ORDER=True), {}),
    ("fp8 FA3 128x128 w8 s3 ko", S.fa3, 128, False, True, 128, 128, 8, 3, dict(KEY_ORDER=True), {}),
    ("fp8 FA3 128x128 w8 s4 ko, 240 consumer registers", S.fa3, 128, False, True, 128, 128, 8, 4, dict(KEY_ORDER=True),
     {"KERNELC_WS_CONSUMER_REGS": "240"}),
    ("fp8 FA3 128x256 w8 s2 ko", S.fa3, 128, False, True, 128, 256, 8, 2, dict(KEY_ORDER=True), {}),
    ("fp16 FA3 128x128 w8 s2", S.fa3, 128, False, False, 128, 128, 8, 2, {}, {}),
    ("fp16 causal FA3 128x128 w8 s2", S.fa3, 128, True, False, 128, 128, 8, 2, dict(LPT=16), {}),
]


def summary(ck, warps):
    sass = ck.asm["sass"]
    ins = [x for x in sass.splitlines() if re.match(r"\s*/\*[0-9a-f]{4,}\*/", x)]
    hg = collections.Counter(m.group(1) for x in ins for m in [re.search(r"([HQ]GMMA\.\S+)", x)] if m)
    smem = getattr(ck, "shared", None) or 0
    threads = 32 * (warps + (4 if "setmaxnreg" in ck.asm["ptx"] else 0))
    setmax = sorted(set(re.findall(r"setmaxnreg\.(\w+)\.sync\.aligned\.u32 (\d+)", ck.asm["ptx"])))
    by_regs = 65536 // (threads * max(ck.n_regs, 1))
    by_smem = (232448 // (smem + 1024)) if smem else 99
    return dict(regs=ck.n_regs, spills=ck.n_spills, smem=smem, threads=threads, setmaxnreg=setmax,
                programs_an_sm=min(by_regs, by_smem), sass=len(ins), hgmma=dict(hg))


def main():
    from bench.bench_attention import _environ
    rows = []
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    for name, build, D, causal, fp8, bm, bn, w, s, cx, env in BUILDS:
        if only and only not in name:
            continue
        try:
            with _environ(dict(env)):
                ck = build(D, causal, fp8, bm, bn, w, s, **dict(cx))
            row = dict(build=name, **summary(ck, w))
        except Exception as e:  # a build that does not compile is a finding, not a crash
            row = dict(build=name, error=f"{type(e).__name__}: {str(e)[:300]}")
        rows.append(row)
        print(json.dumps(row), flush=True)
    if "--json" in sys.argv:
        with open(sys.argv[sys.argv.index("--json") + 1], "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
