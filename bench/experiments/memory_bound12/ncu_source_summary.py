"""Per-instruction warp-stall samples of each kernel in an Nsight Compute source-page export
(``ncu -i R.ncu-rep --page source --csv``): the global loads/stores, EXIT, and every instruction with at least 1%
of the kernel's samples, with its stall reasons. Kernels appear in launch order (ncu_pairs.py: kernelc, then Triton).

    python3 bench/experiments/memory_bound12/ncu_source_summary.py SOURCE.csv [--min-share 0.01]
"""
from __future__ import annotations

import csv
import sys


def summarise(path: str, min_share: float = 0.01) -> str:
    rows = list(csv.reader(open(path, newline="")))
    starts = [i for i, r in enumerate(rows) if r and r[0] == "Kernel Name"]
    out = []
    for n, (a, b) in enumerate(zip(starts, starts[1:] + [len(rows)])):
        head = rows[a + 1]
        ix = {h: i for i, h in enumerate(head)}
        body = [r for r in rows[a + 2:b] if len(r) == len(head)]
        col = ix["Warp Stall Sampling (All Samples)"]
        total = sum(int(r[col] or 0) for r in body)
        stalls = [h for h in head if h.startswith("stall_") and "(Not" not in h]
        out.append(f"== {rows[a][1]} (launch {n}): {len(body)} instructions, {total} samples")
        for r in body:
            s = int(r[col] or 0)
            src = r[ix["Source"]].strip()
            if s >= total * min_share or any(k in src for k in ("LDG", "STG", "EXIT")):
                why = {h[6:]: int(r[ix[h]]) for h in stalls if r[ix[h]] not in ("", "0")}
                out.append(f"{s:7d} {100.0 * s / max(total, 1):5.1f}%  {src[:56]:56s} {why}")
    return "\n".join(out)


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0)
    share = float(sys.argv[sys.argv.index("--min-share") + 1]) if "--min-share" in sys.argv else 0.01
    print(summarise(sys.argv[1], share))
