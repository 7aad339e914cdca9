"""Launch bench_memory_bound cases once under kernelc and once under Triton 3.6, in that order, in one process,
for Nsight Compute to read both builds of the same source side by side (GPU):

    ncu --clock-control none --set full -k regex:'^(transpose|swiglu_bwd|softmax_bwd|log_softmax_bwd)_kernel$' \\
        -f -o $OUT/pairs python3 bench/experiments/mb_gaps/ncu_pairs.py transpose swiglu softmax log_softmax rms

Prints the launch order (``kernelc NAME`` then ``triton NAME`` per case) so the report's launch IDs map to the
implementations; each pair's outputs are compared first (outside the profiled kernels' names, torch's ops).
"""
from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)


def main(argv) -> int:
    import torch
    from bench.bench_memory_bound import _err, cases
    from bench.common import triton_twin
    from examples.kernels import memory_bound as K
    T = triton_twin("memory_bound")
    for name, (make, call, ref, nbytes) in cases().items():
        if argv and not any(name.startswith(a) for a in argv):
            continue
        args = make()
        torch.cuda.synchronize()
        got = call(K, *[a.clone() for a in args])
        torch.cuda.synchronize()
        print(f"launch: kernelc {name}", flush=True)
        want = call(T, *[a.clone() for a in args])
        torch.cuda.synchronize()
        print(f"launch: triton {name}; max abs diff {_err(got, want):.3g}", flush=True)
    return 0


if __name__ == "__main__":
    if "-h" in sys.argv or "--help" in sys.argv:
        print(__doc__)
        sys.exit(0)
    sys.exit(main(sys.argv[1:]))
