"""Host cost of one call of tutorial 02's ``softmax(x)``, under real Triton and under kernelc.

At 256 columns the tutorial's kernel is a few microseconds of GPU work, so its table measures the host:
every call allocates ``y``, calls ``softmax_kernel.warmup(...)`` (to read ``n_regs``), ``_init_handles()``
and launches the returned compiled kernel with ``kernel[(programs, 1, 1)](...)``. This times, per
implementation, each of those steps on the host while the GPU is held busy (``torch.cuda._sleep``: no
step waits on the device), and the whole call as the tutorial's table does (CUDA events, L2 flush).

The kernel is read from the tutorial file (``--tutorials``, Triton's text, not part of this
repository) and run unmodified, each implementation in its own process, interleaved rounds, best per
value.

    python3 bench/experiments/tutorial_gaps/softmax_host.py [--tutorials DIR] [--rounds 2]
        # writes results/softmax_host.json (and $OUT/softmax_host.json when OUT is set)
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
ROWS = 4096
WIDTHS = (256, 4352)


def _host_us(fn, n=200):
    import torch
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    torch.cuda._sleep(400_000_000)  # ~0.2 s of GPU time: the queue never drains while the host enqueues
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6


def child(tutorial: str, impl: str) -> dict:
    if impl.startswith("kernelc"):
        sys.path.insert(0, ROOT)
        import kernelc.compat
        kernelc.compat.install()
    import torch
    import triton
    from triton.runtime import driver
    from softmax_grid import _kernel_module
    from layernorm_bwd import _time_ms
    k_fn = _kernel_module(tutorial).softmax_kernel
    props = driver.active.utils.get_device_properties(torch.cuda.current_device())
    nsm, nregs, smem = props["multiprocessor_count"], props["max_num_regs"], props["max_shared_mem"]
    num_warps, num_stages = 8, (4 if smem > 200000 else 2)
    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    out = {"impl": impl, "widths": {}}
    for n_cols in WIDTHS:
        x = torch.randn(ROWS, n_cols, device="cuda")
        bs = triton.next_power_of_2(n_cols)

        def warm(y):
            return k_fn.warmup(y, x, x.stride(0), y.stride(0), ROWS, n_cols, BLOCK_SIZE=bs, num_stages=num_stages,
                               num_warps=num_warps, grid=(1,))

        def softmax():  # the tutorial's call sequence (CUDA path)
            y = torch.empty_like(x)
            k = warm(y)
            k._init_handles()
            occ = min(nregs // (k.n_regs * 32 * num_warps), smem // max(k.metadata.shared, 1))
            k[(min(nsm * occ, ROWS), 1, 1)](y, x, x.stride(0), y.stride(0), ROWS, n_cols, bs, num_stages)
            return y

        y = softmax()
        torch.cuda.synchronize()
        assert torch.allclose(y, torch.softmax(x, 1), atol=1e-5, rtol=1e-4), f"{impl} {n_cols}: wrong result"
        k = warm(y)
        grid = (min(nsm * (nregs // (k.n_regs * 32 * num_warps)), ROWS), 1, 1)
        row = {"n_regs": k.n_regs, "programs": grid[0],
               "softmax_host_us": _host_us(softmax),
               "empty_like_us": _host_us(lambda: torch.empty_like(x)),
               "warmup_us": _host_us(lambda: warm(y)),
               "compiled_launch_us": _host_us(
                   lambda: k[grid](y, x, x.stride(0), y.stride(0), ROWS, n_cols, bs, num_stages)),
               "jit_launch_us": _host_us(
                   lambda: k_fn[grid](y, x, x.stride(0), y.stride(0), ROWS, n_cols, bs, num_stages,
                                      num_warps=num_warps)),
               "softmax_ms": _time_ms(softmax, flush, reps=200)}
        row["gbps"] = 2 * x.numel() * x.element_size() * 1e-9 / (row["softmax_ms"] * 1e-3)
        out["widths"][str(n_cols)] = row
        print(impl, n_cols, json.dumps(row), flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tutorials", default=os.path.join(ROOT, ".ext", "tutorials"))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    tut = os.path.join(os.path.abspath(a.tutorials), "02-fused-softmax.py")
    if a.child:
        print("RESULT " + json.dumps(child(tut, a.child)))
        return 0
    impls = ["triton", "kernelc"]
    best: dict = {}
    for rnd in range(a.rounds):
        for impl in (impls if rnd % 2 == 0 else impls[::-1]):
            env = dict(os.environ, KERNELC_CACHE_DIR=tempfile.mkdtemp(prefix="kc_cache_"))
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--tutorials", a.tutorials, "--child", impl],
                               env=env, capture_output=True, text=True, timeout=200)
            lines = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
            if p.returncode or not lines:
                print(f"{impl}: failed\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}", flush=True)
                best.setdefault(impl, {"error": p.stderr[-3000:]})
                continue
            res = json.loads(lines[-1][7:])
            cur = best.get(impl)
            if cur is None or "widths" not in cur:
                best[impl] = res
                continue
            for w, row in res["widths"].items():
                for key, v in row.items():
                    if key.endswith("_us") or key.endswith("_ms"):
                        cur["widths"][w][key] = min(cur["widths"][w][key], v)
                cur["widths"][w]["gbps"] = max(cur["widths"][w]["gbps"], row["gbps"])
    keys = ("gbps", "softmax_ms", "softmax_host_us", "empty_like_us", "warmup_us", "compiled_launch_us",
            "jit_launch_us", "n_regs")
    print(f"{'n_cols':>6s} {'impl':8s} " + " ".join(f"{k:>18s}" for k in keys))
    for w in map(str, WIDTHS):
        for impl in impls:
            r = best.get(impl, {}).get("widths", {}).get(w)
            if r:
                print(f"{w:>6s} {impl:8s} " + " ".join(f"{r[k]:18.4g}" for k in keys))
    for d in (os.path.join(HERE, "results"), os.environ.get("OUT")):
        if d:
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "softmax_host.json"), "w") as f:
                json.dump(best, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
