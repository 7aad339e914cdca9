"""Triton's tutorials, unmodified, under real Triton and under kernelc, side by side on one GPU.

    python3 bench/triton_tutorials.py --tutorials DIR [--only 01,03] [--bench-points N] [--timeout S]

``DIR`` holds Triton 3.6's ``python/tutorials/0?-*.py`` (not part of this repository). Each tutorial runs
twice, each time in a fresh process with an empty compile cache: once with the real Triton
(``--triton-site`` prepends a directory to PYTHONPATH, else the installed one) and once under kernelc's
alias (``python -m kernelc.run``'s mechanism, ``bench/tutorial_runner.py``). Writes
``bench/results/triton_tutorials.json``: per tutorial, both runs' exit status, every benchmark table,
per table and column the ratio kernelc/Triton (higher is better: for time columns Triton/kernelc), and
the first call of each kernel (compile + autotune) under both.
"""
from __future__ import annotations

import argparse
import glob
import json
import math
import os
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from bench.common import environment  # noqa: E402

TUTORIALS = ["01-vector-add", "02-fused-softmax", "03-matrix-multiplication", "04-low-memory-dropout",
             "05-layer-norm", "06-fused-attention", "07-extern-functions", "08-grouped-gemm",
             "09-persistent-matmul"]


def run_one(path: str, impl: str, bench_points: Optional[int], timeout: int, triton_site: Optional[str]) -> dict:
    work = tempfile.mkdtemp(prefix=f"tut_{impl}_")  # tutorials save plots/CSVs to '.'
    js = os.path.join(work, "result.json")
    env = dict(os.environ)
    env.pop("KERNELC_INTERPRET", None)
    env["MPLBACKEND"] = "Agg"
    env["TRITON_CACHE_DIR"] = os.path.join(work, "triton_cache")
    env["KERNELC_CACHE_DIR"] = os.path.join(work, "kernelc_cache")
    if impl == "triton" and triton_site:
        env["PYTHONPATH"] = triton_site + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, os.path.join(ROOT, "bench", "tutorial_runner.py"), "--impl", impl, "--json", js]
    if bench_points:
        cmd += ["--bench-points", str(bench_points)]
    cmd.append(path)
    try:
        p = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
        rc, tail = p.returncode, (p.stdout[-1500:], p.stderr[-3000:])
    except subprocess.TimeoutExpired:
        rc, tail = "timeout", ("", f"killed after {timeout} s")
    try:
        with open(js) as f:
            res = json.load(f)
    except (OSError, ValueError):
        res = {"impl": impl, "benchmarks": [], "first_calls": [], "stdout_tail": tail[0], "stderr_tail": tail[1]}
    res["rc"] = rc if rc == "timeout" else res.get("rc", rc)
    print(f"  {impl:8s} rc={res['rc']} {res.get('seconds', 0):7.1f} s  tables={len(res['benchmarks'])}", flush=True)
    return res


def _lower_is_better(ylabel: str) -> bool:
    y = (ylabel or "").lower()
    return "ms" in y or "time" in y or y.endswith("(s)") or y.endswith("us")


def compare(tri: dict, kc: dict) -> List[dict]:
    """Per benchmark table and value column: kernelc/Triton ratios per x (>1: kernelc better)."""
    out = []
    kc_tables = {b["plot_name"]: b for b in kc["benchmarks"]}
    for tb in tri["benchmarks"]:
        kb = kc_tables.get(tb["plot_name"])
        entry = {"plot_name": tb["plot_name"], "ylabel": tb["ylabel"], "columns": {}}
        if kb is None or kb["columns"] != tb["columns"]:
            entry["error"] = "kernelc produced no table of this name" if kb is None else "columns differ"
            out.append(entry)
            continue
        nx = len(tb["x_names"])
        lower = _lower_is_better(tb["ylabel"])
        for j, col in enumerate(tb["columns"][nx:], start=nx):
            ratios = []
            for rt, rk in zip(tb["rows"], kb["rows"]):
                t, k = rt[j], rk[j]
                if not t or not k or (isinstance(t, float) and math.isnan(t)):
                    ratios.append(None)
                    continue
                ratios.append((t / k) if lower else (k / t))
            ok = [r for r in ratios if r]
            entry["columns"][col] = {
                "x": [r[:nx] for r in tb["rows"]], "triton": [r[j] for r in tb["rows"]],
                "kernelc": [r[j] for r in kb["rows"]], "ratio": ratios,
                "geomean_ratio": math.exp(sum(math.log(r) for r in ok) / len(ok)) if ok else None,
                "min_ratio": min(ok) if ok else None}
        out.append(entry)
    return out


