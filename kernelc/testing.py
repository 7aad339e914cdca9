"""Benchmarking and checking helpers, with Triton's ``triton.testing`` names: ``do_bench``,
``do_bench_cudagraph``, ``assert_close``, and ``perf_report`` / ``Benchmark`` (tables and plots).

Without a GPU, ``do_bench`` times with the host clock, so benchmark code also runs (slowly) on CPU.
"""
from __future__ import annotations

import os
import statistics
import time
from typing import Any, Callable, Dict, List, Optional, Sequence


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
    from .runtime.device import cuda_available
    from .runtime.jit import interpret_requested
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


# -- perf_report / Benchmark: one table and one plot per benchmark ----------------------------------

class Benchmark:
    """One performance table/plot: ``fn`` is called for every value in ``x_vals`` (bound to the
    ``x_names`` arguments) and every value in ``line_vals`` (bound to ``line_arg``), with ``args``
    fixed. ``fn`` returns a number or ``(value, min, max)``; ``line_names`` label the columns, ``styles``
    are ``(color, linestyle)`` pairs, ``plot_name`` names the plot and the saved files."""

    def __init__(self, x_names: List[str], x_vals: List[Any], line_arg: str, line_vals: List[Any],
                 line_names: List[str], plot_name: str, args: Dict[str, Any], xlabel: str = "", ylabel: str = "",
                 x_log: bool = False, y_log: bool = False, styles=None):
        if len(line_names) < len(line_vals):
            raise ValueError(f"Benchmark {plot_name!r}: {len(line_vals)} line_vals but only "
                             f"{len(line_names)} line_names")
        self.x_names = list(x_names)
        self.x_vals = list(x_vals)
        self.line_arg = line_arg
        self.line_vals = list(line_vals)
        self.line_names = list(line_names)
        self.plot_name = plot_name
        self.args = dict(args)
        self.xlabel = xlabel
        self.ylabel = ylabel
        self.x_log = x_log
        self.y_log = y_log
        self.styles = styles


#: run only the first N x values of every Benchmark (None: all); ``python -m kernelc.run --bench-points N``
#: sets it, so a tutorial's benchmark can be smoke-run on CPU in the interpreter
bench_points = None


class Mark:
    """What ``perf_report`` returns: call ``.run(print_data=, show_plots=, save_path=, return_df=)``."""

    def __init__(self, fn: Callable, benchmarks):
        self.fn = fn
        self.benchmarks = benchmarks

    def _table(self, bench: Benchmark, **kwargs):
        import pandas as pd
        labels = [f"{n} ({bench.ylabel})" for n in bench.line_names[:len(bench.line_vals)]]
        rows = []
        for x in bench.x_vals[:bench_points]:
            xs = list(x) if isinstance(x, (list, tuple)) else [x] * len(bench.x_names)
            if len(xs) != len(bench.x_names):
                raise ValueError(f"Benchmark {bench.plot_name!r}: x value {x!r} does not match x_names "
                                 f"{bench.x_names}")
            row = dict(zip(bench.x_names, xs))
            for label, line in zip(labels, bench.line_vals):
                out = self.fn(**dict(zip(bench.x_names, xs)), **{bench.line_arg: line}, **bench.args, **kwargs)
                mid, lo, hi = (tuple(out) + (None, None))[:3] if isinstance(out, (tuple, list)) else (out, None, None)
                row[label], row[label + ":min"], row[label + ":max"] = mid, lo, hi
            rows.append(row)
        return pd.DataFrame(rows, columns=bench.x_names + [c for lb in labels for c in (lb, lb + ":min", lb + ":max")]), labels

    def _plot(self, bench: Benchmark, df, labels, show: bool, save_path: str):
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots()
        x = df[bench.x_names[0]]
        for i, label in enumerate(labels):
            color, ls = (bench.styles[i][0], bench.styles[i][1]) if bench.styles and i < len(bench.styles) else (None, None)
            ax.plot(x, df[label].astype(float), label=label, color=color, ls=ls)
            lo, hi = df[label + ":min"], df[label + ":max"]
            if lo.notna().all() and hi.notna().all():
                ax.fill_between(x, lo.astype(float), hi.astype(float), alpha=0.15, color=color)
        ax.legend()
        ax.set_xlabel(bench.xlabel or bench.x_names[0])
        ax.set_ylabel(bench.ylabel)
        ax.set_xscale("log" if bench.x_log else "linear")
        ax.set_yscale("log" if bench.y_log else "linear")
        if save_path:
            fig.savefig(os.path.join(save_path, f"{bench.plot_name}.png"))
        if show:
            plt.show()
        plt.close(fig)

    def run(self, show_plots: bool = False, print_data: bool = False, save_path: str = "", return_df: bool = False,
            diff_col: bool = False, save_precision: int = 6, **kwargs):
        """Run every benchmark: print its table (``print_data``), plot it (``show_plots``), write
        ``<plot_name>.png``/``.csv`` and ``results.html`` under ``save_path``; ``return_df`` returns the
        table(s) as pandas DataFrames."""
        single = isinstance(self.benchmarks, Benchmark)
        benches = [self.benchmarks] if single else list(self.benchmarks)
        if save_path:
            os.makedirs(save_path, exist_ok=True)
        dfs = []
        try:
            for bench in benches:
                full, labels = self._table(bench, **kwargs)
                if bench.plot_name and (show_plots or save_path):
                    self._plot(bench, full, labels, show_plots, save_path)
                df = full[bench.x_names + labels].copy()
                if diff_col and len(labels) == 2:
                    df["Diff"] = df[labels[1]] - df[labels[0]]
                if print_data:
                    print(bench.plot_name + ":")
                    print(df.to_string())
                if save_path:
                    df.to_csv(os.path.join(save_path, f"{bench.plot_name}.csv"), index=False,
                              float_format=f"%.{save_precision}f")
                dfs.append(df)
        finally:
            if save_path:
                with open(os.path.join(save_path, "results.html"), "w") as f:
                    f.write("<html><body>\n" + "".join(f'<image src="{b.plot_name}.png"/>\n' for b in benches[:len(dfs)])
                            + "</body></html>\n")
        if return_df:
            return dfs[0] if single else dfs
        return None


