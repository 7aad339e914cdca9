"""Tutorial 03's ``matmul_kernel`` (pointer loads with K masks) at the configs its autotuner can pick on
Hopper, compiled for sm_90a by kernelc and by Triton 3.6 on CPU, side by side (docs/triton-tutorials.md,
"03 matmul"). One command:

    python3 bench/experiments/tutorial_gaps/t03_sweep.py --tutorials DIR [--dtypes fp16,fp8] [--pick 0,8]
        [--jobs J] [--keep DIR] [--out FILE.json]

``DIR`` holds Triton 3.6's ``03-matrix-multiplication.py`` (not part of this repository; only its ``@triton.jit``
functions are taken). Arguments are typed as the tutorial's benchmark launches them at M = N = K = 4096:
fp16 A (M, K) and B (K, N) row-major (``stride_ak = stride_bn = stride_cn = 1``); fp8 (e5m2) A row-major and
B = ``b.T`` of a row-major tensor (``stride_bk = stride_cn = 1``); 16-divisible pointers and integers, as
Triton's runtime specialises them. Per compile, besides ``tutorial_sweep.summarise``'s numbers: the main loop's
integer address arithmetic (IMAD/LEA/IADD3/SHF), its predicate work (ISETP/SEL/P2R/R2P), the loop's SASS in
order (``--keep``), and the stores of the epilogue (STG width, STS/STSM). Nothing here is a test.
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import os
import re
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
import tutorial_sweep as ts  # noqa: E402

# get_cuda_autotune_config() of the tutorial: (BM, BN, BK, stages, warps); GROUP_SIZE_M = 8 in all
CONFIGS = [(128, 256, 64, 3, 8), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4), (128, 64, 32, 4, 4),
           (64, 128, 32, 4, 4), (128, 32, 32, 4, 4), (64, 32, 32, 5, 2), (32, 64, 32, 5, 2),
           (128, 256, 128, 3, 8), (256, 128, 128, 3, 8), (256, 64, 128, 4, 4), (64, 256, 128, 4, 4),
           (128, 128, 128, 4, 4), (128, 64, 64, 4, 4), (64, 128, 64, 4, 4), (128, 32, 64, 4, 4)]

SIG = {"fp16": ({"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
                 "stride_am": "i32", "stride_bk": "i32", "stride_cm": "i32"},
                {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1}),
       "fp8": ({"a_ptr": "*fp8e5", "b_ptr": "*fp8e5", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
                "stride_am": "i32", "stride_bn": "i32", "stride_cm": "i32"},
               {"stride_ak": 1, "stride_bk": 1, "stride_cn": 1})}

ADDR = ("IMAD", "LEA", "IADD3", "SHF", "IABS", "LOP3", "MOV", "UIADD3", "UIMAD", "ULEA", "USHF", "UMOV", "ULOP3")
PRED = ("ISETP", "SEL", "P2R", "R2P", "PLOP3", "UISETP", "USEL")


def jobs(dtypes, pick):
    for dt in dtypes:
        sig, eq1 = SIG[dt]
        for i, (bm, bn, bk, s, w) in enumerate(CONFIGS):
            if pick and i not in pick:
                continue
            kw = dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8)
            cx = dict(kw, ACTIVATION="")
            yield dict(kernel=f"matmul_kernel.{dt}", fn="matmul_kernel", tutorial="03", config=i, constexprs=kw,
                       num_warps=w, num_stages=s, sig=dict(sig), cx=cx, eq1=dict(eq1))


def loop_detail(cubin_path: str) -> dict:
    """The main loop's SASS, in order, and counts of its address and predicate arithmetic; the kernel's stores."""
    cubin = open(cubin_path, "rb").read()
    instrs, labels = ts.sass_functions(cubin)
    loop = ts.main_loop(instrs, labels)
    body = [(p, o, a) for p, o, a in instrs if loop and loop[0] <= p <= loop[1]]
    ops = [o.split(".")[0] for _, o, _ in body]
    c = collections.Counter(ops)
    stores = collections.Counter(o for _, o, _ in instrs if o.startswith(("STG", "STS", "STSM", "UTMASTG")))
    return {"loop_mma": sum(n for o, n in c.items() if o.endswith("MMA")),
            "loop_fences": sum(n for o, n in c.items() if o.startswith(("MEMBAR", "FENCE"))),
            "loop_wgmma_wait": [a for _, o, a in body if o.startswith("WARPGROUP.DEPBAR")],
            "addr": {k: c[k] for k in ADDR if c[k]}, "addr_total": sum(c[k] for k in ADDR),
            "pred": {k: c[k] for k in PRED if c[k]}, "pred_total": sum(c[k] for k in PRED),
            "stores": dict(stores), "loop_sass": [f"{o} {a}".strip() for _, o, a in body]}


def run_one(job, mod_path, triton_site, timeout, keep):
    row = {k: job[k] for k in ("kernel", "config", "constexprs", "num_warps", "num_stages")}
    for impl in ("kernelc", "triton"):
        res = ts.compile_one(impl, mod_path, job["fn"], job["sig"], job["cx"], job["eq1"], job["num_warps"],
                             job["num_stages"], triton_site, timeout)
        tag = f"{job['kernel']}.{job['config']}.{impl}"
        if "error" in res:
            row[impl] = res
            continue
        row[impl] = ts.summarise(res, keep, tag)
        row[impl].update(loop_detail(os.path.join(keep, tag + ".cubin")))
    return row


def label(r):
    kw = r["constexprs"]
    return (f"{r['kernel'].split('.')[1]} {kw['BLOCK_SIZE_M']}x{kw['BLOCK_SIZE_N']}x{kw['BLOCK_SIZE_K']} "
            f"s{r['num_stages']} w{r['num_warps']}")


def short(d):
    if "error" in d:
        return "error: " + d["error"].splitlines()[-1][:100]
    ml = d.get("main_loop") or {}
    return (f"{d['n_regs']}r {d['local_bytes']}B smem {d['shared']} loop {ml.get('instructions')} "
            f"(LDGSTS {ml.get('LDGSTS', 0)} MMA {d['loop_mma']} addr {d['addr_total']} "
            f"pred {d['pred_total']} fences {d['loop_fences']}) wait {d['loop_wgmma_wait']} ptx-wait {','.join(d['wgmma_wait'])} stores {d['stores']}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tutorials", default=os.path.join(ROOT, ".ext", "tutorials"))
    ap.add_argument("--dtypes", default="fp16,fp8")
    ap.add_argument("--pick", default="", help="config indices into CONFIGS (0-based, comma-separated)")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--triton-site", default="/work/ext/triton_site")
    ap.add_argument("--keep", default="", help="keep each cubin/PTX here (default: a temporary directory)")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "t03_sweep.json"))
    a = ap.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="t03_sweep_")
    keep = a.keep or os.path.join(tmp, "bin")
    mod = os.path.join(tmp, "tut03_kernels.py")
    with open(mod, "w") as f:
        f.write(ts.kernel_module(os.path.join(a.tutorials, "03-matrix-multiplication.py")))
    js = list(jobs(a.dtypes.split(","), {int(x) for x in a.pick.split(",") if x}))
    rows = [None] * len(js)
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
        futs = {ex.submit(run_one, j, mod, a.triton_site, a.timeout, keep): i for i, j in enumerate(js)}
        for n, fut in enumerate(concurrent.futures.as_completed(futs), 1):
            r = rows[futs[fut]] = fut.result()
            print(f"[{n}/{len(js)} {time.time() - t0:5.0f}s] {label(r)}\n   k: {short(r['kernelc'])}\n"
                  f"   t: {short(r['triton'])}", flush=True)
    if not a.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump({"benchmark": "t03_sweep", "shape": "M=N=K=4096",
                   "kernelc_env": {k: v for k, v in os.environ.items() if k.startswith("KERNELC_")},
                   "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
