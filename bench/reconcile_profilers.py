"""kprof vs Proton vs torch.profiler on the same training steps: per-kernel counts and times
(``reconcile``), and each profiler's overhead against an unprofiled control and the CUPTI floor
(``overhead``).

Workloads (each run in its own process; the profiler starts after the warm-up steps):

* ``encoder``: a 4-layer ``torch.nn.TransformerEncoder`` (d_model 512, 8 heads, batch 16 x 256 tokens,
  bf16 autocast, fused AdamW) plus two kernelc kernels per step (layer norm and softmax of
  ``examples/kernels``), scopes around forward/backward/optimizer: a step kprof's benches never tuned on;
* ``train``: ``examples/train.py``'s ``Trainer`` ("small");
* ``tiny``: 1-element ``torch.add`` launches (launch-bound).

``reconcile`` prints and writes, per kernel name (memcpy by direction, memset), count and total time in
each profiler, and the difference of kprof's to torch.profiler's; rows whose difference is above 1% are
flagged.  Each profiler profiles the same number of steps after the same warm-up, so counts must match
exactly; times come from different processes, so each profiler runs ``--rounds`` times and the spread
of a kernel's time between one profiler's own rounds is reported next to the cross-profiler difference.

``reconcile`` also runs ``cupti``: CUPTI's own records decoded by cupti-python (no kprof, no Kineto),
the reference the others are compared with.

``overhead`` runs ``none``, ``floor`` (CUPTI kernel/memcpy/memset activity records only, see
bench/cupti_floor.py), ``kprof`` and ``proton`` in separate processes, rounds interleaved with the order
rotated; each process alternates unprofiled and profiled blocks (the profiler started and finalized
around each of its blocks, outside the timing) and the median of the block ratios is its overhead;
the control (``none``) shows the measurement's resolution.

    python bench/reconcile_profilers.py reconcile [--workloads encoder,train] [--steps 60] [--rounds 2]
    python bench/reconcile_profilers.py overhead [--workloads encoder,train,tiny] [--rounds 3] [--pairs 8]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

WARMUP = {"encoder": 15, "train": 10, "tiny": 500}
STEPS = {"encoder": 60, "train": 40, "tiny": 5000}
OVERHEAD_STEPS = {"encoder": 50, "train": 25, "tiny": 5000}


# -- workloads ---------------------------------------------------------------------------------
class Encoder:
    """The issue-23 step: TransformerEncoder + two kernelc kernels, bf16 autocast, fused AdamW."""

    def __init__(self, device, scope):
        import torch
        from examples.kernels import layernorm as k_ln
        from examples.kernels import softmax as k_sm
        torch.manual_seed(0)
        self.torch, self.k_ln, self.k_sm, self.scope = torch, k_ln, k_sm, scope
        layer = torch.nn.TransformerEncoderLayer(512, 8, dim_feedforward=2048, batch_first=True, device=device)
        self.model = torch.nn.TransformerEncoder(layer, 4, enable_nested_tensor=False).to(device)
        fused = {"fused": True} if device == "cuda" else {}
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, **fused)
        b, t = (16, 256) if device == "cuda" else (2, 16)
        self.x = torch.randn(b, t, 512, device=device)
        self.w = torch.ones(512, device=device)
        self.bias = torch.zeros(512, device=device)
        self.device = device

    def step(self):
        torch = self.torch
        with self.scope("forward"):
            with torch.autocast(self.device, dtype=torch.bfloat16):
                h = self.model(self.x)
            # the two kernelc kernels of the step (fp32 in, no autograd: they feed the loss only)
            y, _, _ = self.k_ln.layer_norm(h.float().reshape(-1, 512).contiguous(), self.w, self.bias, 1e-5)
            p = self.k_sm.softmax(y)
            loss = h.float().pow(2).mean() + p.mean()
        with self.scope("backward"):
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
        with self.scope("optimizer"):
            self.opt.step()


class Train:
    def __init__(self, device, scope):
        from examples.train import SIZES, Trainer
        self.trainer = Trainer(SIZES["small" if device == "cuda" else "tiny"], device)

    def step(self):
        self.trainer.step()


class Tiny:
    def __init__(self, device, scope):
        import torch
        self.torch = torch
        self.a = torch.zeros(1, device=device)
        self.b = torch.ones(1, device=device)
        self.c = torch.empty_like(self.a)

    def step(self):
        self.torch.add(self.a, self.b, out=self.c)


WORKLOADS = {"encoder": Encoder, "train": Train, "tiny": Tiny}


# -- profilers ---------------------------------------------------------------------------------
def _scope_fn(prof):
    if prof == "kprof":
        import profiler
        return profiler.scope
    if prof == "proton":
        import triton.profiler as proton
        return proton.scope
    if prof == "torch":
        from torch.profiler import record_function
        return record_function
    return lambda name: contextlib.nullcontext()


def _start(prof, out):
    """Start ``prof`` writing to ``out`` (no suffix); returns a stop function."""
    if prof == "kprof":
        import profiler
        profiler.start(out)
        return lambda: profiler.finalize()
    if prof == "proton":
        import triton.profiler as proton
        proton.start(out, hook="triton")
        return lambda: proton.finalize()
    if prof == "torch":
        from torch.profiler import ProfilerActivity, profile
        p = profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU])
        p.__enter__()

        def stop():
            p.__exit__(None, None, None)
            p.export_chrome_trace(out + ".json")
        return stop
    if prof == "floor":
        from cupti import cupti
        kinds = (cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.MEMCPY, cupti.ActivityKind.MEMSET)
        if not _FLOOR_REGISTERED:
            cupti.activity_register_callbacks(lambda: (8 << 20, 0), lambda activities: None)
            _FLOOR_REGISTERED.append(True)
        for kind in kinds:
            cupti.activity_enable(kind)

        def stop():
            cupti.activity_flush_all(1)
            for kind in kinds:
                cupti.activity_disable(kind)
        return stop
    if prof == "cupti":
        return _raw_cupti(out + ".cupti.json")
    return lambda: None


_FLOOR_REGISTERED: list = []


def _raw_cupti(path):
    """The reference for ``reconcile``: CUPTI's kernel/memcpy/memset records decoded by cupti-python's
    own attributes (no kprof code, no Kineto), summed per key on CUPTI's thread."""
    from cupti import cupti
    sums = defaultdict(lambda: [0, 0])

    def requested():
        return 8 << 20, 0

    def completed(activities):
        for a in activities:
            kind = int(a.kind)
            if kind == int(cupti.ActivityKind.MEMSET):
                k = "[memset]"
            elif kind == int(cupti.ActivityKind.MEMCPY):
                k = "[memcpy " + cupti.ActivityMemcpyKind(int(a.copy_kind)).name + "]"
            else:
                k = "mangled:" + str(a.name)
            sums[k][0] += int(a.end) - int(a.start)
            sums[k][1] += 1

    cupti.activity_register_callbacks(requested, completed)
    for kind in (cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.MEMCPY, cupti.ActivityKind.MEMSET):
        cupti.activity_enable(kind)

    def stop():
        cupti.activity_flush_all(1)
        for kind in (cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.MEMCPY, cupti.ActivityKind.MEMSET):
            cupti.activity_disable(kind)
        with open(path, "w") as f:
            json.dump(dict(sums), f)
    return stop


