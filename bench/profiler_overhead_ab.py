"""Profiler overhead with each process as its own baseline: a process runs a block of the workload
with no profiler, then starts one (or, for ``control``, nothing) and runs the same block again; the
overhead is the ratio of the two blocks, over many processes.

Why not separate processes per variant: unprofiled processes on a lent H200 differed by up to 7%
in ms/step among themselves.  Why not alternate profiled and unprofiled blocks in one process: once
CUPTI has been initialised, launches stay slower after it is switched off (a tiny torch.add went
from 5.7 to 7.7 us in "unprofiled" blocks, 2026-11-22), so every "none" block after the first is
not a baseline.  ``control`` measures what a second block costs anyway (warm-up, clocks); the
reported ratio is each variant's median ratio divided by control's.

    python bench/profiler_overhead_ab.py [--workload train,step,tiny] [--rounds 5] [--block train=100,...]

Variants:

* ``control``: nothing in the second block either.
* ``cupti-kernel`` (not in the default list): CUPTI kernel activity records only, counted and
  dropped: the activity kinds Proton enables (it adds launch callbacks in C++).
* ``cupti-kernel+api`` (not in the default list): kernel records plus the driver API records.
* ``cupti-floor``: CUPTI kernel/memcpy/memset activity records only, counted and dropped (no
  callbacks): what a CUPTI-based profiler that also records copies pays.
* ``cupti-floor+api``: plus driver API records on the launch calls (how kprof places launches).
* ``kprof``: ``profiler.start()``/``finalize()``, the defaults of ``python -m kprof``.
* ``kprof-nohook``: the same with ``hook=None`` (no kernelc launch hook).
* ``cupti-kernel+latency`` etc.: ``+latency`` turns on CUPTI's latency timestamps (kernel records'
  ``queued``), ``+copyapi`` driver API records on the copy and memset ids only, ``+sub`` a CUPTI
  subscriber with kprof's graph-node callbacks, ``+copycb`` plus callbacks on the copy ids.
* ``proton``: ``triton.profiler.start()``/``finalize()``.
* ``kprof-eager`` (not in the default list): kprof joining records to launches as buffers complete
  (``DEFER_MAX = 0``) instead of at the flush.

Start and stop are outside the timed blocks, as in a whole-process run where they happen before
and after the script's loop.  Writes bench/results/profiler_overhead_ab.json.
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

VARIANTS = ["control", "cupti-floor", "cupti-floor+api", "kprof", "kprof-nohook", "proton"]
TARGETS = {"train": 1.02, "step": 1.02, "tiny": 1.3}
UNITS = {"train": "ms/step", "step": "ms/step", "tiny": "us/add"}


# -- workloads: (run n units) -> seconds, after a warm-up ------------------------------------------
def warm_trainer():
    """examples/train.py's small model after KPROF_AB_TRAIN_WARMUP (120) steps: long enough for the
    GPU to reach its loaded clocks and temperature before the first block (without it the second
    block of a process was 6% slower in the median, 2026-11-22)."""
    import torch
    from examples.train import SIZES, Trainer
    tr = Trainer(SIZES["small"], "cuda")
    for _ in range(int(os.environ.get("KPROF_AB_TRAIN_WARMUP", "120"))):
        tr.step()
    torch.cuda.synchronize()
    return tr


def workload_train():
    import torch
    tr = warm_trainer()

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
    """CUPTI activity records only: kernel records (with ``copies``, also memcpy/memset), and
    optionally driver API records -- ``api="launch"`` on kprof's launch and copy ids, ``"copies"`` on
    its copy and memset ids only -- and ``latency``: the kernel records' queued timestamps."""

    def __init__(self, api=None, copies: bool = True, latency: bool = False, sub: bool = False,
                 copy_callbacks: bool = False):
        from cupti import cupti
        self.cupti, self.api, self.latency, self.count = cupti, api, latency, 0
        self.sub, self.copy_callbacks, self.subscriber = sub or copy_callbacks, copy_callbacks, None
        self.by_kind = None  # a dict to count records per kind (costs a Python loop per buffer)
        K = cupti.ActivityKind
        self.kinds = (K.CONCURRENT_KERNEL, K.MEMCPY, K.MEMSET) if copies else (K.CONCURRENT_KERNEL,)
        self.cbids = []
        if api:
            from profiler.backends.cupti import CuptiBackend
            b = CuptiBackend(cupti)
            self.cbids = b._launch_cbids() if api == "launch" else b._copy_cbids()

    def _completed(self, activities):
        self.count += len(activities)
        for a in activities if self.by_kind is not None else ():
            k = str(getattr(a, "kind", "?")).rsplit(".", 1)[-1]
            self.by_kind[k] = self.by_kind.get(k, 0) + 1

    def start(self):
        c = self.cupti
        if self.sub:   # a subscriber with kprof's graph-node callbacks (and, with copycb, copy callbacks)
            self.subscriber = c.subscribe(lambda *a: None, None)
            for cbid in (c.CallbackIdResource.GRAPHNODE_CREATED, c.CallbackIdResource.GRAPHNODE_CLONED):
                c.enable_callback(1, self.subscriber, c.CallbackDomain.RESOURCE, cbid)
            if self.copy_callbacks:
                from profiler.backends.cupti import CuptiBackend
                for cbid in CuptiBackend(c)._copy_cbids():
                    c.enable_callback(1, self.subscriber, c.CallbackDomain.DRIVER_API, cbid)
        c.activity_register_callbacks(lambda: (8 << 20, 0), self._completed)
        if self.latency:
            c.activity_enable_latency_timestamps(1)
        for k in self.kinds:
            c.activity_enable(k)
        for cbid in self.cbids:     # as kprof does: API records for some ids only
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
        if self.subscriber is not None:
            c.unsubscribe(self.subscriber)


