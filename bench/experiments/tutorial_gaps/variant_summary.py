"""Summarise host_gpu_split.py's JSONs by variant: one column per ``--tag`` (a runtime, or kernelc under one set of
compile knobs), per case the median over every repeat of every process of ``busy_ms`` (GPU time) and ``ms``
(``do_bench``), and each variant's GPU time over the reference tag's (below 1: faster than the reference).

    python3 bench/experiments/tutorial_gaps/variant_summary.py DIR [--ref triton] [--json OUT]
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import statistics


def summarise(paths, ref="triton"):
    per = {}  # (case, tag) -> {metric: [every row's value]}
    for p in sorted(paths):
        try:
            d = json.load(open(p))
        except (OSError, ValueError):
            continue
        if not isinstance(d, dict) or "rows" not in d:
            continue
        tag = d.get("tag") or d["impl"]
        for r in d["rows"]:
            if "error" in r:
                continue
            slot = per.setdefault((r["case"], tag), {"ms": [], "busy_ms": [], "procs": set()})
            slot["ms"].append(r["ms"])
            slot["busy_ms"].append(r["busy_ms"])
            slot["procs"].add(os.path.basename(p))
    out = []
    for case in sorted({c for c, _ in per}):
        row = {"case": case, "variants": {}}
        base = per.get((case, ref))
        base_busy = statistics.median(base["busy_ms"]) if base else None
        for (c, tag), s in sorted(per.items()):
            if c != case:
                continue
            busy = statistics.median(s["busy_ms"])
            row["variants"][tag] = {"busy_ms": busy, "ms": statistics.median(s["ms"]), "n": len(s["busy_ms"]),
                                    "busy_spread": max(s["busy_ms"]) / min(s["busy_ms"]), "procs": len(s["procs"]),
                                    "busy_over_ref": busy / base_busy if base_busy else None}
        out.append(row)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--ref", default="triton")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    rows = summarise(glob.glob(os.path.join(a.dir, "*.json")), a.ref)
    for row in rows:
        print(row["case"])
        for tag, v in row["variants"].items():
            r = f"{v['busy_over_ref']:.4f}" if v["busy_over_ref"] else "-"
            print(f"   {tag:14s} busy {v['busy_ms']:.4f} ms  do_bench {v['ms']:.4f} ms  /{a.ref} {r}  "
                  f"[x{v['busy_spread']:.3f} n{v['n']} p{v['procs']}]")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
