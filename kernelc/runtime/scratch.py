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

from typing import Callable, Dict, List, Optional, Tuple

_buffers: Dict[Tuple[int, int], object] = {}
_kept: List[object] = []  # outgrown and graph-captured buffers (see the module doc)
_cross_stream: set = set()  # keys of our own buffers that serve a stream other than the one they came from
_allocator: Optional[Callable] = None  # set_allocator's function (None: torch.empty)
ALIGNMENT = 128  # CUtensorMap alignment


def set_allocator(allocator: Optional[Callable]) -> None:
    """Allocate kernels' global scratch with ``allocator(size, alignment, stream) -> buffer`` (anything
    with ``data_ptr()``), as Triton's ``triton.set_allocator``; ``None`` restores torch allocation.

    kernelc allocates scratch itself when none is set (Triton raises instead), so programs that call
    this keep their allocator and programs that don't still run. Buffers already handed out stay."""
    global _allocator
    if allocator is not None and not callable(allocator):
        raise TypeError(f"set_allocator takes a function (size, alignment, stream) -> buffer, got {allocator!r}")
    _allocator = allocator
    # Dropped buffers go back to where they came from, as Triton drops its scratch after every launch: a user
    # allocator's buffer is the allocator's affair (it was told the stream), and torch's caching allocator reuses a
    # block only for work queued behind it on the stream it was allocated on. Kept: buffers of ours that serve
    # another stream than the one they were allocated on. (Tutorials 06 and 09 call set_allocator on every call:
    # keeping them all grew without bound.)
    _kept.extend(b for k, b in _buffers.items() if k in _cross_stream)
    _buffers.clear()
    _cross_stream.clear()


def _allocate(nbytes: int, device: int, stream: Optional[int] = None):
    if _allocator is not None:
        buf = _allocator(max(nbytes, 1), ALIGNMENT, stream)
        if not hasattr(buf, "data_ptr"):
            raise TypeError(f"the allocator given to set_allocator returned {type(buf).__name__}, "
                            "which has no data_ptr()")
        return _Sized(buf, max(nbytes, 1))
    import torch
    return torch.empty(max(nbytes, 1), dtype=torch.uint8, device=f"cuda:{device}")


class _Sized:
    """A user allocator's buffer with the size it was asked for (the buffer may not know it)."""

    __slots__ = ("buf", "nbytes")

    def __init__(self, buf, nbytes):
        self.buf, self.nbytes = buf, nbytes

    def numel(self) -> int:
        return self.nbytes

    def data_ptr(self) -> int:
        return self.buf.data_ptr()


def scratch_pointer(nbytes: int, stream: int, device: int) -> int:
    """The device address of at least ``nbytes`` of scratch for a launch on ``stream``."""
    import torch
    if torch.cuda.is_current_stream_capturing():
        buf = _allocate(nbytes, device, stream)
        _kept.append(buf)
        return buf.data_ptr()
    key = (device, stream)
    buf = _buffers.get(key)
    if buf is None or buf.numel() < nbytes:
        if buf is not None:
            _kept.append(buf)
        buf = _buffers[key] = _allocate(max(nbytes, 2 * (buf.numel() if buf is not None else 0)), device, stream)
        if _allocator is None and stream != _current_raw_stream(torch, device):
            _cross_stream.add(key)
    return buf.data_ptr()


def _current_raw_stream(torch, device: int) -> int:
    get = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return get(device) if get is not None else 0
