"""Nsight Compute's per-instruction samples of one kernel, split per MMA loop: an ``ncu ... --page source
--print-source sass --csv`` export (GPU request fa06b, ``ncu_targets.py --target bwd06:D:CAUSAL``) read on CPU.

    python3 bench/experiments/tutorial_gaps/bwd06_ncu_loops.py KERNELC.sass.csv TRITON.sass.csv [--json OUT]

Loops are the innermost backward branches whose body holds an HGMMA (as bwd06_sass.py finds them in the cubin),
in program order; per loop: its SASS instructions, how often its first instruction ran (warps x iterations),
the warp-state samples in it and their share of the kernel's, the top stall reasons, the hottest instructions.
Everything outside the loops (prologue, epilogue, a wait's retry path placed after its loop) is summed apart.
Nothing here is a test (docs/triton-tutorials.md, "06 backward: causal and d64").
"""
import collections
import csv
import json
import re
import sys

def load(path):
    rows = list(csv.reader(open(path)))
    hdr = rows[1]
    idx = {h: i for i, h in enumerate(hdr)}
    out = []
    for r in rows[2:]:
        if len(r) < len(hdr) - 2 or not r[idx["Address"]].startswith("0x"):
            continue
        out.append(r)
    return hdr, idx, out

def loops(path):
    hdr, idx, rows = load(path)
    addr = [int(r[idx["Address"]], 16) for r in rows]
    src = [r[idx["Source"]].strip() for r in rows]
    pos = {a: i for i, a in enumerate(addr)}
    spans = []
    for i, s in enumerate(src):
        m = re.search(r"\bBRA\s+(0x[0-9a-f]+)", s)
        if m:
            t = int(m.group(1), 16)
            if t in pos and pos[t] <= i and any("HGMMA" in x for x in src[pos[t]:i]):
                spans.append((pos[t], i))
    inner = [sp for sp in spans if not any(o != sp and sp[0] <= o[1] < sp[1] for o in spans)]
    stall_cols = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    def num(x):
        try: return float(x.replace(",", ""))
        except: return 0.0
    total = sum(num(r[idx["Warp Stall Sampling (All Samples)"]]) for r in rows)
    res = {"total_samples": total, "loops": []}
    for lo, hi in inner:
        body = rows[lo:hi + 1]
        samp = sum(num(r[idx["Warp Stall Sampling (All Samples)"]]) for r in body)
        ex = num(body[0][idx["Instructions Executed"]])
        st = collections.Counter()
        for r in body:
            for c in stall_cols:
                st[c] += num(r[idx[c]])
        # hottest instructions
        hot = sorted(((num(r[idx["Warp Stall Sampling (All Samples)"]]), r[idx["Source"]].strip()[:60]) for r in body),
                     reverse=True)[:6]
        res["loops"].append({"n_instr": hi - lo + 1, "iterations_x_warps": ex, "samples": samp,
                             "share": round(samp / total, 3), "stalls": dict(st.most_common(6)), "hot": hot})
    return res


def outside(path, n=12):
    hdr, idx, rows = load(path)
    src = [r[idx["Source"]].strip() for r in rows]
    addr = [int(r[idx["Address"]], 16) for r in rows]
    pos = {a: i for i, a in enumerate(addr)}
    inloop = set()
    spans = []
    for i, s in enumerate(src):
        m = re.search(r"\bBRA\s+(0x[0-9a-f]+)", s)
        if m:
            t = int(m.group(1), 16)
            if t in pos and pos[t] <= i and any("HGMMA" in x for x in src[pos[t]:i]):
                spans.append((pos[t], i))
    for lo, hi in spans:
        inloop.update(range(lo, hi + 1))
    def num(x):
        try: return float(x.replace(",", ""))
        except: return 0.0
    out = [(num(rows[i][idx["Warp Stall Sampling (All Samples)"]]), i, src[i][:70]) for i in range(len(rows))
           if i not in inloop]
    stall_cols = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    st = collections.Counter()
    for i in range(len(rows)):
        if i not in inloop:
            for c in stall_cols: st[c] += num(rows[i][idx[c]])
    return sorted(out, reverse=True)[:n], dict(st.most_common(6))


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    out = {}
    for p in a.csv:
        r = loops(p)
        hot, st = outside(p)
        r["outside"] = {"samples": r["total_samples"] - sum(lp["samples"] for lp in r["loops"]), "stalls": st,
                        "hot": hot[:8]}
        out[p] = r
        print(p, "total samples", r["total_samples"])
        for i, lp in enumerate(r["loops"]):
            print(f"  loop {i + 1}: {lp['n_instr']} instrs, first instr executed {lp['iterations_x_warps']:.0f}, "
                  f"samples {lp['samples']:.0f} ({lp['share'] * 100:.1f}%)")
            print("     stalls", {k[6:]: int(v) for k, v in lp["stalls"].items()})
        print(f"  outside the loops: {r['outside']['samples']:.0f}", {k[6:]: int(v) for k, v in st.items()})
    if a.json:
        json.dump(out, open(a.json, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
