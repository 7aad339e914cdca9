"""What GPU (if any) this process can use; probed once, cheaply, and never raising."""
from __future__ import annotations

import functools
import sys


@functools.lru_cache(maxsize=None)
def cuda_available() -> bool:
    """True when a CUDA driver and at least one device are usable."""
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            return bool(torch.cuda.is_available())
        except Exception:
            return False
    try:
        from cuda.bindings import driver
        err, = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return False
        err, n = driver.cuDeviceGetCount()
        return err == driver.CUresult.CUDA_SUCCESS and n > 0
    except Exception:  # no driver library, no bindings: no GPU
        return False
