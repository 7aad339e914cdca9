"""kprof's Python per scope and per kernelc launch on the GPU path (cupti backend, timelines on, a session
active that does not time scopes on the host: kprof's default), in two source trees, alternated process by
process on CPU (issue 23: what kprof runs beyond the CUPTI floor).

``time.perf_counter_ns`` stands in for CUPTI's clock; the launch record is built once (kernelc's own cost of a
``LaunchRecord`` is the same in both trees). Each process reports the lower quartile of 15 repetitions of
20000 calls; the summary is the median over processes per tree.

    python3 bench/experiments/profiler_overhead/python_path_ab.py TREE_A TREE_B [--rounds 5] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r'''
import gc, json, sys, time
sys.path.insert(0, "bench/experiments/profiler_overhead")
import per_launch_path as p
import profiler
from profiler import context, hooks, session
from profiler.tree import ProfileData

def q1(fn, n=20000, reps=15):
    out = []
    for _ in range(reps):
        gc.disable(); t = time.perf_counter_ns(); fn(n); out.append((time.perf_counter_ns() - t) / n); gc.enable()
    out.sort()
    return round(out[len(out) // 4], 1)

res = {}
rec = p._fake_record(False)()
context.timelines_on(time.perf_counter_ns)
hooks._cupti, hooks._python, hooks._idle = True, False, False
hooks.describe(rec)
def launches(n):
    enter, exit_ = hooks._enter, hooks._exit
    for _ in range(n):
        enter(rec); exit_(rec)
    context.MAIN.times.clear(); context.MAIN.nodes.clear()
res["kernelc_hook_enter_exit_ns"] = q1(launches)
fake = type("S", (), {})()
fake.data = ProfileData(trace=False)
fake.scope_key = lambda node, name, pykey: node
session.active = (fake,)
sc = profiler.scope("layernorm")
def scopes(n):
    for _ in range(n):
        with sc:
            pass
    context.MAIN.times.clear(); context.MAIN.nodes.clear()
res["scope_ns"] = q1(scopes)
def empty(n):
    for _ in range(n):
        pass
res["empty_loop_ns"] = q1(empty)
print(json.dumps(res))
'''


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trees", nargs=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    per = {t: [] for t in args.trees}
    for r in range(args.rounds):
        for t in (args.trees if r % 2 == 0 else args.trees[::-1]):
            env = dict(os.environ, PYTHONPATH=t)
            out = subprocess.run([sys.executable, "-c", CHILD], cwd=t, env=env, capture_output=True, text=True,
                                 timeout=300)
            if out.returncode != 0:
                raise SystemExit(out.stderr[-2000:])
            per[t].append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(t, per[t][-1], flush=True)
    summary = {t: {k: statistics.median(d[k] for d in per[t]) for k in per[t][0]} for t in args.trees}
    res = {"summary": summary, "processes": per, "load_avg": os.getloadavg()}
    print(json.dumps(summary, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
