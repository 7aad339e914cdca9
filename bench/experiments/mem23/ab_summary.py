"""One line per comparison of ab_one_process.py JSON files (speed: > 1 means the second tree is faster).

    python3 bench/experiments/mem23/ab_summary.py ab_p1.json ab_p2.json ...
"""
import json
import sys


def main(paths):
    for p in paths:
        try:
            d = json.load(open(p))
        except (OSError, ValueError) as e:
            print(f"{p}: unreadable ({e})")
            continue
        for r in d["results"]:
            ms = " ".join(f"{k} {v:.4f}" for k, v in r["ms_median"].items())
            print(f"{p.rsplit('/', 1)[-1]} {r['config']} ({r['new_vs_old']['n']} rounds) ms: {ms}")
            for k, v in r.items():
                if isinstance(v, dict) and "ci95" in v:
                    lo, hi = v["ci95"]
                    print(f"   {k:16s} {v['geomean']:.4f} [{lo:.4f}, {hi:.4f}]")


if __name__ == "__main__":
    main(sys.argv[1:])
