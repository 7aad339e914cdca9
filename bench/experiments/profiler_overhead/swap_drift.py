"""Issue 23, session 25: which profiler's cost moves over a swap run (``--fine-order swap``, C2 of 2026-11-29)?

kprof/Proton rose between the encoder run's halves (0.9824 -> 1.0543) while its control stayed at ~0.999.  Per
block of the rounds file, each profiler's mean segment time over the mean of the block's none and none2 segments
(the control, a few ms away) is a log ratio; its least-squares slope over the run's blocks (with 2 standard errors)
says whether that profiler's own cost grew, Proton's shrank, or the control moved.  Also: the settle steps (untimed
after each start) the same way, the switch into each profiler (previous stop + this start), and the profiler's
excess per step (ms over the control) by fifths of the run.

    python3 bench/experiments/profiler_overhead/swap_drift.py [ROUNDS_FILE ...]   (default: s25's three, bench/results)
"""
from __future__ import annotations

import gzip
import json
import math
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RES = os.path.join(os.path.dirname(os.path.dirname(HERE)), "results")
DEFAULT = [os.path.join(RES, f"profiler_overhead_s25_swap_{w}_h200.{w}.rounds.json") for w in ("tiny", "encoder", "train")]


def _load(path):
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        path += ".gz"
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt") as f:
        return json.load(f)


def slope(ys):
    """Least-squares slope of ``ys`` against 0..n-1 and its standard error."""
    n = len(ys)
    mx, my = (n - 1) / 2, statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in range(n))
    b = sum((x - mx) * (y - my) for x, y in enumerate(ys)) / sxx
    res = [y - my - b * (x - mx) for x, y in enumerate(ys)]
    return b, math.sqrt(sum(e * e for e in res) / (n - 2) / sxx)


def drift(rounds, profs=("kprof", "proton")):
    """Per quantity: the change over the whole run in % (slope x blocks) with 2 se, and the two halves' means."""
    series = {}
    fifths = {p: [[] for _ in range(5)] for p in profs}
    n = len(rounds)
    for i, b in enumerate(rounds):
        seg = {}
        sett = {}
        gaps = {}
        for s, x, st, g in zip(b["segments"], b["seg_ms"], b["settle_ms"], b["gap_ms"]):
            seg.setdefault(s, []).append(x)
            sett.setdefault(s, []).append(st)
            gaps.setdefault(s, []).append(g)
        ctl = statistics.fmean(seg["none"] + seg["none2"])
        series.setdefault("none/none2", []).append(math.log(statistics.fmean(seg["none"]) / statistics.fmean(seg["none2"])))
        series.setdefault("control, absolute", []).append(math.log(ctl))
        for p in profs:
            series.setdefault(f"{p}/control", []).append(math.log(statistics.fmean(seg[p]) / ctl))
            series.setdefault(f"{p} settle/control", []).append(math.log(statistics.fmean(sett[p]) / ctl))
            series.setdefault(f"switch into {p} (ms)", []).append(statistics.fmean(gaps[p]))
            fifths[p][min(4, i * 5 // n)].append(statistics.fmean(seg[p]) - ctl)
        series.setdefault(f"{profs[0]}/{profs[1]}", []).append(
            math.log(statistics.fmean(seg[profs[0]]) / statistics.fmean(seg[profs[1]])))
    out = {"blocks": n, "series": {}}
    for k, ys in series.items():
        b, se = slope(ys)
        h = n // 2
        if k.startswith("switch"):
            out["series"][k] = {"change_ms": round(b * n, 3), "2se_ms": round(2 * se * n, 3),
                                "halves_ms": [round(statistics.fmean(ys[:h]), 3), round(statistics.fmean(ys[h:]), 3)]}
        else:
            out["series"][k] = {"change_%": round(100 * b * n, 2), "2se_%": round(200 * se * n, 2),
                                "halves": [round(math.exp(statistics.fmean(ys[:h])), 4),
                                           round(math.exp(statistics.fmean(ys[h:])), 4)]}
    out["excess_ms_by_fifth"] = {p: [round(statistics.median(f), 4) for f in fifths[p]] for p in profs}
    return out


def main(argv):
    paths = argv or DEFAULT
    res = {}
    for p in paths:
        d = _load(p)
        ch = d["children"][0]
        r = drift(ch["multi"])
        res[ch["workload"]] = r
        print(f"{ch['workload']}: {r['blocks']} blocks ({os.path.basename(p)})")
        for k, v in r["series"].items():
            if "change_%" in v:
                print(f"  {k:24s} change over the run {v['change_%']:+7.2f}% +- {v['2se_%']:5.2f}%   halves {v['halves']}")
            else:
                print(f"  {k:24s} change over the run {v['change_ms']:+7.2f} ms +- {v['2se_ms']:5.2f}   halves {v['halves_ms']} ms")
        print(f"  excess over the control per step by fifths of the run (ms): {r['excess_ms_by_fifth']}")
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
