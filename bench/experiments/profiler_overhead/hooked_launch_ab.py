"""What a kernelc launch costs on the host with kprof's hook and without, through kernelc's generated launch path,
in two source trees, processes alternated, on CPU (issue 23, session 24).

Each process puts its tree first on ``sys.path`` and binds kernelc's generated launch (``fastpath.make_binder``) of
a layer-norm-shaped kernel (8 arguments, one constexpr) to a stand-in compiled entry whose driver call does
nothing, so everything but ``cuLaunchKernel`` runs as on a GPU.  It times, in thread CPU time, blocks of
``--n`` launches in three states, in rotating order:

* ``bare``: no hook registered (kernelc builds no ``LaunchRecord``);
* ``noop``: a built-in no-op (``id``) as enter and exit hook: kernelc's record and hook loops alone;
* ``kprof``: kprof's hook in the cupti backend's state (timelines on ``time.time_ns``, a session active that does
  not time scopes on the host, the kernel's ``KernelLaunch`` cached by a first launch), as kprof runs it on a GPU.

A process reports per launch the median over ``--reps`` rotations of ``noop - bare`` and ``kprof - bare``; the
summary gives per tree the median over processes with its order-statistic interval, and B - A.

    python3 bench/experiments/profiler_overhead/hooked_launch_ab.py TREE_A TREE_B [--rounds 6] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = r'''
import gc, json, statistics, sys, time, types
A = json.loads(sys.argv[1])
sys.path.insert(0, A["tree"])
import torch
torch.set_num_threads(1)
import kernelc
import kernelc.language as kl
from kernelc.runtime import hooks as khooks
from kernelc.runtime.fastpath import make_binder, spec_part
from kernelc.runtime.launcher import get_state
import profiler
from profiler import context, hooks, session, _native


@kernelc.jit
def ln_kernel(x_ptr, y_ptr, w_ptr, b_ptr, stride, n_cols, eps, BLOCK: kl.constexpr):
    pass


fast = make_binder(ln_kernel)
x, y, w, b = (torch.zeros(64) for _ in range(4))
args = (x, y, w, b, 64, 48, 1e-5)
key = tuple(("*", t.dtype, t.data_ptr() & 15 == 0, t.is_cuda) for t in args[:4]) + tuple(
    spec_part(v) for v in args[4:]) + (("c", 64),)
compiled = types.SimpleNamespace(shared=0, cache_key="k" * 64, signature={"x_ptr": "*fp32"}, n_regs=32, n_spills=0)
ent = types.SimpleNamespace(compiled=compiled, launch=lambda *a: None)
get_state(ln_kernel)["cache"][(key, 4, 3, 0)] = ent
N, REPS = A["n"], A["reps"]
cpu = time.thread_time_ns
grid = (96, 1, 1)


def loop(n):
    f = fast
    for _ in range(n):
        f(grid, x, y, w, b, 64, 48, 1e-5, 64)


fake = type("S", (), {})()
fake.data = sys.modules["profiler.tree"].ProfileData(trace=False)
fake.context = "shadow"
fake.scope_key = lambda node, name, pykey: node


def on(state):
    if state == "noop":
        return khooks.register(id, id)
    if state == "kprof":
        session.active = (fake,)
        context.timelines_on(time.time_ns)
        hooks._cupti, hooks._python, hooks._idle = True, False, False
        hooks._install()
        loop(2)   # the first launch of the configuration: the Python hook describes and caches it
    return None


def off(state, h):
    if state == "noop":
        khooks.unregister(h)
    elif state == "kprof":
        hooks._uninstall()
        session.active = ()
        context.timelines_off()
        hooks._cupti, hooks._idle = False, True
        c = context.MAIN
        c.times.clear(), c.nodes.clear()


def timed(state):
    h = on(state)
    try:
        gc.disable()
        t = cpu()
        loop(N)
        t = cpu() - t
        gc.enable()
    finally:
        off(state, h)
    return t / N


states = ["bare", "noop", "kprof"]
noop, kp, bare = [], [], []
for r in range(REPS + 2):
    order = states[r % 3:] + states[:r % 3]
    if r % 2:
        order.reverse()
    t = {s: timed(s) for s in order}
    if r >= 2:
        noop.append(t["noop"] - t["bare"])
        kp.append(t["kprof"] - t["bare"])
        bare.append(t["bare"])
print(json.dumps({"bare_ns": round(statistics.median(bare), 1), "noop_ns": round(statistics.median(noop), 1),
                  "kprof_ns": round(statistics.median(kp), 1), "native": str(_native.status)[:80]}))
'''


def _order_ci(xs):
    """Median and its distribution-free ~95% interval (order statistics; the range when n < 6)."""
    xs = sorted(xs)
    n = len(xs)
    if n < 6:
        return statistics.median(xs), xs[0], xs[-1]
    k = max(0, int(n / 2 - 0.98 * n ** 0.5))
    return statistics.median(xs), xs[k], xs[n - 1 - k]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tree_a")
    ap.add_argument("tree_b")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    per = {"A": [], "B": []}
    for r in range(a.rounds):
        for which in (("A", "B") if r % 2 == 0 else ("B", "A")):
            tree = a.tree_a if which == "A" else a.tree_b
            p = subprocess.run([sys.executable, "-c", CHILD, json.dumps({"tree": tree, "n": a.n, "reps": a.reps})],
                               capture_output=True, text=True, cwd="/tmp")
            if p.returncode:
                sys.stderr.write(p.stderr[-3000:])
                return 1
            res = json.loads(p.stdout.strip().splitlines()[-1])
            per[which].append(res)
            print(r, which, json.dumps(res), flush=True)
    out = {"trees": {"A": a.tree_a, "B": a.tree_b}, "args": vars(a), "processes": per, "summary": {}}
    for k in ("bare_ns", "noop_ns", "kprof_ns"):
        ea, eb = [x[k] for x in per["A"]], [x[k] for x in per["B"]]
        ma, la, ha = _order_ci(ea)
        mb, lb, hb = _order_ci(eb)
        md, ld, hd = _order_ci([y - x for x, y in zip(ea, eb)])
        out["summary"][k] = {"A": [round(ma, 1), round(la, 1), round(ha, 1)], "B": [round(mb, 1), round(lb, 1),
                             round(hb, 1)], "B-A": [round(md, 1), round(ld, 1), round(hd, 1)]}
        print(f"{k:9s} A {ma:7.1f} [{la:.1f}, {ha:.1f}]  B {mb:7.1f} [{lb:.1f}, {hb:.1f}]  "
              f"B-A {md:+7.1f} [{ld:+.1f}, {hd:+.1f}]")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
