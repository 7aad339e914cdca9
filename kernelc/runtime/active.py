"""The active driver, as Triton's ``triton.runtime.driver.active`` presents it.

Host code written for Triton asks the driver for the torch device to allocate on, the compile target
and the device's limits (to size persistent grids). Without a GPU, kernels run in the CPU interpreter:
the torch device is then ``cpu`` and the target and properties describe what kernelc compiles for by
default (Hopper, ``sm_90a``; an H100 SXM's 132 SMs), so such code still computes a sensible grid.

Example::

    from kernelc.runtime.driver import active
    dev = active.get_active_torch_device()            # device(type='cuda', index=0)
    props = active.utils.get_device_properties(dev.index)
    props["multiprocessor_count"], props["max_shared_mem"], props["max_num_regs"]
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Union

# module-level on purpose: Triton host code asks the driver several times per call (tutorial 06's forward
# calls get_current_target six times), and a function-local import costs about a microsecond each time
from . import device as _device
from . import driver as _driver_module

#: the device described when no GPU is present: the default compile target (an H100 SXM)
CPU_STAND_IN = {"major": 9, "minor": 0, "num_sms": 132, "clock_rate": 1980000, "memory_clock_rate": 2619000,
                "bus_width": 5120, "max_regs_per_block": 65536}


@dataclass(frozen=True)
class GPUTarget:
    """What kernels are compiled for: ``backend`` ("cuda"), ``arch`` (compute capability as an int,
    90 for sm_90) and ``warp_size`` (Triton's ``triton.backends.compiler.GPUTarget``)."""

    backend: str
    arch: Union[int, str]
    warp_size: int


def _gpu() -> bool:
    return _device.cuda_available() and not _device.interpret_requested()


def _index(device) -> int:
    if device is None:
        import torch
        return torch.cuda.current_device()
    return int(getattr(device, "index", device) or 0)


class DriverUtils:
    """``driver.active.utils``: device queries."""

    def get_device_properties(self, device=None) -> Dict[str, Any]:
        """Triton's property dict: ``max_shared_mem`` (opt-in bytes per program), ``max_num_regs``
        (registers per block), ``multiprocessor_count``, ``warpSize``, ``sm_clock_rate`` and
        ``mem_clock_rate`` (kHz), ``mem_bus_width`` (bits), plus ``max_threads_per_sm``."""
        from cubintools.target import ARCH_LIMITS
        if _gpu():
            p = _driver_module.device_properties(_index(device))
        else:
            p = CPU_STAND_IN
        cc = p["major"] * 10 + p["minor"]
        limits = None
        if cc >= 80:
            limits = ARCH_LIMITS.get(cc) or ARCH_LIMITS[max(k for k in ARCH_LIMITS if k <= cc)]
        return {
            "max_shared_mem": p.get("max_shared_optin", limits.max_shared_per_block_optin if limits else 48 * 1024),
            "max_num_regs": p["max_regs_per_block"],
            "multiprocessor_count": p["num_sms"],
            "warpSize": 32,
            "sm_clock_rate": p["clock_rate"],
            "mem_clock_rate": p["memory_clock_rate"],
            "mem_bus_width": p["bus_width"],
            "max_threads_per_sm": p.get("max_threads_per_sm", limits.max_threads_per_sm if limits else 2048),
        }

    def load_binary(self, *args, **kwargs):
        raise NotImplementedError("kernelc loads kernels itself; launch them with kernel[grid](...)")


#: a device's target never changes in a process; GPUTarget is frozen, so one object per device serves every caller
_TARGETS: Dict[int, GPUTarget] = {}
_CPU_TARGET = GPUTarget("cuda", CPU_STAND_IN["major"] * 10 + CPU_STAND_IN["minor"], 32)


class CudaDriver:
    """The one driver kernelc has (CUDA, or the CPU interpreter standing in for it)."""

    backend = "cuda"

    def __init__(self):
        self.utils = DriverUtils()

    def is_active(self) -> bool:
        return True

    def get_active_torch_device(self):
        """``torch.device("cuda", current)``; ``cpu`` when kernels run in the interpreter."""
        import torch
        if _gpu():
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")

    def get_current_device(self) -> int:
        if _gpu():
            import torch
            return torch.cuda.current_device()
        return 0

    def set_current_device(self, device: int) -> None:
        if _gpu():
            import torch
            torch.cuda.set_device(device)

    def get_current_stream(self, device: Optional[int] = None) -> int:
        if not _gpu():
            return 0
        import torch
        return torch.cuda.current_stream(device).cuda_stream

    def get_current_target(self) -> GPUTarget:
        if _gpu():
            index = _device.current_device()  # torch's, without its lazy-init check once CUDA is up
            target = _TARGETS.get(index)
            if target is None:
                p = _driver_module.device_properties(index)
                target = _TARGETS[index] = GPUTarget("cuda", p["major"] * 10 + p["minor"], 32)
            return target
        return _CPU_TARGET

    def get_device_interface(self):
        """The torch module of the device (``torch.cuda``), as Triton returns it."""
        import torch
        return torch.cuda

    def get_benchmarker(self):
        from .timing import do_bench
        return do_bench

    def get_empty_cache_for_benchmark(self):
        """A buffer larger than L2 whose zeroing flushes the cache between timed runs (256 MB)."""
        import torch
        dev = "cuda" if _gpu() else "cpu"
        return torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device=dev)

    def clear_cache(self, cache) -> None:
        cache.zero_()

    def __repr__(self):
        return f"<kernelc CudaDriver ({'GPU' if _gpu() else 'CPU interpreter'})>"


class DriverConfig:
    """``triton.runtime.driver.driver``: holds the active driver (replaceable, as in Triton)."""

    def __init__(self):
        self._default = None
        self._active = None

    @property
    def default(self) -> CudaDriver:
        if self._default is None:
            self._default = CudaDriver()
        return self._default

    @property
    def active(self) -> CudaDriver:
        if self._active is None:
            self._active = self.default
        return self._active

    def set_active(self, drv) -> None:
        self._active = drv

    def reset_active(self) -> None:
        self._active = self.default


driver = DriverConfig()
