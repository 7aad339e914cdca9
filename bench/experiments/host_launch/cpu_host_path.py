"""kernelc's host time per call of the tutorial host patterns (bench/bench_launch.py), on a CPU machine.

Kernels compile for real; the GPU is faked below the Python path (``fakecuda.py``: no module load, cuda-python's
cuLaunchKernel into a stand-in libcuda that returns at once, CPU tensors). So this times kernelc's Python launch path
only, not the driver, and cannot time Triton (whose launcher needs a driver). Times are CPU time of this process
(``time.process_time``: the machine is shared). cProfile text per pattern goes to --profile.

    python3 bench/experiments/host_launch/cpu_host_path.py [--rounds 5] [--calls 2000] [--patterns ...]
        [--profile DIR] [--label NAME]     # writes results/cpu_host_path[_NAME].json
"""
from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--patterns", default="01,02,03,05,06,09,09hook")
    ap.add_argument("--profile", metavar="DIR")
    ap.add_argument("--label", default="")
    ap.add_argument("--kernelc-root", metavar="DIR", help="time this checkout's kernelc (e.g. main's)")
    a = ap.parse_args(argv)
    import statistics
    import time
    from bench import bench_launch  # this checkout's bench, whichever kernelc it times
    if a.kernelc_root:
        sys.path.insert(0, os.path.abspath(a.kernelc_root))
    import fakecuda
    fakecuda.install()
    from kernelc.runtime import scratch
    patterns = a.patterns.split(",")
    props = {"max_num_regs": 65536, "max_shared_mem": 232448, "multiprocessor_count": 132}
    times = bench_launch.measure_patterns(["kernelc"], patterns, a.rounds, a.calls, device="cpu", props=props,
                                          sync=lambda: None, profile=a.profile, check=False,
                                          clock=time.process_time)
    rows = {p: {"min_us": min(t), "median_us": statistics.median(t)} for p, t in times["kernelc"].items()}
    rows["_kept_scratch_buffers"] = len(scratch._kept)
    import kernelc
    rows["_kernelc_from"] = os.path.dirname(os.path.dirname(os.path.abspath(kernelc.__file__)))
    for p, r in rows.items():
        print(p, r)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    name = "cpu_host_path" + (f"_{a.label}" if a.label else "") + ".json"
    with open(os.path.join(HERE, "results", name), "w") as f:
        json.dump({"rows": rows, "per_round_us": times["kernelc"], "rounds": a.rounds, "calls": a.calls}, f, indent=1)


if __name__ == "__main__":
    main()
