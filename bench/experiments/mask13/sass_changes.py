"""Which kernels of mb_gaps/kernel_sets.py change code under this branch's defaults against main's rules
(KERNELC_UNIFORM_MASKS=rings, KERNELC_FILL_KEEP_BLOCKS=off: the same cubins as main's tree, checked with
mb_gaps/decisions.py), and how: registers, blocks per SM, SASS instructions in all and the predicate arithmetic
(ISETP, LOP3, PRMT, SEL, FSEL), the global loads and stores. One process, both settings compiled per kernel (the
options are part of the cache key). Nothing here needs a GPU.

    python3 bench/experiments/mask13/sass_changes.py [--out FILE.json] [names...]
"""
from __future__ import annotations

import collections
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "mb_gaps"))
os.environ.setdefault("KERNELC_CACHE_DIR", tempfile.mkdtemp(prefix="mask13_sass_"))

from kernel_sets import all_cases, compile_case  # noqa: E402

SETTINGS = {"main": {"KERNELC_UNIFORM_MASKS": "rings", "KERNELC_FILL_KEEP_BLOCKS": "off"}, "branch": {}}
CLASSES = ("ISETP", "LOP3", "PRMT", "SEL", "FSEL", "LDG", "STG")


def summary(ck, warps):
    from cubintools.sass import instructions
    from cubintools.target import parse_target
    from kernelc.compiler.backend import ptxas as P
    ins = instructions(ck.asm["cubin"])
    by = collections.Counter(i.opcode.split(".")[0] for i in ins)
    return {"regs": ck.n_regs, "blocks": P.blocks_per_sm(ck.n_regs, 32 * warps, ck.shared, parse_target("sm_90a").limits),
            "sass": len(ins), **{c: by.get(c, 0) for c in CLASSES}}


def main(argv):
    out_path = None
    if "--out" in argv:
        i = argv.index("--out")
        out_path = argv[i + 1]
        del argv[i:i + 2]
    cases = {k: v for k, v in all_cases().items() if not argv or any(a in k for a in argv)}
    res = {}
    for name, case in cases.items():
        row = {}
        for s, env in SETTINGS.items():
            saved = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
            try:
                row[s] = summary(compile_case(case), case[4])
            finally:
                for k, v in saved.items():
                    os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
        a, b = row["main"], row["branch"]
        row["changed"] = a != b
        res[name] = row
        mark = "CHANGED" if row["changed"] else "same   "
        print(f"{mark} {name:28s} " + "  ".join(f"{k} {a[k]}->{b[k]}" if a[k] != b[k] else f"{k} {a[k]}"
                                                for k in ("regs", "blocks", "sass") + CLASSES), flush=True)
    if out_path:
        with open(out_path, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