def cupti_variant(name: str) -> "CuptiFloor":
    """``cupti-kernel`` / ``cupti-floor`` with ``+api``, ``+copyapi``, ``+latency``, ``+sub``,
    ``+copycb`` in any order."""
    base, *opts = name.split("+")
    unknown = set(opts) - {"api", "copyapi", "latency", "sub", "copycb"}
    if unknown:
        raise ValueError(f"{name}: unknown option(s) {sorted(unknown)}")
    api = "launch" if "api" in opts else "copies" if "copyapi" in opts else None
    return CuptiFloor(api=api, copies=base == "cupti-floor", latency="latency" in opts, sub="sub" in opts,
                      copy_callbacks="copycb" in opts)


def make_variant(name: str, tmp: str):
    if name == "control":
        return None
    if name.split("+")[0] in ("cupti-floor", "cupti-kernel"):
        return cupti_variant(name)
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


def child(workload: str, variant: str, block: int, out: str) -> None:
    """One process: ``block`` units with nothing running, then the same with ``variant`` started."""
    tmp = tempfile.mkdtemp(prefix="kprof_ab_")
    run = WORKLOADS[workload]()
    run(1)
    before = run(block)
    o = make_variant(variant, tmp)
    if o is not None:
        o.start()
    run(1)   # the first unit after a start pays one-time setup (CUPTI's, kernelc's hook caches)
    after = run(block)
    if o is not None:
        o.stop()
    json.dump({"before": before, "after": after}, open(out, "w"))


def rows_of(wl: str, variants, ratios: dict, raw: dict) -> list:
    """Result rows of workload ``wl``: median ratio per variant, divided by control's."""
    drift = statistics.median(ratios["control"]) if ratios.get("control") else 1.0
    rows = []
    for v in variants:
        if not ratios[v]:
            continue
        med = statistics.median(ratios[v])
        rows.append({"workload": wl, "variant": v, "ratio": round(med / drift, 4), "raw_median": round(med, 4),
                     "mean": round(statistics.fmean(ratios[v]), 4),
                     "stdev": round(statistics.stdev(ratios[v]), 4) if len(ratios[v]) > 1 else None,
                     "ratios": [round(x, 4) for x in ratios[v]],
                     "unprofiled": round(statistics.median(d["before"] for d in raw[wl][v]), 4), "unit": UNITS[wl],
                     "target": TARGETS[wl] if v == "kprof" else None})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="train,step,tiny")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--name", default="profiler_overhead_ab", help="results file bench/results/NAME.json")
    ap.add_argument("--block", default="train=100,step=1000,tiny=300",
                    help="units per block, per workload (steps; x100 adds for tiny): long enough that CUPTI "
                         "completes activity buffers inside the blocks, so their processing is measured too")
    ap.add_argument("--child", nargs=4, metavar=("WORKLOAD", "VARIANT", "BLOCK", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        wl, v, block, out = args.child
        child(wl, v, int(block), out)
        return 0
    from bench.common import write_results
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    blocks = dict(kv.split("=") for kv in args.block.split(",") if "=" in kv)
    variants = [v for v in args.variants.split(",") if v]
    rows, raw = [], {}
    for wl in [w for w in args.workload.split(",") if w]:
        ratios = {v: [] for v in variants}
        for rnd in range(args.rounds):
            for v in variants[rnd % len(variants):] + variants[:rnd % len(variants)]:
                out = tempfile.mktemp(suffix=".json")
                cmd = [sys.executable, os.path.abspath(__file__), "--child", wl, v, blocks.get(wl, "50"), out]
                r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
                if r.returncode != 0 or not os.path.exists(out):
                    print(f"{wl} {v}: failed\n{(r.stderr or r.stdout)[-1500:]}", flush=True)
                    continue
                d = json.load(open(out))
                raw.setdefault(wl, {}).setdefault(v, []).append(d)
                ratios[v].append(d["after"] / d["before"])
                print(f"{wl:6s} {v:16s} round {rnd}: {d['before']:.4f} -> {d['after']:.4f} {UNITS[wl]} "
                      f"({d['after'] / d['before']:.4f})", flush=True)
            others = [r for r in rows if r["workload"] != wl]
            write_results(args.name, rows_of(wl, variants, ratios, raw) + others,
                          {"raw": raw, "rounds": args.rounds, "blocks": blocks})
        rows = [r for r in rows if r["workload"] != wl] + rows_of(wl, variants, ratios, raw)
    return 0


if __name__ == "__main__":
    sys.exit(main())
