"""Tables from sm28's GPU results (CPU): variants.json (mem21/variants.py) or memory_bound.json(.partial)
(bench_memory_bound --timing interleaved with --variant columns).

    python3 bench/experiments/sm28/summarize.py RESULT.json [--against shipped] [--json OUT]

Per row and column: x / Triton (the 95% t interval over rounds, as the status rule reads it), x / the reference
column (kernelc's shipped build: each round's two log ratios to the same Triton reference, differenced), the
least and greatest per-round ratio over the reference, and how many rounds it is above 1.003 (the 0.3% the brief
asks in every round)."""
import gzip
import json
import math
import statistics
import sys


def _ci(xs):
    n = len(xs)
    if n < 3:
        return None
    m = statistics.fmean(xs)
    sd = statistics.stdev(xs)
    t = {3: 4.303, 4: 3.182, 5: 2.776, 6: 2.571, 7: 2.447, 8: 2.365, 9: 2.306, 10: 2.262, 11: 2.228, 12: 2.201,
         13: 2.179, 14: 2.160, 15: 2.145, 16: 2.131, 17: 2.120, 18: 2.110, 19: 2.101, 20: 2.093}.get(n, 2.0)
    h = t * sd / math.sqrt(n)
    return [round(math.exp(m), 5), round(math.exp(m - h), 5), round(math.exp(m + h), 5)]


def rows_of(d):
    if isinstance(d, dict) and "rows" in d and d["rows"] and "rounds" in d["rows"][0]:
        return [(r["benchmark"], r["rounds"], r.get("errs", {}), r.get("builds", {})) for r in d["rows"]]
    rows = d["rows"] if isinstance(d, dict) else d
    return [(r["benchmark"], r["interleaved"]["rounds"], {}, {}) for r in rows if "interleaved" in r]


def main(argv):
    path = argv[0]
    ref = argv[argv.index("--against") + 1] if "--against" in argv else "kernelc"
    d = json.load(gzip.open(path) if path.endswith(".gz") else open(path))
    out = []
    for name, rounds, errs, builds in rows_of(d):
        cols = list(rounds[0]["log"])
        print(f"{name} ({len(rounds)} rounds)")
        for c in cols:
            logs = [rd["log"][c] for rd in rounds]
            rec = {"row": name, "col": c, "x_triton": _ci(logs), "ms_median": statistics.median(rd["ms"][c] for rd in rounds)}
            if c != ref and ref in rounds[0]["log"] and not c.startswith("triton"):
                diff = [rd["log"][c] - rd["log"][ref] for rd in rounds]
                rec["x_ref"] = _ci(diff)
                rec["per_round_min_max"] = [round(math.exp(min(diff)), 5), round(math.exp(max(diff)), 5)]
                rec["rounds_above_1.003"] = sum(x > math.log(1.003) for x in diff)
            tag = c[8:-1] if c.startswith("kernelc[") else None
            if tag and tag in errs:
                rec["err_vs_triton"] = errs[tag]
            if tag and isinstance(builds.get(tag), dict):
                rec["regs"] = [v.get("regs") for v in builds[tag].values() if isinstance(v, dict) and "regs" in v] \
                    or builds[tag].get("error")
            out.append(rec)
            print(f"   {c:22s} /triton {rec['x_triton']}  /{ref} {rec.get('x_ref', '')} "
                  f"{rec.get('per_round_min_max', '')} >1.003: {rec.get('rounds_above_1.003', '')}")
    if "--json" in argv:
        with open(argv[argv.index("--json") + 1], "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
