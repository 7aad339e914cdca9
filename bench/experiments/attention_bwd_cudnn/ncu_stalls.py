"""Warp-stall samples of Nsight Compute ``--page source --csv`` exports (one kernel each, e.g. the dK/dV kernels
``ncu_bwd.py`` launches), read on CPU: the kernel's samples per stall reason and, for the reasons asked, the SASS
instructions that hold most of them.

    python3 bench/experiments/attention_bwd_cudnn/ncu_stalls.py A_source.csv [B_source.csv ...] \\
        [--reasons long_sb mio barrier] [--top 8] [--json OUT]

Nothing here is a test (docs/attention.md, "The dS^T store: what it costs").
"""
from __future__ import annotations

import argparse
import csv
import json
import sys


def load(path):
    rows = list(csv.reader(open(path)))
    at = next(i for i, r in enumerate(rows) if "Address" in r and "Source" in r)
    hdr = rows[at]
    idx = {h: i for i, h in enumerate(hdr)}
    return idx, [r for r in rows[at + 1:] if len(r) >= len(hdr) - 2 and r[idx["Address"]].startswith("0x")]


def _num(r, idx, key):
    try:
        return float(r[idx[key]].replace(",", ""))
    except (KeyError, ValueError, IndexError):
        return 0.0


def summarize(path, reasons, top):
    idx, rows = load(path)
    stalls = sorted(k[len("stall_"):] for k in idx if k.startswith("stall_") and "(Not Issued)" not in k)
    total = {s: sum(_num(r, idx, "stall_" + s) for r in rows) for s in stalls}
    out = {"file": path, "instructions": len(rows),
           "samples": sum(_num(r, idx, "Warp Stall Sampling (All Samples)") for r in rows),
           "by_reason": {s: v for s, v in sorted(total.items(), key=lambda x: -x[1]) if v}}
    for s in reasons:
        hot = sorted(rows, key=lambda r: -_num(r, idx, "stall_" + s))[:top]
        out[f"top_{s}"] = [{"sass": r[idx["Source"]].strip(), "samples": _num(r, idx, "stall_" + s)} for r in hot]
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("files", nargs="+")
    p.add_argument("--reasons", nargs="*", default=["long_sb", "mio", "wait", "barrier"])
    p.add_argument("--top", type=int, default=8)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    res = [summarize(f, args.reasons, args.top) for f in args.files]
    for r in res:
        print(f"{r['file']}: {r['samples']:.0f} samples")
        print("  " + ", ".join(f"{k} {v:.0f}" for k, v in list(r["by_reason"].items())[:10]))
        for s in args.reasons:
            for h in r[f"top_{s}"][:4]:
                print(f"  {s:12s} {h['samples']:8.0f}  {h['sass'][:70]}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
