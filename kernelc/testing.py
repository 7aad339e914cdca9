"""Benchmarking and checking helpers, with Triton's ``triton.testing`` names: ``do_bench``,
``do_bench_cudagraph``, ``assert_close``, ``perf_report`` / ``Benchmark`` (tables and plots) and the device's
peak numbers.

Without a GPU, ``do_bench`` times with the host clock, so benchmark code also runs (slowly) on CPU.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Optional

from .runtime.timing import RETURN_MODES, do_bench, do_bench_cudagraph  # noqa: F401


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
