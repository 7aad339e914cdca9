"""Profiler overhead measured inside one process: blocks of the same workload run alternately with
and without a profiler, so the machine, the allocator state and the GPU clocks are shared by both
sides (separate processes on a lent H200 differed by up to 7% with no profiler at all).

    python bench/profiler_overhead_ab.py [--workload train,step,tiny] [--rounds 4] [--block train=150,...]

Variants (each block starts what it measures after the warm-up and stops it after a device sync;
start/stop are not timed, as in a whole-process run where they happen before and after the loop):

* ``none``: nothing.
* ``cupti-floor``: CUPTI kernel/memcpy/memset activity records only, counted and dropped (no
  callbacks): what any CUPTI-based profiler pays.
* ``cupti-floor+api``: plus driver API records on the launch calls (how kprof places launches).
* ``kprof``: ``profiler.start()``/``finalize()``, the defaults of ``python -m kprof``.
* ``kprof-nohook``: the same with ``hook=None`` (no kernelc launch hook).
* ``kprof-eager``: kprof joining records to launches as buffers complete (``DEFER_MAX = 0``)
  instead of at the flush.
* ``proton``: ``triton.profiler.start()``/``finalize()``, measured in a second process with its own
  ``none`` blocks (Proton loads its own libcupti: the two never share a process).

Rounds rotate the variant order; each variant's ratio is the median over rounds of its block time
divided by the ``none`` block of the same round.  Writes bench/results/profiler_overhead_ab.json.
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
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

KPROF_VARIANTS = ("none", "cupti-floor", "cupti-floor+api", "kprof", "kprof-nohook", "kprof-eager")
PROTON_VARIANTS = ("none", "proton")
UNITS = {"train": "ms/step", "step": "ms/step", "tiny": "us/add"}


# -- workloads: (run n units) -> seconds, after a warm-up ------------------------------------------
def workload_train():
    import torch
    from examples.train import SIZES, Trainer
    tr = Trainer(SIZES["small"], "cuda")
    for _ in range(5):
        tr.step()
    torch.cuda.synchronize()

    def run(n):
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(n):
            tr.step()
        torch.cuda.synchronize()
        return (time.perf_counter() - t) * 1e3 / n
    return run


def workload_step():
    import torch
    from bench.bench_profiler_overhead import make_step
    step = make_step()

    def run(n):
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(n):
            step()
        torch.cuda.synchronize()
        return (time.perf_counter() - t) * 1e3 / n
    return run


def workload_tiny():
    import torch
    a = torch.ones(1, device="cuda")
    b = torch.ones(1, device="cuda")
    c = torch.empty(1, device="cuda")
    for _ in range(500):
        torch.add(a, b, out=c)
    torch.cuda.synchronize()

    def run(n):
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(n * 100):
            torch.add(a, b, out=c)
        torch.cuda.synchronize()
        return (time.perf_counter() - t) * 1e6 / (n * 100)
    return run


WORKLOADS = {"train": workload_train, "step": workload_step, "tiny": workload_tiny}


# -- variants: start() -> stop() -----------------------------------------------------------------
class CuptiFloor:
    """CUPTI activity records only (optionally driver API records on kprof's launch ids)."""

    def __init__(self, api: bool):
        from cupti import cupti
        self.cupti, self.api, self.count = cupti, api, 0
        self.kinds = (cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.MEMCPY, cupti.ActivityKind.MEMSET)
        self.cbids = []
        if api:
            from profiler.backends.cupti import CuptiBackend
            self.cbids = CuptiBackend(cupti)._launch_cbids()

    def _completed(self, activities):
        self.count += len(activities)

    def start(self):
        c = self.cupti
        c.activity_register_callbacks(lambda: (8 << 20, 0), self._completed)
        for k in self.kinds:
            c.activity_enable(k)
        for cbid in self.cbids:     # as kprof does: API records for the launch ids only
            try:
                c.activity_enable_driver_api(cbid, 1)
            except Exception:
                pass

    def stop(self):
        c = self.cupti
        import torch
        torch.cuda.synchronize()
        c.activity_flush_all(1)
        for k in self.kinds:
            c.activity_disable(k)
        for cbid in self.cbids:
            try:
                c.activity_enable_driver_api(cbid, 0)
            except Exception:
                pass
        c.activity_flush_all(1)


def make_variant(name: str, tmp: str):
    if name == "none":
        return None
    if name in ("cupti-floor", "cupti-floor+api"):
        return CuptiFloor(api=name.endswith("+api"))
    if name.startswith("kprof"):
        import profiler
        from profiler.backends import cupti as backend

        class Kprof:
            def start(self):
                kw = {"hook": None} if name == "kprof-nohook" else {}
                self.defer_max = backend.DEFER_MAX
                if name == "kprof-eager":
                    backend.DEFER_MAX = 0
                profiler.start(os.path.join(tmp, name.replace("-", "_")), **kw)

            def stop(self):
                profiler.finalize()
                backend.DEFER_MAX = self.defer_max
        return Kprof()
    if name == "proton":
        import triton.profiler as proton

        class Proton:
            def start(self):
                proton.start(os.path.join(tmp, "proton"))

            def stop(self):
                proton.finalize()
        return Proton()
    raise ValueError(name)


def child(workload: str, variants, rounds: int, block: int, out: str) -> None:
    tmp = tempfile.mkdtemp(prefix="kprof_ab_")
    run = WORKLOADS[workload]()
    objs = {v: make_variant(v, tmp) for v in variants}
    times = {v: [] for v in variants}
    for r in range(rounds):
        order = list(variants[r % len(variants):]) + list(variants[:r % len(variants)])
        for v in order:
            o = objs[v]
            if o is not None:
                o.start()
            run(1)   # the first unit after a start pays one-time setup (CUPTI's, kernelc's hook caches)
            times[v].append(run(block))
            if o is not None:
                o.stop()
    json.dump({"times": times}, open(out, "w"))


def summarize(times: dict) -> dict:
    base = times["none"]
    out = {}
    for v, ts in times.items():
        ratios = [t / b for t, b in zip(ts, base)]
        out[v] = {"median": statistics.median(ts), "min": min(ts), "ratio_median": statistics.median(ratios),
                  "ratios": [round(x, 4) for x in ratios]}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="train,step,tiny")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--block", default="train=150,step=1000,tiny=300",
                    help="units per block, per workload (steps; x100 adds for tiny): long enough that CUPTI "
                         "completes activity buffers inside the blocks, so their processing is measured too")
    ap.add_argument("--no-proton", action="store_true")
    ap.add_argument("--child", nargs=3, metavar=("WORKLOAD", "VARIANTS", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        wl, vs, out = args.child
        child(wl, vs.split(","), args.rounds, int(args.block), out)
        return 0
    from bench.common import write_results
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    rows, raw = [], {}
    groups = [KPROF_VARIANTS] + ([] if args.no_proton else [PROTON_VARIANTS])
    blocks = dict(kv.split("=") for kv in args.block.split(",") if "=" in kv)
    for wl in [w for w in args.workload.split(",") if w]:
        for vs in groups:
            out = tempfile.mktemp(suffix=".json")
            cmd = [sys.executable, os.path.abspath(__file__), "--rounds", str(args.rounds), "--block", blocks.get(wl, "20"),
                   "--child", wl, ",".join(vs), out]
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
            if r.returncode != 0 or not os.path.exists(out):
                print(f"{wl} {vs}: failed\n{(r.stderr or r.stdout)[-2000:]}", flush=True)
                continue
            s = summarize(json.load(open(out))["times"])
            proc = "kprof" if vs is KPROF_VARIANTS else "proton"
            raw.setdefault(wl, {})[proc] = s
            for v, d in s.items():
                rows.append({"workload": wl, "process": proc, "variant": v, "median": round(d["median"], 4), "unit": UNITS[wl],
                             "ratio": round(d["ratio_median"], 4), "ratios": d["ratios"]})
                print(f"{wl:6s} {v:16s} {d['median']:9.4f} {UNITS[wl]:8s} ratio {d['ratio_median']:.4f}  {d['ratios']}",
                      flush=True)
        write_results("profiler_overhead_ab", rows, {"raw": raw, "rounds": args.rounds, "blocks": blocks})
    return 0


if __name__ == "__main__":
    sys.exit(main())
