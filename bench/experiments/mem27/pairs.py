"""Every pair of kernelc columns of an ab27.py call, per row: x/y as per-round mean log ratios, 95% t intervals over
the rounds (as ab27.py's x/off), and each column against Triton.

    python3 bench/experiments/mem27/pairs.py AB27.json [OUT.json]
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def main(argv) -> int:
    from bench.bench_memory_bound import log_ratio_ci
    d = json.load(open(argv[0]))
    out = {}
    for r in d["rows"]:
        rds = r.get("rounds") or []
        if len(rds) < 3:
            continue
        cols = [c for c in rds[0]["log"] if c != "triton[control]"]
        o = out[r["row"]] = {"rounds": len(rds)}
        for x in cols:
            o[f"{x}/triton"] = [round(v, 5) for v in log_ratio_ci([rd["log"][x] for rd in rds])]
            for y in cols:
                if x != y:
                    o[f"{x}/{y}"] = [round(v, 5) for v in log_ratio_ci([rd["log"][x] - rd["log"][y] for rd in rds])]
        o["triton[control]/triton"] = [round(v, 5) for v in log_ratio_ci([rd["log"]["triton[control]"] for rd in rds])]
        print(r["row"], json.dumps(o))
    if len(argv) > 1:
        with open(argv[1], "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
