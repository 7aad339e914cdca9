"""Write a small profile with Proton itself, the viewer's interop fixture (GPU only).

    python bench/make_proton_fixture.py [tests/viewer/data/proton_small.hatchet]

Needs an NVIDIA GPU, triton 3.6 (its ``triton.profiler`` is Proton) and torch.  The workload
mirrors the hand-made stand-in that tests/viewer/make_fixtures.py writes until this is run:

    ROOT > train_step > torch_matmul  > <cuBLAS kernel>              (5 launches, fp16 512^3)
                      > triton_matmul > matmul_512x512x512           (Triton, launch metadata flops16/bytes)
                      > triton_add    > add_1048576                  (Triton, launch metadata flops32/bytes)
                                      > __proton_launch_metadata > <torch reduction kernels>
                                        (the add's metadata function launches GPU work on purpose:
                                         Proton files the kernels under that frame and its viewer,
                                         like ours, drops it)

Kernels are compiled and warmed up before profiling starts, so no compile work is recorded.
After writing, the file is read back with profiler.format and shown with kprof-viewer as a check.
Then regenerate the goldens on any machine: python tests/viewer/make_fixtures.py --goldens
"""

from __future__ import annotations

import os
import sys

ROOT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(ROOT_DIR, "tests", "viewer", "data", "proton_small.hatchet")
M = N = K = 512
N_ADD = 1 << 20
REPEAT = 5


def main(argv: list[str]) -> int:
    out = os.path.abspath(argv[1] if len(argv) > 1 else DEFAULT_OUT)
    if not out.endswith(".hatchet"):
        print(f"error: output must end in .hatchet (Proton appends it), got {out}", file=sys.stderr)
        return 2

    import torch
    import triton
    import triton.language as tl
    import triton.profiler as proton

    if not torch.cuda.is_available():
        print("error: needs a CUDA GPU", file=sys.stderr)
        return 1

    def matmul_metadata(grid, metadata, args):
        m, n, k = args["M"], args["N"], args["K"]
        return {"name": f"matmul_{m}x{n}x{k}", "flops16": 2.0 * m * n * k,
                "bytes": (m * k + k * n + m * n) * 2}

    @triton.jit(launch_metadata=matmul_metadata)
    def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr):
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + offs_m[:, None] * K + offs_k[None, :]
        b_ptrs = b_ptr + offs_k[:, None] * N + offs_n[None, :]
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for _ in range(0, tl.cdiv(K, BLOCK_K)):
            acc += tl.dot(tl.load(a_ptrs), tl.load(b_ptrs))
            a_ptrs += BLOCK_K
            b_ptrs += BLOCK_K * N
        tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(tl.float16))

    def add_metadata(grid, metadata, args):
        n = args["n_elements"]
        # Deliberately launches GPU kernels (compare + reduce + copy to host) inside Proton's
        # launch-metadata state, as Proton's own tests do, so the file has that frame.
        int((args["x_ptr"] != 0).sum().item())
        return {"name": f"add_{n}", "flops32": float(n), "bytes": 3 * 4 * n}

    @triton.jit(launch_metadata=add_metadata)
    def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n_elements
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

    torch.manual_seed(0)
    a = torch.randn((M, K), device="cuda", dtype=torch.float16)
    b = torch.randn((K, N), device="cuda", dtype=torch.float16)
    c = torch.empty((M, N), device="cuda", dtype=torch.float16)
    x = torch.randn(N_ADD, device="cuda", dtype=torch.float32)
    y = torch.randn(N_ADD, device="cuda", dtype=torch.float32)
    z = torch.empty_like(x)
    mm_grid = (triton.cdiv(M, 64), triton.cdiv(N, 64))
    add_grid = (triton.cdiv(N_ADD, 1024),)

    def run_matmul():
        matmul_kernel[mm_grid](a, b, c, M, N, K, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32)

    def run_add():
        add_kernel[add_grid](x, y, z, N_ADD, BLOCK=1024)

    # Compile and warm up outside the profile.
    torch.matmul(a, b)
    run_matmul()
    run_add()
    torch.cuda.synchronize()
    torch.testing.assert_close(c, (a.float() @ b.float()).half(), atol=0.5, rtol=0.05)
    torch.testing.assert_close(z, x + y)

    os.makedirs(os.path.dirname(out), exist_ok=True)
    stem = out[: -len(".hatchet")]
    proton.start(stem, hook="triton")  # default: shadow context, tree data, hatchet output
    with proton.scope("train_step"):
        with proton.scope("torch_matmul"):
            for _ in range(REPEAT):
                torch.matmul(a, b)
        with proton.scope("triton_matmul"):
            for _ in range(REPEAT):
                run_matmul()
        with proton.scope("triton_add"):
            for _ in range(REPEAT):
                run_add()
    torch.cuda.synchronize()
    proton.finalize()
    print(f"wrote {out} with triton {triton.__version__}, torch {torch.__version__}, "
          f"{torch.cuda.get_device_name()}")

    # Read it back with our reader and show it with our viewer.
    sys.path.insert(0, ROOT_DIR)
    from profiler.format import read_profile
    from profiler.viewer.cli import main as viewer_main

    root, device_info = read_profile(out)
    print("device_info:", device_info)
    viewer_main(["--no-color", "-m", "time/us,count,tflop/s,gbyte/s,util", out])
    print("now regenerate the goldens: python tests/viewer/make_fixtures.py --goldens")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
