"""Which kernels a knob changed: two kernelc disk caches filled by the same run with the knob on and off.

    python3 cache_diff.py CACHE_ON CACHE_OFF [--json OUT]

Entries are matched on (name, signature, constexprs, num_warps, num_stages), since the cache key itself hashes
the knob; for each match it prints whether the PTX differs and how many ``ldmatrix`` instructions each has.
Used to find the kernels of other people's code (Liger-Kernel, Triton's unit tests) where ``KERNELC_CVT_LDMATRIX``
changes the code, so that their tests passing with both values means something.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re


def entries(cache):
    out = {}
    for meta_path in glob.glob(os.path.join(cache, "**", "meta.json"), recursive=True):
        d = os.path.dirname(meta_path)
        try:
            m = json.load(open(meta_path))
            ptx = open(os.path.join(d, "kernel.ptx")).read()
        except (OSError, ValueError):
            continue
        key = (m.get("name"), json.dumps(m.get("signature"), sort_keys=True),
               json.dumps(m.get("constexprs"), sort_keys=True), m.get("num_warps"), m.get("num_stages"))
        out[key] = ptx
    return out


def count_ldmatrix(ptx):
    return len(re.findall(r"^\s*ldmatrix\.", ptx, re.M))


def diff(on, off):
    a, b = entries(on), entries(off)
    rows = []
    for key in sorted(set(a) & set(b), key=str):
        rows.append({"name": key[0], "constexprs": key[2], "num_warps": key[3], "differs": a[key] != b[key],
                     "ldmatrix_on": count_ldmatrix(a[key]), "ldmatrix_off": count_ldmatrix(b[key])})
    return {"only_on": len(set(a) - set(b)), "only_off": len(set(b) - set(a)), "matched": rows}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("on")
    ap.add_argument("off")
    ap.add_argument("--json")
    a = ap.parse_args()
    r = diff(a.on, a.off)
    changed = [x for x in r["matched"] if x["differs"]]
    print(f"matched {len(r['matched'])} kernels ({r['only_on']} only in on, {r['only_off']} only in off); "
          f"{len(changed)} differ")
    for x in changed:
        print(f"  {x['name']} w{x['num_warps']} ldmatrix {x['ldmatrix_off']} -> {x['ldmatrix_on']} {x['constexprs'][:160]}")
    if a.json:
        json.dump(r, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
