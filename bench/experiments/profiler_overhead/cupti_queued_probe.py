"""Can a kernel record's ``queued`` timestamp place its launch, instead of a driver API record?

kprof places each launch in the launching thread's scope timeline at the launch's host time.  With
driver API records that time is the record's start; this probe checks the alternative, CUPTI's
latency timestamps (``cuptiActivityEnableLatencyTimestamps``): for each of N single-kernel torch ops
it reads CUPTI's clock just before and just after the call, and checks that the kernel record's
``queued`` lies in between.  Also: kernels replayed from a CUDA graph, and whether enabling the
timestamps after CUDA is initialised (how ``profiler.start()`` meets a running program) works.

    python bench/experiments/profiler_overhead/cupti_queued_probe.py [--when after-init|before-init] [-n 2000]

Prints one JSON line (and writes bench/results/cupti_queued_probe_<when>.json).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(HERE))))  # bench/experiments/<topic>/


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--when", choices=("after-init", "before-init"), default="after-init")
    ap.add_argument("-n", type=int, default=2000)
    args = ap.parse_args(argv)
    from cupti import cupti
    records = []

    def completed(activities):
        for a in activities:
            records.append((int(a.correlation_id), int(getattr(a, "queued", 0)), int(getattr(a, "submitted", 0)),
                            int(a.start), int(getattr(a, "graph_node_id", 0) or 0)))

    def enable():
        cupti.activity_register_callbacks(lambda: (8 << 20, 0), completed)
        cupti.activity_enable_latency_timestamps(1)
        cupti.activity_enable(cupti.ActivityKind.CONCURRENT_KERNEL)

    if args.when == "before-init":
        enable()
    import torch
    a = torch.ones(256, device="cuda")
    b = torch.ones(256, device="cuda")
    c = torch.empty(256, device="cuda")
    for _ in range(100):
        torch.add(a, b, out=c)
    torch.cuda.synchronize()
    if args.when == "after-init":
        enable()
    torch.add(a, b, out=c)      # the first launch after enabling (setup is not measured)
    torch.cuda.synchronize()
    cupti.activity_flush_all(1)
    records.clear()
    clock = cupti.get_timestamp
    windows = []
    for _ in range(args.n):
        t0 = clock()
        torch.add(a, b, out=c)
        windows.append((t0, clock()))
    torch.cuda.synchronize()
    cupti.activity_flush_all(1)
    eager = sorted(r for r in records if not r[4])
    records.clear()
    # a CUDA graph of 8 adds, replayed 50 times
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(8):
                torch.add(a, b, out=c)
    torch.cuda.synchronize()
    for _ in range(50):
        g.replay()
    torch.cuda.synchronize()
    cupti.activity_flush_all(1)
    graph = [r for r in records if r[4]]
    inside = sum(1 for (t0, t1), r in zip(windows, eager) if t0 <= r[1] <= t1)
    lead = sorted(r[1] - t0 for (t0, _t1), r in zip(windows, eager) if r[1])
    out = {
        "when": args.when, "ops": args.n, "kernel_records": len(eager),
        "queued_nonzero": sum(1 for r in eager if r[1]), "queued_inside_call": inside,
        "queued_minus_call_start_ns": {"min": lead[0] if lead else None, "median": lead[len(lead) // 2] if lead else None,
                                       "max": lead[-1] if lead else None},
        "submitted_nonzero": sum(1 for r in eager if r[2]),
        "graph_kernel_records": len(graph), "graph_queued_nonzero": sum(1 for r in graph if r[1]),
        "device": torch.cuda.get_device_name(), "torch": torch.__version__,
    }
    print(json.dumps(out))
    from bench.common import write_results
    write_results(f"cupti_queued_probe_{args.when}", [out], results_dir=os.path.join(HERE, 'results'))
    return 0 if inside == args.n else 1


if __name__ == "__main__":
    sys.exit(main())
