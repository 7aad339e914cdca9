"""A/B of kernelc's host path on CPU (fakecuda.py): two checkouts (e.g. main and this branch), each in its own
processes, alternated, best per pattern of CPU time per call.

    python3 bench/experiments/host_launch/cpu_ab.py --a /tmp/main --b . [--reps 3] [--out results/cpu_ab.json]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", required=True, help="checkout A (its kernelc is timed)")
    ap.add_argument("--b", required=True, help="checkout B")
    ap.add_argument("--reps", type=int, default=3, help="processes per checkout, alternated")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "cpu_ab.json"))
    a = ap.parse_args(argv)
    best = {}
    for rep in range(a.reps):
        for label, root in (("a", a.a), ("b", a.b)):
            root = os.path.abspath(root)
            p = subprocess.run([sys.executable, os.path.join(HERE, "cpu_host_path.py"), "--rounds", "2", "--calls",
                                "1000", "--label", f"ab_{label}", "--kernelc-root", root], capture_output=True, text=True)
            part = os.path.join(HERE, "results", f"cpu_host_path_ab_{label}.json")
            with open(part) as f:
                rows = json.load(f)["rows"]
            os.remove(part)  # one process's numbers: only the summary is kept
            if p.returncode:
                print(p.stderr[-2000:])
            for pat, r in rows.items():
                if pat == "_kernelc_from":
                    assert r == root, (r, root)
                if isinstance(r, dict):
                    best[(pat, label)] = min(best.get((pat, label), float("inf")), r["min_us"])
    out = {}
    for pat in sorted({p for p, _ in best}):
        ta, tb = best[(pat, "a")], best[(pat, "b")]
        out[pat] = {"a_us": ta, "b_us": tb, "b_over_a": tb / ta}
        print(f"{pat:7s} a {ta:7.2f} us  b {tb:7.2f} us  b/a {tb / ta:.3f}")
    with open(a.out, "w") as f:
        json.dump({"a": os.path.abspath(a.a), "b": os.path.abspath(a.b), "reps": a.reps, "rows": out}, f, indent=1)


if __name__ == "__main__":
    main()
