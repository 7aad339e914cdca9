"""kernelc's host time per call of tutorial 03's ``matmul(a, b)`` as its benchmark calls it at 256^3 (fp16 inputs, and
fp8 inputs prepared as the benchmark does: ``b.T`` then the cast, so b is column-major), on a CPU machine: the
tutorial's text under the alias, the GPU faked below the Python path (``fakecuda.py``), the autotuner held to one
config (``--config``, host_gpu_split.py's spec; default: kernelc's S24 pick at the fp8 point).

    python3 bench/experiments/host_launch/cpu_mm03.py --tutorials DIR [--calls 3000 --rounds 5] [--profile OUT.txt]

CPU time of this process per call (``time.process_time``), best and median of the rounds, per case. Python path
only: not the driver, not Triton's runtime.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "tutorial_gaps"))
PICK = "BLOCK_SIZE_M=128/BLOCK_SIZE_N=32/BLOCK_SIZE_K=32/GROUP_SIZE_M=8/w=4/s=4"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tutorials", required=True)
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--config", default=PICK)
    ap.add_argument("--profile")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    import fakecuda
    fakecuda.install()
    from kernelc.compat import install
    install()
    import torch
    import host_gpu_split as hgs
    mod = hgs._load(os.path.join(a.tutorials, "03-matrix-multiplication.py"), "t06s24_tut03",
                    stop_at="torch.manual_seed(0)")
    hgs._restrict_spec(mod.matmul_kernel, a.config)
    fns = {}
    for case in ("fp16", "fp8"):
        torch.manual_seed(0)
        x = torch.randn((256, 256), dtype=torch.float16)
        y = torch.randn((256, 256), dtype=torch.float16)
        if case == "fp8":
            x = x.to(torch.float8_e5m2)
            y = y.T
            y = y.to(torch.float8_e5m2)
        fns[case] = (lambda x=x, y=y: mod.matmul(x, y))
        t0 = time.perf_counter()
        fns[case]()
        print(f"{case}: first call {time.perf_counter() - t0:.2f} s; b strides {tuple(y.stride())}", flush=True)
    res = {c: [] for c in fns}
    for _ in range(a.rounds):
        for c, fn in fns.items():
            t0 = time.process_time()
            for _ in range(a.calls):
                fn()
            res[c].append((time.process_time() - t0) / a.calls * 1e6)
    out = {c: {"best_us": min(v), "median_us": statistics.median(v), "rounds": v} for c, v in res.items()}
    for c, v in out.items():
        print(f"{c}: {v['best_us']:.2f} us best, {v['median_us']:.2f} median a call")
    if a.profile:
        import cProfile
        import io
        import pstats
        for c, fn in fns.items():
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(a.calls):
                fn()
            prof.disable()
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(25)
            with open(f"{a.profile}.{c}.txt", "w") as f:
                f.write(buf.getvalue())
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
