"""CPU (sm_90a SASS): the fp8 forwards' unmasked key loops with and without KEY_ORDER (V's keys in the order that
makes P's accumulator registers, renamed, P V's A fragments: no shuffle), at D=128 and 64, causal and not
(fwd16's sass_d128.py / fp813's sass_d64.py compile and count).

    python3 bench/experiments/fwd17/sass_keyorder.py [--json OUT]

Nothing here is a test.
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path[:0] = [ROOT, os.path.join(ROOT, "bench", "experiments", "fp813")]

import sass_d64 as S  # noqa: E402

BUILDS = [  # kernel, D, causal, BLOCK_M, BLOCK_N, warps, stages (the fp8 defaults of attention.py / attention_fa3.py)
    ("ptr", 128, False, 64, 128, 4, 2),
    ("ptr", 128, True, 64, 128, 4, 2),
    ("ptr", 64, False, 64, 128, 4, 3),
    ("fa3", 128, False, 128, 128, 8, 4),
    ("fa3", 128, True, 128, 128, 8, 4),
]


def main():
    rows = []
    only = [a for a in sys.argv[1:] if a.isdigit()]
    for i, (kern, D, causal, bm, bn, w, s) in enumerate(BUILDS):
        if only and str(i) not in only:
            continue
        for ko in (False, True):
            name = f"{kern} fp8 D{D}{' causal' if causal else ''} {bm}x{bn} w{w} s{s} KEY_ORDER={int(ko)}"
            try:
                build = S.pointer if kern == "ptr" else S.fa3
                row = dict(build=name, **S.profile(build(D, causal, True, bm, bn, w, s, KEY_ORDER=ko)))
                row["elems"] = bm * bn // (w * 32)
                row["instr_per_elem"] = round(row["loop"] / row["elems"], 2)
            except Exception as e:  # noqa: BLE001
                row = dict(build=name, error=f"{type(e).__name__}: {e}"[:600])
            rows.append(row)
            print(json.dumps(row), flush=True)
    if "--json" in sys.argv:
        with open(sys.argv[sys.argv.index("--json") + 1], "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
