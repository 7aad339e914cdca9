"""(d64c28) Every backward launch the example makes, recorded without running (CPU, no GPU needed): for each head dim,
mask, sequence length and dQ mode (``None``: the default), through the launch plan (``attention_bwd``) and the general
path (``attention_bwd_steps``), each kernel's name, grid and launch keywords (its compile key's constexprs and options).
Run on two trees and ``--diff`` the two JSON files: a launch whose keywords and kernel are the same compiles to the same
PTX/SASS under the same compiler (the kernels' source and the compiler unchanged between the two).

    PYTHONPATH=$PWD python3 bench/experiments/d64c28/launch_keys.py --out A.json
    python3 bench/experiments/d64c28/launch_keys.py --diff A.json B.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys

HEAD_DIMS = (16, 32, 64, 128)
LENGTHS = (1000, 1024, 1026, 4096, 8188, 8192, 12288, 16380, 16384, 32768)
MODES = (None, "fused", "separate", "atomic", "flat", "ds")


def record():
    import torch
    from examples.kernels import attention_bwd as B
    seen = []

    class Record:
        def __init__(self, name):
            self.name = name

        def __getitem__(self, grid):
            return lambda *a, **kw: seen.append([self.name, list(grid), {k: repr(v) for k, v in sorted(kw.items())}])

        def prepare(self, grid, *a, **kw):
            return lambda *ts: seen.append([self.name, list(grid), {k: repr(v) for k, v in sorted(kw.items())}])
    real = {name: getattr(B, name) for name in dir(B) if name.endswith("_kernel")}
    for name in real:
        setattr(B, name, Record(name))
    B.clear_plans()
    try:
        return _record_all(B, torch, seen)
    finally:
        for name, kernel in real.items():  # the kernels back (sass_defaults.py compiles them next)
            setattr(B, name, kernel)
        B.clear_plans()


def _record_all(B, torch, seen):
    out = {}
    for D in HEAD_DIMS:
        for causal in (False, True):
            for N in LENGTHS:
                q = torch.zeros(1, 2, N, D, dtype=torch.float16)
                lse = torch.zeros(1, 2, N, dtype=torch.float32)
                for mode in MODES:
                    if mode == "ds" and N > 4096:
                        continue  # dS^T's buffer: the keys are N's, not its size's
                    key = f"D={D} causal={int(causal)} N={N} mode={mode}"
                    for path in ("plan", "steps"):
                        seen.clear()
                        try:
                            if path == "plan":
                                B.attention_bwd(q, q, q, q, q, lse, causal, 0.125, dq_mode=mode)
                            else:
                                _, steps = B.attention_bwd_steps(q, q, q, q, q, lse, causal, 0.125, dq_mode=mode)
                                for _, launch in steps:
                                    launch()
                            out[f"{key} {path}"] = list(seen)
                        except Exception as e:  # a mode a shape does not take: its message is the record
                            out[f"{key} {path}"] = f"{type(e).__name__}: {e}"
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--diff", nargs=2)
    a = ap.parse_args()
    if a.diff:
        x, y = (json.load(open(p)) for p in a.diff)
        same = [k for k in x if x[k] == y.get(k)]
        differ = sorted(k for k in set(x) | set(y) if x.get(k) != y.get(k))
        print(f"{len(same)} cases the same, {len(differ)} differ")
        for k in differ:
            print("DIFFERS", k)
        return
    sys.path.insert(0, os.getcwd())
    res = record()
    json.dump(res, open(a.out, "w"), indent=0, sort_keys=True)
    print(f"{len(res)} cases recorded")


if __name__ == "__main__":
    main()
