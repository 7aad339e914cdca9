"""Tutorial 05's layer-norm forward (examples/kernels/layernorm.py) at 1024-8192 columns, M=4096 fp16: kernelc under
its defaults, kernelc under other KERNELC_UNIFORM_MASKS values, and Triton on the same source, with each round's
launches interleaved (bench/interleaved.py) and Triton timed twice (its control column: the A/A). The question:
does the uniform-mask rule change this loop kernel (the fifteenth session's regression at 1024-4096 under nodots).

    python3 bench/experiments/mem18/ln_fwd_interleaved.py [--rounds 4] [--n 1024,2048,4096,8192] \
        [--col onepass:KERNELC_UNIFORM_MASKS=onepass ...]        # needs a GPU; writes $OUT/ln_fwd_interleaved.json

Per column: x / Triton from the rounds' per-repetition log ratios (mean over rounds, 95% t interval), GB/s of x
read + y written from the rounds' medians.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)
os.environ.setdefault("KERNELC_CACHE_DIR", tempfile.mkdtemp(prefix="mem18_ln_"))

from bench.bench_memory_bound import CONTROL, _built, _env as Env, column_env, interleaved_round, log_ratio_ci  # noqa
from bench.common import triton_twin   # noqa: E402

M = 4096


def _module(tag):
    from examples.kernels import layernorm
    spec = importlib.util.spec_from_file_location(f"layernorm_{tag}", layernorm.__file__)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--n", default="1024,2048,4096,8192")
    ap.add_argument("--col", action="append", default=[], help="TAG:VAR=VALUE[,VAR=VALUE] (a kernelc column)")
    a = ap.parse_args(argv)
    import torch
    cols = {"kernelc": {}}
    for c in a.col:
        tag, _, assigns = c.partition(":")
        cols[f"kernelc[{tag}]"] = dict(kv.split("=", 1) for kv in assigns.split(",") if kv)
    mods = {c: _module(i) for i, c in enumerate(cols)}
    tri = triton_twin("layernorm")
    cache_root = tempfile.mkdtemp(prefix="mem18_ln_cols_")
    out = {}
    for n in [int(v) for v in a.n.split(",")]:
        torch.manual_seed(0)
        x = torch.randn(M, n, dtype=torch.float16, device="cuda")
        w = torch.rand(n, dtype=torch.float16, device="cuda")
        b = torch.rand(n, dtype=torch.float16, device="cuda")
        ref = torch.nn.functional.layer_norm(x, (n,), w, b)
        fns = {c: (lambda m=m: m.layer_norm(x, w, b)) for c, m in mods.items()}
        fns["triton"] = lambda: tri.layer_norm(x, w, b)
        fns[CONTROL] = lambda: tri.layer_norm(x, w, b)
        regs = {}
        for c, fn in fns.items():
            with Env(column_env(cache_root, c, cols[c]) if c in cols else {}):
                y = fn()[0]
            err = (y.float() - ref.float()).abs().max().item()
            if err > 2e-2:
                print(f"N={n} {c}: max error {err} against torch", flush=True)
            if c in mods:
                regs[c] = {k: ck.n_regs for k, ck in _built(mods[c]).items()}
        names = list(fns)
        rounds = []
        for r in range(a.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            rounds.append(interleaved_round({c: fns[c] for c in order}, CONTROL))
        row = {"regs": regs, "rounds": rounds, "ratio_ci95": {}, "gbps": {}}
        for c in names:
            ms = statistics.median(rd["ms"][c] for rd in rounds)
            row["gbps"][c] = 2 * M * n * 2 / (ms * 1e-3) / 1e9
            if c != "triton":
                ci = log_ratio_ci([rd["log"][c] for rd in rounds])
                row["ratio_ci95"][c] = [round(v, 5) for v in ci] if ci else None
        out[n] = row
        print(f"N={n:6d} " + "  ".join(f"{c} {g:7.1f}" for c, g in row["gbps"].items()) + " GB/s", flush=True)
        print("         x/triton " + "  ".join(f"{c} {v[0]:.4f} [{v[1]:.4f}, {v[2]:.4f}]"
                                               for c, v in row["ratio_ci95"].items() if v) + f"  regs {regs}",
              flush=True)
    d = os.environ.get("OUT") or os.environ.get("RES")
    if d:
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "ln_fwd_interleaved.json"), "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
