"""Timing of device work: ``do_bench`` and ``do_bench_cudagraph`` (Triton's ``triton.testing`` names, re-exported
by :mod:`kernelc.testing`). They live in the runtime because the autotuner times its candidates with them.

Without a GPU, ``do_bench`` times with the host clock, so benchmark code also runs (slowly) on CPU.
"""
from __future__ import annotations

import statistics
import time
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
    if not _on_gpu():
        return _summarize(_host_times(fn, warmup, rep, grad_to_none), quantiles, return_mode)
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
    return _summarize([s.elapsed_time(e) for s, e in zip(starts, ends)], quantiles, return_mode)


RETURN_MODES = {"mean": statistics.fmean, "median": statistics.median, "min": min, "max": max,
                "all": lambda t: list(t)}


def _summarize(times: List[float], quantiles, return_mode: str):
    if return_mode not in RETURN_MODES:
        raise ValueError(f"return_mode must be one of {sorted(RETURN_MODES)}, got {return_mode!r}")
    if quantiles is not None:
        st = sorted(times)
        out = [_quantile(st, q) for q in quantiles]
        return out[0] if len(out) == 1 else out
    return RETURN_MODES[return_mode](times)


def _on_gpu() -> bool:
    from .device import cuda_available
    from .device import interpret_requested
    return cuda_available() and not interpret_requested()


def _host_times(fn: Callable, warmup: float, rep: float, grad_to_none=None) -> List[float]:
    """Wall-clock times (ms) of ``fn`` runs on the host: at most ``rep`` ms in all after ``warmup`` ms,
    at least one timed run."""
    t_end = time.perf_counter() + warmup / 1e3
    fn()
    while time.perf_counter() < t_end:
        fn()
    times: List[float] = []
    budget_end = time.perf_counter() + rep / 1e3
    while not times or time.perf_counter() < budget_end:
        if grad_to_none is not None:
            for x in grad_to_none:
                x.grad = None
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def do_bench_cudagraph(fn: Callable, rep: float = 20, grad_to_none=None, quantiles: Optional[Sequence[float]] = None,
                       return_mode: str = "mean"):
    """Time ``fn`` replayed from a CUDA graph (no launch overhead), as Triton's ``do_bench_cudagraph``:
    ``fn`` is captured once, then graphs of enough calls to fill ~``rep`` ms are replayed and timed.
    Without a GPU it times ``fn`` with the host clock."""
    import torch
    if not _on_gpu():
        return _summarize(_host_times(fn, 0, rep, grad_to_none), quantiles, return_mode)
    with torch.cuda.stream(torch.cuda.Stream()):
        fn()  # compile and autotune outside the capture
        if grad_to_none is not None:
            for x in grad_to_none:
                x.detach_().requires_grad_(True)
                x.grad = None
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        g.replay()
        end.record()
        torch.cuda.synchronize()
        est = max(start.elapsed_time(end), 1e-4)
        n = max(1, int(rep / est))
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(n):
                if grad_to_none is not None:
                    for x in grad_to_none:
                        x.grad = None
                fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(10):
            start.record()
            g.replay()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / n)
    return _summarize(times, quantiles, return_mode)


def _quantile(sorted_times: List[float], q: float) -> float:
    if not sorted_times:
        return float("nan")
    pos = q * (len(sorted_times) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_times) - 1)
    return sorted_times[lo] + (sorted_times[hi] - sorted_times[lo]) * (pos - lo)
