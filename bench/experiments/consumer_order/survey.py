"""Issue 21's kernels without dots (bench/experiments/mb_gaps/kernel_sets.py), compiled on CPU in op order
(KERNELC_CONSUMER_ORDER=off) and in consumer order (backend/consumer_order.py) forced on every kernel without
dots (column ``nodots``: what call H10 measured as the ``nodots`` default of the first version), and whether the
default rule (``elementwise``, passes/instruction_order.py) marks it: the build the assembler's fill policy keeps
under each, its registers, blocks per SM and mean global loads in flight a thread
(``cubintools.sass.mean_loads_in_flight``), and that times the resident warps.

    python3 bench/experiments/consumer_order/survey.py [names...]

Writes results/survey.json. Nothing here needs a GPU.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "mb_gaps"))
CACHE = tempfile.mkdtemp(prefix="consumer_order_survey_")   # one disk cache a column: the forced column shares keys

from kernel_sets import all_cases, compile_case  # noqa: E402


def row(ck, warps):
    from cubintools import inspect_cubin, instructions
    from cubintools.sass import mean_loads_in_flight
    from cubintools.target import parse_target
    from kernelc.compiler.backend.ptxas import blocks_per_sm
    cub = ck.asm["cubin"]
    f = inspect_cubin(cub).kernel(None)
    ins = [i for i in instructions(cub) if i.function == f.name]
    lif = mean_loads_in_flight(ins)
    blocks = blocks_per_sm(f.n_regs, warps * 32, f.shared, parse_target("sm_90a").limits)
    return {"regs": f.n_regs, "blocks": blocks, "sass": len(ins), "lif": lif, "lif_per_sm": round(lif * blocks * warps, 1)}


def main(argv):
    cases = {k: v for k, v in all_cases().items() if not argv or any(a in k for a in argv)}
    out = {}
    for name, case in cases.items():
        r = {}
        from kernelc.compiler.passes import instruction_order as IO
        rule = IO.is_elementwise_chain
        for mode in ("off", "nodots"):
            os.environ["KERNELC_CONSUMER_ORDER"] = "off" if mode == "off" else "elementwise"
            os.environ["KERNELC_CACHE_DIR"] = os.path.join(CACHE, mode)
            if mode == "nodots":   # every kernel without dots, as the first version's default did
                IO.is_elementwise_chain = lambda fn: not any(op.name == "dot" for op in fn.walk())
            try:
                ck = compile_case(case)
            finally:
                IO.is_elementwise_chain = rule
            r[mode] = row(ck, case[4])
        os.environ["KERNELC_CONSUMER_ORDER"] = "elementwise"
        os.environ["KERNELC_CACHE_DIR"] = os.path.join(CACHE, "default")
        r["marked_by_default"] = "instruction_order='consumers'" in compile_case(case).asm["tir"].splitlines()[0]
        out[name] = r
        a, b = r["off"], r["nodots"]
        print(f"{name:44s} off {a['regs']:3d}r {a['blocks']}b {a['lif']:5.2f} {a['lif_per_sm']:6.1f}/SM | "
              f"nodots {b['regs']:3d}r {b['blocks']}b {b['lif']:5.2f} {b['lif_per_sm']:6.1f}/SM | "
              f"default marks it: {r['marked_by_default']}", flush=True)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "survey.json" if not argv else "survey_part.json"), "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
