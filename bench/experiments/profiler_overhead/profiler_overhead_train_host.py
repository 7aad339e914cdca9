"""Where a profiler's cost lands on examples/train.py: host time to issue one training step versus
the step's wall time, with nothing running and then with each profiler started, in one process per
variant (the variants of bench/profiler_overhead_ab.py).

If issuing a step takes less host time than the GPU takes to run it, the step is GPU-bound and a
profiler's per-launch host work is hidden up to that slack; what is left of its overhead is then
GPU-side (CUPTI's kernel timestamps) or a host cost that exceeds the slack.

    python bench/experiments/profiler_overhead/profiler_overhead_train_host.py [--variants control,cupti-kernel,kprof-nohook,kprof,proton]

Writes bench/results/profiler_overhead_train_host.json: per variant, before/after start: wall
ms/step over a block, median host ms to issue a step (synchronised before, clock stopped when
``step()`` returns), and, for the CUPTI-only variant, activity records per step by kind.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))  # bench/experiments/<topic>/
sys.path.insert(0, ROOT)


def measure(tr, block: int) -> dict:
    import torch
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(block):
        tr.step()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t) * 1e3 / block
    host = []
    for _ in range(max(block // 2, 5)):
        torch.cuda.synchronize()
        t = time.perf_counter()
        tr.step()
        host.append((time.perf_counter() - t) * 1e3)
    torch.cuda.synchronize()
    return {"wall_ms": round(wall, 4), "host_issue_ms": round(statistics.median(host), 4)}


def child(variant: str, block: int, out: str) -> None:
    from bench.profiler_overhead_ab import CuptiFloor, make_variant, warm_trainer
    tr = warm_trainer()
    before = measure(tr, block)
    o = make_variant(variant, tempfile.mkdtemp(prefix="kprof_host_"))
    if isinstance(o, CuptiFloor):
        o.by_kind = {}
    if o is not None:
        o.start()
    tr.step()
    after = measure(tr, block)
    res = {"variant": variant, "before": before, "after": after}
    if o is not None:
        o.stop()
        if isinstance(o, CuptiFloor):  # records per step: block + block//2 measured steps + 1
            steps = block + max(block // 2, 5) + 1
            res["records_per_step"] = {k: round(n / steps, 2) for k, n in sorted(o.by_kind.items())}
    json.dump(res, open(out, "w"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", default="control,cupti-kernel,kprof-nohook,kprof,proton")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--block", type=int, default=60)
    ap.add_argument("--child", nargs=3, metavar=("VARIANT", "BLOCK", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child[0], int(args.child[1]), args.child[2])
        return 0
    from bench.common import write_results
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    rows = []
    for rnd in range(args.rounds):
        for v in [v for v in args.variants.split(",") if v]:
            out = tempfile.mktemp(suffix=".json")
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", v, str(args.block), out],
                               env=env, capture_output=True, text=True, timeout=600)
            if r.returncode != 0 or not os.path.exists(out):
                print(f"{v}: failed\n{(r.stderr or r.stdout)[-1500:]}", flush=True)
                continue
            d = json.load(open(out))
            d["round"] = rnd
            rows.append(d)
            print(json.dumps(d), flush=True)
            write_results("profiler_overhead_train_host", rows, results_dir=os.path.join(HERE, 'results'))
    return 0


if __name__ == "__main__":
    sys.exit(main())
