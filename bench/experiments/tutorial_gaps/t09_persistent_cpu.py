"""Tutorial 09's persistent TMA kernels at the configs both autotuners picked on an H100, compiled on CPU by
kernelc (under several knob settings) and by Triton 3.6, side by side (docs/triton-tutorials.md, "09 persistent
TMA kernels"):

    python3 bench/experiments/tutorial_gaps/t09_persistent_cpu.py [--tutorials DIR] [--triton-site DIR]
        [--variants main,flatten,branch,flatten_all] [--out FILE.json]

Per compile: shared memory, registers, spills, the main loop's SASS mix (``tutorial_sweep.summarise``) and, from
the PTX, what happens around the epilogue: where the TMA stores' ``cp.async.bulk.wait_group.read`` sits (PTX
instructions after the store's ``commit_group``: a handful means the store is waited for right away; the
wait placed before the next write of the buffer is hundreds of instructions, a K loop, later), how many
mbarrier waits and bar.syncs the kernel has, and ``stmatrix`` against ``st.shared`` for the staging. The
kernel source is the tutorial's (not part of this repository: ``tutorial_sweep.kernel_module``), compiled
with the arguments of ``python 09-persistent-matmul.py`` (M = N = 8192, K = 512, fp16). Nothing here is a test.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
import tutorial_sweep as ts  # noqa: E402

# (kernel, BLOCK_SIZE_N, stages, warps, EPILOGUE_SUBTILE): BM = 128, BK = 64. The H100 picks of call C1
# (Triton: s4 w8 subtiled for both persistent kernels, 4 warps for _ws; kernelc: s3 w8 not subtiled) and
# the other corners of the same square.
CONFIGS = [(k, 256, s, 8, st) for k in ("matmul_kernel_tma_persistent", "matmul_kernel_descriptor_persistent")
           for s, st in ((3, False), (3, True), (4, True))] + \
          [("matmul_kernel_descriptor_persistent_ws", 256, 3, w, False) for w in (4, 8)]

# kernelc variants: environment for the compile
VARIANTS = {
    "main": {"KERNELC_FLATTEN_LOOPS": "0", "KERNELC_TMA_STORE_WAIT": "eager"},      # main at 3dc9633's schedule
    "flatten": {"KERNELC_FLATTEN_LOOPS": "tma", "KERNELC_TMA_STORE_WAIT": "eager"},
    "branch": {"KERNELC_FLATTEN_LOOPS": "tma", "KERNELC_TMA_STORE_WAIT": "deferred"},  # this branch's defaults
    "flatten_all": {"KERNELC_FLATTEN_LOOPS": "1", "KERNELC_TMA_STORE_WAIT": "deferred"},
    "defaults": {},   # the tree's defaults
}

_EVENTS = [
    ("mbar_wait", re.compile(r"mbarrier\.try_wait")),
    ("tma_load", re.compile(r"cp\.async\.bulk\.tensor\.\dd\.shared::cluster\.global")),
    ("tma_store", re.compile(r"cp\.async\.bulk\.tensor\.\dd\.global\.shared")),
    ("commit", re.compile(r"cp\.async\.bulk\.commit_group")),
    ("wait_read", re.compile(r"cp\.async\.bulk\.wait_group\.read\s+(\d+)")),
    ("wait", re.compile(r"cp\.async\.bulk\.wait_group\s+(\d+)")),
    ("wgmma_wait", re.compile(r"wgmma\.wait_group\.sync\.aligned\s+(\d+)")),
    ("bar", re.compile(r"\bbar\.sync\b|\bbarrier\.sync\b")),
    ("fence_async", re.compile(r"fence\.proxy\.async")),
    ("stmatrix", re.compile(r"\bstmatrix\.")),
    ("st_shared", re.compile(r"\bst\.shared\.")),
    ("branch", re.compile(r"\bbra(\.uni)?\b")),
]


def ptx_epilogue(ptx: str) -> dict:
    """What the PTX does around its TMA stores (see the module docstring)."""
    lines = [ln.strip() for ln in ptx.splitlines()]
    # kernelc's mbarrier waits are one inline-asm line in braces (`{ .reg .pred p; kc_wait: mbarrier.try_wait...}`)
    instrs = [ln for ln in lines if ln and not ln.startswith(("//", ".", "$L")) and ln not in ("{", "}")
              and ln.endswith((";", "}"))]
    counts = {name: 0 for name, _ in _EVENTS}
    trace, distances, last_commit = [], [], None
    for i, ln in enumerate(instrs):
        for name, rx in _EVENTS:
            m = rx.search(ln)
            if not m:
                continue
            if name == "wait" and "wait_group.read" in ln:
                continue
            counts[name] += 1
            tok = name + (f"({m.group(1)})" if name in ("wait_read", "wait", "wgmma_wait") else "")
            if trace and trace[-1][0] == tok:
                trace[-1][1] += 1
            else:
                trace.append([tok, 1])
            if name == "commit":
                last_commit = i
            if name == "wait_read" and last_commit is not None:
                distances.append(i - last_commit)
            break
    return {"counts": counts, "store_wait_after_commit": distances,
            "trace": " ".join(t if n == 1 else f"{t}x{n}" for t, n in trace if not t.startswith("branch"))}


def compile_row(mod, kernel, bn, s, w, st, impl, env, triton_site):
    fn = "matmul_kernel_descriptor_persistent" if kernel.endswith("_ws") else kernel
    job = next(j for j in ts.jobs_for([kernel], 0)
               if j["constexprs"]["BLOCK_SIZE_N"] == bn and j["constexprs"]["BLOCK_SIZE_K"] == 64
               and j["num_stages"] == s and j["num_warps"] == w and j["constexprs"].get("EPILOGUE_SUBTILE") == st)
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)   # compile_one passes os.environ to its child
    try:
        res = ts.compile_one(impl, mod, fn, job["sig"], job["cx"], job["eq1"], w, s, triton_site, 600)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    if "error" in res:
        return {"error": res["error"][-600:]}
    ptx = res["ptx"]
    out = ts.summarise(res)
    out["epilogue"] = ptx_epilogue(ptx)
    out.pop("timings", None)
    out.pop("notes", None)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tutorials", default=os.path.join(ROOT, ".ext", "tutorials"))
    ap.add_argument("--triton-site", default="/work/ext/triton_site")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--no-triton", action="store_true")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "t09_persistent_cpu.json"))
    a = ap.parse_args(argv)
    mod = os.path.join(tempfile.mkdtemp(prefix="t09p_"), "k09.py")
    with open(mod, "w") as f:
        f.write(ts.kernel_module(os.path.join(a.tutorials, "09-persistent-matmul.py")))
    impls = [(v, "kernelc", VARIANTS[v]) for v in a.variants.split(",") if v]
    if not a.no_triton:
        impls.append(("triton", "triton", {}))
    jobs = [(c, i) for c in CONFIGS for i in impls]
    rows = {}
    t0 = time.time()
    # the env is process-global: kernelc variants one after the other, overlapped only with Triton compiles
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        futs = {ex.submit(compile_row, mod, *c, impl, env, a.triton_site): (c, tag) for c, (tag, impl, env) in jobs}
        for fut in concurrent.futures.as_completed(futs):
            c, tag = futs[fut]
            r = fut.result()
            rows.setdefault(c, {})[tag] = r
            desc = "error" if "error" in r else (f"smem {r['shared']} regs {r['n_regs']} spill {r['local_bytes']} "
                                                 f"loop {r['main_loop'] and r['main_loop']['instructions']} "
                                                 f"store-wait-after-commit {r['epilogue']['store_wait_after_commit']}")
            print(f"[{time.time() - t0:5.0f}s] {c} {tag}: {desc}", flush=True)
    out = []
    for c in CONFIGS:
        k, bn, s, w, st = c
        out.append({"kernel": k, "config": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": 64,
                                            "num_stages": s, "num_warps": w, "EPILOGUE_SUBTILE": st},
                    **rows.get(c, {})})
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump({"benchmark": "t09_persistent_cpu", "target": "sm_90a", "shape": "M=N=8192 K=512 fp16",
                   "variants": {t: e for t, _, e in impls}, "rows": out}, f, indent=1)
    md = ["| kernel, config | " + " | ".join(t for t, _, _ in impls) + " |", "|---|" + "---|" * len(impls)]
    for row in out:
        c = row["config"]
        cells = []
        for t, _, _ in impls:
            x = row.get(t, {})
            if "error" in x or not x:
                cells.append("error")
                continue
            ep = x["epilogue"]["counts"]
            cells.append(f"{x['shared']} B, {x['n_regs']} r, {x['local_bytes']} B spill, loop {(x['main_loop'] or {}).get('instructions')}, "
                         f"stmatrix {ep['stmatrix']} / st.shared {ep['st_shared']}")
        md.append(f"| {row['kernel'].replace('matmul_kernel_', '')} {c['BLOCK_SIZE_N']}x{c['BLOCK_SIZE_K']} s{c['num_stages']} "
                  f"w{c['num_warps']}{' subtiled' if c['EPILOGUE_SUBTILE'] else ''} | " + " | ".join(cells) + " |")
    with open(os.path.splitext(a.out)[0] + ".md", "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))
    print("wrote", a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