def child(workload: str, prof: str, out: str, steps: int, warmup: int, device: str) -> dict:
    """Warm up unprofiled, start ``prof``, run ``steps`` steps, stop it (``reconcile``)."""
    import torch
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    w = WORKLOADS[workload](device, _scope_fn(prof))
    for _ in range(warmup):
        w.step()
    sync()
    stop = _start(prof, out)
    t0 = time.perf_counter()
    for _ in range(steps):
        w.step()
    sync()
    dt = time.perf_counter() - t0
    stop()
    return {"step_ms": dt * 1e3 / steps, "steps": steps}


def child_alternating(workload: str, prof: str, out: str, steps: int, warmup: int, device: str,
                      pairs: int) -> dict:
    """``pairs`` times: an unprofiled block and a profiled one (the profiler started before and stopped
    after its block, outside the timing), in alternating order (AB, BA, ...) so that a drift of the
    step time cancels; returns the per-pair ratios."""
    import gc
    import torch
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    w = WORKLOADS[workload](device, _scope_fn(prof))

    def block():
        sync()
        t0 = time.perf_counter()
        for _ in range(steps):
            w.step()
        sync()
        return (time.perf_counter() - t0) * 1e3 / steps

    def profiled(i):
        stop = _start(prof, f"{out}_{i}")
        t = block()
        stop()
        gc.collect()
        return t

    for _ in range(warmup):
        w.step()
    profiled(-1)  # the profiler's first start (imports, CUPTI init) is not part of any pair
    block()
    ratios = []
    for i in range(pairs):
        if i % 2 == 0:
            a = block()
            b = profiled(i)
        else:
            b = profiled(i)
            a = block()
        ratios.append(b / a)
    return {"ratios": ratios}


# -- reading the three profiles ----------------------------------------------------------------
_COPY = re.compile(r"(HtoD|DtoH|DtoD|HtoH|PtoP|Peer)", re.I)


