"""Which of Liger-Kernel's looped-reduction kernels ``KERNELC_REDUCE_SCRATCH=loops`` changes (CPU, sm_90a): each
kernel compiled by kernelc under ``shared`` (the default) and ``loops`` in its own process and cache; SASS hash,
instruction count, registers and barriers. Liger is read from ``--liger`` (not part of this repository).

    python3 bench/experiments/mem24/liger_loops_sass.py --liger /work/main/.ext/liger [--out X.json]
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))

# (module, kernel) -> (signature, constexprs, num_warps): as Liger's wrappers launch them for fp32 / bf16 inputs
CASES = {
    # (softmax's _softmax_multi_block_*_kernel, the looped ones, are left out: `m = tl.float32(-float("inf"))` is
    # rejected by Triton 3.6 itself ("'dtype' object is not callable", CPU, session 24) as by kernelc)
    ("softmax", "_softmax_single_block_forward_kernel"):
        ("Y_ptr=*fp32,Y_row_stride=i32,X_ptr=*fp32,X_row_stride=i32,n_cols=i32", {"BLOCK_SIZE": 4096}, 16),
    ("layer_norm", "_layer_norm_backward_kernel"):
        ("X_ptr=*bf16,stride_x=i32,W_ptr=*bf16,Mean_ptr=*fp32,stride_mean=i32,RSTD_ptr=*fp32,stride_rstd=i32,"
         "DX_ptr=*bf16,stride_dx=i32,DW_ptr=*fp32,stride_dw=i32,DB_ptr=*fp32,stride_db=i32,DY_ptr=*bf16,stride_dy=i32,"
         "n_rows=i32,n_cols=i32", {"rows_per_program": 4, "BLOCK_SIZE": 4096}, 8),
    ("cross_entropy", "liger_cross_entropy_kernel"):
        ("X_ptr=*bf16,X_stride=i32,Y_ptr=*i64,Y_stride=i32,loss_ptr=*fp32,loss_stride=i32,token_accuracy_stride=i32,"
         "predicted_tokens_stride=i32,n_cols=i32,n_non_ignore=i32,sum_non_ignore_weight=i32,weight_sum=fp32,"
         "ignore_index=i32",
         {"weight_ptr": None, "z_loss_ptr": None, "token_accuracy_ptr": None, "predicted_tokens_ptr": None,
          "softcap": None, "lse_square_scale": 0.0, "label_smoothing": 0.0, "reduction": "mean",
          "RETURN_Z_LOSS": False, "RETURN_TOKEN_ACCURACY": False, "RETURN_PREDICTED_TOKENS": False,
          "BLOCK_SIZE": 32768, "HAS_WEIGHT": False, "HAS_SOFTCAPPING": False, "HAS_GRADIENTS": True}, 32),
    ("rms_norm", "_rms_norm_backward_kernel"):
        ("dY_ptr=*bf16,dY_row_stride=i32,dX_ptr=*bf16,dX_row_stride=i32,X_ptr=*bf16,X_row_stride=i32,W_ptr=*bf16,"
         "W_row_stride=i32,RSTD_ptr=*fp32,RSTD_row_stride=i32,dW_ptr=*fp32,dW_row_stride=i32,n_rows=i32,n_cols=i32,"
         "offset=fp32,rows_per_program=i32",
         {"X_dtype": "bfloat16", "casting_mode": 0, "elementwise_affine": True, "BLOCK_SIZE": 4096}, 8),
}


def one(liger, module, kname, sig_s, cx, nw):
    sys.path.insert(0, ROOT)
    sys.path.insert(0, os.path.join(liger, "src"))
    from kernelc.compat import install
    install()
    import importlib
    mod = importlib.import_module(f"liger_kernel.ops.{module}")
    from kernelc.compiler.compiler import compile as kcompile
    from cubintools import instructions
    sig = dict(p.split("=") for p in sig_s.split(","))
    import kernelc.language as kl
    cx = {k: getattr(kl, v) if k == "X_dtype" else v for k, v in cx.items()}   # a dtype constexpr by name
    ck = kcompile(getattr(mod, kname), sig, cx, "sm_90a", nw, 3,
                  divisibility={n: 16 for n, t in sig.items() if t.startswith("*") or t == "i32"})
    ins = instructions(ck.asm["cubin"])
    c = collections.Counter(i.opcode for i in ins)
    return {"regs": ck.n_regs, "sass": len(ins), "sha": hashlib.sha1(ck.asm["sass"].encode()).hexdigest()[:12],
            "bar": sum(v for k, v in c.items() if k.startswith("BAR"))}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--liger", required=True)
    ap.add_argument("--out")
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.one:
        module, kname = a.one
        sig_s, cx, nw = CASES[(module, kname)]
        print(json.dumps(one(a.liger, module, kname, sig_s, cx, nw)))
        return 0
    out = {}
    tmp = tempfile.mkdtemp(prefix="mem24-liger-")
    for (module, kname), case in CASES.items():
        if case is None:
            continue
        row = {}
        for v in ("shared", "loops"):
            env = dict(os.environ, KERNELC_REDUCE_SCRATCH=v, KERNELC_CACHE_DIR=os.path.join(tmp, v))
            r = subprocess.run([sys.executable, __file__, "--liger", a.liger, "--one", module, kname], env=env,
                               capture_output=True, text=True)
            row[v] = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {"error": r.stderr[-400:]}
        row["changed"] = "error" not in row["shared"] and "error" not in row["loops"] and \
            row["shared"]["sha"] != row["loops"]["sha"]
        out[f"{module}.{kname}"] = row
        print(f"{module}.{kname}: shared {row['shared']} loops {row['loops']} changed={row['changed']}", flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
