"""Issue #22's three cases on the GPU: profiled with PC samples, analysed, and the configs timed by --tune.

    bash scripts/gpu_check.sh issue22_cases        # on the GPU machine (sets up the environment)
    python bench/issue22_cases.py                   # the same, in a prepared environment
    python bench/issue22_cases.py --workload        # only the kernels (what kprof profiles)

The workload runs (a few launches each):

1. an fp32 4096x4096 transpose whose store is strided by the row length (64x64 tiles);
2. a 4096^3 fp16 matmul autotuned over 64x64x32 and 128x64x32;
3. a 4096^3 fp16 matmul with a single 32x32x32 config.

The driver profiles the workload with ``python -m kprof -m pcsampling``. It then runs
``python -m analyzer.cli PROFILE --top 0 --tune --json`` and checks the expected diagnoses:

- ``uncoalesced-access`` on the transpose's store line;
- ``small-tiles`` on both matmuls;
- a ``--tune`` speedup of at least 1.3x on the 32x32x32 matmul.

Results go to bench/results/issue22_gpu.json (and $OUT/results/).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

N = 4096


def workload():
    import torch
    import kernelc
    from tests.analyzer.corpus import cases, mm, mm_autotuned
    t = {c.name: c for c in cases()}["transpose_store"]
    x = torch.randn(N, N, device="cuda")
    y = torch.empty(N, N, device="cuda")
    a = torch.randn(N, N, device="cuda", dtype=torch.float16)
    b = torch.randn(N, N, device="cuda", dtype=torch.float16)
    c = torch.empty(N, N, device="cuda", dtype=torch.float16)
    grid = lambda META: (kernelc.cdiv(N, META["BLOCK_M"]) * kernelc.cdiv(N, META["BLOCK_N"]),)  # noqa: E731
    for _ in range(5):
        t.kernel[(N // 64, N // 64)](x, y, N, N, N, N, BM=64, BN=64)
        mm_autotuned[grid](a, b, c, N, N, N, N, N, N)
        mm[((N // 32) * (N // 32),)](a, b, c, N, N, N, N, N, N, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, num_warps=4,
                                      num_stages=3)
    torch.cuda.synchronize()
    assert torch.equal(y, x.t()), "transpose is wrong"


def drive():
    from bench.common import write_results
    from tests.analyzer.corpus import cases
    out = tempfile.mkdtemp(prefix="issue22-")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    prof = subprocess.run([sys.executable, "-m", "kprof", "-m", "pcsampling", "-n", "issue22", "-o", out,
                           os.path.abspath(__file__), "--workload"], cwd=ROOT, env=env, capture_output=True, text=True)
    print(prof.stdout[-3000:], prof.stderr[-3000:], flush=True)
    path = os.path.join(out, "issue22.hatchet")
    if not os.path.isfile(path):
        print(f"no profile at {path}", file=sys.stderr)
        return 1
    ana = subprocess.run([sys.executable, "-m", "analyzer.cli", path, "--top", "0", "--tune", "--json"], cwd=ROOT,
                         env=env, capture_output=True, text=True)
    text = subprocess.run([sys.executable, "-m", "analyzer.cli", path, "--top", "0", "--no-color"], cwd=ROOT,
                          env=env, capture_output=True, text=True).stdout
    print(text, flush=True)
    if ana.returncode != 0:
        print(ana.stderr, file=sys.stderr)
        return 1
    rep = json.loads(ana.stdout)
    store_line = {c.name: c for c in cases()}["transpose_store"].expected_line
    rows = []
    for k in rep["kernels"]:
        finds = [(d["id"], d["line"], d["severity"]) for d in k["diagnostics"] if d["severity"] != "info"]
        tune = (rep.get("tuning") or {}).get(k["name"]) or {}
        best = max([r.get("speedup") or 0 for r in tune.get("rows", [])] or [0])
        rows.append({"kernel": k["name"], "config": k["constexprs"], "num_warps": k["num_warps"],
                     "time_ns": k["time_ns"], "samples": k["samples"]["total"],
                     "roofline": (k.get("roofline") or {}).get("bound"),
                     "first_diagnosis": finds[0] if finds else None, "findings": finds,
                     "tune_best_speedup": best, "tune_skipped": tune.get("skipped")})
    checks = {
        "transpose_store_flagged": any(r["kernel"] == "transpose" and ("uncoalesced-access", store_line) in
                                       [(i, ln) for i, ln, _ in r["findings"]] for r in rows),
        "matmuls_small_tiles": sum(1 for r in rows if r["kernel"] == "mm" and
                                   any(i == "small-tiles" for i, _, _ in r["findings"])),
        "tune_32x32x32_speedup": max([r["tune_best_speedup"] for r in rows
                                      if r["kernel"] == "mm" and r["config"].get("BLOCK_N") == 32] or [0]),
    }
    print(json.dumps(checks, indent=2))
    write_results("issue22_gpu", rows, {"checks": checks})
    return 0


if __name__ == "__main__":
    if "--workload" in sys.argv:
        workload()
        sys.exit(0)
    sys.exit(drive())
