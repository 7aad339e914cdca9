"""Summary of mem21/variants.py JSON files (no torch import: runs in the request's last seconds, and on CPU):
every column x / Triton and over the shipped kernelc build, a 95% Student t interval over the rounds the file holds
(a process cut short keeps the rounds it finished).

    python3 bench/experiments/mem25/summarize.py FILE.json [...] [--json OUT]
"""
from __future__ import annotations

import json
import math
import statistics
import sys

# two-sided 95% Student t quantiles for 1..12 degrees of freedom
_T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179]


def ci(logs):
    """(exp mean, low, high) of per-round log ratios; None with fewer than 3."""
    n = len(logs)
    if n < 3:
        return None
    m = statistics.fmean(logs)
    half = (_T95[n - 2] if n - 1 <= len(_T95) else 1.96) * statistics.stdev(logs) / math.sqrt(n)
    return [round(math.exp(m), 5), round(math.exp(m - half), 5), round(math.exp(m + half), 5)]


def summarize(path):
    with open(path) as f:
        d = json.load(f)
    out = []
    for row in d["rows"]:
        rds = row.get("rounds") or []
        ent = {"benchmark": row["benchmark"], "rounds": len(rds), "errs": row.get("errs", {}), "cols": {},
               "error": row.get("error")}
        for tag, b in row.get("builds", {}).items():
            if "error" in b:
                ent["cols"][f"kernelc[{tag}]"] = {"error": b["error"]}
        if rds:
            for n in rds[0]["log"]:
                c = {"x_triton": ci([r["log"][n] for r in rds])}
                if n.startswith("kernelc["):
                    # speed over the shipped build: the two columns' log ratios to the same reference, a round each
                    c["x_kernelc"] = ci([r["log"][n] - r["log"]["kernelc"] for r in rds])
                ent["cols"][n] = c
        out.append(ent)
    return out


def main(argv) -> int:
    paths = [a for a in argv if a.endswith(".json") and not a.startswith("--")]
    dest = argv[argv.index("--json") + 1] if "--json" in argv else None
    if dest in paths:
        paths.remove(dest)
    allrows = {}
    for p in paths:
        try:
            rows = summarize(p)
        except (OSError, ValueError, KeyError) as e:
            print(f"{p}: {type(e).__name__}: {e}")
            continue
        allrows[p] = rows
        for r in rows:
            err = f" ERROR {r['error']}" if r["error"] else ""
            print(f"{r['benchmark']} [{p.rsplit('/', 1)[-1]}]: {r['rounds']} rounds{err}")
            for n, c in r["cols"].items():
                if "error" in c:
                    print(f"  {n:18s} error {c['error'][:80]}")
                    continue
                k = f"  /kc {c['x_kernelc']}" if c.get("x_kernelc") else ""
                print(f"  {n:18s} /tr {c['x_triton']}{k}")
    if dest:
        with open(dest, "w") as f:
            json.dump(allrows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
