"""matmul_tma bf16 128x128x64 w4 s3 (bench_kernels' pinned config) compiled for sm_90a under each KERNELC_TMA_ELECT
form: registers, instructions, and the SASS opcodes the copy predicate moves (CPU).

    PYTHONPATH=. python3 bench/experiments/mem23/mm_sass.py [--out results/mm_sass_elect.json]
"""
import collections
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def counts(form):
    os.environ["KERNELC_TMA_ELECT"] = form
    from cubintools.sass import disassemble
    from examples.kernels import matmul_tma as M
    from kernelc.compiler.compiler import compile as kcompile
    sig = {"a_desc": "tensordesc<bf16[128, 64]>", "b_desc": "tensordesc<bf16[64, 128]>",
           "c_desc": "tensordesc<bf16[128, 128]>", "M": "i32", "N": "i32", "K": "i32"}
    cx = {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8}
    ck = kcompile(M.matmul_tma_kernel, sig, cx, "sm_90a", 4, 3, divisibility={n: 16 for n in sig})
    s = disassemble(ck.asm["cubin"], line_info=False)
    ins = [ln for ln in s.splitlines() if re.match(r"\s*/\*[0-9a-f]{4}\*/", ln)]
    c = collections.Counter(m.group(1) for ln in ins for m in [re.search(r"\b(R2UR|ELECT|BRA\.U\.ANY|UTMALDG|VOTEU|"
                                                                        r"HGMMA|BSSY)\b", ln)] if m)
    return {"registers": ck.n_regs, "instructions": len(ins), **dict(sorted(c.items()))}


if __name__ == "__main__":
    from kernelc.compat import install
    install()
    out = {form: counts(form) for form in ("elect", "tid", "auto")}
    print(json.dumps(out, indent=1))
    if "--out" in sys.argv:
        with open(sys.argv[sys.argv.index("--out") + 1], "w") as f:
            json.dump(out, f, indent=1)
