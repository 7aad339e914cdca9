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


# tutorial 06's host pattern: TensorDescriptors made on every call with a dummy block, an autotuned kernel whose
# config's pre_hook sets their block shapes, a grid function of META; written once, built by both compilers
DESC_SRC = """
import kernelc as triton
import kernelc.language as tl
from kernelc.tools.tensor_descriptor import TensorDescriptor


def _set_blocks(nargs):
    nargs["x_desc"].block_shape = [nargs["BM"], nargs["BN"]]
    nargs["y_desc"].block_shape = [nargs["BM"], nargs["BN"]]


@triton.autotune(configs=[triton.Config({"BM": 64, "BN": 64}, num_warps=4, pre_hook=_set_blocks)], key=["M", "N"])
@triton.jit
def desc_copy(x_desc, y_desc, M, N, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    y_desc.store([pid * BM, 0], x_desc.load([pid * BM, 0]))


def call(x, y):
    M, N = x.shape
    xd = TensorDescriptor(x, shape=[M, N], strides=[N, 1], block_shape=[1, 1])
    yd = TensorDescriptor(y, shape=[M, N], strides=[N, 1], block_shape=[1, 1])
    desc_copy[lambda META: (triton.cdiv(M, META["BM"]),)](xd, yd, M, N)
"""


def _desc_module(impl: str):
    import importlib.util
    import tempfile
    src = DESC_SRC
    if impl == "triton":
        src = src.replace("import kernelc as triton", "import triton").replace(
            "import kernelc.language as tl", "import triton.language as tl").replace(
            "kernelc.tools.tensor_descriptor", "triton.tools.tensor_descriptor")
    path = os.path.join(tempfile.mkdtemp(prefix="launch_desc_"), f"desc_{impl}.py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(f"desc_{impl}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


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
    # host descriptors + autotune pre_hook, as tutorial 06's forward launches
    xd = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    yd = torch.empty_like(xd)
    KD, TD = _desc_module("kernelc"), _desc_module("triton")
    KD.call(xd, yd)
    torch.cuda.synchronize()
    assert torch.equal(xd, yd), "the descriptor copy kernel (kernelc) copied wrongly"
    yd.zero_()
    TD.call(xd, yd)
    torch.cuda.synchronize()
    assert torch.equal(xd, yd), "the descriptor copy kernel (triton) copied wrongly"
    n_desc = N_LAUNCH // 4
    r_kd = per_launch_us(lambda: KD.call(xd, yd), n_desc)
    r_td = per_launch_us(lambda: TD.call(xd, yd), n_desc)
    rows.append({"what": "kernelc: 2 host TensorDescriptors + autotune pre_hook + launch", "us_per_launch": r_kd,
                 "vs_triton": r_kd / r_td, "vs_torch_add": r_kd / r_add})
    rows.append({"what": "triton: 2 host TensorDescriptors + autotune pre_hook + launch", "us_per_launch": r_td,
                 "vs_triton": 1.0, "vs_torch_add": r_td / r_add})
    write_results("launch_overhead", rows, {"targets": "kernelc <= 0.6x triton and <= 1.2x torch.add"})


if __name__ == "__main__":
    main()
