"""kernelc's host time per call of tutorial 06's forward, ``attention(q, k, v, causal, sm_scale, False)`` as its
benchmark calls it (autograd Function, torch.empty, four host TensorDescriptors, the autotuner's pre_hook, the
launch), on a CPU machine: the tutorial's text loaded under the alias, the GPU faked below the Python path
(``fakecuda.py``: the kernel compiles for real, no module load, the launch returns at once, CPU tensors).

    python3 bench/experiments/host_launch/cpu_attn06.py --tutorials DIR [--calls 3000 --rounds 5]
        [--profile OUT.txt] [--json OUT.json]

CPU time of this process per call (``time.process_time``: the machine is shared), best and median of the rounds,
per case (fp16 / fp8, d64, causal, N_CTX 2048, batch 1 and 1 head so the CPU tensors are small: the host path does
not depend on the sizes). The autotuner is restricted to 64x64 s3 w4, the config both runtimes take at that key.
Python path only: not the driver, not Triton's runtime (whose launcher needs a driver).
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tutorials", required=True)
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cases", default="fp16,fp8")
    ap.add_argument("--profile", help="cProfile text of the first case's calls")
    ap.add_argument("--json")
    ap.add_argument("--kernelc-root", metavar="DIR", help="time this checkout's kernelc (e.g. main's worktree)")
    a = ap.parse_args(argv)
    if a.kernelc_root:
        sys.path.insert(0, os.path.abspath(a.kernelc_root))
    import fakecuda
    fakecuda.install()
    from kernelc.compat import install
    install()
    import torch
    import host_gpu_split as hgs
    mod = hgs._load(os.path.join(a.tutorials, "06-fused-attention.py"), "t06s23_tut06")
    if hgs._restrict(mod._attn_fwd, "64x64x3x4") is None:
        raise SystemExit("64x64 s3 w4 is not in the tutorial's list")
    fns = {}
    for case in a.cases.split(","):
        torch.manual_seed(0)
        q, k, v = (torch.randn((1, 1, 2048, 64), dtype=torch.float16, requires_grad=True) for _ in range(3))
        if case == "fp8":  # as the benchmark's fp8 provider prepares them
            q, k = q.to(torch.float8_e5m2), k.to(torch.float8_e5m2)
            v = v.permute(0, 1, 3, 2).contiguous().permute(0, 1, 3, 2).to(torch.float8_e5m2)
        fns[case] = (lambda q=q, k=k, v=v: mod.attention(q, k, v, True, 1.3, False))
        t0 = time.perf_counter()
        fns[case]()  # compile
        print(f"{case}: first call {time.perf_counter() - t0:.1f} s", flush=True)
    res = {}
    for case, fn in fns.items():
        per = []
        for _ in range(a.rounds):
            t0 = time.process_time()
            for _ in range(a.calls):
                fn()
            per.append((time.process_time() - t0) / a.calls * 1e6)
        res[case] = {"min_us": min(per), "median_us": statistics.median(per), "rounds_us": per}
        print(f"{case}: {min(per):.1f} us a call (best of {a.rounds}), median {statistics.median(per):.1f}", flush=True)
    if a.profile:
        import cProfile
        import io
        import pstats
        fn = next(iter(fns.values()))
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(a.calls):
            fn()
        prof.disable()
        buf = io.StringIO()
        for key in ("tottime", "cumulative"):
            pstats.Stats(prof, stream=buf).sort_stats(key).print_stats(45)
        with open(a.profile, "w") as f:
            f.write(buf.getvalue())
    import kernelc
    src = os.path.dirname(os.path.dirname(os.path.abspath(kernelc.__file__)))
    print(f"kernelc from {src}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"cases": res, "calls": a.calls, "rounds": a.rounds, "kernelc_from": src}, f, indent=1)


if __name__ == "__main__":
    main()
