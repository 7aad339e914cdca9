"""``python -m analyzer._runner --kernel NAME --out times.json -- script.py args...``

Runs a script (as ``__main__``) and writes the GPU time and launch count of kernel NAME to a JSON
file: ``{"times": {NAME: {"time_ns", "count"}}, "method": "torch.profiler"|"cuda-events"|"none",
"returncode": N}``.  Used by ``kprof-analyze --verify`` when the kprof command is not available.

Timing: ``torch.profiler`` with CUDA activity (CUPTI kernel records, which include launches made
through the driver API, as kernelc's are); if it records no kernel of that name (or cannot start),
CUDA events recorded on the launch stream around each launch of the kernel (kernelc launch hooks;
this includes launch gaps when the GPU idles, so it overestimates small kernels).
"""
from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
import traceback


def _run_script(argv):
    sys.argv = list(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
    try:
        runpy.run_path(argv[0], run_name="__main__")
        return 0
    except SystemExit as e:
        code = e.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except BaseException:
        traceback.print_exc()
        return 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m analyzer._runner")
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--method", choices=("auto", "torch", "events"), default="auto")
    ap.add_argument("script", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    script = [x for x in a.script if x != "--"] if a.script[:1] == ["--"] else a.script
    if script and script[0] == "--":
        script = script[1:]
    if not script:
        ap.error("no script given")
    times = {}
    method = "none"
    rc = 1
    import torch

    events = []

    def on_enter(rec):
        if rec.name == a.kernel and rec.backend == "cuda":
            s = torch.cuda.ExternalStream(rec.stream) if rec.stream else torch.cuda.current_stream()
            e0 = torch.cuda.Event(enable_timing=True)
            e0.record(s)
            events.append([e0, None, s])

    def on_exit(rec):
        if rec.name == a.kernel and rec.backend == "cuda" and events and events[-1][1] is None:
            e1 = torch.cuda.Event(enable_timing=True)
            e1.record(events[-1][2])
            events[-1][1] = e1

    from kernelc.runtime import hooks
    prof = None
    if a.method in ("auto", "torch"):
        try:
            from torch.profiler import ProfilerActivity, profile
            prof = profile(activities=[ProfilerActivity.CUDA])
            prof.__enter__()
        except Exception:
            prof = None
    handle = hooks.register(enter=on_enter, exit=on_exit) if a.method in ("auto", "events") else None
    try:
        rc = _run_script(script)
    finally:
        try:
            torch.cuda.synchronize()
        except Exception:
            pass
        if handle is not None:
            hooks.unregister(handle)
        if prof is not None:
            try:
                prof.__exit__(None, None, None)
                total, count = 0.0, 0
                evs = list(prof.events())
                for ev in evs:   # device-side kernel records (microseconds)
                    if ev.name == a.kernel and str(getattr(ev, "device_type", "")).endswith("CUDA"):
                        total += ev.time_range.end - ev.time_range.start
                        count += 1
                if not count:    # older layouts: kernels attached to the CPU op that launched them
                    for ev in evs:
                        for k in getattr(ev, "kernels", None) or ():
                            if getattr(k, "name", None) == a.kernel:
                                total += getattr(k, "duration", 0.0)
                                count += 1
                if count:
                    times[a.kernel] = {"time_ns": total * 1e3, "count": count}
                    method = "torch.profiler"
            except Exception:
                traceback.print_exc()
        if not times and events:
            total = 0.0
            n = 0
            for e0, e1, _ in events:
                if e1 is not None:
                    total += e0.elapsed_time(e1) * 1e6
                    n += 1
            if n:
                times[a.kernel] = {"time_ns": total, "count": n}
                method = "cuda-events"
        with open(a.out, "w") as f:
            json.dump({"times": times, "method": method, "returncode": rc}, f)
    return rc


if __name__ == "__main__":
    sys.exit(main())
