"""(d64b27) The kernels that run a producer warpgroup with setmaxnreg at their defaults (the D=128 backward's dK/dV
kernels of ds / the separate pass / flat, the dQ kernel, the FA3-order forward) and this session's D=64 candidates,
compiled on CPU for sm_90a: registers, spills, whether the SASS holds USETMAXREG, and hashes of the PTX and of the SASS
without line info. Run once per tree and compare (the .minnctapersm change):

    TREE=/work/main KERNELC_CACHE_DIR=/tmp/c1 PYTHONPATH=/work/main python3 bench/experiments/d64b27/ws_sass.py > a.json
    TREE=$PWD KERNELC_CACHE_DIR=/tmp/c2 PYTHONPATH=$PWD python3 bench/experiments/d64b27/ws_sass.py > b.json
"""
import hashlib
import json
import os
import re
import sys

ROOT = os.environ.get("TREE", os.getcwd())
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "attention_bwd_cudnn"))
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "tutorial_gaps"))
sys.path.insert(0, ROOT)
from bwd_sass import compile_kernel  # noqa: E402
from examples.kernels import attention_bwd as B  # noqa: E402


def h(ck):
    ptx = "\n".join(ln for ln in ck.asm["ptx"].splitlines()
                    if not ln.strip().startswith((".loc", ".file", "$L__tmp", "//")) and "debug" not in ln)
    sass = "\n".join(re.sub(r"/\*[0-9a-f]{4,}\*/", "", ln).strip() for ln in ck.asm["sass"].splitlines()
                     if ln.strip() and not ln.lstrip().startswith(("//", ".")))
    return dict(ptx=hashlib.sha1(ptx.encode()).hexdigest()[:12], sass=hashlib.sha1(sass.encode()).hexdigest()[:12],
                regs=ck.n_regs, spills=ck.n_spills, shared=ck.shared, usetmaxreg="USETMAXREG" in ck.asm["sass"],
                setmaxnreg="setmaxnreg" in ck.asm["ptx"])


CASES = [
    ("ds dkdv D128 nc default", 128, False, "dkdv_ds", B.DS_DKDV_CONFIGS[128], dict(WS=1, EVEN_M=True, ROWS_TMA=True)),
    ("ds dkdv D128 nc norows", 128, False, "dkdv_ds", B.DS_DKDV_CONFIGS[128], dict(WS=1, EVEN_M=True)),
    ("ds dkdv D128 c onews", 128, True, "dkdv_ds", B.DS_DKDV_CONFIGS[128], dict(WS=1, EVEN_M=True, GROUP=8,
                                                                               ONE_LOOP=True)),
    ("ds dkdv D128 c onewsrows", 128, True, "dkdv_ds", B.DS_DKDV_CONFIGS[128], dict(WS=1, EVEN_M=True, GROUP=8,
                                                                                   ONE_LOOP=True, ROWS_TMA=True)),
    ("ds dkdv D128 c default", 128, True, "dkdv_ds", B.DS_DKDV_CONFIGS[128], dict(EVEN_M=True, GROUP=8)),
    ("sep dkdv D128 nc default", 128, False, "dkdv", B.DKDV_CONFIGS[128], dict(WS=1)),
    ("sep dq D128 nc default", 128, False, "dq", B.DQ_CONFIGS[128], {}),
    ("sep dq D128 c default", 128, True, "dq", B.DQ_CONFIGS[128], dict(GROUP=0)),
    ("ds dq D128 nc default", 128, False, "dq_ds", B.DQ_FROM_DS_CONFIGS[128], {}),
    ("sep dkdv D64 nc 64x128 ws rows", 64, False, "dkdv", (64, 128, 8, 3), dict(WS=1, EVEN_M=True, ROWS_TMA=True)),
    ("sep dkdv D64 nc 64x128 ws", 64, False, "dkdv", (64, 128, 8, 3), dict(WS=1, EVEN_M=True)),
    ("sep dq D64 nc 128x128", 64, False, "dq", (128, 128, 8, 2), {}),
    ("sep dq D64 nc 128x64", 64, False, "dq", (128, 64, 8, 2), {}),
]

out = {}
for name, D, causal, kern, cfg, ex in CASES:
    try:
        out[name] = h(compile_kernel(D, causal, kern, cfg, extra=ex))
    except Exception as e:
        out[name] = "ERR " + type(e).__name__ + ": " + str(e)[:120]
try:
    from examples.kernels import attention_fa3 as AF
    from tests.compiler.test_fa3_configs import _compile
    for D in (64, 128):
        for causal in (False, True):
            bm, bn, w, st = AF.config(D, causal)
            out[f"fa3 fwd D{D} c{int(causal)}"] = h(_compile(D, False, causal, bm, bn, w, st))
except Exception as e:
    out["fa3"] = "ERR " + type(e).__name__ + ": " + str(e)[:120]
print(json.dumps(out, indent=1))
