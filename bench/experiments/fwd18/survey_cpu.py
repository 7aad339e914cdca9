"""CPU (sm_90a): the causal forwards' candidates of this session -- registers, spills, shared memory, programs an SM,
and the whole kernel's SASS size and the masked (diagonal) loop's -- against the defaults (fp813's sass_d64.py
compiles them).

    python3 bench/experiments/fwd18/survey_cpu.py [--json OUT]

Nothing here is a test.
"""
import collections
import json
import os
import re
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "bench", "experiments", "fp813")]

import sass_d64 as S  # noqa: E402

BUILDS = [  # name, kind, D, causal, fp8, BLOCK_M, BLOCK_N, warps, stages, constexprs
    ("ptr fp8 D128 causal 64x128 w4 s2 ko (default)", "ptr", 128, True, True, 64, 128, 4, 2, dict(KEY_ORDER=True)),
    ("  + DIAG_SPLIT", "ptr", 128, True, True, 64, 128, 4, 2, dict(KEY_ORDER=True, DIAG_SPLIT=True)),
    ("  + LPT 8", "ptr", 128, True, True, 64, 128, 4, 2, dict(KEY_ORDER=True, LPT=8)),
    ("  + EVEN_N MASK_FOLD", "ptr", 128, True, True, 64, 128, 4, 2, dict(KEY_ORDER=True, EVEN_N=True, MASK_FOLD=True)),
    ("  + EVEN_N MASK_FOLD DIAG_SPLIT LPT 8", "ptr", 128, True, True, 64, 128, 4, 2,
     dict(KEY_ORDER=True, EVEN_N=True, MASK_FOLD=True, DIAG_SPLIT=True, LPT=8)),
    ("ptr fp8 D128 64x128 w4 s2 ko", "ptr", 128, False, True, 64, 128, 4, 2, dict(KEY_ORDER=True)),
    ("  + EVEN_N MASK_FOLD", "ptr", 128, False, True, 64, 128, 4, 2, dict(KEY_ORDER=True, EVEN_N=True, MASK_FOLD=True)),
    ("ptr fp8 D64 causal 64x128 w4 s3 ko", "ptr", 64, True, True, 64, 128, 4, 3, dict(KEY_ORDER=True)),
    ("  + DIAG_SPLIT", "ptr", 64, True, True, 64, 128, 4, 3, dict(KEY_ORDER=True, DIAG_SPLIT=True)),
    ("fa3 fp16 D128 causal 128x128 w8 s2 (default)", "fa3", 128, True, False, 128, 128, 8, 2, {}),
    ("  + LPT 8", "fa3", 128, True, False, 128, 128, 8, 2, dict(LPT=8)),
    ("fa3 fp16 D64 causal 64x64 w4 s2 (default)", "fa3", 64, True, False, 64, 64, 4, 2, {}),
    ("ptr fp16 D64 causal 64x64 w4 s2 (default)", "ptr", 64, True, False, 64, 64, 4, 2, {}),
    ("  + EVEN_N MASK_FOLD LPT 8", "ptr", 64, True, False, 64, 64, 4, 2, dict(EVEN_N=True, MASK_FOLD=True, LPT=8)),
]


def loops(sass):
    """Instruction counts of the backward-branch loops that issue a wgmma, in program order."""
    lines = sass.splitlines()
    labels = {m.group(1): i for i, ln in enumerate(lines) if (m := re.match(r"\s*(\.L_x_\d+):", ln))}
    out = []
    for i, ln in enumerate(lines):
        m = re.search(r"\bBRA\b.*?(\.L_x_\d+)", ln)
        if m and labels.get(m.group(1), i) < i:
            b = [x for x in lines[labels[m.group(1)]:i + 1] if re.match(r"\s*/\*[0-9a-f]{4,}\*/", x)]
            if any("GMMA" in x for x in b):
                out.append(len(b))
    return out


def main():
    rows = []
    for name, kind, D, causal, fp8, bm, bn, w, s, cx in BUILDS:
        t = time.time()
        try:
            ck = (S.fa3 if kind == "fa3" else S.pointer)(D, causal, fp8, bm, bn, w, s, **cx)
            sass = ck.asm["sass"]
            n = sum(1 for x in sass.splitlines() if re.match(r"\s*/\*[0-9a-f]{4,}\*/", x))
            row = dict(build=name, regs=ck.n_regs, spills=ck.n_spills, warps=ck.launch_warps,
                       smem=getattr(ck, "shared", None), sass=n, gmma_loops=loops(sass),
                       compile_s=round(time.time() - t, 1))
            row["progs_per_sm"] = min(65536 // (row["regs"] * row["warps"] * 32),
                                      (228 * 1024) // max((row["smem"] or 0) + 1024, 1))
        except Exception as e:  # noqa: BLE001
            row = dict(build=name, error=f"{type(e).__name__}: {e}"[:400])
        rows.append(row)
        print(json.dumps(row), flush=True)
    if "--json" in sys.argv:
        with open(sys.argv[sys.argv.index("--json") + 1], "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
