"""``triton._C.libtriton``: ``nvidia.cublas.CublasLt`` (the cuBLAS reference Triton's tutorials time),
implemented with torch's matmul, which is cuBLAS(Lt) on NVIDIA GPUs. Nothing else of Triton's C
extension exists under kernelc."""
from __future__ import annotations

from types import SimpleNamespace


class CublasLt:
    """``CublasLt(workspace)``; ``matmul(a, b, c)`` writes ``c = a @ b.T`` (``b`` is [N, K], as in
    Triton); fp8 inputs go through ``torch._scaled_mm`` with unit scales."""

    def __init__(self, workspace):
        self.workspace = workspace  # cuBLAS gets its own workspace from torch; kept for the caller

    def matmul(self, a, b, c):
        import torch
        if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[1]:
            raise ValueError(f"CublasLt.matmul expects a [M, K] and b [N, K], got {tuple(a.shape)} and {tuple(b.shape)}")
        if a.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
            one = torch.ones((), device=a.device, dtype=torch.float32)
            out_dtype = c.dtype if c.dtype not in (torch.float8_e4m3fn, torch.float8_e5m2) else torch.float16
            r = torch._scaled_mm(a, b.T, scale_a=one, scale_b=one, out_dtype=out_dtype)
            c.copy_(r.to(c.dtype))
        else:
            torch.matmul(a, b.T, out=c)
        return c


nvidia = SimpleNamespace(cublas=SimpleNamespace(CublasLt=CublasLt))