def perf_report(benchmarks):
    """Decorator: ``@perf_report(Benchmark(...))`` (or a list of them) turns a benchmark function into a
    :class:`Mark` whose ``run`` tabulates and plots it."""
    return lambda fn: Mark(fn, benchmarks)


# -- device peaks (Triton's triton.testing helpers for roofline numbers) -----------------------------

#: dense tensor-core flops per SM per clock, by compute capability major, for 16-bit inputs
_TC_FLOPS_PER_CLK = {8: 2048, 9: 4096, 10: 8192}
#: multiplier of the 16-bit rate by input type
_TC_DTYPE_FACTOR = {"float8": 2.0, "int8": 2.0, "float16": 1.0, "bfloat16": 1.0, "float32": 0.5, "tf32": 0.5}


def _props(device=None):
    from .runtime.active import driver
    return driver.active.utils.get_device_properties(device), driver.active.get_current_target()


def get_dram_gbps(device=None) -> float:
    """Peak DRAM bandwidth in GB/s from the memory clock and bus width (double data rate)."""
    p, _ = _props(device)
    return p["mem_clock_rate"] * 1e3 * 2 * p["mem_bus_width"] / 8 / 1e9


def _dtype_key(dtype) -> str:
    name = str(dtype).replace("torch.", "")
    for k in ("float8", "int8", "bfloat16", "float16", "tf32", "float32"):
        if name.startswith(k):
            return k
    raise ValueError(f"no tensor-core rate known for {dtype}")


def get_max_tensorcore_tflops(dtype, clock_rate, device=None) -> float:
    """Peak dense tensor-core TFLOP/s for ``dtype`` at ``clock_rate`` kHz (Triton's signature)."""
    p, target = _props(device)
    per_clk = _TC_FLOPS_PER_CLK.get(int(target.arch) // 10, 2048) * _TC_DTYPE_FACTOR[_dtype_key(dtype)]
    return p["multiprocessor_count"] * per_clk * clock_rate * 1e3 / 1e12


def get_max_simd_tflops(dtype, clock_rate, device=None) -> float:
    """Peak FMA (non-tensor-core) TFLOP/s: 128 fp32 lanes per SM x 2 flops per FMA (fp16x2 doubles it)."""
    p, _ = _props(device)
    lanes = 128 * (2 if _dtype_key(dtype) in ("float16", "bfloat16") else 1)
    return p["multiprocessor_count"] * lanes * 2 * clock_rate * 1e3 / 1e12


def nvsmi(attrs: List[str]) -> List[Any]:
    """``nvidia-smi --query-gpu=<attrs>`` for GPU 0, values as ints where they are numbers."""
    import subprocess
    out = subprocess.check_output(["nvidia-smi", "-i", "0", "--query-gpu=" + ",".join(attrs),
                                   "--format=csv,noheader,nounits"], text=True)
    vals = [v.strip() for v in out.strip().split(",")]
    return [int(v) if v.isdigit() else v for v in vals]
