"""Triton's tutorials, unmodified, under real Triton and under kernelc, side by side on one GPU.

    python3 bench/triton_tutorials.py --tutorials DIR [--only 01,03] [--repeats N] [--bench-points N]
                                      [--first-points] [--libdevice PATH] [--max-seconds S] [--timeout S]

``DIR`` holds Triton 3.6's ``python/tutorials/0?-*.py`` (not part of this repository). They are copied
to ``<tmp>/python/tutorials/`` with ``libdevice.10.bc`` at ``<tmp>/third_party/nvidia/backend/lib/``,
Triton's source-tree layout, which tutorial 07 reads its libdevice path from. Each tutorial runs
``--repeats`` times per implementation, in fresh processes with empty compile caches, alternating
which implementation goes first: real Triton (``--triton-site`` prepends a directory to PYTHONPATH,
else the installed one) and kernelc's alias (``python -m kernelc.run``'s mechanism,
``bench/tutorial_runner.py``). Per table, point and column the best of the repeats is kept.

Writes ``bench/results/triton_tutorials.json``: per tutorial, the runs' exit status, every benchmark
table, per table and column the ratio kernelc/Triton (higher is better: for time columns
Triton/kernelc), and the noise floor: the same ratio for the control columns (the ones not named
``Triton...``: Torch, cuBLAS, ..., identical code in both processes). A kernel column's gap is called
real only where it is outside that floor. Also the first call of each kernel (compile + autotune).

``--warm`` (tutorials 06 and 09: Triton's own autotuning compiles a few hundred kernels, more than one
10-minute device call holds) first compiles every kernel each tutorial will compile, for each
implementation, in a dry run (``bench/tutorial_dryrun.py``: the unmodified tutorial with kernels compiled
and not launched, ``--warm-jobs`` processes in parallel, each compiling its share of the kernels) into one
cache directory per implementation. Every measured run then starts from a fresh copy of its
implementation's warm cache instead of an empty one. Both implementations are treated alike; what the
compiles cost is reported from the dry run (``warm``: wall time, kernels, compile seconds), and each run
reports how many of its compiles hit the warm cache (``compile`` per implementation).
"""
from __future__ import annotations

import argparse
import glob
import json
import math
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from bench.common import environment  # noqa: E402

TUTORIALS = ["01-vector-add", "02-fused-softmax", "03-matrix-multiplication", "04-low-memory-dropout",
             "05-layer-norm", "06-fused-attention", "07-extern-functions", "08-grouped-gemm",
             "09-persistent-matmul"]


LIBDEVICE_IN_TREE = os.path.join("third_party", "nvidia", "backend", "lib", "libdevice.10.bc")


def find_libdevice(triton_site: Optional[str] = None) -> Optional[str]:
    """A ``libdevice.10.bc``: the one in the Triton package (``triton_site`` or installed), else kernelc's."""
    import importlib.util
    cands = []
    if triton_site:
        cands.append(os.path.join(triton_site, "triton", "backends", "nvidia", "lib", "libdevice.10.bc"))
    try:
        spec = importlib.util.find_spec("triton")  # locates the package without importing it
        if spec is not None and spec.submodule_search_locations:
            for d in spec.submodule_search_locations:
                cands.append(os.path.join(d, "backends", "nvidia", "lib", "libdevice.10.bc"))
    except (ImportError, ValueError):
        pass
    cands += sorted(glob.glob(os.path.join(ROOT, ".wheels", "*", "libdevice.10.bc")))
    for c in cands:
        if os.path.isfile(c):
            return c
    try:
        from kernelc.compiler.backend.llvm import libdevice_path
        return libdevice_path()
    except Exception:
        return None


def stage_tutorials(src_dir: str, libdevice: Optional[str]) -> str:
    """Copy the tutorials to ``<tmp>/python/tutorials/`` and put ``libdevice`` where tutorial 07 looks for it
    (``<tutorials>/../../third_party/nvidia/backend/lib/``); returns the tutorials directory."""
    root = tempfile.mkdtemp(prefix="triton_tree_")
    dst = os.path.join(root, "python", "tutorials")
    os.makedirs(dst)
    for f in glob.glob(os.path.join(os.path.abspath(src_dir), "*.py")):
        shutil.copy(f, dst)
    if libdevice:
        lib = os.path.join(root, LIBDEVICE_IN_TREE)
        os.makedirs(os.path.dirname(lib))
        shutil.copy(libdevice, lib)
    return dst


CACHE_ENV = {"triton": "TRITON_CACHE_DIR", "kernelc": "KERNELC_CACHE_DIR"}


def copy_cache(src: str, dst: str, impl: str) -> int:
    """Copy a warm compile cache to ``dst`` (a run's own cache); returns the number of kernels in it.

    Triton's cache groups (``__grp__*.json``) name their files by absolute path: they are rewritten to
    point into ``dst``, so the run reads its own copy. Autotuning results stored in the cache (kernelc's
    ``autotune/``, Triton's ``*.autotune.json``) are left out: a dry run's timings are not measurements."""
    if not os.path.isdir(src):
        os.makedirs(dst, exist_ok=True)
        return 0
    src = os.path.abspath(src)
    dst = os.path.abspath(dst)

    def ignore(d, names):
        return [n for n in names if n == "autotune" and d == src or n.endswith(".autotune.json")
                or n.startswith("tmp.pid_") or n.startswith(".tmp-")]
    shutil.copytree(src, dst, ignore=ignore, dirs_exist_ok=True)
    n = 0
    if impl == "triton":
        for grp in glob.glob(os.path.join(dst, "*", "__grp__*.json")):
            with open(grp) as f:
                data = json.load(f)
            paths = data.get("child_paths") or {}
            data["child_paths"] = {k: os.path.join(dst, os.path.relpath(v, src)) for k, v in paths.items()}
            with open(grp, "w") as f:
                json.dump(data, f)
            n += 1
    else:
        n = len(glob.glob(os.path.join(dst, "??", "*", "meta.json")))
    return n