def _demangle(name: str) -> str:
    try:
        from cubintools.demangle import demangle
    except ImportError:
        from profiler.backends.demangle import demangle
    return demangle(name) if name.startswith("_Z") else name


def _key(name: str, kind: str) -> str:
    if kind == "memcpy":
        m = _COPY.search(name.replace("Host", "H").replace("Device", "D").replace(" to ", "to"))
        return f"[memcpy {m.group(1).upper() if m else '?'}]"
    if kind == "memset":
        return "[memset]"
    return " ".join(_demangle(name).split())


def _kind(name: str) -> str:
    low = name.lower()
    if low.startswith("memcpy"):
        return "memcpy"
    if low.startswith("memset"):
        return "memset"
    return "kernel"


def hatchet_kernels(path: str) -> dict:
    """kprof's or Proton's profile: {key: [ns, count]} over GPU frames."""
    from profiler.format import read_profile
    root, _ = read_profile(path)
    out = defaultdict(lambda: [0, 0])
    for node, _ in root.walk():
        m = node.metrics
        if "time (ns)" not in m or str(m.get("device_type", "")).upper() not in ("CUDA", "1"):
            continue
        e = node.extra or {}
        name = e.get("kernel") if e.get("kind") == "kernel" and e.get("kernel") else node.name
        k = _key(name, _kind(node.name))
        out[k][0] += m["time (ns)"]
        out[k][1] += m.get("count", 0)
    return dict(out)


def torch_kernels(path: str) -> dict:
    data = json.load(open(path))
    events = data["traceEvents"] if isinstance(data, dict) else data
    out = defaultdict(lambda: [0, 0])
    for e in events:
        if e.get("ph") != "X":
            continue
        cat = e.get("cat")
        if cat == "kernel":
            k = _key(e["name"], "kernel")
        elif cat == "gpu_memcpy":
            k = _key("memcpy " + e["name"], "memcpy")
        elif cat == "gpu_memset":
            k = "[memset]"
        else:
            continue
        out[k][0] += int(round(float(e.get("dur", 0)) * 1000))
        out[k][1] += 1
    return dict(out)


def cupti_kernels(path: str) -> dict:
    out = defaultdict(lambda: [0, 0])
    for k, (ns, n) in json.load(open(path)).items():
        if k.startswith("mangled:"):
            k = _key(k[len("mangled:"):], "kernel")
        elif k.startswith("[memcpy"):
            k = _key(k[1:-1].replace("_", " "), "memcpy")
        out[k][0] += ns
        out[k][1] += n
    return dict(out)