def first_calls(tri: dict, kc: dict) -> List[dict]:
    """Outermost first call per kernel name (compile + autotune), Triton vs kernelc seconds."""
    def outer(res):
        d: Dict[str, float] = {}
        for r in res["first_calls"]:
            if r["depth"] == 0:
                d[r["kernel"]] = d.get(r["kernel"], 0.0) + r["first_call_s"]
        return d
    t, k = outer(tri), outer(kc)
    return [{"kernel": n, "triton_s": t.get(n), "kernelc_s": k.get(n),
             "kernelc_over_triton": (k[n] / t[n]) if n in t and n in k and t[n] else None}
            for n in sorted(set(t) | set(k))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tutorials", required=True, help="directory with Triton 3.6's tutorial files")
    ap.add_argument("--only", help="comma-separated prefixes, e.g. 01,03")
    ap.add_argument("--bench-points", type=int, help="first N x values of each benchmark table (default: all)")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per tutorial run")
    ap.add_argument("--triton-site", help="directory to prepend to PYTHONPATH for the real-Triton runs")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "triton_tutorials.json"))
    ap.add_argument("--fresh", action="store_true", help="start a new results file instead of adding to it")
    a = ap.parse_args(argv)
    names = TUTORIALS
    if a.only:
        pre = [p.strip() for p in a.only.split(",")]
        names = [n for n in names if any(n.startswith(p) for p in pre)]
    report = {"benchmark": "triton_tutorials", "environment": environment(), "bench_points": a.bench_points,
              "tutorials": {}}
    if os.path.exists(a.out) and not a.fresh:  # runs split over several calls (--only) add up in one file
        try:
            with open(a.out) as f:
                old = json.load(f)
            if old.get("bench_points") == a.bench_points:
                report["tutorials"] = old.get("tutorials", {})
        except (OSError, ValueError):
            pass
    for name in names:
        hits = glob.glob(os.path.join(os.path.abspath(a.tutorials), name + ".py"))
        if not hits:
            report["tutorials"][name] = {"error": f"{name}.py not found in {a.tutorials}"}
            print(f"{name}: not found")
            continue
        print(name, flush=True)
        tri = run_one(hits[0], "triton", a.bench_points, a.timeout, a.triton_site)
        kc = run_one(hits[0], "kernelc", a.bench_points, a.timeout, None)
        report["tutorials"][name] = {
            "triton": {k: tri.get(k) for k in ("rc", "seconds", "mismatch", "stderr_tail", "triton_version")},
            "kernelc": {k: kc.get(k) for k in ("rc", "seconds", "mismatch", "stderr_tail", "triton_version")},
            "passed": {"triton": tri.get("rc") == 0 and not tri.get("mismatch"),
                       "kernelc": kc.get("rc") == 0 and not kc.get("mismatch")},
            "tables": compare(tri, kc), "first_calls": first_calls(tri, kc)}
        for t in report["tutorials"][name]["tables"]:
            for col, c in t.get("columns", {}).items():
                if c["geomean_ratio"]:
                    print(f"    {t['plot_name']:40s} {col:28s} kernelc/Triton geomean {c['geomean_ratio']:.3f} "
                          f"(min {c['min_ratio']:.3f})")
            if "error" in t:
                print(f"    {t['plot_name']}: {t['error']}")
        for fc in report["tutorials"][name]["first_calls"]:
            print(f"    first call {fc['kernel']:32s} triton {fc['triton_s'] or float('nan'):7.2f} s  "
                  f"kernelc {fc['kernelc_s'] or float('nan'):7.2f} s")
        os.makedirs(os.path.dirname(a.out), exist_ok=True)
        tmp = a.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(report, f, indent=1)
        os.replace(tmp, a.out)  # written after each tutorial: a later timeout loses nothing
    out_dir = os.environ.get("OUT")
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, os.path.basename(a.out)), "w") as f:
            json.dump(report, f, indent=1)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
