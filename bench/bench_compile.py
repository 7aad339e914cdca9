"""Compile time: cold (empty cache, fresh process) and warm (disk cache) first-launch latency of
vector add and a matmul, kernelc vs Triton, each in its own subprocess."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.common import write_results  # noqa: E402

CHILD = r"""
import os, sys, time, json
sys.path.insert(0, {root!r})
import torch
torch.zeros(1, device="cuda"); torch.cuda.synchronize()
which, kernel = sys.argv[1], sys.argv[2]
if which == "kernelc":
    from examples.kernels import vector_add as V, matmul as M
else:
    from bench.common import triton_twin
    V, M = triton_twin("vector_add"), triton_twin("matmul")
x = torch.rand(4096, device="cuda"); y = torch.rand(4096, device="cuda"); o = torch.empty_like(x)
a = torch.randn(512, 512, device="cuda", dtype=torch.float16); b = torch.randn(512, 512, device="cuda", dtype=torch.float16)
c = torch.empty(512, 512, device="cuda", dtype=torch.float16)
torch.cuda.synchronize()
t0 = time.perf_counter()
if kernel == "vector_add":
    V.add_kernel[(4,)](x, y, o, 4096, BLOCK_SIZE=1024)
else:
    M.matmul_kernel[(16,)](a, b, c, 512, 512, 512, 512, 1, 512, 1, 512, 1, BLOCK_SIZE_M=128, BLOCK_SIZE_N=128,
                           BLOCK_SIZE_K=32, GROUP_SIZE_M=8, num_warps=8, num_stages=3)
torch.cuda.synchronize()
secs = time.perf_counter() - t0
load = None
if which == "kernelc":
    k = V.add_kernel if kernel == "vector_add" else M.matmul_kernel
    ent = next(iter(k._cuda_state["cache"].values()))
    load = ent.compiled.timings.get("disk_cache_load")
print(json.dumps({{"seconds": secs, "disk_load": load}}))
"""


def run(which, kernel, cache):
    env = dict(os.environ, KERNELC_CACHE_DIR=cache, TRITON_CACHE_DIR=cache)
    p = subprocess.run([sys.executable, "-c", CHILD.format(root=ROOT), which, kernel], env=env, capture_output=True,
                       text=True, timeout=300)
    if p.returncode:
        return {"error": p.stderr[-500:]}, None
    out = json.loads(p.stdout.strip().splitlines()[-1])
    return out["seconds"], out.get("disk_load")


def main():
    rows = []
    for kernel in ("vector_add", "matmul"):
        for which in ("kernelc", "triton"):
            cache = tempfile.mkdtemp(prefix=f"cc_{which}_")
            cold, _ = run(which, kernel, cache)
            warm, load = run(which, kernel, cache)
            rows.append({"kernel": kernel, "compiler": which, "cold_s": cold, "warm_s": warm,
                         "disk_load_ms": load * 1e3 if load is not None else None})
    write_results("compile_time", rows, {
        "targets": "cold vector add <= 0.5 s, matmul <= 1.0 s, warm load from disk <= 10 ms",
        "note": "cold/warm_s: first launch in a fresh process (CUDA module load and one-time driver/runtime "
                "setup included); disk_load_ms: reading the compiled kernel from the disk cache"})


if __name__ == "__main__":
    main()
