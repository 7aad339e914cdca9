"""CUDA launch path (compile, cache, load, launch). Implemented by the GPU codegen/runtime issues."""
from __future__ import annotations


def launch_cuda(fn, values, grid, num_warps, num_stages, options, warmup):
    raise NotImplementedError(
        f"kernelc cannot launch {fn.__name__} on the GPU yet: the CUDA backend is not built. "
        f"Set KERNELC_INTERPRET=1 to run it in the CPU interpreter")
