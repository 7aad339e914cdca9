"""The ``device_info`` part of a profile: per device type and id, the arch, SM count, clocks (kHz)
and memory bus width (bits), in Proton's units (see :func:`profiler.format.device_entry`)."""
from __future__ import annotations

import os
from typing import Any, Dict, Iterable, Tuple

from .format import device_entry

_cache: Dict[int, Dict[str, Any]] = {}


def cuda_device(device_id: int) -> Dict[str, Any]:
    """One CUDA device's entry, read with the driver API (zeros where an attribute is missing)."""
    if device_id in _cache:
        return _cache[device_id]
    vals = {"major": 0, "minor": 0, "num_sms": 0, "clock_rate": 0, "memory_clock_rate": 0, "bus_width": 0}
    try:
        from cuda.bindings import driver as drv
        drv.cuInit(0)
        err, dev = drv.cuDeviceGet(int(device_id))
        if int(err) == 0:
            A = drv.CUdevice_attribute
            names = {"major": "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR",
                     "minor": "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR",
                     "num_sms": "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT",
                     "clock_rate": "CU_DEVICE_ATTRIBUTE_CLOCK_RATE",
                     "memory_clock_rate": "CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE",
                     "bus_width": "CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH"}
            for key, attr in names.items():
                a = getattr(A, attr, None)
                if a is None:
                    continue
                e, v = drv.cuDeviceGetAttribute(a, dev)
                if int(e) == 0:
                    vals[key] = int(v)
    except Exception:
        pass
    arch = f"{vals['major']}{vals['minor']}" if vals["major"] else "unknown"
    entry = device_entry(arch, vals["num_sms"], vals["clock_rate"],
                         vals["memory_clock_rate"], vals["bus_width"])
    _cache[device_id] = entry
    return entry


def cpu_device() -> Dict[str, Any]:
    """The host, for kernels run in kernelc's CPU interpreter (no peak table: no ``util``)."""
    return device_entry("interpreter", os.cpu_count() or 1, 0, 0, 0)


def device_info(devices: Iterable[Tuple[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """``{device_type: {device_id: entry}}`` for the ``(type, id)`` pairs a profile used."""
    out: Dict[str, Dict[str, Any]] = {}
    for dtype, did in sorted(devices, key=lambda d: (d[0], str(d[1]))):
        if dtype == "CUDA":
            entry = cuda_device(int(did))
        elif dtype == "CPU":
            entry = cpu_device()
        else:
            continue
        out.setdefault(dtype, {})[str(did)] = entry
    return out
