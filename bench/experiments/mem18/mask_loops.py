"""Loop kernels without dots under the uniform-mask settings: registers, blocks per SM, SASS counts, and the
predicate spills (P2R/R2P) that per-element masks cost across a loop. One process, every setting compiled per
kernel (the options are part of the cache key). CPU only.

    python3 bench/experiments/mem18/mask_loops.py [--out FILE.json] [--set NAME:VAR=V,...] [names...]
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
os.environ.setdefault("KERNELC_CACHE_DIR", tempfile.mkdtemp(prefix="mem18_masks_"))

from kernel_sets import all_cases, compile_case  # noqa: E402

SETTINGS = {"onepass": {"KERNELC_UNIFORM_MASKS": "onepass"}, "nodots": {"KERNELC_UNIFORM_MASKS": "nodots"}}
CLASSES = ("ISETP", "LOP3", "SEL", "FSEL", "P2R", "R2P", "LDG", "STG")
DEFAULT = ("mb layer_norm_bwd", "mb rms_norm_bwd", "t05 fwd", "t05 bwd_dx BLOCK 4096", "bk layernorm",
           "mb log_softmax", "mb softmax_bwd", "mb cross_entropy")


def summary(ck, warps):
    from cubintools.sass import instructions
    from cubintools.target import parse_target
    from kernelc.compiler.backend import ptxas as P
    ins = instructions(ck.asm["cubin"])
    by = collections.Counter(i.opcode.split(".")[0] for i in ins)
    return {"regs": ck.n_regs, "blocks": P.blocks_per_sm(ck.n_regs, 32 * warps, ck.shared,
                                                         parse_target("sm_90a").limits),
            "sass": len(ins), **{c: by.get(c, 0) for c in CLASSES}}


def main(argv):
    out_path = None
    settings = dict(SETTINGS)
    if "--out" in argv:
        i = argv.index("--out")
        out_path = argv[i + 1]
        del argv[i:i + 2]
    while "--set" in argv:
        i = argv.index("--set")
        tag, _, assigns = argv[i + 1].partition(":")
        settings[tag] = dict(a.split("=", 1) for a in assigns.split(",") if a)
        del argv[i:i + 2]
    names = argv or DEFAULT
    cases = {k: v for k, v in all_cases().items() if any(a in k for a in names)}
    res = {}
    for name, case in cases.items():
        row = {}
        for s, env in settings.items():
            saved = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
            try:
                row[s] = summary(compile_case(case), case[4])
            finally:
                for k, v in saved.items():
                    os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
        res[name] = row
        print(name, flush=True)
        for s, v in row.items():
            print(f"   {s:10s} " + " ".join(f"{k} {v[k]}" for k in v), flush=True)
    if out_path:
        with open(out_path, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
