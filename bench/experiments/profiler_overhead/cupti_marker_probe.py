"""Can scope changes be placed among launches by correlation id, with one driver-API record per scope
change instead of one per launch?

kprof places each kernel in its thread's scope through the driver-API activity record of its launch
(thread id, host start time): one record per launch, copy and memset, written by CUPTI in C on the
launching thread, which is most of what kprof costs over CUPTI's floor on a host-bound training step
(docs/performance.md, issue 23).  The alternative probed here: enable the API record of one cheap
driver call only (a *marker*) and make that call at each scope change.  If CUPTI's correlation ids
are one process-wide sequence in call order, a kernel belongs to the scope of the last marker whose id
is below its own; native threads (torch's autograd thread) then take the main thread's scope as
kprof's timelines give them today.

For each candidate marker call (``cuDriverGetVersion``, ``cuCtxGetDevice``, ``cuDeviceGetCount``; called
through ctypes on libcuda) it checks, with kernel/memcpy/memset records enabled and the marker's API
record only:

* that each call gives exactly one API record, and how many records of that id torch itself made
  (``spurious``: calls not ours, e.g. from the runtime);
* sequences ``marker, op, op, marker, ...`` of torch launches (adds, a memset, a device copy) and a
  ``loss.backward()`` whose kernels launch on torch's autograd thread: whether every kernel's
  correlation id lies between the ids of the markers around its op (``misplaced`` must be 0);
* CUDA graph replays (kernel ids are the replay's launch id);
* what a marker call costs (ns per call with its record on, and with nothing on).

    python bench/experiments/profiler_overhead/cupti_marker_probe.py [-n 500]

Prints one JSON line and writes bench/experiments/profiler_overhead/results/cupti_marker_probe.json.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(HERE))))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=500)
    ap.add_argument("--calls", default="cuDriverGetVersion,cuCtxGetDevice,cuDeviceGetCount",
                    help="candidates in the order probed (the first one also pays CUPTI's first API records)")
    ap.add_argument("--name", default="cupti_marker_probe")
    args = ap.parse_args(argv)
    import torch
    from cupti import cupti
    lib = ctypes.CDLL("libcuda.so.1")
    iv = ctypes.c_int()
    calls = {
        "cuDriverGetVersion": lambda: lib.cuDriverGetVersion(ctypes.byref(iv)),
        "cuCtxGetDevice": lambda: lib.cuCtxGetDevice(ctypes.byref(iv)),
        "cuDeviceGetCount": lambda: lib.cuDeviceGetCount(ctypes.byref(iv)),
    }
    calls = {n: calls[n] for n in args.calls.split(",")}
    K = cupti.ActivityKind
    KERNEL, MEMCPY, MEMSET, DRIVER = int(K.CONCURRENT_KERNEL), int(K.MEMCPY), int(K.MEMSET), int(K.DRIVER)
    recs = []

    def completed(activities):
        for a in activities:
            k = int(a.kind)
            if k == DRIVER:
                recs.append(("api", int(a.correlation_id), int(getattr(a, "cbid", -1)), int(a.thread_id)))
            elif k in (KERNEL, MEMCPY, MEMSET):
                recs.append(("dev", int(a.correlation_id), k, int(getattr(a, "graph_node_id", 0) or 0)))

    # a workload with launches on the main thread and on the autograd thread
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.GELU(), torch.nn.Linear(256, 256)).cuda()
    x = torch.randn(64, 256, device="cuda")
    a = torch.ones(1024, device="cuda")
    b = torch.ones(1024, device="cuda")
    c = torch.empty(1024, device="cuda")
    ops = {
        "add": lambda: torch.add(a, b, out=c),
        "memset": lambda: c.zero_(),
        "copy": lambda: c.copy_(a),
        "backward": lambda: model(x).square().mean().backward(),
    }
    for f in ops.values():
        f()
    torch.cuda.synchronize()

    cupti.activity_register_callbacks(lambda: (8 << 20, 0), completed)
    for k in (K.CONCURRENT_KERNEL, K.MEMCPY, K.MEMSET):
        cupti.activity_enable(k)
    D = cupti.DriverApiTraceCbid
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "candidates": {}}
    # warm-up: CUPTI's first API records of the process cost once, not per call; paid here, not by the first
    # candidate (the run of 2026-11-27 13:30 had no warm-up)
    first = next(iter(calls))
    cupti.activity_enable_driver_api(int(getattr(D, first)), 1)
    for _ in range(200):
        calls[first]()
    cupti.activity_enable_driver_api(int(getattr(D, first)), 0)
    torch.cuda.synchronize()
    cupti.activity_flush_all(1)
    recs.clear()
    for name, call in calls.items():
        cbid = int(getattr(D, name))
        # cost with nothing of this id enabled
        t0 = time.perf_counter_ns()
        for _ in range(args.n):
            call()
        off_ns = (time.perf_counter_ns() - t0) / args.n
        cupti.activity_enable_driver_api(cbid, 1)
        t0 = time.perf_counter_ns()
        for _ in range(args.n):
            call()
        on_ns = (time.perf_counter_ns() - t0) / args.n
        torch.cuda.synchronize()
        cupti.activity_flush_all(1)
        own = sum(1 for r in recs if r[0] == "api" and r[2] == cbid)
        recs.clear()
        # sequences: marker, op (1-3 times), marker, ...; the op kind rotates
        plan = []
        names = list(ops)
        for i in range(args.n):
            op = names[i % len(names)]
            plan.append((op, 1 + i % 3))
            call()
            for _ in range(1 + i % 3):
                ops[op]()
        call()
        torch.cuda.synchronize()
        cupti.activity_flush_all(1)
        seq = list(recs)
        recs.clear()
        # graph replays between markers
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for _ in range(4):
                    torch.add(a, b, out=c)
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        cupti.activity_flush_all(1)
        recs.clear()
        for i in range(20):
            call()
            g.replay()
        call()
        torch.cuda.synchronize()
        cupti.activity_flush_all(1)
        graph = list(recs)
        recs.clear()
        cupti.activity_enable_driver_api(cbid, 0)
        r = _segments(seq, cbid, plan)
        r.update(own_records_per_call=round(own / args.n, 3), ns_per_call_record_on=round(on_ns),
                 ns_per_call_nothing_on=round(off_ns))
        gr = _segments(graph, cbid, [("replay", 1)] * 20)
        r["graph"] = {"markers": gr["markers"], "device_records": gr["device_records"],
                      "outside_markers": gr["outside_markers"], "per_segment": gr["per_op"]}
        out["candidates"][name] = r
    print(json.dumps(out))
    from bench.common import write_results
    write_results(args.name, [out], results_dir=os.path.join(HERE, "results"))
    return 0


def _segments(recs, cbid, plan):
    """Device records per segment between consecutive marker records (by correlation id), against the
    plan ``[(op, repeats)]``: a segment's device records must come from its own op."""
    import bisect
    from collections import Counter, defaultdict
    marks = sorted(r[1] for r in recs if r[0] == "api" and r[2] == cbid)
    threads = Counter(r[3] for r in recs if r[0] == "api" and r[2] == cbid)
    dev = [r for r in recs if r[0] == "dev"]
    per_seg = defaultdict(list)
    outside = 0
    for r in dev:
        i = bisect.bisect_left(marks, r[1]) - 1
        if i < 0 or i >= len(marks) - 1:
            outside += 1
            continue
        per_seg[i].append(r[2])
    # per op kind: the distinct (records per repeat) seen; one value per op kind means every segment of
    # that op got the same records, i.e. none leaked into a neighbour
    per_op = defaultdict(Counter)
    for i, (op, k) in enumerate(plan):
        got = per_seg.get(i, [])
        per_op[op][f"{len(got) / k:g}"] += 1
    return {"markers": len(marks), "expected_markers": len(plan) + 1, "marker_threads": len(threads),
            "device_records": len(dev), "outside_markers": outside,
            "per_op": {op: dict(c) for op, c in per_op.items()}}


if __name__ == "__main__":
    sys.exit(main())
