"""Headroom of softmax fwd and rope (issue 21, session 26): each column's achieved DRAM bandwidth (the row's bytes
over its time) and its speed against streaming copies of the same bytes timed in the same rounds, from
mem21/variants.py JSON written with ``--copies`` (no torch import: runs at the end of a request, and on CPU).

Per column: the median over rounds of the round's median ms; GB/s = the row's bytes (bench_memory_bound's count:
softmax fwd 2x, rope 2x q; rope's 2 MB of cos/sin, read from L2, not counted) / that time; ``/copy[kc]`` etc.: the
column's speed over that copy (time of the copy / time of the column), a 95% t interval over the rounds from the
rounds' paired log ratios (each round's two columns against the same Triton reference, differenced).

    python3 bench/experiments/mem26/headroom.py FILE.json [...] [--json OUT]
"""
from __future__ import annotations

import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "mem25"))
from summarize import ci  # noqa: E402  (mem25's: exp mean and 95% t interval of per-round log ratios)

COPIES = ("copy[kc]", "copy[tr]", "copy[torch]")


def headroom(path) -> list:
    with open(path) as f:
        d = json.load(f)
    out = []
    for row in d["rows"]:
        rds = row.get("rounds") or []
        ent = {"benchmark": row["benchmark"], "rounds": len(rds), "bytes": row.get("bytes"),
               "errs": row.get("errs", {}), "error": row.get("error"), "cols": {}}
        if rds:
            for n in rds[0]["ms"]:
                ms = statistics.median(r["ms"][n] for r in rds)
                c = {"ms": round(ms, 5)}
                if ent["bytes"]:
                    c["GBps"] = round(ent["bytes"] / ms / 1e6, 1)
                if n in rds[0]["log"]:
                    c["x_triton"] = ci([r["log"][n] for r in rds])
                    for cp in COPIES:
                        if cp in rds[0]["log"] and cp != n:
                            # log(ref / n) - log(ref / copy) = log(copy / n): speed of n over the copy
                            c[f"x_{cp}"] = ci([r["log"][n] - r["log"][cp] for r in rds])
                    if n != "kernelc" and "kernelc" in rds[0]["log"]:
                        c["x_kernelc"] = ci([r["log"][n] - r["log"]["kernelc"] for r in rds])
                ent["cols"][n] = c
        out.append(ent)
    return out


def main(argv) -> int:
    paths = [a for a in argv if a.endswith(".json") and not a.startswith("--")]
    dest = argv[argv.index("--json") + 1] if "--json" in argv else None
    if dest in paths:
        paths.remove(dest)
    res = {}
    for p in paths:
        try:
            rows = headroom(p)
        except (OSError, ValueError, KeyError) as e:
            print(f"{p}: {type(e).__name__}: {e}")
            continue
        res[p] = rows
        for r in rows:
            err = f" ERROR {r['error'][:80]}" if r["error"] else ""
            print(f"{r['benchmark']} [{os.path.basename(p)}]: {r['rounds']} rounds, {r['bytes']} B{err}")
            for n, c in r["cols"].items():
                f = lambda k: f"{c[k][0]:.4f}[{c[k][1]:.4f},{c[k][2]:.4f}]" if c.get(k) else "-"
                print(f"  {n.replace('triton[control]', 'A/A'):16s} {c['ms'] * 1e3:7.2f}us {c.get('GBps', 0):6.0f}GB/s"
                      f" /tr {f('x_triton')} /kc {f('x_kernelc')} /cpkc {f('x_copy[kc]')} /cptorch {f('x_copy[torch]')}")
            print("  errs", {k: (round(v, 6) if isinstance(v, float) else v) for k, v in r["errs"].items()})
    if dest:
        with open(dest, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
