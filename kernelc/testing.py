"""Benchmarking and checking helpers (``kernelc.testing.do_bench``, ``assert_close``)."""
from __future__ import annotations

import statistics
from typing import Callable, List, Optional, Sequence


def _l2_flush_buffer():
    import torch
    # 256 MB: larger than any current GPU's L2, so every timed run starts from DRAM.
    buf = getattr(_l2_flush_buffer, "buf", None)
    if buf is None:
        buf = _l2_flush_buffer.buf = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    return buf


def do_bench(fn: Callable, warmup: float = 25, rep: float = 100, grad_to_none=None,
             quantiles: Optional[Sequence[float]] = None, return_mode: str = "mean", flush_l2: bool = True):
    """Time ``fn`` on the GPU with CUDA events, flushing L2 before each run.

    ``warmup`` and ``rep`` are milliseconds of GPU time to spend; returns the ``return_mode``
    ("mean", "median", "min", "max") time in ms, or the requested ``quantiles``.

    Example::

        ms = kernelc.testing.do_bench(lambda: add(x, y), quantiles=[0.5, 0.2, 0.8])
    """
    import torch
    fn()
    torch.cuda.synchronize()
    cache = _l2_flush_buffer() if flush_l2 else None
    # estimate one run
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        if cache is not None:
            cache.zero_()
        fn()
    end.record()
    torch.cuda.synchronize()
    est = max(start.elapsed_time(end) / 5, 1e-4)
    n_warm = max(1, int(warmup / est))
    n_rep = max(1, int(rep / est))
    for _ in range(n_warm):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    for i in range(n_rep):
        if grad_to_none is not None:
            for x in grad_to_none:
                x.grad = None
        if cache is not None:
            cache.zero_()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    if quantiles is not None:
        out = [_quantile(times, q) for q in quantiles]
        return out[0] if len(out) == 1 else out
    return {"mean": statistics.fmean, "median": statistics.median, "min": min, "max": max}[return_mode](times)


def _quantile(sorted_times: List[float], q: float) -> float:
    if not sorted_times:
        return float("nan")
    pos = q * (len(sorted_times) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_times) - 1)
    return sorted_times[lo] + (sorted_times[hi] - sorted_times[lo]) * (pos - lo)


def assert_close(x, y, atol: Optional[float] = None, rtol: Optional[float] = None, err_msg: str = ""):
    """Assert two tensors/arrays are close (torch.testing semantics), with a readable message."""
    import numpy as np
    try:
        import torch
        if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
            x = torch.as_tensor(x)
            y = torch.as_tensor(y).to(x.device)
            torch.testing.assert_close(x, y, atol=atol, rtol=rtol, equal_nan=True, check_dtype=False, msg=err_msg or None)
            return
    except ImportError:
        pass
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), atol=atol or 0, rtol=rtol or 1e-7, err_msg=err_msg)
