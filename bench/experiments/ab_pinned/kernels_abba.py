"""bench/bench_kernels.py in two source trees, interleaved processes A B B A on one GPU, inside a time budget.

    python3 bench/experiments/ab_pinned/kernels_abba.py --a pre21=/tmp/pre21 --b main=$PWD \\
        --group matmul_tma,matmul_device_desc --group vector_add,softmax,layernorm --budget 100 --out DIR

Each group runs as four processes (A, B, B, A), each ``python3 TREE/bench/bench_kernels.py NAMES`` with that
tree first on sys.path, its own kernelc disk cache (the second process of a tree reuses the first's builds, so
only autotune's timing repeats) and Triton's cache as the environment has it (shared by all four). A group
starts only if the time left covers it at the pace of the groups before (the first always starts); a process
past the time left is killed and its group compared on what finished. Per row the figure is kernelc's speed
over the control timed in the same process (kernels_ab.py): B/A of it is the change between the trees; the two
processes of one tree give that figure's own spread (A2/A1, B2/B1), which an A/B change must exceed to count.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernels_ab import _control, _rows  # noqa: E402


def command(tree, names, warmup=0.0):
    """The command of one process: TREE's bench_kernels.py on ``names``, through warm_run.py (the same process
    warms the GPU for ``warmup`` seconds first) when ``warmup`` > 0."""
    script = os.path.join(tree, "bench", "bench_kernels.py")
    if warmup > 0:
        return [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "warm_run.py"),
                str(warmup), script, *names]
    return [sys.executable, script, *names]


def _run(tag, tree, names, i, out, env_extra, time_left, warmup=0.0):
    name = f"kab_{tag}_{i}"
    env = dict(os.environ)
    env.update(env_extra)
    env["PYTHONPATH"] = os.pathsep.join([tree] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["KERNELC_CACHE_DIR"] = os.path.join(out, f"kcache_{tag}")
    env["BENCH_RESULTS_NAME"] = name
    t0 = time.time()
    with open(os.path.join(out, name + ".log"), "w") as log:
        try:
            rc = subprocess.run(command(tree, names, warmup), cwd=tree,
                                env=env, stdout=log, stderr=subprocess.STDOUT, timeout=max(1, time_left)).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    dt = time.time() - t0
    src = os.path.join(tree, "bench", "results", name + ".json")
    path = None
    if os.path.exists(src):
        path = os.path.join(out, name + ".json")
        shutil.copy(src, path)
    print(f"  {name} {' '.join(names)}: rc={rc} {dt:.0f}s", flush=True)
    return path, dt


def _figure(path):
    return {n: _control(r)[1] for n, r in _rows(path).items()} if path else {}


def compare(files):
    """files: {(tag, i): path}; tags 'a'/'b', i 1/2. Per row: B/A per pair and each tree's own spread."""
    f = {k: _figure(p) for k, p in files.items()}
    rows = []
    names = sorted(set().union(*[set(v) for v in f.values()]) if f else [], key=str)
    for n in names:
        get = lambda t, i: f.get((t, i), {}).get(n)  # noqa: E731
        pairs = [(get("a", i), get("b", i)) for i in (1, 2)]
        ab = [b / a for a, b in pairs if a and b]
        spread = {t: (get(t, 2) / get(t, 1)) if get(t, 1) and get(t, 2) else None for t in ("a", "b")}
        rows.append({"benchmark": n, "b_over_a": statistics.median(ab) if ab else None, "pairs": ab,
                     "spread_a2_over_a1": spread["a"], "spread_b2_over_b1": spread["b"],
                     "figure": {f"{t}{i}": get(t, i) for t in "ab" for i in (1, 2)}})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True, help="TAG=TREE (the base)")
    ap.add_argument("--b", required=True, help="TAG=TREE (the change)")
    ap.add_argument("--b-env", default="", help="VAR=VALUE[,VAR=VALUE] for B's processes only")
    ap.add_argument("--group", action="append", required=True, help="comma-separated bench_kernels names")
    ap.add_argument("--budget", type=float, default=100.0, help="seconds for all groups")
    ap.add_argument("--warmup", type=float, default=0.0,
                    help="seconds of GEMMs at the start of each process, before its first row (warm_run.py)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    (ta, tree_a), (tb, tree_b) = (s.split("=", 1) for s in (a.a, a.b))
    env_b = dict(kv.split("=", 1) for kv in a.b_env.split(",") if kv)
    t_start = time.time()
    result = {"a": [ta, os.path.abspath(tree_a)], "b": [tb, os.path.abspath(tree_b)], "b_env": env_b,
              "budget_s": a.budget, "warmup_s": a.warmup, "groups": []}
    paces = []
    for gi, group in enumerate(a.group):
        names = group.split(",")
        left = a.budget - (time.time() - t_start)
        if paces and left < statistics.mean(paces):
            print(f"group {names}: skipped, {left:.0f}s left against {statistics.mean(paces):.0f}s per group",
                  flush=True)
            result["groups"].append({"names": names, "skipped": True})
            continue
        print(f"group {names} ({left:.0f}s left)", flush=True)
        g0 = time.time()
        files, secs = {}, {}
        for tag, i in (("a", 1), ("b", 1), ("b", 2), ("a", 2)):
            left = a.budget - (time.time() - t_start)
            if left <= 1:
                break
            tree = tree_a if tag == "a" else tree_b
            label = ta if tag == "a" else tb
            files[(tag, i)], secs[f"{label}_{i}"] = _run(f"g{gi}_{label}", tree, names, i, a.out,
                                                        env_b if tag == "b" else {}, left, a.warmup)
        paces.append(time.time() - g0)
        rows = compare({k: v for k, v in files.items() if v})
        result["groups"].append({"names": names, "seconds": secs, "rows": rows})
        for r in rows:
            fmt = lambda v: f"{v:.3f}" if v else "  -  "  # noqa: E731
            print(f"  {r['benchmark']:46s} {tb}/{ta} {fmt(r['b_over_a'])} pairs "
                  f"[{', '.join(fmt(x) for x in r['pairs'])}]  own spread {ta} {fmt(r['spread_a2_over_a1'])} "
                  f"{tb} {fmt(r['spread_b2_over_b1'])}", flush=True)
    json.dump(result, open(os.path.join(a.out, "abba.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
