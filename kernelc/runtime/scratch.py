"""Global scratch memory that compiled kernels ask for (``CompiledKernel.global_scratch_bytes`` per
program): today the CUtensorMaps of descriptors made in the kernel (codegen/device_tensor_map.py).

The launcher passes ``scratch_pointer(grid size * bytes per program, stream, device)`` as the
kernel's hidden last parameter. One buffer per (device, stream) serves every launch on that stream:
launches on one stream run in order, so they can share it. It grows by doubling; a replaced buffer
is kept (never freed) because a kernel still queued on the stream may use it. A launch captured into
a CUDA graph gets a buffer of its own, kept for the life of the process: replays of the graph may run
on another stream, concurrently with other launches.
"""
from __future__ import annotations

from typing import Dict, List, Tuple

_buffers: Dict[Tuple[int, int], object] = {}
_kept: List[object] = []  # outgrown and graph-captured buffers (see the module doc)


def _allocate(nbytes: int, device: int):
    import torch
    return torch.empty(max(nbytes, 1), dtype=torch.uint8, device=f"cuda:{device}")


def scratch_pointer(nbytes: int, stream: int, device: int) -> int:
    """The device address of at least ``nbytes`` of scratch for a launch on ``stream``."""
    import torch
    if torch.cuda.is_current_stream_capturing():
        buf = _allocate(nbytes, device)
        _kept.append(buf)
        return buf.data_ptr()
    key = (device, stream)
    buf = _buffers.get(key)
    if buf is None or buf.numel() < nbytes:
        if buf is not None:
            _kept.append(buf)
        buf = _buffers[key] = _allocate(max(nbytes, 2 * (buf.numel() if buf is not None else 0)), device)
    return buf.data_ptr()
