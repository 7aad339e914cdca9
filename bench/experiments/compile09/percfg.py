"""Tutorial 09's autotune configs compiled one per process, with kernelc (under assembler variants) and Triton
3.6, on the machine it runs on: seconds, registers, spills and errors per config (issue #20, "first call no
longer than Triton's"). Each compile runs in its own fresh process and empty cache; ``--jobs`` of them at once.

    python3 bench/experiments/compile09/percfg.py --tutorial DIR/09-persistent-matmul.py \\
        --kernels matmul_kernel --variant nvjitlink:KERNELC_ASSEMBLER=nvjitlink --variant auto:KERNELC_ASSEMBLER=auto \\
        --jobs 14 --timeout 150 --out results.json

Nothing here is a test; results and conclusions: docs/triton-tutorials.md.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import bench_compile as BC  # noqa: E402

_KC_EXTRA = r"""
from kernelc.compiler.backend.ptxas import ptxas_binary, ptxas_max_ptx
exe = ptxas_binary()
print(json.dumps({"ptxas": exe, "ptxas_max_ptx": ptxas_max_ptx(exe) if exe else None}))
"""


def _one(impl, env_extra, mod_path, fn, sig, cfg, div, timeout, eq1=()):
    work = tempfile.mkdtemp(prefix=f"pc_{impl}_")
    env = dict(os.environ, KERNELC_CACHE_DIR=os.path.join(work, "kc"), TRITON_CACHE_DIR=os.path.join(work, "tc"),
               TRITON_HOME=work, **env_extra)
    env.pop("KERNELC_INTERPRET", None)
    payload = json.dumps(dict(root=ROOT, mod=mod_path, fn=fn, sig=sig, configs=[cfg], div=div, threads=False,
                              timeline=False, eq1=list(eq1)))
    child = BC._CPU_CHILD_TRITON if impl == "triton" else BC._CPU_CHILD_KERNELC + _KC_EXTRA
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-c", child, payload], env=env, capture_output=True, text=True,
                           timeout=timeout, cwd=work)
        wall = time.perf_counter() - t0
        if p.returncode:
            return {"error": p.stderr.strip()[-600:], "process_s": wall}
        lines = [json.loads(ln) for ln in p.stdout.strip().splitlines() if ln.startswith("{")]
        out = dict(lines[0]["configs"][0], process_s=wall)
        for extra in lines[1:]:
            out.update(extra)
        return out
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout} s", "process_s": time.perf_counter() - t0, "timeout": True}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tutorial", required=True)
    p.add_argument("--kernels", default="matmul_kernel")
    p.add_argument("--variant", action="append", default=[],
                   help="NAME:K=V[;K=V...] a kernelc variant (default: one, 'kernelc', the environment as is)")
    p.add_argument("--no-triton", action="store_true")
    p.add_argument("--eq1", default="stride_ak,stride_bn,stride_cn",
                   help="integer arguments equal to 1, as both runtimes specialise them for contiguous tensors "
                        "(the tutorial's A, B, C); '' for none")
    p.add_argument("--only", default="", help="configs as BN/BK/stages/warps[,...] (default: all 24)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--timeout", type=float, default=150.0)
    p.add_argument("--out", default=None)
    p.add_argument("--triton-site", default=None, help="a directory with Triton on it (a machine without Triton)")
    a = p.parse_args(argv)
    cases = BC.tutorial_cases()
    mod_dir = tempfile.mkdtemp(prefix="pc_mods_")
    mod_path = os.path.join(mod_dir, "k09.py")
    with open(mod_path, "w") as f:
        f.write(BC._kernel_module(a.tutorial))
    variants = []
    for v in a.variant or ["kernelc:"]:
        name, _, kv = v.partition(":")
        variants.append((name, dict(x.split("=", 1) for x in kv.split(";") if x)))
    if not a.no_triton:
        variants.append(("triton", {"PYTHONPATH": a.triton_site} if a.triton_site else {}))
    only = {tuple(int(x) for x in s.split("/")) for s in a.only.split(",") if s}
    jobs = []
    for kname in a.kernels.split(","):
        _, fn, sig, configs, div = cases[f"09 {kname}"]
        for cx, w, s in configs:
            key = (cx["BLOCK_SIZE_N"], cx["BLOCK_SIZE_K"], s, w)
            if only and key not in only:
                continue
            for vname, env in variants:
                jobs.append((kname, key, vname, env, fn, sig, (cx, w, s), div))
    # the slowest first (BN 256 at 4 warps), so that the pool's tail is short
    jobs.sort(key=lambda j: -(j[1][0] * j[1][1] // j[1][3]))
    t0 = time.perf_counter()

    def run(j):
        kname, key, vname, env, fn, sig, cfg, div = j
        r = _one("triton" if vname == "triton" else "kernelc", env, mod_path, fn, sig, cfg, div, a.timeout,
                 [n for n in a.eq1.split(",") if n])
        row = dict(kernel=kname, config=dict(zip(("BN", "BK", "stages", "warps"), key)), variant=vname, **r)
        print(json.dumps({k: row.get(k) for k in ("kernel", "config", "variant", "s", "process_s", "regs", "error",
                                                   "ptxas")})[:400], flush=True)
        return row

    with ThreadPoolExecutor(max_workers=a.jobs) as ex:
        rows = list(ex.map(run, jobs))
    wall = time.perf_counter() - t0
    summary = {}
    for r in rows:
        d = summary.setdefault(f"{r['kernel']} {r['variant']}", {"n": 0, "sum_s": 0.0, "max_s": 0.0, "errors": 0,
                                                                  "timeouts": 0})
        d["n"] += 1
        d["sum_s"] += r.get("process_s", 0.0)
        d["max_s"] = max(d["max_s"], r.get("process_s", 0.0))
        d["errors"] += "error" in r
        d["timeouts"] += bool(r.get("timeout"))
    for k, d in summary.items():
        print(f"{k:40s} n {d['n']:3d} sum {d['sum_s']:8.1f} s max {d['max_s']:7.1f} s errors {d['errors']} "
              f"timeouts {d['timeouts']}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"wall_s": wall, "jobs": a.jobs, "timeout_s": a.timeout, "machine": BC._machine(),
                       "summary": summary, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
