"""What the unprofiled control's spread is made of, from the overhead results files already on disk
(issue 23; no GPU).

The control's spread (``control_spread_%`` of ``bench/reconcile_profilers.py overhead``) is the range over the
control processes (``none``) of each one's median pair ratio.  This script splits it, per run and workload, into

* **within-process noise**: the standard error of each median from its own pairs (1.2533 x sd / sqrt(n) of the
  log pair ratios), and the spread that noise alone gives (``control_noise`` in the bench);
* **between processes**: the chi-square of the medians around their weighted mean (p small: the processes
  differ by more than their own pairs explain), per run and summed over all runs;
* **first pairs**: every process's pair ratios by position, against the process's median (all profilers);
* **drift**: the last third of a process's unprofiled blocks over its first third;
* **block length**: in the control processes that kept per-segment times (``--step-probe``), adjacent
  sub-blocks of k segments, the sd of their log ratio and sd x sqrt(k) (flat: noise independent from step to
  step, so block length does not matter; growing: slow noise, so short blocks resolve more per second).

    python3 bench/experiments/profiler_overhead/spread_decomp.py [FILES...] [--json OUT]
"""
from __future__ import annotations

import argparse
import glob
import json
import math
import os
import statistics
import sys
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))  # the repository
sys.path.insert(0, ROOT)

from bench.reconcile_profilers import _chi2_sf, control_noise, summarize  # noqa: E402

DEFAULT = sorted(glob.glob(os.path.join(ROOT, "bench", "results", "profiler_overhead*.json")))


def position_effect(children, wl, last=5):
    """Per pair position (the last bin pools ``last`` and later): (n, mean of log(pair / process median) in %,
    its standard error in %) over every process of ``wl`` with at least 6 pairs."""
    pos = defaultdict(list)
    for r in children:
        if r["workload"] != wl or len(r["warm"]) < 6:
            continue
        m = statistics.median(r["warm"])
        for i, w in enumerate(r["warm"]):
            pos[min(i, last)].append(100 * math.log(w / m))
    return {k: (len(v), round(statistics.fmean(v), 2), round(statistics.pstdev(v) / math.sqrt(len(v)), 2))
            for k, v in sorted(pos.items()) if len(v) > 1}


