"""Does a speed probe on the same thread, just before and after a few ms of work, tell the speed that work ran
at?  (issue 23: the host's vCPUs change speed by 20-35% over tens to hundreds of ms, per core, and the control's
spread follows it; a reference loop on another core and a 1 ms probe before each 0.4 s block did not help.)

One process per listed core, pinned to it, runs for ``--seconds``: probe, work, probe, work, ..., where a probe
is ``--probe-iters`` iterations of a fixed pure-Python loop and a unit of work is a fixed amount of either the
same kind of loop (``py``) or 1-element CPU ``torch.add`` calls (``torch``: C++ dispatch, like a step's
launches) sized to about ``--work-ms``.  The work never changes, so every change in its time is the host's.
Per core it prints how much the work's time moves, raw and scaled by the probes around it (``probe``: the mean
speed of the two probes; ``probe-med``: a running median of 5 probes), per unit and for adjacent blocks of
``--block-s`` (the overhead bench's A/A), and the spread of block-ratio medians over 4 quarters of the run.

    python3 bench/experiments/profiler_overhead/probe_persistence.py --cpus 2,3 --kinds py,torch --seconds 20
"""
from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import statistics
import time


def _probe(iters):
    t0 = time.perf_counter_ns()
    x = 0
    for i in range(iters):
        x += i * i
    return time.perf_counter_ns() - t0


def _run(cpu, kind, seconds, work_ms, probe_iters, t_start, q):
    try:
        os.sched_setaffinity(0, {cpu})
    except (OSError, AttributeError):
        pass
    if kind == "torch":
        import torch
        torch.set_num_threads(1)
        a, b, c = torch.zeros(1), torch.ones(1), torch.empty(1)

        def unit(n):
            for _ in range(n):
                torch.add(a, b, out=c)
    else:
        def unit(n):
            x = 0
            for i in range(n):
                x += i * i
    # size the work to about work_ms here, once (a fixed count from then on)
    n = 100
    while True:
        t0 = time.perf_counter()
        unit(n)
        if time.perf_counter() - t0 > 0.002:
            break
        n *= 2
    dt = []   # the fastest of several tries: a slow phase of the core must not size the work
    for _ in range(7):
        t0 = time.perf_counter()
        unit(n)
        dt.append(time.perf_counter() - t0)
    n = max(1, int(n * work_ms / 1e3 / min(dt)))
    while time.time() < t_start:
        time.sleep(0.001)
    end = time.time() + seconds
    perf = time.perf_counter_ns
    work, probes = [], [_probe(probe_iters)]
    while time.time() < end:
        t0 = perf()
        unit(n)
        work.append(perf() - t0)
        probes.append(_probe(probe_iters))
    q.put((cpu, kind, n, [w / 1e3 for w in work], [p / 1e3 for p in probes]))


def _smooth(xs, half=2):
    return [statistics.median(xs[max(0, i - half):i + half + 1]) for i in range(len(xs))]


def _scaled(work, probes, how):
    if how == "raw":
        return list(work)
    pr = _smooth(probes) if how == "probe-med" else probes
    return [w * 0.5 * (1 / a + 1 / b) for w, a, b in zip(work, pr[:-1], pr[1:])]


def analyse(work, probes, block_units):
    """Per estimator: the units' CV, the sd of adjacent blocks' ratio (log, %), and the spread (max - min, %)
    of the median block ratio over the run's four quarters."""
    out = {}
    for how in ("raw", "probe", "probe-med"):
        v = _scaled(work, probes, how)
        blocks = [sum(v[i:i + block_units]) for i in range(0, len(v) - block_units + 1, block_units)]
        ratios = [blocks[i + 1] / blocks[i] for i in range(0, len(blocks) - 1, 2)]
        q = max(1, len(ratios) // 4)
        meds = [statistics.median(ratios[i:i + q]) for i in range(0, len(ratios) - q + 1, q)][:4]
        out[how] = {"unit_cv_%": round(100 * statistics.pstdev(v) / statistics.fmean(v), 2),
                    "block_ratio_sd_%": round(100 * statistics.pstdev([math.log(r) for r in ratios]), 2)
                    if len(ratios) > 1 else None,
                    "block_pairs": len(ratios),
                    "quarter_medians": [round(m, 4) for m in meds],
                    "quarter_spread_%": round(100 * (max(meds) - min(meds)), 2) if meds else None}
    lw = [math.log(w) for w in work]
    ls = [math.log(2 / (a + b)) for a, b in zip(probes[:-1], probes[1:])]
    mx, my = statistics.fmean(ls), statistics.fmean(lw)
    vx = sum((x - mx) ** 2 for x in ls)
    vy = sum((y - my) ** 2 for y in lw)
    cov = sum((x - mx) * (y - my) for x, y in zip(ls, lw))
    out["corr_log_work_log_speed"] = round(cov / math.sqrt(vx * vy), 3) if vx and vy else None
    out["slope_log_work_log_speed"] = round(cov / vx, 3) if vx else None   # -1: the work scales with the probe
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpus", default="auto", help="cores, one process each: 2,3,6 or auto")
    ap.add_argument("--kinds", default="py,torch", help="work per core, cycled over --cpus: py, torch")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--work-ms", type=float, default=3.0)
    ap.add_argument("--probe-iters", type=int, default=6000)
    ap.add_argument("--block-s", type=float, default=0.4)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    if args.cpus == "auto":   # as the overhead bench's --cpus auto: 4 cores from the third of those allowed
        avail = sorted(os.sched_getaffinity(0))
        cpus = avail[2:6] if len(avail) >= 6 else avail
    else:
        cpus = [int(c) for c in args.cpus.split(",")]
    kinds = args.kinds.split(",")
    q = mp.Queue()
    t_start = time.time() + (6.0 if "torch" in kinds else 1.0)   # torch's import first
    ps = [mp.Process(target=_run, args=(c, kinds[i % len(kinds)], args.seconds, args.work_ms, args.probe_iters,
                                        t_start, q)) for i, c in enumerate(cpus)]
    for p in ps:
        p.start()
    got = [q.get() for _ in ps]
    for p in ps:
        p.join()
    res = {"args": vars(args), "cores": []}
    for cpu, kind, n, work, probes in sorted(got):
        unit_s = statistics.median(work) / 1e6 + statistics.median(probes) / 1e6
        block_units = max(1, int(args.block_s / unit_s))
        a = analyse(work, probes, block_units)
        row = {"cpu": cpu, "kind": kind, "work_count": n, "units": len(work), "block_units": block_units,
               "work_us_median": round(statistics.median(work), 1), "probe_us_median": round(statistics.median(probes), 1),
               **a}
        print(json.dumps(row))
        row["work_us"] = [round(w, 1) for w in work]
        row["probe_us"] = [round(p, 1) for p in probes]
        res["cores"].append(row)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
