"""The memory-bound set (examples/kernels/memory_bound.py) at the bench's sizes, compiled on CPU by kernelc
under each assembler setting and by Triton 3.6: registers, SASS size, global access widths, MUFU use, and
how many global loads each thread issues before it first uses one (``NNr/Mld`` in the printed table).

    python3 bench/experiments/tutorial_gaps/memory_bound_sass.py [--triton-site DIR] [--as-measured-2026-11] [names...]

Writes results/memory_bound_sass.json and prints a table. Each kernelc setting compiles in its own
process (cpu_compare.py --json) with its environment; integers and pointers are taken divisible by 16, as
the runtimes specialise them for the bench's tensors. Nothing here needs a GPU.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
SRC = os.path.join(ROOT, "examples", "kernels", "memory_bound.py")

BF = "*bf16"
# kernel -> (signature, constexprs, warps): the wrappers' choices at the bench's sizes
CASES = {
    "transpose_kernel": ("x_ptr=*fp32,y_ptr=*fp32,M=i32,N=i32,stride_xm=i32,stride_ym=i32",
                         "BLOCK_M=64,BLOCK_N=64", 4),
    "permute021_kernel": ("x_ptr=*fp16,y_ptr=*fp16,M=i32,N=i32,stride_xb=i32,stride_xm=i32,stride_yb=i32,"
                          "stride_yn=i32", "BLOCK_M=64,BLOCK_N=64", 4),
    "swiglu_fwd_kernel": (f"a_ptr={BF},b_ptr={BF},c_ptr={BF},stride=i32,n_cols=i32", "BLOCK_SIZE=16384", 16),
    "swiglu_bwd_kernel": (f"dc_ptr={BF},a_ptr={BF},b_ptr={BF},da_ptr={BF},db_ptr={BF},stride=i32,n_cols=i32",
                          "BLOCK_SIZE=16384", 16),
    "geglu_fwd_kernel": (f"a_ptr={BF},b_ptr={BF},c_ptr={BF},stride=i32,n_cols=i32", "BLOCK_SIZE=16384", 16),
    "geglu_bwd_kernel": (f"dc_ptr={BF},a_ptr={BF},b_ptr={BF},da_ptr={BF},db_ptr={BF},stride=i32,n_cols=i32",
                         "BLOCK_SIZE=16384", 16),
    "softmax_fwd_kernel": ("y_ptr=*fp16,x_ptr=*fp16,stride=i32,n_cols=i32", "BLOCK_SIZE=8192", 16),
    "softmax_bwd_kernel": ("dx_ptr=*fp16,dy_ptr=*fp16,y_ptr=*fp16,stride=i32,n_cols=i32", "BLOCK_SIZE=8192", 16),
    "log_softmax_fwd_kernel": ("y_ptr=*fp16,x_ptr=*fp16,stride=i32,n_cols=i32", "BLOCK_SIZE=8192", 16),
    "log_softmax_bwd_kernel": ("dx_ptr=*fp16,dy_ptr=*fp16,y_ptr=*fp16,stride=i32,n_cols=i32", "BLOCK_SIZE=8192",
                               16),
    "rms_norm_bwd_kernel": (f"dy_ptr={BF},x_ptr={BF},w_ptr={BF},rstd_ptr=*fp32,dx_ptr={BF},dw_ptr=*fp32,stride=i32,"
                            "n_rows=i32,n_cols=i32,rows_per_program=i32", "BLOCK_SIZE=4096", 8),
    "layer_norm_bwd_kernel": ("dy_ptr=*fp16,x_ptr=*fp16,w_ptr=*fp16,mean_ptr=*fp32,rstd_ptr=*fp32,dx_ptr=*fp16,"
                              "dw_ptr=*fp32,db_ptr=*fp32,stride=i32,n_rows=i32,n_cols=i32,rows_per_program=i32",
                              "BLOCK_SIZE=4096", 8),
    "cross_entropy_kernel": (f"logits_ptr={BF},grad_ptr={BF},target_ptr=*i64,loss_ptr=*fp32,stride=i32,n_cols=i32,"
                             "inv_n_rows=fp32", "BLOCK_SIZE=32768", 32),
    "rope_kernel": ("q_ptr=*bf16,q_row_stride=i32,cos_ptr=*fp32,sin_ptr=*fp32,cos_row_stride=i32,seq_len=i32,"
                    "n_heads=i32,head_dim=i32", "BLOCK_H=32,BLOCK_D=64", 4),
}
# What the GPU runs of 2026-11-25 and 2026-11-27 (08:45) compiled: bench_memory_bound then made every row kernel's
# inputs 2048 x 4096 whatever its name said, so BLOCK_SIZE=4096 at 8 warps (--as-measured-2026-11)
ROW_KERNELS = ("swiglu_fwd_kernel", "swiglu_bwd_kernel", "geglu_fwd_kernel", "geglu_bwd_kernel", "softmax_fwd_kernel",
               "softmax_bwd_kernel", "log_softmax_fwd_kernel", "log_softmax_bwd_kernel")
AS_MEASURED = {k: (sig, "BLOCK_SIZE=4096", 8) if k in ROW_KERNELS else (sig, cx, w)
               for k, (sig, cx, w) in CASES.items()}
# kernelc settings: name -> environment
SETTINGS = {
    "kernelc nvjitlink+bound": {"KERNELC_ASSEMBLER": "nvjitlink", "KERNELC_NVJITLINK_LAUNCH_BOUND": "1"},
    "kernelc nvjitlink": {"KERNELC_ASSEMBLER": "nvjitlink", "KERNELC_NVJITLINK_LAUNCH_BOUND": "0"},
    "kernelc fill=step": {"KERNELC_ASSEMBLER": "nvjitlink", "KERNELC_FILL_POLICY": "step"},
    "kernelc auto": {"KERNELC_ASSEMBLER": "auto"},
}


def _compare(kernel, only, env, site, cases):
    sig, cx, warps = cases[kernel]
    cmd = [sys.executable, os.path.join(HERE, "cpu_compare.py"), SRC, kernel, "--sig", sig, "--cx", cx,
           "--num-warps", str(warps), "--only", only, "--json", "--triton-site", site]
    env = dict(os.environ, PYTHONPATH=ROOT, KERNELC_CACHE_DIR=os.environ.get("KERNELC_CACHE_DIR", "/tmp/mb_sass_cache"),
               **env)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if r.returncode:
        return {"error": r.stderr[-500:]}
    return json.loads(r.stdout)[only]


def _summary(r):
    if "error" in r:
        return r
    s = r["sass"]
    pick = lambda pre: {k: v for k, v in s.items() if k.startswith(pre)}  # noqa: E731
    return {"regs": r["n_regs"], "local": r["local_bytes"], "sass": r["sass_total"],
            "loads_before_first_use": r["loads_before_first_use"], "ldg": pick("LDG"),
            "stg": pick("STG"), "mufu": pick("MUFU"), "ffma": s.get("FFMA", 0),
            "fmul": s.get("FMUL", 0), "fadd": s.get("FADD", 0)}


def main(argv):
    site = "/work/ext/triton_site"
    if "--triton-site" in argv:
        i = argv.index("--triton-site")
        site = argv[i + 1]
        del argv[i:i + 2]
    cases, suffix = CASES, ""
    if "--as-measured-2026-11" in argv:
        argv.remove("--as-measured-2026-11")
        cases, suffix = {k: AS_MEASURED[k] for k in ROW_KERNELS}, "_as_measured_2026_11"
    names = [k for k in cases if not argv or any(a in k for a in argv)]
    out = {}
    for k in names:
        row = {name: _summary(_compare(k, "kernelc", env, site, cases)) for name, env in SETTINGS.items()}
        row["triton"] = _summary(_compare(k, "triton", {}, site, cases))
        out[k] = row
        print(f"{k:24s} " + "  ".join(f"{n.split(' ', 1)[-1] if n != 'triton' else 'triton'} "
                                       f"{r.get('regs', 'ERR')}r/{r.get('loads_before_first_use', '-')}ld"
                                       for n, r in row.items()),
              flush=True)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", f"memory_bound_sass{suffix}.json"), "w") as f:
        json.dump({"settings": SETTINGS, "cases": {k: list(cases[k]) for k in names}, "results": out}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
