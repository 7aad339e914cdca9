"""The attention kernels' PTX at their default constexprs (ROWS_TMA off), hashed without line info (``.loc``/``.file``,
comments, debug sections): run once per tree and compare, e.g.

    TREE=/work/main KERNELC_CACHE_DIR=/tmp/c1 PYTHONPATH=/work/main python3 bench/experiments/att25/default_ptx.py > main.json
    TREE=$PWD KERNELC_CACHE_DIR=/tmp/c2 PYTHONPATH=$PWD python3 bench/experiments/att25/default_ptx.py > br.json
"""
import sys, os, hashlib, re, json
ROOT = os.environ["TREE"]
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "attention_bwd_cudnn")); sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "tutorial_gaps")); sys.path.insert(0, ROOT)
from bwd_sass import compile_kernel
from examples.kernels import attention_bwd as B
out = {}
def h(ck):
    ptx = "\n".join(l for l in ck.asm["ptx"].splitlines() if not l.strip().startswith((".loc", ".file", "$L__tmp", "//")) and "debug" not in l)
    return hashlib.sha1(ptx.encode()).hexdigest()[:12], ck.n_regs, ck.shared
for D in (64, 128):
    for causal in (False, True):
        for kern, table in (("dkdv_ds", B.DS_DKDV_CONFIGS), ("dkdv", B.DKDV_CONFIGS), ("dq", B.DQ_CONFIGS), ("dq_ds", B.DQ_FROM_DS_CONFIGS)):
            extras = [{}]
            if kern == "dkdv_ds" and D == 128:
                extras = [{"WS": 1, "EVEN_M": True}, {"EVEN_M": True, "GROUP": 8}, {}]
            for ex in extras:
                try:
                    out[f"{kern} D{D} c{int(causal)} {ex}"] = h(compile_kernel(D, causal, kern, table[D], extra=ex))
                except Exception as e:
                    out[f"{kern} D{D} c{int(causal)} {ex}"] = "ERR " + type(e).__name__
from examples.kernels import attention_fa3 as AF
from tests.compiler.test_fa3_configs import _compile
for causal in (False, True):
    bm, bn, w, st = AF.config(128, causal)
    out[f"fa3 {causal}"] = h(_compile(128, False, causal, bm, bn, w, st))
print(json.dumps(out))
