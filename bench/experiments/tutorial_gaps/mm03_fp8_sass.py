"""Tutorial 03's ``matmul_kernel`` with fp8 inputs as its benchmark launches it (a row-major, b column-major after
``b.T``: stride_ak = stride_bk = stride_cn = 1), compiled on CPU by kernelc and by Triton 3.6 (sm_90a) at a few of
its autotune configs, the SASS split into prologue / main loop / epilogue (``pointer_gemm_sass.regions``) and counted
by kind. Session 24 measured these configs at M = N = K = 256 (``host_gpu_split.py --sweep m03:256:fp8``).

    python3 bench/experiments/tutorial_gaps/mm03_fp8_sass.py --tutorials DIR --triton-site DIR [--out FILE.json]
        [--configs 128x32x32x4x4,...]   # BMxBNxBKxWARPSxSTAGES
        [--opdiff]                      # also each region's opcodes that one side has more of (NOPs left out)

``KERNELC_REUSE_SYNC=needed`` in the environment compiles kernelc's side with the opt-in (issue 20).

Nothing here is a test.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)
import pointer_gemm_sass as pg  # noqa: E402
import tutorial_sweep as ts  # noqa: E402

SIG = {"a_ptr": "*fp8e5", "b_ptr": "*fp8e5", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
       "stride_am": "i32", "stride_bn": "i32", "stride_cm": "i32"}
EQ1 = {"stride_ak": 1, "stride_bk": 1, "stride_cn": 1}
# the S24 picks (kernelc 128x32x32, Triton 64x128x64), kernelc's R1 pick (128x32x64), the widest gap of R1's sweep
# either way (32x64x32 w2, 128x256x64 w8)
CONFIGS = "128x32x32x4x4,64x128x64x4x4,128x32x64x4x4,32x64x32x2x5,128x256x64x8x3"


def _region_opcodes(cubin: bytes) -> dict:
    """{prologue, epilogue: {opcode: count}} around the main loop (``tutorial_sweep.main_loop``), NOPs left out."""
    instrs, labels = ts.sass_functions(cubin)
    lo, hi = ts.main_loop(instrs, labels)
    return {"prologue": dict(collections.Counter(o for p, o, _ in instrs if p < lo)),
            "epilogue": dict(collections.Counter(o for p, o, _ in instrs if p > hi and o != "NOP"))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tutorials", required=True)
    ap.add_argument("--triton-site", required=True)
    ap.add_argument("--configs", default=CONFIGS)
    ap.add_argument("--out")
    ap.add_argument("--opdiff", action="store_true")
    a = ap.parse_args(argv)
    mod = os.path.join(tempfile.mkdtemp(prefix="mm03_"), "tut03_kernels.py")
    with open(mod, "w") as f:
        f.write(ts.kernel_module(os.path.join(a.tutorials, "03-matrix-multiplication.py")))
    rows = []
    for c in a.configs.split(","):
        bm, bn, bk, w, s = (int(x) for x in c.split("x"))
        cx = dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8, ACTIVATION="")
        row = {"config": c}
        for impl in ("kernelc", "triton"):
            res = ts.compile_one(impl, mod, "matmul_kernel", SIG, cx, EQ1, w, s, a.triton_site, 600)
            if "error" in res:
                row[impl] = {"error": res["error"][-400:]}
                continue
            g = pg.regions(bytes.fromhex(res["cubin"]))
            row[impl] = {"shared": res.get("shared"), "regions": g, "opcodes": _region_opcodes(bytes.fromhex(res["cubin"]))}
        rows.append(row)
        for impl in ("kernelc", "triton"):
            r = row[impl]
            if "error" in r:
                print(f"{c:16s} {impl:8s} error {r['error'][:100]}")
                continue
            parts = [f"{k} " + " ".join(f"{kk}={vv}" for kk, vv in v.items() if vv and kk != "holds_epilogue")
                     for k, v in r["regions"].items() if k in ("prologue", "main_loop", "epilogue")]
            print(f"{c:16s} {impl:8s} " + " | ".join(parts), flush=True)
        if a.opdiff and all("opcodes" in row[i] for i in ("kernelc", "triton")):
            for reg in ("prologue", "epilogue"):
                k = collections.Counter(row["kernelc"]["opcodes"][reg])
                t = collections.Counter(row["triton"]["opcodes"][reg])
                print(f"{c:16s} {reg}: kernelc {sum(k.values())}, Triton {sum(t.values())}; kernelc has more "
                      f"{dict(sorted((k - t).items()))}; Triton has more {dict(sorted((t - k).items()))}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
