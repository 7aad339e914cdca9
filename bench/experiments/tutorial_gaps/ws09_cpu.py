"""Tutorial 09's ``_ws`` kernel (``matmul_kernel_descriptor_persistent`` with ``WARP_SPECIALIZE=True,
FLATTEN=False``) compiled on CPU by kernelc and by Triton 3.6, side by side (docs/triton-tutorials.md,
"09 `_ws`: the nested loop specialised"):

    python3 bench/experiments/tutorial_gaps/ws09_cpu.py [--tutorials DIR] [--triton-site DIR] [--out FILE.json]

Per compile: threads, registers, local memory (spills), shared memory, and every backward-branch loop of the
SASS that holds an MMA or a TMA copy (instructions, HGMMA, UTMALDG/UTMASTG, SYNCS, BAR): the consumers' K
loop, the producer's copy loop, the tile loops around them. kernelc under ``KERNELC_WS_SPLIT_M`` 1 (default)
and 0. The kernel source is the tutorial's (``tutorial_sweep.kernel_module``, not part of this repository),
M = N = 8192, K = 512 fp16. Nothing here is a test.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
import tutorial_sweep as ts  # noqa: E402

# (BN, stages, warps), BM = 128, BK = 64, not subtiled (the tutorial prunes subtiled _ws configs on Hopper)
CONFIGS = [(256, 3, 4), (256, 3, 8), (128, 3, 4), (128, 4, 4), (128, 3, 8)]
VARIANTS = {"kernelc": ("kernelc", {}), "kernelc_nosplit": ("kernelc", {"KERNELC_WS_SPLIT_M": "0"}),
            "triton": ("triton", {})}
KERNEL = "matmul_kernel_descriptor_persistent_ws"


def sass_loops(cubin: bytes):
    instrs, labels = ts.sass_functions(cubin)
    out = []
    for pc, op, ops in instrs:
        m = re.search(r"`\(\.L_x_(\d+)\)", ops) if op.startswith("BRA") else None
        tgt = labels.get(m.group(1)) if m else None
        if tgt is None or tgt > pc:
            continue
        body = [o for p, o, _ in instrs if tgt <= p <= pc]
        cats = ts.categorise(body)
        if any(k in cats for k in ("HGMMA", "UTMALDG", "UTMASTG")):
            out.append({"start": tgt, "instructions": len(body), **cats})
    return sorted(out, key=lambda l: l["instructions"])


def compile_row(mod, bn, s, w, impl, env, triton_site):
    job = next(j for j in ts.jobs_for([KERNEL], 0)
               if j["constexprs"]["BLOCK_SIZE_N"] == bn and j["constexprs"]["BLOCK_SIZE_K"] == 64
               and j["num_stages"] == s and j["num_warps"] == w)
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        res = ts.compile_one(impl, mod, job["fn"], job["sig"], job["cx"], job["eq1"], w, s, triton_site, 600)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    if "error" in res:
        return {"error": res["error"][-600:]}
    cubin = bytes.fromhex(res["cubin"])
    out = ts.summarise(dict(res))
    return {"threads": out["threads"], "n_regs": out["n_regs"], "local_bytes": out["local_bytes"],
            "shared": out["shared"], "sass_total": out["sass_total"], "mma_shapes": out["mma_shapes"],
            "setmaxnreg": sorted(set(re.findall(r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32\s+(\d+)", res["ptx"]))),
            "loops": sass_loops(cubin)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tutorials", default=os.path.join(ROOT, ".ext", "tutorials"))
    ap.add_argument("--triton-site", default="/work/ext/triton_site")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--out", default=os.path.join(HERE, "results", "ws09_cpu.json"))
    a = ap.parse_args(argv)
    mod = os.path.join(tempfile.mkdtemp(prefix="ws09c_"), "k09.py")
    with open(mod, "w") as f:
        f.write(ts.kernel_module(os.path.join(a.tutorials, "09-persistent-matmul.py")))
    rows = []
    md = ["| config | " + " | ".join(a.variants.split(",")) + " |", "|---|" + "---|" * len(a.variants.split(","))]
    for bn, s, w in CONFIGS:
        row = {"config": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": 64, "num_stages": s, "num_warps": w}}
        cells = []
        for label in a.variants.split(","):
            impl, env = VARIANTS[label]
            r = compile_row(mod, bn, s, w, impl, env, a.triton_site)
            row[label] = r
            if "error" in r:
                cells.append("error")
            else:
                k = next((l for l in r["loops"] if "HGMMA" in l), None)
                cells.append(f"{r['threads']} thr, {r['n_regs']} r, {r['local_bytes']} B local, K loop "
                             f"{k and k['instructions']} ({k and k.get('HGMMA')} HGMMA, {k and k.get('UTMALDG', 0)} UTMALDG)")
            print(f"128x{bn}x64 s{s} w{w} {label}: {cells[-1]}", flush=True)
        rows.append(row)
        md.append(f"| 128x{bn}x64 s{s} w{w} | " + " | ".join(cells) + " |")
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump({"benchmark": "ws09_cpu", "kernel": KERNEL, "target": "sm_90a", "shape": "M=N=8192 K=512 fp16",
                   "variants": {k: VARIANTS[k][1] for k in a.variants.split(",")}, "rows": rows}, f, indent=1)
    with open(os.path.splitext(a.out)[0] + ".md", "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
