"""Summaries of this topic's GPU results (CPU): variants.py files (per process and row, each column over Triton and
over kernelc's shipped build, with 95% t intervals over the rounds) and ab_one_process.py files.

    python3 bench/experiments/mem22/summarize.py DIR [DIR ...]
"""
import glob
import json
import math
import os
import statistics
import sys


def _ci(xs):
    m = statistics.fmean(xs)
    if len(xs) < 2:
        return math.exp(m), math.exp(m), math.exp(m)
    t = {2: 12.71, 3: 4.30, 4: 3.18, 5: 2.78, 6: 2.57, 7: 2.45, 8: 2.36, 9: 2.31, 10: 2.26}.get(len(xs), 2.1)
    h = t * statistics.stdev(xs) / math.sqrt(len(xs))
    return math.exp(m), math.exp(m - h), math.exp(m + h)


def variants(path):
    out = []
    d = json.load(open(path))
    for r in d["rows"]:
        rds = r.get("rounds") or []
        if not rds:
            continue
        cols = list(rds[0]["log"])
        for c in cols:
            vs_t = _ci([rd["log"][c] for rd in rds])
            vs_k = _ci([rd["log"][c] - rd["log"]["kernelc"] for rd in rds]) if c != "kernelc" else None
            b = r["builds"].get(c[8:-1], {}) if c.startswith("kernelc[") else {}
            regs = [v.get("regs") for v in b.values() if isinstance(v, dict) and "regs" in v]
            out.append({"file": os.path.basename(path), "row": r["benchmark"], "col": c, "rounds": len(rds),
                        "x_over_triton": vs_t, "x_over_kernelc": vs_k, "regs": regs or r.get("regs", {}).get("kernelc"),
                        "err": r.get("errs", {}).get(c[8:-1]) if c.startswith("kernelc[") else None})
    return out


def main(dirs):
    for d in dirs:
        for p in sorted(glob.glob(os.path.join(d, "*.json"))):
            try:
                j = json.load(open(p))
            except Exception:
                continue
            if "rows" in j:
                for e in variants(p):
                    t, k = e["x_over_triton"], e["x_over_kernelc"]
                    print(f"{e['file']:14s} {e['row'][:16]:16s} {e['col']:18s} n={e['rounds']} "
                          f"/T {t[0]:.4f} [{t[1]:.4f}, {t[2]:.4f}]"
                          + (f"  /k {k[0]:.4f} [{k[1]:.4f}, {k[2]:.4f}]" if k else "")
                          + f"  regs {e['regs']} err {e['err']}")
            elif "results" in j:
                for r in j["results"]:
                    nv, oa, na = r["new_vs_old"], r["old_aa"], r["new_aa"]
                    print(f"{os.path.basename(p)} set {r['set']} {r['config']}: new/old {nv['geomean']:.4f} "
                          f"[{nv['ci95'][0]:.4f}, {nv['ci95'][1]:.4f}] rounds {nv['min']:.3f}-{nv['max']:.3f} n={nv['n']}; "
                          f"A/A old {oa['geomean']:.4f} [{oa['ci95'][0]:.4f}, {oa['ci95'][1]:.4f}] new {na['geomean']:.4f} "
                          f"[{na['ci95'][0]:.4f}, {na['ci95'][1]:.4f}]; ms " + " ".join(f"{k} {v:.4f}" for k, v in r["ms_median"].items())
                          + (f"; picked {r['picked']}" if r.get("picked") else ""))
                    if r.get("orders"):   # each slot's median ms by its position in the round
                        pos = {}
                        for order, rd in zip(r["orders"], r["rounds_ms"]):
                            for i, n in enumerate(order):
                                pos.setdefault(n, {}).setdefault(i, []).append(rd[n])
                        print("    by position: " + "; ".join(
                            f"{n} " + " ".join(f"{statistics.median(v[i]):.4f}" for i in sorted(v)) for n, v in pos.items()))


if __name__ == "__main__":
    main(sys.argv[1:])
