"""kernelc quickstart: three kernels from examples/kernels on the GPU if there is one, else in the
CPU interpreter, each checked against torch. Run: python examples/quickstart.py"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from examples.kernels import matmul, softmax, vector_add  # noqa: E402
from kernelc.runtime.device import cuda_available  # noqa: E402


def main():
    gpu = cuda_available()
    dev = "cuda" if gpu else "cpu"
    print(f"kernelc quickstart: running on {'the GPU (' + torch.cuda.get_device_name() + ')' if gpu else 'the CPU interpreter (no GPU found)'}")
    n, rows, cols = (1 << 24, 4096, 4096) if gpu else (1 << 14, 64, 300)
    x, y = torch.rand(n, device=dev), torch.rand(n, device=dev)
    t0 = time.perf_counter()
    out = vector_add.add(x, y)
    print(f"  vector add ({n} fp32): max error {(out - (x + y)).abs().max().item():.2e}  [{time.perf_counter() - t0:.3f}s]")
    s = torch.randn(rows, cols, device=dev)
    t0 = time.perf_counter()
    sm = softmax.softmax(s)
    print(f"  softmax ({rows}x{cols}): max error {(sm - torch.softmax(s, 1)).abs().max().item():.2e}  [{time.perf_counter() - t0:.3f}s]")
    m = 1024 if gpu else 96
    a = torch.randn(m, m, device=dev, dtype=torch.float16)
    b = torch.randn(m, m, device=dev, dtype=torch.float16)
    t0 = time.perf_counter()
    c = matmul.matmul(a, b)
    err = ((c.float() - a.float() @ b.float()).norm() / (a.float() @ b.float()).norm()).item()
    print(f"  matmul ({m}^3 fp16, autotuned): relative error {err:.2e}  [{time.perf_counter() - t0:.3f}s]")
    ok = err < 1e-2
    print("all results match torch" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
