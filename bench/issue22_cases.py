"""Issue #22's three cases on the GPU: profiled with PC samples, analysed, and the configs timed by --tune.

    bash scripts/gpu_check.sh issue22_cases        # on the GPU machine (sets up the environment)
    python bench/issue22_cases.py                   # the same, in a prepared environment
    python bench/issue22_cases.py --workload        # only the kernels (what kprof profiles)
    python bench/issue22_cases.py --dry-run         # the pipeline on the CPU interpreter (128^2 sizes;
                                                    # --tune then says it needs a GPU)

The workload runs (a few launches each):

1. an fp32 4096x4096 transpose whose store is strided by the row length (64x64 tiles);
2. a 4096^3 fp16 matmul autotuned over 64x64x32 and 128x64x32;
3. a 4096^3 fp16 matmul with a single 32x32x32 config.

The driver profiles the workload with ``python -m kprof -m pcsampling``. It then runs
``python -m analyzer.cli PROFILE --top 0 --tune --json`` and checks the expected diagnoses:

- on the transpose's store line ``uncoalesced-access``, or, since the compiler converts the store's layout
  itself (``passes/coalesce.py``), the ``layout-conversion`` report with its cost in numbers;
- ``small-tiles`` on both matmuls;
- a ``--tune`` speedup of at least 1.3x on the 32x32x32 matmul, parsed from the printed text (``best
  speedup: N.NNx``) with the winning ``@kernelc.autotune`` block, and the same from the JSON.

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

DRY = "--dry-run" in sys.argv
N = 128 if DRY else 4096
DEVICE = "cpu" if DRY else "cuda"


def workload():
    import torch
    import kernelc
    from tests.analyzer.corpus import cases, mm, mm_autotuned
    t = {c.name: c for c in cases()}["transpose_store"]
    x = torch.randn(N, N, device=DEVICE)
    y = torch.empty(N, N, device=DEVICE)
    a = torch.randn(N, N, device=DEVICE, dtype=torch.float16)
    b = torch.randn(N, N, device=DEVICE, dtype=torch.float16)
    c = torch.empty(N, N, device=DEVICE, dtype=torch.float16)
    grid = lambda META: (kernelc.cdiv(N, META["BLOCK_M"]) * kernelc.cdiv(N, META["BLOCK_N"]),)  # noqa: E731
    for _ in range(2 if DRY else 5):
        t.kernel[(N // 64, N // 64)](x, y, N, N, N, N, BM=64, BN=64)
        mm_autotuned[grid](a, b, c, N, N, N, N, N, N)
        mm[((N // 32) * (N // 32),)](a, b, c, N, N, N, N, N, N, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, num_warps=4,
                                      num_stages=3)
    if not DRY:
        torch.cuda.synchronize()
    assert torch.equal(y, x.t()), "transpose is wrong"


def drive():
    from bench.common import write_results
    from tests.analyzer.corpus import cases
    out = tempfile.mkdtemp(prefix="issue22-")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    prof = subprocess.run([sys.executable, "-m", "kprof", "-m", "pcsampling", "-n", "issue22", "-o", out,
                           os.path.abspath(__file__), "--workload"] + (["--dry-run"] if DRY else []), cwd=ROOT,
                          env=env, capture_output=True, text=True)
    print(prof.stdout[-3000:], prof.stderr[-3000:], flush=True)
    path = os.path.join(out, "issue22.hatchet")
    if not os.path.isfile(path):
        print(f"no profile at {path}", file=sys.stderr)
        return 1
    jpath = os.path.join(out, "issue22.json")
    # one --tune run: the text report (with the tune tables) on stdout, the same report as JSON in a file
    # the dry run's kernels ran in the interpreter: no artifacts, recompiled for sm_90a from the repo's source
    extra = ["--arch", "sm_90a", "--recompile-from-source"] if DRY else []
    tuned = subprocess.run([sys.executable, "-m", "analyzer.cli", path, "--top", "0", "--tune", "--no-color"] + extra,
                           cwd=ROOT, env=env, capture_output=True, text=True)
    text = tuned.stdout
    print(text, tuned.stderr[-2000:], flush=True)
    # the diagnoses as JSON (suggestions not compile-checked again: the --tune run above did)
    ana = subprocess.run([sys.executable, "-m", "analyzer.cli", path, "--top", "0", "--json", "--no-check", "-o", jpath]
                         + extra,
                         cwd=ROOT, env=env, capture_output=True, text=True)
    if ana.returncode != 0 or tuned.returncode != 0 or not os.path.isfile(jpath):
        print(ana.stderr, tuned.stderr, file=sys.stderr)
        return 1
    rep = json.load(open(jpath))
    printed = parse_tune_text(text)
    store_line = {c.name: c for c in cases()}["transpose_store"].expected_line
    rows = []
    for k in rep["kernels"]:
        finds = [(d["id"], d["line"], d["severity"]) for d in k["diagnostics"] if d["severity"] != "info"]
        infos = [(d["id"], d["line"], {n: v for n, v in d["evidence"].items() if isinstance(v, (int, float))})
                 for d in k["diagnostics"] if d["severity"] == "info"]
        tune = printed.get(k["rank"]) or {}
        rl = k.get("roofline") or {}
        rows.append({"kernel": k["name"], "rank": k["rank"], "config": k["constexprs"], "num_warps": k["num_warps"],
                     "time_ns": k["time_ns"], "samples": k["samples"]["total"], "roofline": rl.get("bound"),
                     "bytes_pct_of_peak": rl.get("bytes_pct_of_peak"), "flops_pct_of_peak": rl.get("flops_pct_of_peak"),
                     "first_diagnosis": finds[0] if finds else None, "findings": finds, "infos": infos,
                     "tune_best_speedup": tune.get("best_speedup"), "tune_winner": tune.get("winner"),
                     "tune_autotune_block": tune.get("autotune"), "tune_rows": tune.get("rows"),
                     "tune_skipped": tune.get("skipped")})
    checks = {
        "transpose_store_flagged": any(r["kernel"] == "transpose" and ("uncoalesced-access", store_line) in
                                       [(i, ln) for i, ln, _ in r["findings"]] for r in rows),
        "transpose_store_conversion_reported": any(
            r["kernel"] == "transpose" and any(i == "layout-conversion" and ln == store_line and
                                               ev.get("conversion_shared_bytes") for i, ln, ev in r["infos"])
            for r in rows),
        "matmuls_small_tiles": sum(1 for r in rows if r["kernel"] == "mm" and
                                   any(i == "small-tiles" for i, _, _ in r["findings"])),
        "tune_32x32x32_speedup": max([r["tune_best_speedup"] or 0 for r in rows
                                      if r["kernel"] == "mm" and r["config"].get("BLOCK_N") == 32] or [0]),
        "tune_32x32x32_autotune_printed": any("@kernelc.autotune(" in (r["tune_autotune_block"] or "")
                                              for r in rows if r["kernel"] == "mm" and r["config"].get("BLOCK_N") == 32),
    }
    checks["pass"] = bool((checks["transpose_store_flagged"] or checks["transpose_store_conversion_reported"])
                          and checks["matmuls_small_tiles"] >= 2 and checks["tune_32x32x32_speedup"] >= 1.3
                          and checks["tune_32x32x32_autotune_printed"])
    print(json.dumps(checks, indent=2))
    write_results("issue22_gpu_dryrun" if DRY else "issue22_gpu", rows, {"checks": checks, "n": N})
    return 0


def parse_tune_text(text):
    """{rank: {"best_speedup", "winner", "autotune", "rows", "skipped"}} from kprof-analyze --tune's text
    (``--tune NAME (rank R, CONFIG):`` blocks)."""
    import re
    out, cur = {}, None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        ln = lines[i]
        m = re.match(r"--tune .* \(rank (\d+), .*\):$", ln)
        if m:
            cur = out.setdefault(int(m.group(1)), {"rows": [], "best_speedup": None, "winner": None, "autotune": None,
                                                   "skipped": None})
        elif cur is not None and ln.startswith("  skipped: "):
            cur["skipped"] = ln[len("  skipped: "):]
        elif cur is not None and ln.startswith("  winner: "):
            cur["winner"] = ln[len("  winner: "):]
        elif cur is not None and ln.startswith("  best speedup: "):
            cur["best_speedup"] = float(re.match(r"  best speedup: ([0-9.]+)x", ln).group(1))
        elif cur is not None and ln.startswith("  @kernelc.autotune("):
            block = []
            while i < len(lines) and lines[i].startswith("  "):
                block.append(lines[i][2:])
                if lines[i] == "  )":
                    break
                i += 1
            cur["autotune"] = "\n".join(block)
        elif cur is not None and re.match(r"\s+[0-9.]+ us\s+[0-9.]+x", ln):
            cur["rows"].append(ln.strip())
        i += 1
    return out


if __name__ == "__main__":
    if "--workload" in sys.argv:
        workload()
        sys.exit(0)
    sys.exit(drive())
