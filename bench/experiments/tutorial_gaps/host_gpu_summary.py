"""Summarise host_gpu_split.py's JSONs (one per process): per case and runtime, the median over every repeat of every
process of ``ms``, ``busy_ms`` and ``host_us``, with the spread (max/min of the per-process medians), and the
kernelc/Triton ratio of each (Triton's time over kernelc's: above 1 means kernelc is faster).

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
        out.append(row)
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
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
