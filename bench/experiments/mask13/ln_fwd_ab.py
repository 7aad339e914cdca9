"""The layer-norm forward row (examples/kernels/layernorm.py, tutorial 05's forward) at the tutorial's small N,
where the widened uniform masks moved the fill policy's pick (CPU, sm_90a: N 1024 32 -> 48 registers, 16 -> 10
blocks; 2048 32 -> 48, 8 -> 5; 4096 40 -> 56, 6 -> 4; the launch bound's build, by loads in flight): kernelc under
its defaults, kernelc under main's rules (KERNELC_UNIFORM_MASKS=rings, KERNELC_FILL_KEEP_BLOCKS=off: the same cubins
as main on CPU, mb_gaps/decisions.py), and Triton on the same source, in one process, rounds interleaved.

    python3 bench/experiments/mask13/ln_fwd_ab.py [--rounds 3] [--n 1024,2048,4096,8192]   # needs a GPU

GB/s of x read + y written (2 x M x N x 2 bytes), median over rounds of do_bench's median; writes $OUT/ln_fwd_ab.json.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)
os.environ.setdefault("KERNELC_CACHE_DIR", tempfile.mkdtemp(prefix="mask13_ln_"))

from bench.bench_memory_bound import _built, _env as Env, column_env   # noqa: E402
from bench.common import triton_twin   # noqa: E402

M = 4096
COLUMNS = {"kernelc": {}, "kernelc[main]": {"KERNELC_UNIFORM_MASKS": "rings", "KERNELC_FILL_KEEP_BLOCKS": "off"}}


def _module(tag):
    from examples.kernels import layernorm
    spec = importlib.util.spec_from_file_location(f"layernorm_{tag}", layernorm.__file__)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", default="1024,2048,4096,8192")
    a = ap.parse_args(argv)
    import statistics
    import torch
    from kernelc.testing import do_bench
    mods = {c: _module(i) for i, c in enumerate(COLUMNS)}
    tri = triton_twin("layernorm")
    cache_root = tempfile.mkdtemp(prefix="mask13_ln_cols_")
    out = {}
    for n in [int(v) for v in a.n.split(",")]:
        torch.manual_seed(0)
        x = torch.randn(M, n, dtype=torch.float16, device="cuda")
        w = torch.rand(n, dtype=torch.float16, device="cuda")
        b = torch.rand(n, dtype=torch.float16, device="cuda")
        ref = torch.nn.functional.layer_norm(x, (n,), w, b)
        fns = {c: (lambda m=m: m.layer_norm(x, w, b)) for c, m in mods.items()}
        fns["triton"] = lambda: tri.layer_norm(x, w, b)
        regs = {}
        for c, fn in fns.items():
            # each kernelc column compiles under its knobs into a disk cache of its own
            with Env(column_env(cache_root, c, COLUMNS[c]) if c in COLUMNS else {}):
                y = fn()[0]
            err = (y.float() - ref.float()).abs().max().item()
            if err > 2e-2:
                print(f"N={n} {c}: max error {err} against torch", flush=True)
            if c in mods:
                regs[c] = {k: ck.n_regs for k, ck in _built(mods[c]).items()}
        times = {c: [] for c in fns}
        order = list(fns)
        for r in range(a.rounds):
            for c in (order if r % 2 == 0 else order[::-1]):
                times[c].append(do_bench(fns[c], warmup=25, rep=100, return_mode="median"))
        gbs = {c: 2 * M * n * 2 / (statistics.median(t) * 1e-3) / 1e9 for c, t in times.items()}
        out[n] = {"gbps": gbs, "ms": times, "regs": regs}
        print(f"N={n:6d} " + "  ".join(f"{c} {g:7.1f} GB/s" for c, g in gbs.items())
              + f"   kernelc/main {gbs['kernelc'] / gbs['kernelc[main]']:.3f}  kernelc/triton "
              f"{gbs['kernelc'] / gbs['triton']:.3f}  main/triton {gbs['kernelc[main]'] / gbs['triton']:.3f}  {regs}",
              flush=True)
    d = os.environ.get("OUT")
    if d:
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "ln_fwd_ab.json"), "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
