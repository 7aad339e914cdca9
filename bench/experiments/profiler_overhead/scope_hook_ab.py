"""kprof's Python per ``profiler.scope`` and per hooked kernelc launch on the GPU path (the cupti backend's
state: timelines on, a session active that does not time scopes on the host), in two source trees,
processes alternated, on CPU (issue 23: kprof's Python is what separates it from the CUPTI floor on `train`).

Each process times, as the program runs them (a fresh ``profiler.scope(name)`` per ``with``, a fresh
``LaunchRecord`` per launch, then kernelc's hook loops):

* ``scope``: ``with profiler.scope(name): pass`` (six names, as train's layers use), minus the same loop with
  ``contextlib.nullcontext()`` (what the bench's ``kprof-noscope`` puts there);
* ``scope_metrics``: the same with ``metrics={"flops": ...}`` (train's ``attn``/``mlp``);
* ``launch``: a ``LaunchRecord`` built and handed to every registered enter/exit hook (kernelc's fast path),
  minus the same launch with no hook registered (kernelc then builds no record);

each both back to back ("tight") and with ``--ops`` small torch CPU ops between two events ("in_step": the
caches and branch predictors the Python path finds in a launch-bound step). A process reports per event the
median over ``--reps`` alternated real/baseline block pairs; the summary is, per tree, the median over
processes and its order-statistic 95% interval, and B/A of the medians.

``time.perf_counter_ns`` stands in for CUPTI's clock (``cupti.get_timestamp`` needs a driver; on an H200 host
it costs ~140 ns against ~70, s16's clock_cost.py).

    python3 bench/experiments/profiler_overhead/scope_hook_ab.py TREE_A TREE_B [--rounds 6] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys

CHILD = r'''
import contextlib, gc, importlib, importlib.util, json, statistics, sys, time
A = json.loads(sys.argv[1])
sys.path.insert(0, A["trees"][0])
import torch
torch.set_num_threads(1)
from kernelc.runtime import hooks as khooks


def load(tree, alias):
    # one copy of kprof per tree in this process (its modules import each other relatively only)
    spec = importlib.util.spec_from_file_location(alias, tree + "/profiler/__init__.py",
                                                  submodule_search_locations=[tree + "/profiler"])
    m = importlib.util.module_from_spec(spec)
    sys.modules[alias] = m
    spec.loader.exec_module(m)
    return m


N, OPS, REPS = A["n"], A["ops"], A["reps"]
xs = [torch.randn(1024) for _ in range(4)]
names = ["layernorm", "attn", "mlp", "loss", "forward", "backward"]
pc = time.perf_counter_ns
cpu = time.thread_time_ns  # CPU time of this thread: time slices lost to the shared host's other work drop out


def work(k):
    y = xs[0]
    for i in range(k):
        y = y + xs[i & 3]
    return y


class Compiled:
    shared = 0
    cache_key = "k" * 64
    signature = {"x": "*fp32"}
    n_regs = 32
    n_spills = 0


class Fn:
    __name__ = "ln_kernel"
    arg_names = ["x", "y", "N", "BLOCK"]
    file = __file__ if "__file__" in dir() else "x.py"
    first_line = 1
    src = "def ln_kernel(x, y, N, BLOCK): pass"
    launch_metadata = None


ck, fn = Compiled(), Fn()
Rec = khooks.LaunchRecord
VALS, CM = (1, 2, 768, 1024), [False, False, False, True]


class Copy:
    def __init__(self, tree, alias):
        self.p = load(tree, alias)
        importlib.import_module(alias + ".hooks")
        self.context, self.hooks, self.session = (sys.modules[alias + ".context"], sys.modules[alias + ".hooks"],
                                                  sys.modules[alias + ".session"])
        ProfileData = sys.modules[alias + ".tree"].ProfileData
        fake = type("S", (), {})()
        fake.data = ProfileData(trace=False)
        fake.context = "shadow"
        fake.scope_key = lambda node, name, pykey: node
        self.fake = fake
        self.scope = self.p.scope

    def on(self):   # the cupti backend's state: timelines, one session not timing scopes, the hook
        self.session.active = (self.fake,)
        self.context.timelines_on(pc)
        h = self.hooks
        h._cupti, h._python, h._idle = True, False, False
        h.describe(Rec("ln_kernel", (8192, 1, 1), 4, 1, 0, 0, "cuda", ck, ck.cache_key, fn, VALS, CM, None))

    def off(self):
        self.session.active = ()
        self.context.timelines_off()
        h = self.hooks
        h._cupti, h._idle = False, True

    def clear(self):
        c = self.context.MAIN
        c.times.clear(), c.nodes.clear()


copies = [Copy(t, f"kprof_{i}") for i, t in enumerate(A["trees"])]


def scope_loop(sc, n, k, metrics):
    for i in range(n):
        with sc(names[i % 6], metrics):
            pass
        if k:
            work(k)


def null(name, metrics=None):
    return contextlib.nullcontext()


def launch_loop(n, k):
    # kernelc's fast path around the driver call (runtime/fastpath.py), the launch itself left out
    he, hx = khooks._enter_hooks, khooks._exit_hooks
    for i in range(n):
        if he or hx:
            r = Rec("ln_kernel", (8192, 1, 1), 4, 1, ck.shared, 0, "cuda", ck, ck.cache_key, fn, VALS, CM, None)
            for h in he:
                h(r)
            for h in hx:
                h(r)
        if k:
            work(k)


def timed(f, *a):
    gc.disable()
    t = cpu()
    f(*a)
    t = cpu() - t
    gc.enable()
    return t


def run(what, which, n, k):
    # which: None = the baseline (no kprof), else a Copy
    if which is not None:
        which.on()
        if what == "launch":
            which.hooks._install()
    try:
        if what == "launch":
            return timed(launch_loop, n, k)
        m = {"flops": 123456789} if what == "scope_metrics" else None
        return timed(scope_loop, which.scope if which is not None else null, n, k, m)
    finally:
        if which is not None:
            which.hooks._uninstall()
            which.clear()
            which.off()


res = {}
for mode, k, n in (("tight", 0, N), ("in_step", OPS, max(100, N // 10))):
    for what in ("scope", "scope_metrics", "launch"):
        da, db, ratio = [], [], []
        for r in range(REPS + 2):
            order = [None, copies[0], copies[1]]
            order = order[r % 3:] + order[:r % 3]
            if r % 2:
                order.reverse()
            t = {id(w): run(what, w, n, k) for w in order}
            if r >= 2:
                a = (t[id(copies[0])] - t[id(None)]) / n
                b = (t[id(copies[1])] - t[id(None)]) / n
                da.append(a)
                db.append(b)
                ratio.append((t[id(copies[1])] - t[id(None)]) / max(1, t[id(copies[0])] - t[id(None)]))
        res[f"{mode}_{what}"] = {"A_ns": round(statistics.median(da), 1), "B_ns": round(statistics.median(db), 1),
                                 "B-A_ns": round(statistics.median(b - a for a, b in zip(da, db)), 1)}
print(json.dumps(res))
'''


def _order_ci(xs):
    """Median and its distribution-free ~95% interval (order statistics; the range when n < 6)."""
    s = sorted(xs)
    n = len(s)
    if n < 6:
        return statistics.median(s), [s[0], s[-1]]
    k = max(0, int(math.floor(n / 2 - 0.98 * math.sqrt(n))))
    return statistics.median(s), [s[k], s[n - 1 - k]]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trees", nargs=2, help="A and B: source trees whose profiler/ packages are compared")
    ap.add_argument("--rounds", type=int, default=6, help="processes")
    ap.add_argument("--n", type=int, default=3000, help="events per tight block (a tenth per in-step block)")
    ap.add_argument("--ops", type=int, default=20, help="torch ops between two events in the in-step blocks")
    ap.add_argument("--reps", type=int, default=31, help="counted block triples (none, A, B) per process")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    trees = [os.path.abspath(t) for t in args.trees]
    cfg = json.dumps({"n": args.n, "ops": args.ops, "reps": args.reps, "trees": trees})
    per = []
    for r in range(args.rounds):
        # kernelc and the bench scripts come from A; the two copies of profiler/ load in A, B order
        env = dict(os.environ, PYTHONPATH=trees[0])
        out = subprocess.run([sys.executable, "-c", CHILD, cfg], cwd=trees[0], env=env, capture_output=True,
                             text=True, timeout=900)
        if out.returncode != 0:
            raise SystemExit(out.stderr[-2000:])
        per.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(r, json.dumps(per[-1]), flush=True)
    summary = {}
    for key in per[0]:
        row = {}
        for f in ("A_ns", "B_ns", "B-A_ns"):
            m, ci = _order_ci([d[key][f] for d in per])
            row[f] = round(m, 1)
            row[f + "_ci"] = [round(x, 1) for x in ci]
        row["B/A"] = round(row["B_ns"] / row["A_ns"], 3) if row["A_ns"] else None
        summary[key] = row
    res = {"trees": trees, "config": json.loads(cfg), "summary": summary, "processes": per,
           "load_avg": os.getloadavg(), "python": sys.version.split()[0]}
    for key, v in summary.items():
        print(f"{key:20s} A {v['A_ns']:7.1f} {v['A_ns_ci']}  B {v['B_ns']:7.1f} {v['B_ns_ci']}  "
              f"B-A {v['B-A_ns']:7.1f} {v['B-A_ns_ci']}  B/A {v['B/A']}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