def _run_child(workload, prof, out, steps, warmup, device, pairs=0):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("KERNELC_INTERPRET", None)
    cmd = [sys.executable, os.path.abspath(__file__), "_child", workload, prof, out, str(steps), str(warmup), device, str(pairs)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=ROOT)
    if p.returncode != 0:
        raise RuntimeError(f"{workload}/{prof} failed (rc {p.returncode}):\n{p.stdout[-1500:]}\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def reconcile(args) -> int:
    from bench.common import write_results
    tmp = tempfile.mkdtemp(prefix="kprof_reconcile_")
    all_rows, summaries = [], {}
    profs = [p for p in args.profilers.split(",") if p]
    for wl in args.workloads.split(","):
        steps = args.steps or STEPS[wl]
        warm = WARMUP[wl]
        data = {p: [] for p in profs}
        for rnd in range(args.rounds):
            order = profs[rnd % len(profs):] + profs[:rnd % len(profs)]
            for p in order:
                out = os.path.join(tmp, f"{wl}_{p}_{rnd}")
                _run_child(wl, p, out, steps, warm, args.device)
                data[p].append(torch_kernels(out + ".json") if p == "torch" else
                               cupti_kernels(out + ".cupti.json") if p == "cupti" else hatchet_kernels(out + ".hatchet"))
        # per key: mean time over rounds, count (must agree across rounds), own-round spread
        agg = {}
        for p, runs in data.items():
            keys = set().union(*runs)
            agg[p] = {k: (statistics.mean(r.get(k, [0, 0])[0] for r in runs),
                          sorted({r.get(k, [0, 0])[1] for r in runs}),
                          (max(r.get(k, [0, 0])[0] for r in runs) - min(r.get(k, [0, 0])[0] for r in runs))
                          / max(1, statistics.mean(r.get(k, [0, 0])[0] for r in runs))) for k in keys}
        ref = "cupti" if "cupti" in agg else "torch" if "torch" in agg else profs[0]
        keys = sorted(set().union(*(agg[p] for p in profs)), key=lambda k: -agg[ref].get(k, (0,))[0])
        total = {p: sum(v[0] for v in agg[p].values()) for p in profs}
        for k in keys:
            row = {"workload": wl, "kernel": k if len(k) <= 80 else k[:55] + "..." + k[-22:]}
            for p in profs:
                ns, cnt, spread = agg[p].get(k, (0, [0], 0))
                row[f"{p}_count"] = cnt[0] if len(cnt) == 1 else cnt
                row[f"{p}_ms"] = round(ns / 1e6, 4)
                row[f"{p}_spread_%"] = round(100 * spread, 2)
            r_ns = agg[ref].get(k, (0,))[0]
            row["share_%"] = round(100 * r_ns / max(1, total[ref]), 2)
            for p in profs:
                if p != ref:
                    p_ns = agg[p].get(k, (0,))[0]
                    row[f"{p}_vs_{ref}_%"] = round(100 * (p_ns - r_ns) / r_ns, 2) if r_ns else None
            all_rows.append(row)
        summaries[wl] = {"steps": steps, "warmup": warm, "rounds": args.rounds,
                         "total_ms": {p: round(total[p] / 1e6, 3) for p in profs},
                         "total_per_step_ms": {p: round(total[p] / 1e6 / steps, 4) for p in profs}}
        print(json.dumps({wl: summaries[wl]}, indent=1))
    write_results(args.name or "reconcile_profilers", all_rows, {"summary": summaries})
    return 0


def overhead(args) -> int:
    """Each process alternates unprofiled and profiled blocks (:func:`child_alternating`); the median
    of its ratios is its overhead.  ``none`` (no profiler started) is the control: the spread of its
    ratio over the processes is the resolution of the measurement."""
    from bench.common import write_results
    tmp = tempfile.mkdtemp(prefix="kprof_overhead_")
    profs = [p for p in args.profilers.split(",") if p]
    rows, summary = [], {}
    for wl in args.workloads.split(","):
        steps = args.steps or OVERHEAD_STEPS[wl]
        per_proc = defaultdict(list)
        for rnd in range(args.rounds):
            order = profs[rnd % len(profs):] + profs[:rnd % len(profs)]
            for p in order:
                r = _run_child(wl, p, os.path.join(tmp, f"{wl}_{p}_{rnd}"), steps, WARMUP[wl], args.device,
                               pairs=args.pairs)
                med = statistics.median(r["ratios"])
                per_proc[p].append(med)
                rows.append({"workload": wl, "round": rnd, "profiler": p, "median_ratio": round(med, 4),
                             "ratios": [round(x, 4) for x in r["ratios"]]})
        ctrl = per_proc["none"]
        s = {"steps_per_block": steps, "rounds": args.rounds, "pairs_per_process": args.pairs,
             "control_spread_%": round(100 * (max(ctrl) - min(ctrl)), 2) if ctrl else None,
             "overhead_x_median": {p: round(statistics.median(v), 4) for p, v in per_proc.items()},
             "overhead_x_per_process": {p: [round(x, 4) for x in v] for p, v in per_proc.items()}}
        if "floor" in per_proc and "kprof" in per_proc:
            s["kprof_over_floor_%"] = round(100 * (statistics.median(per_proc["kprof"]) /
                                                   statistics.median(per_proc["floor"]) - 1), 2)
        summary[wl] = s
        print(json.dumps({wl: s}), flush=True)
    write_results(args.name or "profiler_overhead_rotated", rows, {"summary": summary})
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_child":
        wl, prof, out, steps, warmup, device, pairs = argv[1:8]
        if int(pairs):
            print(json.dumps(child_alternating(wl, prof, out, int(steps), int(warmup), device, int(pairs))))
        else:
            print(json.dumps(child(wl, prof, out, int(steps), int(warmup), device)))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=["reconcile", "overhead"])
    ap.add_argument("--workloads", default=None)
    ap.add_argument("--profilers", default=None)
    ap.add_argument("--steps", type=int, default=None, help="profiled steps (default per workload)")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--device", default=None)
    ap.add_argument("--pairs", type=int, default=8, help="overhead: unprofiled/profiled block pairs per process")
    ap.add_argument("--name", default=None, help="results file name (bench/results/NAME.json)")
    args = ap.parse_args(argv)
    import torch
    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.mode == "reconcile":
        args.workloads = args.workloads or "encoder,train"
        args.profilers = args.profilers or "cupti,torch,kprof,proton"
        args.rounds = args.rounds or 2
        return reconcile(args)
    args.workloads = args.workloads or "encoder,train,tiny"
    args.profilers = args.profilers or "none,floor,kprof,proton"
    args.rounds = args.rounds or 3
    return overhead(args)


if __name__ == "__main__":
    sys.exit(main())
