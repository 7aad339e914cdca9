"""(d64s27) A call's JSON files (``bwd_ab.py --out``) as markdown rows: ms a call per round, cuDNN's time over the
entry's, and each round's time against a baseline entry's (negative: faster).

    python3 bench/experiments/d64s27/summarize.py RESULTS_DIR [--base sepwsq def]
"""
from __future__ import annotations

import argparse
import glob
import json
import os
from collections import defaultdict


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--base", nargs="+", default=["sepwsq", "def"])
    a = ap.parse_args()
    for path in sorted(glob.glob(os.path.join(a.dir, "*.json"))):
        try:
            d = json.load(open(path))
        except Exception:
            continue
        if not isinstance(d, dict) or "rows" not in d:
            continue
        part = d.get("part", "ab")
        print(f"\n## {os.path.basename(path)}: {part}, N {d.get('seq')}, D {d.get('head_dim')}, {d.get('device')}")
        if part == "ab":
            rows = {r["entry"]: r for r in d["rows"]}
            print("| entry | ms a call | cuDNN / entry | " + " | ".join(f"vs {b}" for b in a.base) + " | err vs cuDNN |")
            print("|---|---|---|" + "---|" * len(a.base) + "---|")
            for name, r in rows.items():
                vs = []
                for b in a.base:
                    if b in rows and b != name:
                        vs.append(" ".join(f"{(m / bm - 1) * 100:+.1f}%" for m, bm in zip(r["ms"], rows[b]["ms"])))
                    else:
                        vs.append("")
                ratio = " ".join(f"{x:.3f}" for x in r.get("cudnn_over_this", []))
                err = r.get("err_vs_cudnn")
                print(f"| {name} | {' '.join(f'{x:.3f}' for x in r['ms'])} | {ratio} | " + " | ".join(vs)
                      + (f" | {err:.1e} |" if err is not None else " | |"))
        elif part == "kernels":
            acc = defaultdict(list)
            for r in d["rows"]:
                acc[(r["entry"], r["step"])].append(r)
            print("| entry | kernel | ms (rounds) | TFLOP/s |")
            print("|---|---|---|---|")
            for (e, st), rs in acc.items():
                tf = " ".join(f"{r['tflops']:.0f}" for r in rs if r.get("tflops"))
                print(f"| {e} | {st} | {' '.join('%.3f' % r['ms'] for r in rs)} | {tf} |")
        else:
            by = defaultdict(list)
            for r in d["rows"]:
                by[r["entry"]].append(r)
            for e, rs in by.items():
                tot = [r for r in rs if r["kernel"] == "(all)"]
                print(f"- {e}: {tot[0]['ms_per_call']:.3f} ms of kernels a call" if tot else f"- {e}")
                for r in sorted((r for r in rs if r["kernel"] != "(all)"), key=lambda r: -r["ms_per_call"])[:6]:
                    print(f"  - {r['ms_per_call']:.3f} ms x{r['launches']:g} {r['kernel'][:100]}")


if __name__ == "__main__":
    main()