def drift(children, wl):
    """Per process of ``wl`` with 6+ pairs: last third of its unprofiled blocks over the first third, in %."""
    out = []
    for r in children:
        u = r["unprof_ms"]
        if r["workload"] == wl and len(u) >= 6:
            out.append(round(100 * (statistics.fmean(u[-(len(u) // 3):]) / statistics.fmean(u[:len(u) // 3]) - 1), 1))
    return out


def block_length_noise(children, wl, ks=(1, 2, 4, 8, 16)):
    """Control processes with per-segment times: for sub-blocks of k adjacent segments inside one block, the sd
    of log(next / previous) (pairs of sub-blocks, not overlapping) and sd x sqrt(k), in %."""
    out = {}
    ctl = [r for r in children if r["workload"] == wl and r["profiler"] == "none"]
    for k in ks:
        logs = []
        for r in ctl:
            for _, d in r.get("sched") or []:
                seg = (d or {}).get("seg_us")
                if not seg:
                    continue
                sub = [sum(seg[i:i + k]) for i in range(0, len(seg) - k + 1, k)]
                logs += [math.log(b / a) for a, b in zip(sub[::2], sub[1::2]) if a > 0 and b > 0]
        if len(logs) >= 6:
            sd = statistics.pstdev(logs)
            out[k] = {"pairs": len(logs), "sd_%": round(100 * sd, 2), "sd_x_sqrt_k": round(100 * sd * math.sqrt(k), 2)}
    return out


def pooled_shift(per_run):
    """Fixed-effect (and random-effects) pool of per-run shifts over the floor: ``per_run`` = [(label, pct, lo, hi)] with Mann-Whitney
    95% intervals; each run weighted by 1/se^2, se = (hi - lo) / 3.92 (the interval taken as normal).  Returns
    the pooled shift, its 95% interval, and Cochran's Q with its p-value (small: the runs disagree by more than
    their intervals allow, so no single pooled number describes them)."""
    rows = [(lab, v, (hi - lo) / 3.92) for lab, v, lo, hi in per_run if v is not None and lo is not None and hi > lo]
    if len(rows) < 2:
        return None
    w = [1 / se ** 2 for _, _, se in rows]
    mean = sum(v * wt for (_, v, _), wt in zip(rows, w)) / sum(w)
    se = 1 / math.sqrt(sum(w))
    q = sum(wt * (v - mean) ** 2 for (_, v, _), wt in zip(rows, w))
    # random effects (DerSimonian-Laird): where the runs disagree by more than their intervals (Q above its df),
    # a between-run variance tau^2 is added to every run's, which widens the pooled interval
    tau2 = max(0.0, (q - (len(rows) - 1)) / (sum(w) - sum(x * x for x in w) / sum(w)))
    wr = [1 / (se_ ** 2 + tau2) for _, _, se_ in rows]
    mr = sum(v * wt for (_, v, _), wt in zip(rows, wr)) / sum(wr)
    ser = 1 / math.sqrt(sum(wr))
    return {"runs": len(rows), "pct": round(mean, 2), "ci": [round(mean - 1.96 * se, 2), round(mean + 1.96 * se, 2)],
            "Q": round(q, 2), "p_heterogeneity": round(_chi2_sf(q, len(rows) - 1), 3),
            "random_effects": {"pct": round(mr, 2), "ci": [round(mr - 1.96 * ser, 2), round(mr + 1.96 * ser, 2)],
                               "tau_%": round(math.sqrt(tau2), 2)}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", default=DEFAULT)
    ap.add_argument("--json", default=None, help="write everything to this file")
    ap.add_argument("--settle-pairs", type=int, default=0, help="pairs left out at the start of each process for the "
                    "per-run shifts (0: all, as the earlier runs were published)")
    args = ap.parse_args(argv)
    runs, pooled = [], defaultdict(lambda: {"chi2": 0.0, "dof": 0, "runs": 0})
    shifts = defaultdict(list)   # (workload, profiler) -> per run (file, HL % over the floor, lo, hi)
    by_wl = defaultdict(list)
    for f in args.files:
        try:
            d = json.load(open(f))
        except (OSError, ValueError):
            continue
        children = d.get("children") or []
        if not children:
            continue
        env = d.get("environment") or {}
        for wl in sorted({r["workload"] for r in children}):
            by_wl[wl] += [r for r in children if r["workload"] == wl]
            ctl = [r for r in children if r["workload"] == wl and r["profiler"] == "none"]
            meds = [statistics.median(r["warm"]) for r in ctl if r["warm"]]
            cn = control_noise(ctl)
            row = {"file": os.path.basename(f), "device": env.get("device"), "date": (env.get("date") or "")[:16],
                   "workload": wl, "control_spread_%": round(100 * (max(meds) - min(meds)), 2) if len(meds) > 1 else None,
                   **cn}
            runs.append(row)
            kids = [r for r in children if r["workload"] == wl]
            # pooled only over runs whose kprof had raw buffers in effect (the default since 2026-11-27); earlier
            # runs measured another mode and stay out of the pool
            raw = all((r.get("kprof_state") or {}).get("raw") for r in kids if r["profiler"] == "kprof")
            if raw and any(r["profiler"] == "floor" for r in kids):
                summ = summarize(kids, reps=200, settle=args.settle_pairs)
                for prof in ("kprof", "proton"):
                    e = summ.get(prof) or {}
                    ci = e.get("hl_over_floor_ci_%")
                    if e.get("hl_over_floor_%") is not None and ci:
                        shifts[wl, prof].append((os.path.basename(f), e["hl_over_floor_%"], ci[0], ci[1]))
            if cn:
                p = pooled[wl]
                p["chi2"] += cn["chi2"]
                p["dof"] += cn["dof"]
                p["runs"] += 1
    for wl, p in pooled.items():
        p["chi2"] = round(p["chi2"], 2)
        p["p_between"] = round(_chi2_sf(p["chi2"], p["dof"]), 3)
    per_wl = {wl: {"between_processes_all_runs": pooled.get(wl),
                   "over_floor_per_run": {p: shifts[wl, p] for p in ("kprof", "proton") if shifts.get((wl, p))},
                   "over_floor_pooled": {p: pooled_shift(shifts[wl, p]) for p in ("kprof", "proton")
                                         if shifts.get((wl, p))},
                   "first_pairs": position_effect(rs, wl), "drift_%": drift(rs, wl),
                   "block_length": block_length_noise(rs, wl)} for wl, rs in by_wl.items()}
    print(f"{'file':50s} {'workload':8s} {'spread':>7s} {'expected':>8s} {'pairs':14s} {'se %':20s} {'chi2':>6s} {'p':>6s} {'1%: pairs':>9s}")
    for r in runs:
        if "n" not in r:
            continue
        print(f"{r['file'][:50]:50s} {r['workload']:8s} {r['control_spread_%']:7.2f} {r['spread_expected_%']:8.2f} "
              f"{str(r['n']):14s} {str(r['se_%']):20s} {r['chi2']:6.2f} {r['p_between']:6.3f} {r['pairs_for_1pct']:9d}")
    for wl, e in per_wl.items():
        print(f"\n{wl}: between processes over all runs {e['between_processes_all_runs']}")
        print(f"  pair ratio by position (n, mean % vs the process median, se): {e['first_pairs']}")
        print(f"  drift, last third over first third of unprofiled blocks, %: {e['drift_%']}")
        for prof, runs_ in e["over_floor_per_run"].items():
            print(f"  {prof} over the floor per run (HL %, MW 95%): " +
                  ", ".join(f"{lab.replace('profiler_overhead_', '').replace('.json', '')} {v:+.2f} [{lo:+.2f}, {hi:+.2f}]"
                            for lab, v, lo, hi in runs_))
            print(f"  {prof} over the floor pooled (fixed effect): {e['over_floor_pooled'][prof]}")
        if e["block_length"]:
            print(f"  control, sub-blocks of k segments: {e['block_length']}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"runs": runs, "workloads": per_wl}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
