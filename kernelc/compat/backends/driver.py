"""``triton.backends.driver``: the driver base classes and kernelc's driver."""
from __future__ import annotations

from ...runtime.active import CudaDriver


class DriverBase:
    """Triton's driver interface (``is_active``, ``get_current_target``, ...)."""

    @classmethod
    def is_active(cls) -> bool:
        return False


class GPUDriver(DriverBase):
    pass


class KernelcDriver(CudaDriver, GPUDriver):
    @classmethod
    def is_active(cls) -> bool:
        return True
