"""Which host clock is CUPTI's (``cupti.get_timestamp``, the clock of its activity records and of kprof's
timelines in API-record mode)?  Issue 23: a timeline entry reads it through cupti-python (~140-160 ns on an H200
host, against ~70 for ``time.perf_counter_ns``); two reads per scope and two per hooked kernelc launch.  If it is
one of the kernel's clocks, or that clock plus a fixed offset, kprof could read that clock instead.

For each candidate clock X, ``--samples`` bracketed reads ``a = X(); g = get_timestamp(); b = X()`` spread over
``--seconds`` (a CUPTI session recording kernels, a small kernel launched between samples): the offset
``g - (a + b) / 2`` per sample, its spread, its drift (least-squares slope, ns per second) and the bracket's half
width.  The same clock: offset 0 (or constant) within the bracket; another clock: an offset that moves.

    python3 bench/experiments/profiler_overhead/clock_domain.py [--seconds 8] [--out FILE.json]
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def _clocks():
    out = {"time_ns (REALTIME)": time.time_ns, "perf_counter_ns (MONOTONIC)": time.perf_counter_ns}
    for name in ("CLOCK_MONOTONIC_RAW", "CLOCK_BOOTTIME", "CLOCK_TAI"):
        cid = getattr(time, name, None)
        if cid is not None:
            out[name] = (lambda c: lambda: time.clock_gettime_ns(c))(cid)
    return out


def per_call_ns(fn, n=20000, reps=5):
    r = []
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        r.append((time.perf_counter_ns() - t0) / n)
    return round(sorted(r)[len(r) // 2], 1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--samples", type=int, default=4000)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    import torch
    torch.cuda.init()
    x = torch.zeros(1 << 16, device="cuda")
    from cupti import cupti
    kinds = (cupti.ActivityKind.CONCURRENT_KERNEL,)
    cupti.activity_register_callbacks(lambda: (8 << 20, 0), lambda acts: None)
    for k in kinds:
        cupti.activity_enable(k)
    g = cupti.get_timestamp
    clocks = _clocks()
    res = {"cost_ns": {"cupti.get_timestamp": per_call_ns(g)}}
    for name, fn in clocks.items():
        res["cost_ns"][name] = per_call_ns(fn)
    samples = {name: [] for name in clocks}
    pause = args.seconds / args.samples
    t_end = time.perf_counter() + args.seconds
    i = 0
    while time.perf_counter() < t_end and i < args.samples * 2:
        for name, fn in clocks.items():
            a = fn()
            c = g()
            b = fn()
            samples[name].append((a, c, b))
        x.add_(1)
        i += 1
        time.sleep(pause)
    torch.cuda.synchronize()
    cupti.activity_flush_all(1)
    for k in kinds:
        cupti.activity_disable(k)
    res["per_clock"] = {}
    for name, ss in samples.items():
        t0 = ss[0][0]
        mids = [((a + b) / 2 - t0) / 1e9 for a, _, b in ss]
        offs = [c - (a + b) / 2 for a, c, b in ss]
        half = [(b - a) / 2 for a, _, b in ss]
        mx, my = statistics.fmean(mids), statistics.fmean(offs)
        sxx = sum((m - mx) ** 2 for m in mids)
        slope = sum((m - mx) * (o - my) for m, o in zip(mids, offs)) / sxx if sxx else 0.0
        resid = [o - (my + slope * (m - mx)) for m, o in zip(mids, offs)]
        # inside the bracket: a <= g <= b after the fitted offset is removed
        inside = sum(1 for (a, c, b), r in zip(ss, resid) if abs(r) <= (b - a) / 2 + 1) / len(ss)
        res["per_clock"][name] = {
            "samples": len(ss), "offset_median_ns": round(statistics.median(offs), 1),
            "offset_first_last_ns": [round(offs[0], 1), round(offs[-1], 1)],
            "drift_ns_per_s": round(slope, 2), "resid_p50_abs_ns": round(statistics.median(abs(r) for r in resid), 1),
            "resid_max_abs_ns": round(max(abs(r) for r in resid), 1),
            "half_bracket_p50_ns": round(statistics.median(half), 1), "inside_bracket_frac": round(inside, 4)}
    res["seconds"] = args.seconds
    # which libcupti each profiler loads (kprof: cupti-python's; Proton: TRITON_CUPTI_LIB_PATH or Triton's copy):
    # two copies in one process is what an in-process kprof/Proton comparison has to live with
    try:
        from profiler.backends import cupti_raw
        lib = cupti_raw.find_libcupti()
        res["kprof_libcupti"] = getattr(lib, "_name", None)
    except Exception as e:
        res["kprof_libcupti"] = f"{type(e).__name__}: {e}"
    try:
        from triton import knobs
        d = knobs.proton.cupti_lib_dir
        res["proton_cupti_dir"] = d
        res["proton_cupti_files"] = sorted(os.listdir(d)) if os.path.isdir(d) else None
    except Exception as e:
        res["proton_cupti_dir"] = f"{type(e).__name__}: {e}"
    print(json.dumps(res, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
