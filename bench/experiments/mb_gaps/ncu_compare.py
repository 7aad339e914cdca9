"""Side by side: kernelc's and Triton's build of each kernel in an Nsight Compute raw CSV export written from
``ncu_pairs.py``'s launches (``ncu -i R.ncu-rep --page raw --csv``): per kernel name, the first launch is kernelc's,
the second Triton's (ncu_pairs launches them in that order).

    python3 bench/experiments/mb_gaps/ncu_compare.py RAW.csv [--all] [--json OUT]

Prints time, DRAM bytes and throughput, L2 sectors, global requests, achieved occupancy and its limits, shared-memory
bank conflicts and the stall reasons (warps per issue) that differ by more than 5%; ``--all``: every metric that
differs by more than 1%.
"""
from __future__ import annotations

import csv
import json
import re
import sys

KEY = [
    "gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed", "lts__t_sectors_op_read.sum", "lts__t_sectors_op_write.sum",
    "lts__t_requests_srcunit_tex_op_read.sum", "lts__t_requests_srcunit_tex_op_write.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active", "sm__maximum_warps_per_active_cycle_pct",
    "launch__registers_per_thread", "launch__occupancy_limit_registers", "launch__occupancy_limit_shared_mem",
    "launch__occupancy_limit_warps", "launch__shared_mem_per_block_dynamic",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "smsp__inst_executed.sum", "sm__cycles_elapsed.avg", "gpc__cycles_elapsed.max",
]
STALL = re.compile(r"^smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio$")


def _num(v):
    try:
        return float(v.replace(",", ""))
    except (ValueError, AttributeError):
        return None


def load(path):
    rows = list(csv.reader(open(path, newline="")))
    hdr, units, data = rows[0], rows[1], rows[2:]
    out = []
    for r in data:
        if len(r) != len(hdr):
            continue
        out.append({h: v for h, v in zip(hdr, r)})
    return hdr, units, out


def pairs(launches):
    by = {}
    for L in launches:
        by.setdefault(L["Kernel Name"], []).append(L)
    return {k: v for k, v in by.items()}


def main(argv) -> int:
    path = argv[0]
    show_all = "--all" in argv
    hdr, units, launches = load(path)
    result = {}
    for name, ls in pairs(launches).items():
        if len(ls) < 2:
            print(f"== {name}: {len(ls)} launch(es), no pair")
            continue
        k, t = ls[0], ls[1]
        print(f"== {name} (kernelc id {k['ID']}, Triton id {t['ID']}; grid {k['Grid Size']} / {t['Grid Size']}, "
              f"block {k['Block Size']} / {t['Block Size']})")
        rows = {}
        for m in hdr:
            a, b = _num(k.get(m, "")), _num(t.get(m, ""))
            if a is None or b is None:
                continue
            rows[m] = (a, b)
        shown = set()
        for m in KEY:
            if m in rows:
                a, b = rows[m]
                print(f"  {m:62s} {a:16.4g} {b:16.4g}  {'' if not b else f'{a / b:6.3f}'}")
                shown.add(m)
        stalls = [(STALL.match(m).group(1), *rows[m]) for m in rows if STALL.match(m)]
        for s, a, b in sorted(stalls, key=lambda x: -max(x[1], x[2])):
            if max(a, b) >= 0.05 and (not b or abs(a / b - 1) > 0.05 or max(a, b) > 1):
                print(f"  stall {s:56s} {a:16.4g} {b:16.4g}  {'' if not b else f'{a / b:6.3f}'}")
        if show_all:
            for m, (a, b) in sorted(rows.items()):
                if m not in shown and not STALL.match(m) and (a or b) and (not b or abs(a / b - 1) > 0.01):
                    print(f"  {m:62s} {a:16.4g} {b:16.4g}")
        result[name] = {m: {"kernelc": a, "triton": b} for m, (a, b) in rows.items()}
    if "--json" in argv:
        with open(argv[argv.index("--json") + 1], "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0)
    sys.exit(main(sys.argv[1:]))
