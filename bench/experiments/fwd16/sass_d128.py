"""CPU (sm_90a SASS): the D=128 pointer forward's unmasked key loop, fp8 against fp16, at the shipped configs
(attention.FWD_CONFIGS / FP8_FWD_CONFIGS) and at the same shape for each dtype, so what an fp8 key block issues
beyond fp16's can be read per score (issue 27). Reuses bench/experiments/fp813/sass_d64.py's compile and count.

    python3 bench/experiments/fwd16/sass_d128.py [--json OUT]

Nothing here is a test.
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "bench", "experiments", "fp813")]

import sass_d64 as S  # noqa: E402

BUILDS = [  # name, fp8, causal, BLOCK_M, BLOCK_N, warps, stages
    ("ptr fp16 128x128 w8 s2 (default)", False, False, 128, 128, 8, 2),
    ("ptr fp8 64x128 w4 s2 (default)", True, False, 64, 128, 4, 2),
    ("ptr fp16 64x128 w4 s2", False, False, 64, 128, 4, 2),
    ("ptr fp8 128x128 w8 s2", True, False, 128, 128, 8, 2),
]


def main():
    rows = []
    for name, fp8, causal, bm, bn, w, s in BUILDS:
        try:
            row = dict(build=name, **S.profile(S.pointer(128, causal, fp8, bm, bn, w, s)))
            row["elems"] = bm * bn // (w * 32)  # scores a thread owns a key block
            row["instr_per_elem"] = round(row["loop"] / row["elems"], 2)
        except Exception as e:  # noqa: BLE001
            row = dict(build=name, error=f"{type(e).__name__}: {e}"[:300])
        rows.append(row)
        print(json.dumps(row), flush=True)
    if len(sys.argv) > 2 and sys.argv[1] == "--json":
        with open(sys.argv[2], "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
