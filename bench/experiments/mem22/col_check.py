"""CPU: the memory-bound row kernels (mem20/asm_matrix.py's CASES) compiled for sm_90a under knob settings:
registers, local memory, blocks per SM (by registers), SASS instruction count, barriers, shuffles, MUFU and FMUL.

    python3 bench/experiments/mem22/col_check.py softmax_fwd_kernel,rope_kernel K=V,... [K=V,...]
Each further argument is one column of knob settings ('-' for none).
"""
import collections
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "mem20"))
from asm_matrix import CASES  # noqa: E402
from kernelc.compat import install  # noqa: E402

install()
from bench.bench_memory_bound import _env  # noqa: E402
from cubintools import inspect_cubin, instructions  # noqa: E402
from examples.kernels import memory_bound as K  # noqa: E402
from kernelc.compiler.compiler import compile as kcompile  # noqa: E402


def main(argv):
    kernels, cols = argv[0].split(","), argv[1:] or ["-"]
    for kname in kernels:
        sig_s, cx, nw = CASES[kname]
        sig = dict(p.split("=") for p in sig_s.split(","))
        for col in cols:
            env = dict(kv.split("=", 1) for kv in col.split(",") if "=" in kv)
            with _env(env):
                ck = kcompile(getattr(K, kname), sig, cx, "sm_90a", nw, 3,
                              divisibility={n: 16 for n, t in sig.items() if t.startswith("*") or t in ("i32", "i64")})
            f = inspect_cubin(ck.asm["cubin"]).kernel(ck.name)
            ins = [i.opcode for i in instructions(ck.asm["cubin"])]
            c = collections.Counter(o.split(".")[0] for o in ins)
            blocks = min(64 // nw, 65536 // (nw * 32 * ((f.n_regs + 7) // 8 * 8)))
            print(f"{kname:24s} {col:40s} regs {f.n_regs:3d} local {f.frame_size:3d} blocks {blocks:2d} "
                  f"sass {len(ins):4d} BAR {c['BAR']} SHFL {c['SHFL']} MUFU {c['MUFU']} FMUL {c['FMUL']} "
                  f"IMAD {c['IMAD']} LDS {c['LDS']}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
