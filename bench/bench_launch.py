"""Host launch overhead of a cached kernel: kernelc vs Triton vs torch.add vs a bare cuLaunchKernel,
and kernelc with a launch hook registered. Per-launch host time over many launches of a tiny kernel."""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from bench.common import triton_twin, write_results  # noqa: E402

N_LAUNCH = 20000


def per_launch_us(fn, n=N_LAUNCH):
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        best = min(best, (t1 - t0) / n * 1e6)
    return best


def main():
    from examples.kernels import vector_add as K
    from kernelc.runtime import hooks
    T = triton_twin("vector_add")
    x, y, o = (torch.rand(1024, device="cuda") for _ in range(3))
    n = x.numel()
    ours = lambda: K.add_kernel[(1,)](x, y, o, n, BLOCK_SIZE=1024)  # noqa: E731
    tri = lambda: T.add_kernel[(1,)](x, y, o, n, BLOCK_SIZE=1024)  # noqa: E731
    tadd = lambda: torch.add(x, y, out=o)  # noqa: E731
    # bare cuda-python launch of our compiled kernel with a prebuilt argument tuple
    from cuda.bindings import driver
    import ctypes
    ours()
    st = K.add_kernel._cuda_state
    ent = next(iter(st["cache"].values()))
    f = ent.function.function
    stream = torch.cuda.current_stream().cuda_stream
    args = ((x.data_ptr(), y.data_ptr(), o.data_ptr(), n), (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int))
    bare = lambda: driver.cuLaunchKernel(f, 1, 1, 1, 128, 1, 1, 0, stream, args, 0)  # noqa: E731
    # the same kernel launched through a ctypes call into libcuda (the alternative launch route)
    import kernelc
    os.environ["KERNELC_LAUNCH_IMPL"] = "ctypes"
    K2 = kernelc.jit(K.add_kernel.fn)
    ours_cp = lambda: K2[(1,)](x, y, o, n, BLOCK_SIZE=1024)  # noqa: E731
    ours_cp()
    os.environ.pop("KERNELC_LAUNCH_IMPL")
    rows = []
    r_ours, r_tri, r_add, r_bare = per_launch_us(ours), per_launch_us(tri), per_launch_us(tadd), per_launch_us(bare)
    r_cp = per_launch_us(ours_cp)
    h = hooks.register(enter=lambda rec: None)
    r_hook = per_launch_us(ours)
    hooks.unregister(h)
    rows.append({"what": "kernelc launch (cached)", "us_per_launch": r_ours, "vs_triton": r_ours / r_tri,
                 "vs_torch_add": r_ours / r_add})
    rows.append({"what": "kernelc launch via ctypes libcuda call", "us_per_launch": r_cp, "vs_triton": r_cp / r_tri,
                 "vs_torch_add": r_cp / r_add})
    rows.append({"what": "triton launch (cached)", "us_per_launch": r_tri, "vs_triton": 1.0, "vs_torch_add": r_tri / r_add})
    rows.append({"what": "torch.add(out=)", "us_per_launch": r_add, "vs_triton": r_add / r_tri, "vs_torch_add": 1.0})
    rows.append({"what": "bare cuda-python cuLaunchKernel", "us_per_launch": r_bare, "vs_triton": r_bare / r_tri,
                 "vs_torch_add": r_bare / r_add})
    rows.append({"what": "kernelc launch + 1 no-op hook", "us_per_launch": r_hook, "vs_triton": r_hook / r_tri,
                 "vs_torch_add": r_hook / r_add})
    write_results("launch_overhead", rows, {"targets": "kernelc <= 0.6x triton and <= 1.2x torch.add"})


if __name__ == "__main__":
    main()
