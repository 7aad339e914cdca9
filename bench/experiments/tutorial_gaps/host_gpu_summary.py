"""Summarise host_gpu_split.py's JSONs (one per process): per case and runtime, the median over every repeat of every
process of ``ms``, ``busy_ms`` and ``host_us``, with the spread (max/min of the per-process medians), and the
kernelc/Triton ratio of each (Triton's time over kernelc's: above 1 means kernelc is faster).

``range`` and ``verdict`` (session 24) read the ratio against its spread: the ratio over every pairing of one Triton
process's median with one kernelc process's, lowest and highest. ``below 0.95`` only when every pairing is below
0.95, ``at or above 0.95`` only when every pairing is at or above it, else ``undecided`` (the processes differ more
than the margin). The same for ``busy_ms`` (the GPU's time). ``tunings`` and ``sweep``: 03's per-config timings, the
autotuners' own and the held configs' GPU times, with the rank of each tuner's pick by GPU time.

    python3 bench/experiments/tutorial_gaps/host_gpu_summary.py DIR [--json OUT]
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys


# per-row readings besides ms/busy_ms/host_us, when the rows have them
EXTRA = ("ms_mean", "ms_median", "ms_max", "n_slow", "ms_gc_off")


def summarise(paths):
    per = {}  # (case, impl) -> {metric: [per-process median]}
    covered = {}
    for p in sorted(paths):
        d = json.load(open(p))
        if not isinstance(d, dict) or "rows" not in d:  # e.g. a summary written into the same folder
            continue
        impl = d["impl"]
        by_case = {}
        for r in d["rows"]:
            if "error" in r:
                continue
            by_case.setdefault(r["case"], []).append(r)
        for case, rows in by_case.items():
            slot = per.setdefault((case, impl), {"ms": [], "busy_ms": [], "host_us": [], "procs": []})
            for m in ("ms", "busy_ms", "host_us"):
                slot[m].append(statistics.median(r[m] for r in rows))
            for m in EXTRA:  # (rows written since session 22)
                vals = [r[m] for r in rows if isinstance(r.get(m), (int, float))]
                if vals:
                    slot.setdefault(m, []).append(statistics.median(vals))
            gcs = [sum(g["n"] for g in r["gc"]["runs"].values()) for r in rows if isinstance(r.get("gc"), dict)]
            if gcs:
                slot.setdefault("gc_runs", []).append(statistics.median(gcs))
                slot.setdefault("gc_max_s", []).append(max(r["gc"]["max_s"] for r in rows if "gc" in r))
            slot["procs"].append(os.path.basename(p))
            covered[(case, impl)] = covered.get((case, impl), True) and all(r["covered"] for r in rows)
    out = []
    for case in sorted({c for c, _ in per}):
        row = {"case": case}
        for impl in ("kernelc", "triton"):
            s = per.get((case, impl))
            if not s:
                continue
            row[impl] = {m: {"median": statistics.median(s[m]), "spread": max(s[m]) / min(s[m]), "n": len(s[m])}
                         for m in ("ms", "busy_ms", "host_us")}
            for m in EXTRA + ("gc_runs", "gc_max_s"):
                if s.get(m):
                    row[impl][m] = {"median": statistics.median(s[m]), "max": max(s[m]), "n": len(s[m])}
            row[impl]["covered"] = covered[(case, impl)]
        if "kernelc" in row and "triton" in row:
            row["triton_over_kernelc"] = {m: row["triton"][m]["median"] / row["kernelc"][m]["median"]
                                          for m in ("ms", "busy_ms", "host_us")}
            row["range"], row["verdict"] = {}, {}
            for m in ("ms", "busy_ms"):
                t, k = per[(case, "triton")][m], per[(case, "kernelc")][m]
                lo, hi = min(t) / max(k), max(t) / min(k)
                row["range"][m] = [lo, hi]
                row["verdict"][m] = verdict(lo, hi)
        out.append(row)
    return out


def verdict(lo, hi, line=0.95):
    if hi < line:
        return f"below {line}"
    if lo >= line:
        return f"at or above {line}"
    return "undecided"


def sweeps(paths):
    """03's per-config timings: per point and runtime, each config's median over processes of busy_ms and ms (the
    do_bench median the autotuner reads) from ``sweep``, the autotuner's own timings from ``tunings`` and its picks,
    and the GPU-time rank of each pick (1 = the fastest config on the GPU)."""
    out = {}
    for p in sorted(paths):
        d = json.load(open(p))
        if not isinstance(d, dict) or "rows" not in d:
            continue
        impl = d["impl"]
        for point, res in (d.get("sweep") or {}).items():
            slot = out.setdefault(point, {}).setdefault(impl, {"configs": {}, "picks": [], "tunings": []})
            for spec, r in res.items():
                c = slot["configs"].setdefault(spec, {"busy_ms": [], "ms": [], "host_us": []})
                for m in ("busy_ms", "ms", "host_us"):
                    if m in r:
                        c[m].append(r[m])
        for case, tm in (d.get("tunings") or {}).items():
            point = ":".join(case.split(":")[:3])
            slot = out.setdefault(point, {}).setdefault(impl, {"configs": {}, "picks": [], "tunings": []})
            val = {s: (t[0] if isinstance(t, list) else t) for s, t in tm.items()}
            slot["tunings"].append(val)
            # the pick as each autotuner makes it: Triton's takes the least [median, p20, p80] list (a tie on the
            # median goes to the lower p20), kernelc's the least median
            keyed = {s: (t if isinstance(t, list) else [t]) for s, t in tm.items()
                     if t is not None and (t[0] if isinstance(t, list) else t) != float("inf")}
            if keyed:
                slot["picks"].append(min(keyed, key=keyed.get))
    for point, impls in out.items():
        for impl, slot in impls.items():
            med = {s: statistics.median(c["busy_ms"]) for s, c in slot["configs"].items() if c["busy_ms"]}
            order = sorted(med, key=med.get)
            slot["gpu_rank"] = order
            slot["pick_ranks"] = [order.index(s) + 1 if s in order else None for s in slot["picks"]]
            for s, c in slot["configs"].items():
                for m in ("busy_ms", "ms", "host_us"):
                    c[m + "_median"] = statistics.median(c[m]) if c[m] else None
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    rows = summarise(glob.glob(os.path.join(args.dir, "*.json")))
    print(f"{'case':34s} {'T/k ms':>7s} {'T/k busy':>8s} {'T/k host':>8s}   kernelc ms busy host(us) [spread ms]   "
          f"triton ms busy host(us) [spread ms]")
    for r in rows:
        t = r.get("triton_over_kernelc", {})
        f = lambda i: (f"{r[i]['ms']['median']:.4f} {r[i]['busy_ms']['median']:.4f} {r[i]['host_us']['median']:6.1f} "  # noqa: E731
                       f"[x{r[i]['ms']['spread']:.3f} n{r[i]['ms']['n']}{'' if r[i]['covered'] else ' UNCOVERED'}]"
                       if i in r else "-")
        print(f"{r['case']:34s} {t.get('ms', 0):7.3f} {t.get('busy_ms', 0):8.3f} {t.get('host_us', 0):8.3f}   "
              f"{f('kernelc')}   {f('triton')}")
        for i in ("kernelc", "triton"):
            extra = {m: r[i][m]["median"] for m in EXTRA + ("gc_runs", "gc_max_s") if i in r and m in r[i]}
            if extra:
                print(f"{'':34s} {i}: " + " ".join(f"{m} {v:.4g}" for m, v in extra.items()))
    # per process: what a full collection costs there, the picks, and each case's first visit (right after its
    # first call: where an autotuning's garbage would be collected)
    for p in sorted(glob.glob(os.path.join(args.dir, "*.json"))):
        d = json.load(open(p))
        if not isinstance(d, dict) or "rows" not in d:
            continue
        first = [r for r in d["rows"] if r.get("repeat") == 0 and "error" not in r and isinstance(r.get("gc"), dict)]
        print(f"{os.path.basename(p)}: full collection {d.get('full_collect_s', float('nan')) * 1e3:.1f} ms over "
              f"{d.get('gc_objects')} objects; picks {d.get('picks', {})}")
        for case, g in (d.get("first_call_gc") or {}).items():
            if case.startswith("a06"):
                print(f"    first call {case:30s} gc {g['runs']} longest {g['max_s'] * 1e3:.1f} ms, counts after "
                      f"{g.get('counts_after')}")
        for r in first:
            print(f"    first visit {r['case']:30s} ms {r['ms']:.4f} (gc off {r.get('ms_gc_off', float('nan')):.4f}) "
                  f"gc {r['gc']['runs']} longest {r['gc']['max_s'] * 1e3:.1f} ms")
    for r in rows:
        if "verdict" in r:
            print(f"{r['case']:34s} T/k ms range [{r['range']['ms'][0]:.3f}, {r['range']['ms'][1]:.3f}] "
                  f"{r['verdict']['ms']}; busy range [{r['range']['busy_ms'][0]:.3f}, {r['range']['busy_ms'][1]:.3f}] "
                  f"{r['verdict']['busy_ms']}")
    sw = sweeps(glob.glob(os.path.join(args.dir, "*.json")))
    for point, impls in sw.items():
        for impl, slot in impls.items():
            print(f"sweep {point} {impl}: picks {slot['picks']} GPU ranks {slot['pick_ranks']}")
            for spec in slot["gpu_rank"][:6]:
                c = slot["configs"][spec]
                print(f"    {spec:60s} busy {c['busy_ms_median'] * 1e3:7.2f} us  do_bench {c['ms_median'] * 1e3:7.2f} us"
                      f"  host {c['host_us_median']:6.1f} us")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)  # a list of rows: status_table.py reads it as it is
        if sw:
            with open(os.path.splitext(args.json)[0] + "_sweeps.json", "w") as fh:
                json.dump(sw, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
