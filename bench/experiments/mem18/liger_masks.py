"""Liger-Kernel's row-loop backward kernels (layer_norm, rms_norm: a mask made before the loop over a program's rows)
compiled for sm_90a under KERNELC_UNIFORM_MASKS=onepass (main's rule) and the default (invariant): registers, SASS
instructions, compares and predicate moves. CPU only; needs Liger's source (``$MAIN/.ext/liger``).

    python3 bench/experiments/mem18/liger_masks.py [--out FILE.json]
"""
from __future__ import annotations

import collections
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
LIGER = os.environ.get("LIGER", "/work/main/.ext/liger")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(LIGER, "src"))
os.environ.setdefault("KERNELC_CACHE_DIR", tempfile.mkdtemp(prefix="mem18_liger_"))

CLASSES = ("ISETP", "LOP3", "FSEL", "SEL", "P2R", "R2P", "LDG", "STG")


def cases():
    import kernelc.language as tl
    out = {}
    for n, w in ((4096, 8), (8192, 16)):
        out[f"liger layer_norm bwd fp16 {n}"] = (
            "layer_norm", "_layer_norm_backward_kernel",
            dict(X_ptr="*fp16", stride_x="i32", W_ptr="*fp16", Mean_ptr="*fp32", stride_mean="i32", RSTD_ptr="*fp32",
                 stride_rstd="i32", DX_ptr="*fp16", stride_dx="i32", DW_ptr="*fp32", stride_dw="i32", DB_ptr="*fp32",
                 stride_db="i32", DY_ptr="*fp16", stride_dy="i32", n_rows="i32", n_cols="i32"),
            dict(rows_per_program=32, BLOCK_SIZE=n), w)
        out[f"liger rms_norm bwd bf16 llama {n}"] = (
            "rms_norm", "_rms_norm_backward_kernel",
            dict(dY_ptr="*bf16", dY_row_stride="i32", dX_ptr="*bf16", dX_row_stride="i32", X_ptr="*bf16",
                 X_row_stride="i32", W_ptr="*bf16", W_row_stride="i32", RSTD_ptr="*fp32", RSTD_row_stride="i32",
                 dW_ptr="*fp32", dW_row_stride="i32", n_rows="i32", n_cols="i32", offset="fp32",
                 rows_per_program="i32"),
            dict(X_dtype=tl.bfloat16, casting_mode=0, elementwise_affine=True, BLOCK_SIZE=n), w)
    return out


def summary(ck):
    from cubintools.sass import instructions
    ins = instructions(ck.asm["cubin"])
    by = collections.Counter(i.opcode.split(".")[0] for i in ins)
    return {"regs": ck.n_regs, "spills": ck.n_spills, "sass": len(ins), **{c: by.get(c, 0) for c in CLASSES}}


def main(argv):
    import importlib
    import kernelc
    from kernelc.compat import install
    install()   # Liger's modules import triton: kernelc stands in for it
    res = {}
    for name, (f, kname, sig, cx, warps) in cases().items():
        fn = getattr(importlib.import_module(f"liger_kernel.ops.{f}"), kname)
        div = {n: 16 for n, t in sig.items() if t.startswith("*") or t == "i32"}
        row = {}
        for mode in ("onepass", "invariant"):
            os.environ["KERNELC_UNIFORM_MASKS"] = mode
            try:
                row[mode] = summary(kernelc.compile(fn, sig, cx, target="sm_90a", num_warps=warps, num_stages=3,
                                                    divisibility=div))
            except Exception as e:   # a kernel that does not compile is reported, not hidden
                row[mode] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
        os.environ.pop("KERNELC_UNIFORM_MASKS", None)
        res[name] = row
        print(name, flush=True)
        for m, v in row.items():
            print(f"   {m:10s} " + " ".join(f"{k} {x}" for k, x in v.items()), flush=True)
    if "--out" in argv:
        with open(argv[argv.index("--out") + 1], "w") as fh:
            json.dump(res, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
