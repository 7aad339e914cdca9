"""bench_kernels' softmax 4096x4096 fp32 (examples/kernels/softmax.py: a grid-stride row loop, 16 warps,
``num_programs = 132 * 4``) at several grids, kernelc with this tree's defaults, kernelc with
KERNELC_FILL_STEP_DOWN=0 (main's build: 40 registers, 3 blocks per SM) and Triton on the same source, in one
process with interleaved rounds (GPU).

The question: 528 programs at 3 blocks per SM run as 396 and then 132 alone on their SMs (one 16-warp block,
1.3 loads in flight a thread); at 4 blocks (32 registers, Triton's count) all 528 are resident at once. If that
tail is the cause of main's 2.5% against 766f1cd (53 registers, 2 blocks: two even waves), main's build is
faster at 396 programs than at 528, and the 32-register build is not.

    python3 bench/experiments/mb_gaps/softmax_tail.py [--rounds 5] [--out FILE.json]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "softmax_tail.json"))
    a = ap.parse_args(argv)
    import torch
    from bench.bench_memory_bound import _env, column_env, _time
    from bench.common import triton_twin
    from examples.kernels import softmax as K

    def copy(tag):
        spec = importlib.util.spec_from_file_location(f"softmax_{tag}", K.__file__)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    root = tempfile.mkdtemp(prefix="kernelc-softmax-tail-")
    cols = [("kernelc", K, column_env(root, "0")),
            ("kernelc[nodown]", copy("nodown"), column_env(root, "1", {"KERNELC_FILL_STEP_DOWN": "0"}))]
    T = triton_twin("softmax")
    M, N = a.rows, a.cols
    x = torch.randn(M, N, device="cuda")
    want = torch.softmax(x, 1)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    grids = sorted({sms * 2, sms * 3, sms * 4, M})
    impls = []
    for g in grids:
        for name, mod, env in cols:
            impls.append((f"{name}@{g}", env, lambda mod=mod, g=g: mod.softmax(x, num_programs=g)))
        impls.append((f"triton@{g}", {}, lambda g=g: T.softmax(x, num_programs=g)))
    for n, env, fn in impls:   # compile under each column's knobs, check
        with _env(env):
            err = (fn() - want).abs().max().item()
        assert err < 1e-5, (n, err)
    regs = {}
    for name, mod, _ in cols:
        for ent in mod.softmax_kernel._cuda_state["cache"].values():
            regs[name] = ent.compiled.n_regs
    times = {n: [] for n, _, _ in impls}
    for rnd in range(a.rounds):
        order = impls[rnd % len(impls):] + impls[:rnd % len(impls)]
        for n, env, fn in order:
            with _env(env):
                times[n].append(_time(fn))
    gb = 2 * M * N * 4 / 1e6
    rows = {n: {"ms": statistics.median(t), "gbs": gb / statistics.median(t), "all_ms": t} for n, t in times.items()}
    for n, r in rows.items():
        print(f"{n:24s} {r['ms'] * 1e3:8.2f} us  {r['gbs']:7.1f} GB/s")
    print("registers", regs)
    out = {"device": torch.cuda.get_device_name(0), "sms": sms, "rows": M, "cols": N, "rounds": a.rounds,
           "registers": regs, "results": rows}
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], os.path.basename(a.out)), "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
