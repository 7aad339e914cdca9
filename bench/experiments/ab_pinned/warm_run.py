"""Run a script after keeping the GPU busy for a while, in the same process:

    python3 warm_run.py SECONDS SCRIPT [ARGS...]

kernels_abba.py's first row of each process was its noisiest (s14: the 4096^3 rows), timed while the clocks were
still ramping from the idle gap between processes; a few seconds of fp16 GEMMs just before the script's first
timing lets them settle. The script runs as ``__main__`` with its own ``__file__``, so it sets up its own paths.
"""
from __future__ import annotations

import runpy
import sys
import time


def warm(seconds: float) -> int:
    """Back-to-back 4096^3 fp16 GEMMs for ``seconds``; returns how many ran (0 without a GPU)."""
    if seconds <= 0:
        return 0
    import torch
    if not torch.cuda.is_available():
        return 0
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    n, t_end = 0, time.time() + seconds
    while time.time() < t_end:
        for _ in range(8):
            a @ a
        torch.cuda.synchronize()
        n += 8
    return n


def main(argv):
    seconds, script, args = float(argv[0]), argv[1], argv[2:]
    n = warm(seconds)
    print(f"warm_run: {n} GEMMs in {seconds:.1f}s before {script}", flush=True)
    sys.argv = [script, *args]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
