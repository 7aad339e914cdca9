"""The ``cpu`` backend: what can be measured without CUPTI, with the host clock.

* kernelc launches that run in the CPU interpreter: each is timed from the launch hook's enter to
  its exit (``time (ns)``, ``count``, launch-metadata ``flops``/``bytes``, device ``CPU 0``);
* kernelc launches on a GPU (when CUPTI is unavailable, e.g. held by another profiler): counted,
  with their launch metadata, but not timed (the launch returns before the kernel runs);
* scopes: each scope frame gets its *self* time (its wall time minus nested scopes and kernels),
  so a frame's inclusive time is its wall time.

Other GPU work (torch, cuBLAS) is invisible here.  The output format is the same as ``cupti``'s.
"""
from __future__ import annotations

import time


class CpuBackend:
    name = "cpu"

    def attach(self, session) -> None:
        pass

    def detach(self, session) -> None:
        pass

    def flush(self) -> None:
        pass

    def release(self, session) -> None:
        pass

    def to_trace_clock(self, host_ns: int) -> int:
        return host_ns

    @staticmethod
    def now() -> int:
        return time.perf_counter_ns()
