"""kernelc's share of the host time of tutorial 05's backward as its benchmark times it (``y.backward(dy,
retain_graph=True)`` with x's grad set to None), on a CPU machine: the tutorial's text under the alias, the GPU faked
below the Python path (``fakecuda.py``), 4096 x N fp16 tensors on the CPU (torch's zeros/empty run for real on the
CPU, so their share here is not the GPU host's).

    python3 bench/experiments/host_launch/cpu_ln05.py --tutorials DIR [--n 15872] [--calls 300 --rounds 5]

Per call: the whole backward, and the two kernelc launches in it (``_layer_norm_bwd_dx_fused``, ``_layer_norm_bwd_dwdb``,
timed by wrapping the kernels' ``__getitem__`` result), CPU time of this process (``time.process_time``).
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
    ap.add_argument("--n", type=int, default=15872)
    ap.add_argument("--m", type=int, default=4096)
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    import fakecuda
    fakecuda.install()
    from kernelc.compat import install
    install()
    import torch
    import host_gpu_split as hgs
    mod = hgs._load(os.path.join(a.tutorials, "05-layer-norm.py"), "t06s24_tut05", stop_at="test_layer_norm(1151")
    spent = {"launch": 0.0}
    for name in ("_layer_norm_bwd_dx_fused", "_layer_norm_bwd_dwdb"):
        k = getattr(mod, name)
        orig = type(k).__getitem__

        class Timed(type(k)):  # the launch from kernel[grid] to its return
            def __getitem__(self, grid, _orig=orig):
                launcher = _orig(self, grid)

                def timed(*args, **kw):
                    t0 = time.process_time()
                    try:
                        return launcher(*args, **kw)
                    finally:
                        spent["launch"] += time.process_time() - t0
                return timed
        k.__class__ = Timed
    torch.manual_seed(0)
    w_shape = (a.n,)
    weight = torch.rand(w_shape, dtype=torch.float16, requires_grad=True)
    bias = torch.rand(w_shape, dtype=torch.float16, requires_grad=True)
    x = -2.3 + 0.5 * torch.randn((a.m, a.n), dtype=torch.float16)
    dy = .1 * torch.randn_like(x)
    x.requires_grad_(True)
    y = mod.layer_norm(x, w_shape, weight, bias, 1e-5)

    def fn():
        x.grad = None
        y.backward(dy, retain_graph=True)
    fn()
    whole, launch = [], []
    for _ in range(a.rounds):
        spent["launch"] = 0.0
        t0 = time.process_time()
        for _ in range(a.calls):
            fn()
        whole.append((time.process_time() - t0) / a.calls * 1e6)
        launch.append(spent["launch"] / a.calls * 1e6)
    out = {"n": a.n, "whole_us": {"best": min(whole), "median": statistics.median(whole)},
           "two_launches_us": {"best": min(launch), "median": statistics.median(launch)}}
    print(json.dumps(out))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
