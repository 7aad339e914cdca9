"""CPU (sm_90a): rope's build under KERNELC_L2_REUSE=evict_last (passes/l2_reuse.py) against R2's ``el`` column
(mem21/variants.py's ``l2el:nost`` edit of the build without it, the build that was timed): whether the two SASS
texts are the same instruction for instruction, registers included; and the build without (``off``).

    PYTHONPATH=. python3 bench/experiments/mem26/l2_reuse_sass.py [--out PATH]
"""
from __future__ import annotations

import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
for p in (ROOT, os.path.join(ROOT, "bench", "experiments", "mem20"), os.path.join(ROOT, "bench", "experiments", "mem21")):
    sys.path.insert(0, p)


def main(argv) -> int:
    from kernelc.compat import install
    install()
    import asm_matrix as A
    import variants as V
    from cubintools import instructions
    from examples.kernels import memory_bound as K
    from kernelc.compiler.compiler import compile as kcompile
    sig_s, cx, nw = A.CASES["rope_kernel"]
    sig = dict(p.split("=") for p in sig_s.split(","))
    div = {n: 16 for n, t in sig.items() if t.startswith("*") or t in ("i32", "i64")}
    builds = {}
    for mode in ("off", "evict_last"):
        os.environ["KERNELC_L2_REUSE"] = mode
        ck = kcompile(K.rope_kernel, sig, cx, "sm_90a", nw, 3, divisibility=div)
        builds[mode] = (ck.asm["ptx"], ck.asm["cubin"])
    text = {m: [f"{i.opcode} {i.operands}" for i in instructions(c)] for m, (_, c) in builds.items()}
    text["el (R2's column)"] = [f"{i.opcode} {i.operands}" for i in
                                instructions(V.build(builds["off"][0], "own", ["l2el:nost"]))]
    out = {k: {"instructions": len(v), "sha1": hashlib.sha1("\n".join(v).encode()).hexdigest()[:12],
               "ldg": [x for x in v if x.startswith("LDG")]} for k, v in text.items()}
    out["evict_last == el"] = text["evict_last"] == text["el (R2's column)"]
    out["policy lines in the PTX"] = [ln.strip() for ln in builds["evict_last"][0].split("\n")
                                      if "createpolicy" in ln or "cache_hint" in ln]
    print(json.dumps(out, indent=1))
    dest = argv[argv.index("--out") + 1] if "--out" in argv else os.path.join(HERE, "results", "l2_reuse_sass.json")
    with open(dest, "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
