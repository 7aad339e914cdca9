"""GPU workloads shared by the PC-sampling GPU tests, the test-data recorder and the benchmarks.

Each factory allocates its tensors once and returns ``run()`` (one launch, asynchronous) with the
kernel's name as ``run.kernel``; call it once before sampling so that compilation stays out.
"""

from __future__ import annotations

from typing import Callable

# The first autotune config of examples/kernels/matmul.py (the one the GPU tutorial tests run).
MATMUL_CONFIG = dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=32, GROUP_SIZE_M=8, num_warps=8, num_stages=3)


def _named(fn: Callable, kernel: str, what: str) -> Callable:
    fn.kernel = kernel  # type: ignore[attr-defined]
    fn.what = what      # type: ignore[attr-defined]
    return fn


def kernelc_matmul(n: int = 2048, dtype: str = "float16") -> Callable:
    import torch
    from examples.kernels.matmul import matmul
    dt = getattr(torch, dtype)
    a = torch.randn(n, n, device="cuda", dtype=dt)
    b = torch.randn(n, n, device="cuda", dtype=dt)
    return _named(lambda: matmul(a, b, **MATMUL_CONFIG), "matmul_kernel", f"kernelc matmul {dtype} {n}^3")


def kernelc_softmax(rows: int = 4096, cols: int = 4096) -> Callable:
    import torch
    from examples.kernels.softmax import softmax
    x = torch.randn(rows, cols, device="cuda", dtype=torch.float32)
    return _named(lambda: softmax(x), "softmax_kernel", f"kernelc softmax fp32 {rows}x{cols}")


def kernelc_vector_add(n: int = 1 << 26) -> Callable:
    import torch
    from examples.kernels.vector_add import add
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    return _named(lambda: add(x, y), "add_kernel", f"kernelc vector add fp32 {n}")


def torch_matmul(n: int = 4096) -> Callable:
    import torch
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    return _named(lambda: torch.matmul(a, b), "", f"torch (cuBLAS) matmul fp16 {n}^3")


def torch_softmax(rows: int = 4096, cols: int = 4096) -> Callable:
    import torch
    x = torch.randn(rows, cols, device="cuda", dtype=torch.float32)
    return _named(lambda: torch.softmax(x, dim=1), "", f"torch softmax fp32 {rows}x{cols}")


WORKLOADS = {"matmul": kernelc_matmul, "softmax": kernelc_softmax, "vector_add": kernelc_vector_add,
             "torch_matmul": torch_matmul, "torch_softmax": torch_softmax}