def _runner_cmd(path: str, impl: str, js: str, bench_points: Optional[int], spread: bool,
                x_values: Optional[str] = None) -> List[str]:
    cmd = [sys.executable, os.path.join(ROOT, "bench", "tutorial_runner.py"), "--impl", impl, "--json", js]
    if x_values:
        cmd += ["--x-values", x_values]
    elif bench_points:
        cmd += ["--bench-points", str(bench_points)] + (["--spread"] if spread else [])
    return cmd


def parse_points(specs: Sequence[str]) -> Dict[str, tuple]:
    """``--points PREFIX=N`` (N bench points) or ``PREFIX=x:V1,V2`` (those x values): per tutorial prefix,
    (bench_points or None, x_values or None)."""
    out = {}
    for spec in specs or ():
        pre, _, val = spec.partition("=")
        if not pre or not val:
            raise SystemExit(f"--points {spec!r}: expected PREFIX=N or PREFIX=x:V1,V2")
        out[pre.strip()] = (None, val[2:]) if val.startswith("x:") else (int(val), None)
    return out


def points_for(name: str, default: Optional[int], per: Dict[str, tuple]) -> tuple:
    """(bench_points, x_values) for one tutorial: its ``--points`` entry, else ``--bench-points``."""
    for pre, v in per.items():
        if name.startswith(pre):
            return v
    return default, None


def _prefixed(names: Sequence[str], spec: Optional[str]) -> List[str]:
    """The tutorials of ``names`` that a comma-separated prefix list names ('' or 'all': every one)."""
    if spec is None:
        return []
    pre = [p.strip() for p in spec.split(",") if p.strip()]
    if not pre or pre == ["all"]:
        return list(names)
    return [n for n in names if any(n.startswith(p) for p in pre)]


# The one-run table (--suite): every tutorial side by side in one call of at most 480 s on one H200. Seconds a
# tutorial took (Triton + kernelc, one run each, H200; bench/results/): from cold caches 01 14, 02 14, 03 63, 04 11,
# 05 27, 07 9, 08 49 (s18 T18A, 204 s in all with the processes' start); 06 at 4 points a table from warm caches
# 230, plus 68 of dry runs (s18 T18B), at 1 point 56 (s13); 09 at its default K=512 from warm caches 117, plus 83 of
# dry runs (s16), and 298 from cold caches (s17 R1t: Triton's autotuners compile about 190 configs one after the
# other). As before (4 points spread over each table, cold caches) that is about 700 s, so: 01, 02, 04, 05, 07 as
# before; 03 and 08 at 2 points (03 tunes each size afresh, about 7 s a point; 08 keeps N=128, its point near the
# line); 06 and 09 from warm caches, their dry runs all at once; 06 at N_CTX 2048 only (its 20 tables at one point:
# the one below 0.95 in s18; 06 tunes each N_CTX afresh, about 28 s a point); last, if 30 s are left, one run per
# runtime of 06 from empty caches that stops after its first call (the first ``_attn_fwd`` compiles and tunes all
# its configs); 09's first calls are from warm caches (its cold ones cost Triton 150 s). The first suite run (s21,
# 03 and 08 at 3 points) took: dry runs 97 s (not 70: 28 processes on 16 cores), 01 14, 02 18, 03 58, 04 12, 05 28,
# 07 10, 08 48, 06 57, and 360 s had passed when 09 was due, 10 s short of its estimate. SUITE_SECONDS: the estimate
# a tutorial is started with (both runtimes); one that would pass --deadline is skipped whole, not cut.
SUITE = dict(order="01,02,03,04,05,07,08,06,09", warm="06,09", warm_parallel=True,
             points=["06=x:2048", "03=2", "08=2"], cold_first_calls="06", bench_points=4, repeats=1, deadline=470.0)
SUITE_SECONDS = {"01": 16, "02": 20, "03": 40, "04": 13, "05": 30, "07": 11, "08": 34, "06": 60, "09": 120}
COLD_FIRST_SECONDS = 30  # 06's two runs from empty caches that stop after the first call (s20 R2: 10 + 4 s of it)


def _run_interruptible(cmd: List[str], cwd: str, env: dict, timeout: float):
    """Run ``cmd``; past ``timeout`` interrupt it (SIGINT: the runner still writes its JSON, with what the
    tutorial printed so far and the profiles it wrote), and kill it 20 s later. Returns (rc, stdout, stderr)."""
    import signal
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGINT)
        try:
            out, err = p.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        return "timeout", out or "", (err or "") + f"\nkilled after {timeout} s"


