"""Compare bench/bench_kernels.py results of two trees run one after the other on the same GPU (issue 21's
"no bench_kernels regression" A/B): per row, tree B's kernelc/control ratio over tree A's.

    python3 bench/experiments/ab_pinned/kernels_ab.py --a pre_gpu0.json pre_gpu1.json --b main_gpu0.json main_gpu1.json

Files are given in pairs (the i-th A file and the i-th B file ran on the same GPU in one call, in either
order). Each bench_kernels row times kernelc and a control in the same process: Triton on the same source, or
the library reference (cuBLAS, SDPA, torch) where Triton has no column. The row's figure here is kernelc's speed
over that control, so clock and thermal differences between the two processes cancel; B/A of that figure is
the change between the trees (> 1: B faster). Also printed per pair: the control's own speed B/A (how much the
GPU moved between the two processes), and each tree's autotune pick where the row records one.
"""
from __future__ import annotations

import argparse
import json
import statistics


def _rows(path):
    return {r["benchmark"]: r for r in json.load(open(path))["rows"] if "error" not in r}


def _control(row):
    """(name, kernelc / control speed, control metric) of a row."""
    if row.get("kernelc/triton"):
        return "triton", row["kernelc/triton"], row["triton"]
    for k, v in row.items():
        if k.startswith("kernelc/") and v:
            ref = k.split("/", 1)[1]
            return ref, v, row.get(ref)
    return None, None, None


def compare(a_files, b_files):
    if len(a_files) != len(b_files):
        raise SystemExit("--a and --b need the same number of files (one A and one B per GPU)")
    pairs = [(_rows(a), _rows(b)) for a, b in zip(a_files, b_files)]
    names = [n for n in pairs[0][0] if all(n in a and n in b for a, b in pairs)]
    out = []
    for n in names:
        changes, controls, picks = [], [], set()
        ref = None
        for a, b in pairs:
            ref, ra, ca = _control(a[n])
            _, rb, cb = _control(b[n])
            if ra and rb:
                changes.append(rb / ra)
                if ca and cb:
                    controls.append(cb / ca)
            picks.add((a[n].get("config"), b[n].get("config")))
        if not changes:
            continue
        rec = {"benchmark": n, "control": ref, "b_over_a": statistics.median(changes), "min": min(changes),
               "max": max(changes), "control_b_over_a": controls, "configs_a_b": sorted(map(list, picks), key=str)}
        out.append(rec)
        print(f"{n:52s} {ref:18s} B/A {rec['b_over_a']:.3f} [{rec['min']:.3f}, {rec['max']:.3f}]  control moved "
              + " ".join(f"{c:.3f}" for c in controls))
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", nargs="+", required=True)
    ap.add_argument("--b", nargs="+", required=True)
    ap.add_argument("--out")
    args = ap.parse_args()
    res = compare(args.a, args.b)
    if args.out:
        json.dump(res, open(args.out, "w"), indent=1)
