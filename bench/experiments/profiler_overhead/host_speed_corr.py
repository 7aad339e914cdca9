"""Does the host CPU's speed move on all cores at once?  (issue 23: the control's spread follows the CPU's
speed, which a 1 ms probe before each block could not correct.)

Runs one pure-Python counting loop per listed core, all at the same time, each pinned to its core, and
records how many loop iterations each did in every ``--bin-ms`` window.  If the speed changes are host-wide
(clock, power), the cores' series move together, and a reference process on a spare core, counting during a
timed block, measures that block's CPU speed; if they are per-core (an SMT sibling in another VM, a vCPU
moved), they do not, and no reference can stand in for the timed core.

    python3 bench/experiments/profiler_overhead/host_speed_corr.py --cpus 2,3,6,10 --seconds 30 --out x.json

Prints, per pair of cores, the correlation of their speed series at several window lengths, and each core's
range (slowest / fastest window).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import time


def _count(cpu: int, t_start: float, seconds: float, bin_ms: float, arr, nbins: int) -> None:
    try:
        os.sched_setaffinity(0, {cpu})
    except (OSError, AttributeError):
        pass
    while time.time() < t_start:
        pass
    end = t_start + seconds
    bin_s = bin_ms / 1e3
    n = 0
    x = 0
    while True:
        for i in range(200):   # ~10 us of work between clock reads
            x += i * i
        n += 1
        now = time.time()
        if now >= end:
            break
        b = int((now - t_start) / bin_s)
        if 0 <= b < nbins:
            arr[b] += 1


def _corr(a, b):
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    va = sum((x - ma) ** 2 for x in a)
    vb = sum((y - mb) ** 2 for y in b)
    if va == 0 or vb == 0:
        return None
    return sum((x - ma) * (y - mb) for x, y in zip(a, b)) / (va * vb) ** 0.5


def _rebin(s, k):
    return [sum(s[i:i + k]) for i in range(0, len(s) - k + 1, k)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpus", default="2,3")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--bin-ms", type=float, default=10)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    cpus = [int(c) for c in args.cpus.split(",")]
    nbins = int(args.seconds * 1e3 / args.bin_ms)
    arrs = [mp.Array("q", nbins, lock=False) for _ in cpus]
    t_start = time.time() + 1.0
    ps = [mp.Process(target=_count, args=(c, t_start, args.seconds, args.bin_ms, a, nbins)) for c, a in zip(cpus, arrs)]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
    series = {c: list(a)[1:-1] for c, a in zip(cpus, arrs)}   # first and last bins are partial
    topo = {}
    for c in cpus:
        try:
            topo[c] = open(f"/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list").read().strip()
        except OSError:
            topo[c] = None
    res = {"cpus": cpus, "seconds": args.seconds, "bin_ms": args.bin_ms, "siblings": topo, "per_core": {}, "pairs": []}
    for c, s in series.items():
        res["per_core"][c] = {w: (lambda r: {"min_over_max": round(min(r) / max(r), 3) if max(r) else None,
                                             "cv_%": round(100 * statistics.pstdev(r) / statistics.fmean(r), 2)
                                             if statistics.fmean(r) else None})(_rebin(s, k))
                              for w, k in (("10ms", 1), ("100ms", 10), ("400ms", 40))}
    for i, a in enumerate(cpus):
        for b in cpus[i + 1:]:
            row = {"a": a, "b": b}
            for w, k in (("10ms", 1), ("100ms", 10), ("400ms", 40)):
                r = _corr(_rebin(series[a], k), _rebin(series[b], k))
                row[w] = round(r, 3) if r is not None else None
            res["pairs"].append(row)
    for c, v in res["per_core"].items():
        print(f"cpu {c} (siblings {topo[c]}): " + "  ".join(f"{w}: min/max {d['min_over_max']} cv {d['cv_%']}%"
                                                           for w, d in v.items()))
    for row in res["pairs"]:
        print(f"corr cpu {row['a']} ~ cpu {row['b']}: 10 ms {row['10ms']}  100 ms {row['100ms']}  400 ms {row['400ms']}")
    if args.out:
        res["series"] = {str(c): s for c, s in series.items()}
        json.dump(res, open(args.out, "w"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