def _env(impl: str, triton_site: Optional[str], caches: Dict[str, str]) -> dict:
    env = dict(os.environ)
    env.pop("KERNELC_INTERPRET", None)
    env["MPLBACKEND"] = "Agg"
    env.update({CACHE_ENV[k]: v for k, v in caches.items()})
    if impl == "triton" and triton_site:
        env["PYTHONPATH"] = triton_site + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_one(path: str, impl: str, bench_points: Optional[int], timeout: int, triton_site: Optional[str],
            spread: bool = False, warm: Optional[str] = None, keep_profiles: Optional[str] = None,
            tutorial_args: Sequence[str] = (), x_values: Optional[str] = None,
            stop_after_first_calls: Optional[int] = None) -> dict:
    """One measured run in a fresh process, with empty compile caches or (``warm``) a copy of the warm one.
    ``keep_profiles``: a directory for the profiles the tutorial writes (09's ``matmul.hatchet``).
    ``stop_after_first_calls``: end the run once that many outermost first calls are timed."""
    work = tempfile.mkdtemp(prefix=f"tut_{impl}_")  # tutorials save plots/CSVs to '.'
    js = os.path.join(work, "result.json")
    caches = {k: os.path.join(work, f"{k}_cache") for k in CACHE_ENV}
    warm_kernels = copy_cache(warm, caches[impl], impl) if warm else None
    env = _env(impl, triton_site, caches)
    cmd = _runner_cmd(path, impl, js, bench_points, spread, x_values)
    if keep_profiles:
        cmd += ["--keep-profiles", keep_profiles]
    if stop_after_first_calls:
        cmd += ["--stop-after-first-calls", str(stop_after_first_calls)]
    cmd += [path, *tutorial_args]
    rc, out, err = _run_interruptible(cmd, work, env, timeout)
    tail = (out[-1500:], err[-3000:])
    try:
        with open(js) as f:
            res = json.load(f)
    except (OSError, ValueError):
        res = {"impl": impl, "benchmarks": [], "first_calls": [], "stdout_tail": tail[0], "stderr_tail": tail[1]}
    res["rc"] = rc if rc == "timeout" else res.get("rc", rc)
    if rc == "timeout":
        res["stderr_tail"] = (res.get("stderr_tail") or "")[-2500:] + f"\nkilled after {timeout} s"
    if warm_kernels is not None:
        res.setdefault("compile", {})["warm_cache_kernels"] = warm_kernels
    c = res.get("compile") or {}
    print(f"  {impl:8s} rc={res['rc']} {res.get('seconds', 0):7.1f} s  tables={len(res['benchmarks'])}  "
          f"compiles {c.get('kernels', '?')} (cache hits {c.get('cache_hits', '?')}, failed {c.get('failed', '?')}, "
          f"{c.get('compile_s', 0):.1f} s compiling, {c.get('autotune_s', 0):.1f} s autotuning)", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    return res


def warm_caches(path: str, impl: str, cache: str, bench_points: Optional[int], spread: bool, jobs: int,
                timeout: int, triton_site: Optional[str], tutorial_args: Sequence[str] = (),
                x_values: Optional[str] = None) -> dict:
    """Dry-run the tutorial in ``jobs`` parallel processes compiling into ``cache``: each runs the whole
    tutorial and compiles the kernels whose identity hashes to its index (``--kernels i/N``), so every
    kernel is compiled once. Returns the wall time, each process's exit status and the compile
    accounting summed over the processes."""
    os.makedirs(cache, exist_ok=True)
    work = tempfile.mkdtemp(prefix=f"warm_{impl}_")
    env = _env(impl, triton_site, {impl: cache})
    t0 = time.perf_counter()
    procs = []
    for i in range(jobs):
        js = os.path.join(work, f"shard{i}.json")
        wd = os.path.join(work, f"shard{i}")
        os.makedirs(wd)
        cmd = _runner_cmd(path, impl, js, bench_points, spread, x_values) + [
            "--dry-run", "--kernels", f"{i}/{jobs}", path, *tutorial_args]
        log = open(os.path.join(wd, "log.txt"), "w")
        procs.append((subprocess.Popen(cmd, cwd=wd, env=env, stdout=log, stderr=subprocess.STDOUT), js, log))
    out = {"jobs": jobs, "rc": [], "compile": {}, "errors": []}
    for p, js, log in procs:
        try:
            rc = p.wait(timeout=max(1.0, timeout - (time.perf_counter() - t0)))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            rc = "timeout"
        log.close()
        out["rc"].append(rc)
        try:
            with open(js) as f:
                res = json.load(f)
        except (OSError, ValueError):
            continue
        for k, v in (res.get("compile") or {}).items():
            if isinstance(v, (int, float)):
                out["compile"][k] = out["compile"].get(k, 0) + v
            elif k == "per_compile":  # every shard's compiles, with their configs and seconds
                out.setdefault("per_compile", []).extend(v)
        if res.get("rc"):
            out["errors"].append((res.get("stderr_tail") or "")[-800:])
    out["wall_s"] = time.perf_counter() - t0
    shutil.rmtree(work, ignore_errors=True)
    c = out["compile"]
    print(f"  warm {impl:8s} {out['wall_s']:6.1f} s wall, {jobs} processes, rc={out['rc']}: "
          f"{c.get('cache_misses', 0)} compiles ({c.get('compile_s', 0):.1f} s summed), "
          f"{c.get('cache_hits', 0)} already cached", flush=True)
    return out


def merge_runs(runs: List[dict]) -> dict:
    """One implementation's repeats as one result: per table, point and value column the best value
    (max, or min for time columns), ``spread`` per column and point (worst/best, >= 1); the first call
    per kernel is the median over the runs (each one starts with an empty cache). Exit status and
    mismatch: the worst run's."""
    first = runs[0]
    out = {k: first.get(k) for k in ("triton_version", "stderr_tail")}
    bad = [r for r in runs if r.get("rc") != 0]
    out["rc"] = bad[0]["rc"] if bad else 0
    if bad:
        out["stderr_tail"] = bad[0].get("stderr_tail")
    out["mismatch"] = any(r.get("mismatch") for r in runs)
    out["seconds"] = sum(r.get("seconds") or 0.0 for r in runs)
    out["repeats"] = len(runs)
    out["compile"] = [r.get("compile") for r in runs]  # per run: compiles, cache hits, compile/autotune seconds
    out["table_errors"] = [r.get("table_errors") for r in runs]
    out["autotune"] = [r.get("autotune") for r in runs]  # per run: the config each autotuner chose per key
    out["autotune_timings"] = [r.get("autotune_timings") for r in runs]  # per run: each candidate's ms, last tuning
    out["gc"] = [r.get("gc") for r in runs]  # per run: the collector's runs, those inside a do_bench named
    tables = []
    for tb in first["benchmarks"]:
        same = [b for r in runs for b in r["benchmarks"]
                if b["plot_name"] == tb["plot_name"] and b["columns"] == tb["columns"] and len(b["rows"]) == len(tb["rows"])]
        nx = len(tb["x_names"])
        lower = _lower_is_better(tb["ylabel"])
        rows, spread = [], {c: [] for c in tb["columns"][nx:]}
        values = {c: [] for c in tb["columns"][nx:]}  # per column and point, every repeat's reading
        for i, row in enumerate(tb["rows"]):
            best = list(row[:nx])
            for j, col in enumerate(tb["columns"][nx:], start=nx):
                vals = [b["rows"][i][j] for b in same if _good(b["rows"][i][j])]
                values[col].append(vals)
                if not vals:
                    best.append(None)
                    spread[col].append(None)
                    continue
                best.append(min(vals) if lower else max(vals))
                spread[col].append(max(vals) / min(vals))
            rows.append(best)
        tables.append(dict(tb, rows=rows, spread=spread, values=values, repeats=len(same)))
    out["benchmarks"] = tables
    profiles: Dict[str, Dict[str, dict]] = {}
    for r in runs:  # per profile file and frame: the run where it ran fastest
        for fname, scopes in (r.get("profiles") or {}).items():
            if "error" in scopes:
                continue
            best = profiles.setdefault(fname, {})
            for scope, m in scopes.items():
                c = _scope_cost(m)
                if c is not None and (scope not in best or c < _scope_cost(best[scope])):
                    best[scope] = m
    out["profiles"] = profiles
    out["printed_trees"] = [r.get("printed_trees") for r in runs]
    per: Dict[str, List[float]] = {}
    for r in runs:
        for n, s in _outer_first_calls(r).items():
            per.setdefault(n, []).append(s)
    out["first_calls"] = [{"kernel": n, "depth": 0, "first_call_s": statistics.median(v)} for n, v in per.items()]
    return out


def _good(v) -> bool:
    return isinstance(v, (int, float)) and not math.isnan(v) and v > 0


def is_control(column: str) -> bool:
    """Columns that run the same (non-kernelc) code in both processes: everything not named Triton..."""
    return not column.strip().lower().startswith("triton")


CONTROL_SCOPES = ("cublas", "hipblas", "torch")


def _scope_cost(m: dict) -> Optional[float]:
    """Lower is faster: seconds per flop where the frame has flops, else time per launch, else its time."""
    if not m.get("time_ns"):
        return None
    if m.get("tflops"):
        return 1.0 / m["tflops"]
    if m.get("count"):
        return m["time_ns"] / m["count"]
    return m["time_ns"]


def _profile_side(m: Optional[dict]) -> Optional[dict]:
    if not m:
        return None
    n = m.get("count") or 0
    return {"count": n, "total_ms": m["time_ns"] / 1e6, "ms_per_launch": m["time_ns"] / n / 1e6 if n else None,
            "tflops": m.get("tflops"), "flops": sum((m.get("flops") or {}).values()), "kernels": m.get("kernels", []),
            "memory_ops": m.get("memory_ops")}


def profile_ratio(t: Optional[dict], k: Optional[dict]):
    """kernelc/Triton for one frame (>1: kernelc faster): TFLOP/s over TFLOP/s where both have flops (the
    tutorial's own metric; it does not depend on how many launches each profile holds), else Triton's time
    per launch over kernelc's. Returns (ratio, basis)."""
    if not t or not k:
        return None, None
    if t.get("tflops") and k.get("tflops"):
        return k["tflops"] / t["tflops"], "TFLOP/s"
    if t.get("ms_per_launch") and k.get("ms_per_launch"):
        return t["ms_per_launch"] / k["ms_per_launch"], "time per launch"
    return None, None


def compare_profiles(tri: dict, kc: dict) -> List[dict]:
    """Tutorials that time with the profiler (09: ``proton.scope``s around cuBLAS and torch, its own
    kernels named by their ``launch_metadata``, e.g. ``matmul_kernel [M=8192, N=8192, K=512]``): per
    profile file, one entry like a table's. ``kernels``: per frame name found in either run, each side's
    launches, total ms, ms per launch and TFLOP/s, and the ratio kernelc/Triton (``profile_ratio``).
    ``columns``: the same ratios, one "column" per frame found in both, for the noise floor, whose control
    columns are the tutorial's non-Triton baselines (cuBLAS, torch: the same library code in both runs)."""
    out = []
    tprof, kprof = tri.get("profiles") or {}, kc.get("profiles") or {}
    for fname in sorted(set(tprof) | set(kprof)):
        tscopes, kscopes = tprof.get(fname) or {}, kprof.get(fname) or {}
        entry = {"plot_name": f"profile {fname}", "ylabel": "kernelc/Triton (TFLOP/s, else ms per launch)",
                 "columns": {}, "kernels": []}
        if not tscopes or not kscopes:
            entry["error"] = ("kernelc" if not kscopes else "Triton") + " wrote no profile of this name"
        for scope in sorted(set(tscopes) | set(kscopes)):
            t, k = _profile_side(tscopes.get(scope)), _profile_side(kscopes.get(scope))
            r, basis = profile_ratio(t, k)
            entry["kernels"].append({"name": scope, "triton": t, "kernelc": k, "ratio": r, "basis": basis})
            if r is None:
                continue
            entry["columns"][scope] = {"x": [[scope]], "triton": [t["tflops"] or t["ms_per_launch"]],
                                       "kernelc": [k["tflops"] or k["ms_per_launch"]], "ratio": [r],
                                       "geomean_ratio": r, "min_ratio": r, "basis": basis}
        entry["control"] = [c for c in entry["columns"] if c.strip().lower().startswith(CONTROL_SCOPES)]
        entry["only_triton"] = sorted(set(tscopes) - set(kscopes))
        entry["only_kernelc"] = sorted(set(kscopes) - set(tscopes))
        out.append(entry)
    return out


def noise_floor(entry: dict) -> dict:
    """The control columns' kernelc-run/Triton-run ratios as the noise floor of one compared table:
    per point the largest deviation from 1 (as a factor >= 1) over the control columns, and for the
    table the largest over its points. Each kernel column gets a verdict per point and for its
    geomean: 'slower'/'faster' only outside the floor, else 'within noise'."""
    cols = entry.get("columns", {})
    ctrl = entry["control"] if "control" in entry else [c for c in cols if is_control(c)]
    npts = max((len(c["ratio"]) for c in cols.values()), default=0)
    per_point = []
    for i in range(npts):
        devs = [max(r, 1 / r) for c in ctrl for r in [cols[c]["ratio"][i]] if r]
        per_point.append(max(devs) if devs else None)
    if "control" in entry:  # profile scopes: one point each, the floor is the worst control scope
        devs = [max(r, 1 / r) for c in ctrl for r in cols[c]["ratio"] if r]
        per_point = [max(devs) if devs else None] * npts
    known = [f for f in per_point if f]
    floor = max(known) if known else None
    entry["noise_floor"] = {"control_columns": ctrl, "per_point": per_point, "table": floor}
    for name, c in cols.items():
        if name in ctrl:
            continue
        c["verdict"] = [_verdict(r, f) for r, f in zip(c["ratio"], per_point)]
        c["geomean_verdict"] = _verdict(c["geomean_ratio"], floor)
    return entry


def _verdict(ratio: Optional[float], floor: Optional[float]) -> str:
    if not ratio:
        return "no data"
    if floor is None:
        return "no control column"
    if ratio < 1 / floor:
        return "slower"
    if ratio > floor:
        return "faster"
    return "within noise"


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
            if "spread" in tb and "spread" in kb:  # worst/best over the repeats, per point
                entry["columns"][col].update(triton_spread=tb["spread"][col], kernelc_spread=kb["spread"][col])
            if "values" in tb and "values" in kb:
                entry["columns"][col].update(repeat_ratios(tb["values"][col], kb["values"][col], lower))
        out.append(entry)
    return out


def repeat_ratios(tvals: List[List[float]], kvals: List[List[float]], lower: bool, line: float = 0.95) -> dict:
    """Per point, from every repeat's reading: ``median_ratio`` (kernelc/Triton of the two medians), ``pair_range``
    (the lowest and highest ratio over every pairing of one Triton repeat with one kernelc repeat) and
    ``pair_verdict``: "below 0.95" only when every pairing is below, "at or above 0.95" only when none is, else
    "undecided" (the repeats differ more than the margin). With one repeat each the range is the one ratio."""
    med, rng, ver = [], [], []
    for t, k in zip(tvals, kvals):
        if not t or not k:
            med.append(None)
            rng.append(None)
            ver.append("no data")
            continue
        r = (lambda a, b: a / b) if lower else (lambda a, b: b / a)  # (triton, kernelc) -> kernelc's advantage
        pairs = [r(a, b) for a in t for b in k]
        med.append(r(statistics.median(t), statistics.median(k)))
        rng.append([min(pairs), max(pairs)])
        ver.append(f"below {line}" if max(pairs) < line else f"at or above {line}" if min(pairs) >= line
                   else "undecided")
    return {"median_ratio": med, "pair_range": rng, "pair_verdict": ver, "repeats": [len(t) for t in tvals]}


def _outer_first_calls(res: dict) -> Dict[str, float]:
    d: Dict[str, float] = {}
    for r in res["first_calls"]:
        if r["depth"] == 0:
            d[r["kernel"]] = d.get(r["kernel"], 0.0) + r["first_call_s"]
    return d


def first_calls(tri: dict, kc: dict) -> List[dict]:
    """Outermost first call per kernel name (compile + autotune), Triton vs kernelc seconds."""
    t, k = _outer_first_calls(tri), _outer_first_calls(kc)
    return [{"kernel": n, "triton_s": t.get(n), "kernelc_s": k.get(n),
             "kernelc_over_triton": (k[n] / t[n]) if n in t and n in k and t[n] else None}
            for n in sorted(set(t) | set(k))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tutorials", required=True, help="directory with Triton 3.6's tutorial files")
    ap.add_argument("--only", help="comma-separated prefixes, e.g. 01,03")
    ap.add_argument("--order", help="comma-separated prefixes: run the tutorials in this order (the others after them)")
    ap.add_argument("--repeats", type=int, default=3,
                    help="runs per tutorial and implementation, alternating which goes first (default 3)")
    ap.add_argument("--bench-points", type=int, default=4,
                    help="x values per benchmark table (default 4; 0: all)")
    ap.add_argument("--first-points", action="store_true",
                    help="the first --bench-points x values (default: spread from the first to the last)")
    ap.add_argument("--points", action="append", default=[], metavar="PREFIX=N|PREFIX=x:V1,V2",
                    help="a tutorial's own bench points: N of them, or those x values (e.g. 06=x:2048); repeatable")
    ap.add_argument("--max-seconds", type=float, default=480,
                    help="start no round that would end past this many seconds, judged by the last round "
                         "(default 480; the first round always runs)")
    ap.add_argument("--deadline", type=float,
                    help="seconds for the whole call: each run's timeout is cut to what is left (a run cut short "
                         "keeps the tables it printed), and a tutorial is skipped when less than --min-run is left")
    ap.add_argument("--min-run", type=float, default=15.0, help="with --deadline (default 15 s)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per tutorial run")
    ap.add_argument("--triton-site", help="directory to prepend to PYTHONPATH for the real-Triton runs")
    ap.add_argument("--libdevice", help="libdevice.10.bc for tutorial 07 (default: Triton's, else kernelc's)")
    ap.add_argument("--warm", nargs="?", const="all", metavar="PREFIXES",
                    help="compile every kernel first in a dry run (no GPU work), then measure each run from a copy "
                         "of that warm cache; with prefixes (e.g. 06,09) only those tutorials, the others from empty "
                         "caches")
    ap.add_argument("--warm-parallel", action="store_true",
                    help="run the dry runs of every warmed tutorial and both implementations at once")
    ap.add_argument("--warm-jobs", type=int, default=max(1, min(16, (os.cpu_count() or 2) - 2)),
                    help="dry-run processes per tutorial and implementation for --warm "
                         "(default: cores - 2, at most 16)")
    ap.add_argument("--cold-first-calls", metavar="PREFIXES",
                    help="for these warmed tutorials, also one run per implementation from empty caches that stops "
                         "after --cold-first-n first calls: the first-call column from cold caches")
    ap.add_argument("--cold-first-n", type=int, default=1)
    ap.add_argument("--suite", action="store_true",
                    help="the one-run table of issue 20: every tutorial, one round, in one call (see SUITE; the "
                         "options given explicitly win)")
    ap.add_argument("--tutorial-args", default="",
                    help="arguments for the tutorial scripts themselves (e.g. \"-K 512\" for 09), dry runs included")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "triton_tutorials.json"))
    ap.add_argument("--fresh", action="store_true", help="start a new results file instead of adding to it")
    if argv is None:
        argv = sys.argv[1:]
    a = ap.parse_args(argv)
    if a.suite:
        given = {x.split("=")[0] for x in argv if x.startswith("--")}
        for k, v in SUITE.items():
            opt = "--" + k.replace("_", "-")
            if opt not in given:
                setattr(a, k, v)
        a.fresh = True
    t_start = time.perf_counter()
    names = TUTORIALS
    if a.only:
        names = _prefixed(names, a.only)
    if a.order:
        first = [n for p in a.order.split(",") for n in names if n.startswith(p.strip())]
        names = list(dict.fromkeys(first + names))
    points = a.bench_points or None
    per_points = parse_points(a.points)
    targs = shlex.split(a.tutorial_args)
    # the profiles the tutorials write (09), per tutorial, implementation and round, next to the JSON
    profiles_dir = os.path.splitext(a.out)[0] + "_profiles"
    spread = not a.first_points
    libdevice = a.libdevice or find_libdevice(a.triton_site)
    tut_dir = stage_tutorials(a.tutorials, libdevice)
    print(f"tutorials staged in {tut_dir}; libdevice {libdevice or 'NOT FOUND (07 fails under Triton)'}", flush=True)
    report = {"benchmark": "triton_tutorials", "environment": environment(), "bench_points": points,
              "points": "spread" if spread else "first", "repeats": a.repeats, "tutorial_args": targs,
              "per_tutorial_points": {k: list(v) for k, v in per_points.items()}, "suite": bool(a.suite),
              "order": names, "deadline": a.deadline, "tutorials": {}}
    if os.path.exists(a.out) and not a.fresh:  # runs split over several calls (--only) add up in one file
        try:
            with open(a.out) as f:
                old = json.load(f)
            if (old.get("bench_points"), old.get("points"), old.get("repeats")) == (points, report["points"], a.repeats):
                report["tutorials"] = old.get("tutorials", {})
        except (OSError, ValueError):
            pass
    found = {n: os.path.join(tut_dir, n + ".py") for n in names}
    for name in names:
        if not os.path.isfile(found[name]):
            report["tutorials"][name] = {"error": f"{name}.py not found in {a.tutorials}"}
            print(f"{name}: not found")
    runs: Dict[str, Dict[str, List[dict]]] = {n: {"triton": [], "kernelc": []} for n in names if os.path.isfile(found[n])}
    pts = {n: points_for(n, points, per_points) for n in runs}

    def left() -> float:
        return (a.deadline - (time.perf_counter() - t_start)) if a.deadline else float("inf")

    def timeout() -> int:
        return int(max(1, min(a.timeout, left())))

    warm: Dict[str, str] = {}
    warm_names = _prefixed(list(runs), a.warm)
    if warm_names:
        # one warm cache per implementation, shared by the tutorials: the dry runs and the measured runs
        # read the same staged files, so the kernels' cache keys (which hash source, and for kernelc its
        # code object's file name) agree
        warm_root = tempfile.mkdtemp(prefix="warm_caches_")
        warm = {impl: os.path.join(warm_root, impl) for impl in ("triton", "kernelc")}
        report["warm"] = {n: {} for n in warm_names}
        jobs_args = [(name, impl) for name in warm_names for impl in ("triton", "kernelc")]

        def warm_one(name, impl):
            print(f"{name}: warming the {impl} compile cache (dry run)", flush=True)
            bp, xv = pts[name]
            report["warm"][name][impl] = warm_caches(found[name], impl, warm[impl], bp, spread, jobs,
                                                     timeout(), a.triton_site, targs, x_values=xv)
        # all at once: about two processes a core in all (each dry run spends part of its time outside compiles)
        jobs = max(2, (a.warm_jobs + 1) // 2) if a.warm_parallel and len(jobs_args) > 2 else a.warm_jobs
        if a.warm_parallel:
            import concurrent.futures
            with concurrent.futures.ThreadPoolExecutor(len(jobs_args)) as ex:
                for f in [ex.submit(warm_one, *j) for j in jobs_args]:
                    f.result()
        else:
            for j in jobs_args:
                warm_one(*j)
        _write(report, a.out)
        report["warm_seconds"] = time.perf_counter() - t_start
    cold_first = set(_prefixed(list(runs), a.cold_first_calls)) & set(warm_names)
    cold_runs: Dict[str, Dict[str, List[dict]]] = {}
    skipped = set()
    # rounds over all tutorials (not N repeats of one, then the next): a slow drift of the machine
    # (clocks, another tenant) then hits both implementations alike
    last_round = 0.0
    for rnd in range(max(1, a.repeats)):
        if rnd and time.perf_counter() - t_start + last_round > a.max_seconds:
            print(f"another round would pass --max-seconds {a.max_seconds:g}: stopping after {rnd}", flush=True)
            break
        t_round = time.perf_counter()
        for idx, name in enumerate(runs):
            need = max(a.min_run, SUITE_SECONDS.get(name[:2], 0) if a.suite else 0)
            if left() < need:
                print(f"{name}: skipped, {max(0.0, left()):.0f} s left of --deadline {a.deadline:g} "
                      f"(it needs about {need:.0f})", flush=True)
                skipped.add(name)
                continue
            print(f"{name} (round {rnd + 1}/{a.repeats})", flush=True)
            # which runtime goes first alternates over rounds and over the tutorials of a round
            order = ("triton", "kernelc") if (rnd + idx) % 2 == 0 else ("kernelc", "triton")
            bp, xv = pts[name]
            for impl in order:
                keep = os.path.join(profiles_dir, name, f"{impl}-{rnd + 1}")
                runs[name][impl].append(run_one(found[name], impl, bp, timeout(), a.triton_site, spread,
                                                warm.get(impl) if name in warm_names else None, keep_profiles=keep,
                                                tutorial_args=targs, x_values=xv))
                if not all(runs[name].values()):  # the first of the two: keep what it measured if the call ends now
                    partial = {k: [_summary(r) for r in v] for k, v in runs[name].items()}
                    report["tutorials"][name] = {"partial": partial}
                    _write(report, a.out)
            _report_tutorial(report, name, runs[name], warm=name in warm_names, points=(bp, xv, spread))
            _write(report, a.out)
        last_round = time.perf_counter() - t_round
    # after the rounds (the tables first, when the deadline is near): from empty caches, up to the first call(s)
    for idx, name in enumerate(n for n in runs if n in cold_first and n not in skipped):
        if left() < COLD_FIRST_SECONDS:
            print(f"{name}: no run from empty caches, {max(0.0, left()):.0f} s left", flush=True)
            continue
        bp, xv = pts[name]
        order = ("triton", "kernelc") if idx % 2 == 0 else ("kernelc", "triton")
        print(f"{name}: its first call from empty caches", flush=True)
        cold_runs[name] = {impl: [run_one(found[name], impl, bp, timeout(), a.triton_site, spread, tutorial_args=targs,
                                          x_values=xv, stop_after_first_calls=a.cold_first_n)] for impl in order}
        _report_tutorial(report, name, runs[name], cold_runs[name], warm=name in warm_names, points=(bp, xv, spread))
        _write(report, a.out)
    for name in runs:
        if name in report["tutorials"] and "passed" in report["tutorials"][name]:
            _print_tutorial(name, report["tutorials"][name])
    for name in sorted(skipped):
        report["tutorials"].setdefault(name, {})["skipped"] = "deadline"
    report["seconds"] = time.perf_counter() - t_start
    _write(report, a.out)
    out_dir = os.environ.get("OUT")
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        _write(report, os.path.join(out_dir, os.path.basename(a.out)))
        dst = os.path.join(out_dir, os.path.basename(profiles_dir))
        if os.path.isdir(profiles_dir) and os.path.abspath(dst) != os.path.abspath(profiles_dir):
            shutil.copytree(profiles_dir, dst, dirs_exist_ok=True)
    print(f"wrote {a.out} ({report['seconds']:.0f} s)")
    return 0


def _summary(r: dict) -> dict:
    return {k: r.get(k) for k in ("rc", "seconds", "compile", "first_calls", "benchmarks", "table_errors", "profiles",
                                  "printed_trees", "autotune", "autotune_timings", "gc", "stderr_tail", "stdout_tail")}


def _report_tutorial(report: dict, name: str, runs: Dict[str, List[dict]],
                     cold: Optional[Dict[str, List[dict]]] = None, warm: bool = False, points=None) -> None:
    """One tutorial's entry: both implementations' merged runs, the compared tables, the first calls (from the
    measured runs; ``cold``: also from the runs that stopped after their first calls, from empty caches)."""
    if not runs["triton"] or not runs["kernelc"]:
        report["tutorials"][name] = {"partial": {k: [_summary(r) for r in v] for k, v in runs.items()}}
        return
    tri, kc = merge_runs(runs["triton"]), merge_runs(runs["kernelc"])
    keys = ("rc", "seconds", "mismatch", "stderr_tail", "triton_version", "repeats", "compile", "table_errors",
            "autotune", "autotune_timings", "printed_trees", "gc")
    report["tutorials"][name] = {
        "triton": {k: tri.get(k) for k in keys}, "kernelc": {k: kc.get(k) for k in keys},
        "passed": {"triton": tri.get("rc") == 0 and not tri.get("mismatch"),
                   "kernelc": kc.get("rc") == 0 and not kc.get("mismatch")},
        "tables": [noise_floor(t) for t in compare(tri, kc) + compare_profiles(tri, kc)],
        "first_calls": first_calls(tri, kc), "caches": "warm" if warm else "cold"}
    if points is not None:
        report["tutorials"][name]["points"] = {"bench_points": points[0], "x_values": points[1], "spread": points[2]}
    if cold and cold.get("triton") and cold.get("kernelc"):
        ct, ck = merge_runs(cold["triton"]), merge_runs(cold["kernelc"])
        report["tutorials"][name]["first_calls_cold"] = first_calls(ct, ck)
        report["tutorials"][name]["cold_runs"] = {
            impl: {"rc": r[0].get("rc"), "seconds": r[0].get("seconds"), "stopped": r[0].get("stopped"),
                   "compile": r[0].get("compile")} for impl, r in cold.items()}


def _print_tutorial(name: str, res: dict) -> None:
    print(f"{name}: passed triton={res['passed']['triton']} kernelc={res['passed']['kernelc']} "
          f"({res['kernelc'].get('repeats')} repeats)")
    for t in res["tables"]:
        if "kernels" in t:
            _print_profile(t)
            continue
        if "error" in t:
            print(f"    {t['plot_name']}: {t['error']}")
            continue
        nf = t.get("noise_floor", {}).get("table")
        for col, c in t.get("columns", {}).items():
            if c["geomean_ratio"]:
                ctrl = t.get("noise_floor", {}).get("control_columns", ())
                tag = "control" if col in ctrl else c.get("geomean_verdict", "")
                print(f"    {t['plot_name']:28s} {col:24s} kernelc/Triton geomean {c['geomean_ratio']:.3f} "
                      f"(min {c['min_ratio']:.3f})  noise floor x{nf or float('nan'):.3f}  {tag}")
    for fc in res["first_calls"]:
        print(f"    first call {fc['kernel']:32s} triton {fc['triton_s'] or float('nan'):7.2f} s  "
              f"kernelc {fc['kernelc_s'] or float('nan'):7.2f} s")


def _side_text(m: Optional[dict]) -> str:
    if not m:
        return f"{'-':>30s}"
    tf = f"{m['tflops']:7.1f}" if m.get("tflops") else f"{'-':>7s}"
    return f"{m['count']:7.0f} {m['total_ms']:11.2f} {tf}"


def _print_profile(t: dict) -> None:
    """One row per frame: launches, total ms and TFLOP/s under each implementation, and kernelc/Triton."""
    nf = (t.get("noise_floor") or {}).get("table")
    ctrl = (t.get("noise_floor") or {}).get("control_columns") or t.get("control") or ()
    head = f"    {t['plot_name']}" + (f": {t['error']}" if "error" in t else "")
    print(head + (f"  (noise floor x{nf:.3f} from {', '.join(ctrl)})" if nf else ""))
    w = min(72, max([len(r["name"]) for r in t["kernels"]] + [5]))
    print(f"      {'frame':{w}s}  {'Triton: launches  total ms  TFLOP/s':>36s}  "
          f"{'kernelc: launches  total ms  TFLOP/s':>37s}  kernelc/Triton")
    for row in t["kernels"]:
        col = t.get("columns", {}).get(row["name"], {})
        tag = "control" if row["name"] in ctrl else col.get("geomean_verdict", "")
        r = f"{row['ratio']:.3f} ({row['basis']}) {tag}" if row.get("ratio") else ""
        print(f"      {row['name'][:w]:{w}s}  {_side_text(row['triton']):>36s}  {_side_text(row['kernelc']):>37s}  {r}")
    for impl in ("triton", "kernelc"):
        ops = [(row["name"], row[impl]["memory_ops"]) for row in t["kernels"]
               if row[impl] and (row[impl].get("memory_ops") or {}).get("count")]
        if ops:
            print(f"      ({impl}'s profile also holds memsets/memcpys, left out above as Proton records kernels only: "
                  + "; ".join(f"{n}: {o['count']:.0f}, {o['time_ns'] / 1e6:.2f} ms" for n, o in ops) + ")")


def _write(report: dict, path: str) -> None:
    """Atomic: a later timeout or crash loses nothing already written."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(report, f, indent=1)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
