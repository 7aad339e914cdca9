"""CPU (sm_90a): the launch shape of softmax fwd 8192^2 fp16 and rope 4x4096x32x128 bf16, of the streaming copies
timed beside them (copies.py) and of the R2 variants (mem21/variants.py edits): registers, instructions, global
memory opcodes, resident blocks an SM (H200: 132 SMs, 64K registers, 2048 threads, 32 blocks an SM; no
shared-memory limit reached), programs, waves (programs / resident programs) and the last wave's fill.

    PYTHONPATH=.:<triton 3.6 site> python3 bench/experiments/mem26/shapes.py [--out PATH]
"""
from __future__ import annotations

import collections
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
for p in (ROOT, HERE, os.path.join(ROOT, "bench", "experiments", "mem20"),
          os.path.join(ROOT, "bench", "experiments", "mem21")):
    sys.path.insert(0, p)

SMS, REGS, THREADS, BLOCKS = 132, 65536, 2048, 32
SIG = {"softmax_fwd_kernel": ({"y_ptr": "*fp16", "x_ptr": "*fp16", "stride": "i32", "n_cols": "i32"},
                              {"BLOCK_SIZE": 8192}, 16, 8192),
       "rope_kernel": ({"q_ptr": "*bf16", "q_row_stride": "i32", "cos_ptr": "*fp32", "sin_ptr": "*fp32",
                        "cos_row_stride": "i32", "seq_len": "i32", "n_heads": "i32", "head_dim": "i32"},
                       {"BLOCK_H": 32, "BLOCK_D": 64}, 4, 16384),
       "row_copy_kernel": ({"y_ptr": "*fp16", "x_ptr": "*fp16", "stride": "i32", "n_cols": "i32"},
                           {"BLOCK_SIZE": 8192}, 16, 8192),
       "rope_negate_kernel": ({"q_ptr": "*bf16", "q_row_stride": "i32", "n_heads": "i32", "head_dim": "i32"},
                              {"BLOCK_H": 32, "BLOCK_D": 128}, 4, 16384)}
EDITS = {"softmax_fwd_kernel": ["rev", "stna", "pers:8192/528"],
         "rope_kernel": ["pers:16384/1188", "l2el:nost", "bmajor:4", "bmajor:4+l2el:nost"]}


def resident(regs: int, warps: int) -> int:
    """Blocks an SM holds: registers (allocated per warp in units of 256) and threads."""
    per_warp = math.ceil(regs * 32 / 256) * 256
    return min(REGS // (per_warp * warps), THREADS // (32 * warps), BLOCKS)


def describe(cubin, name, warps, programs, launched=None) -> dict:
    from cubintools import inspect_cubin, instructions
    f = inspect_cubin(cubin).kernel(name)
    ins = list(instructions(cubin))
    blocks = resident(f.n_regs, warps)
    slots = SMS * blocks
    launched = launched or programs
    waves = launched / slots
    return {"regs": f.n_regs, "local": f.frame_size, "instructions": len(ins), "warps": warps,
            "mem": dict(sorted(collections.Counter(i.opcode for i in ins if i.opcode.startswith(("LDG", "STG")))
                               .items())),
            "blocks_per_sm": blocks, "resident_programs": slots, "programs": programs, "launched": launched,
            "waves": round(waves, 3), "last_wave_fill": round(waves - math.floor(waves), 3) or 1.0}


def main(argv) -> int:
    from kernelc.compat import install
    install()
    import copies as C
    import variants as V
    from examples.kernels import memory_bound as K
    from kernelc.compiler.compiler import compile as kcompile
    out = {}
    for kname, (sig, cx, warps, programs) in SIG.items():
        fn = getattr(K, kname, None) or getattr(C, kname)
        ck = kcompile(fn, sig, cx, "sm_90a", warps, 3,
                      divisibility={n: 16 for n, t in sig.items() if t.startswith("*") or t == "i32"})
        out[kname] = {"shipped": describe(ck.asm["cubin"], ck.name, warps, programs)}
        for e in EDITS.get(kname, []):
            edits = e.split("+")
            launched = next((int(x.split("/")[1]) for x in edits if x.startswith("pers:")), None)
            out[kname][e] = describe(V.build(ck.asm["ptx"], "own", edits), ck.name, warps, programs, launched)
        for tag, d in out[kname].items():
            print(f"{kname:20s} {tag:20s} {json.dumps(d)}", flush=True)
    dest = argv[argv.index("--out") + 1] if "--out" in argv else os.path.join(HERE, "results", "shapes.json")
    with open(dest, "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
