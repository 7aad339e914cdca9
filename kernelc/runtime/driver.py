"""The CUDA driver through cuda-python: module loading, function attributes, launches, errors.

Runs in torch's primary context on torch's current stream. Driver errors become Python errors that
say what went wrong in the user's terms (out of shared memory with the numbers, an illegal address
with the kernel name).
"""
from __future__ import annotations

import ctypes
import functools
import sys
import types
from typing import Optional, Tuple

from ..errors import KernelError, OutOfResources


class CudaError(KernelError):
    pass


@functools.lru_cache(maxsize=None)
def _drv():
    from cuda.bindings import driver
    return driver


def check(result, what: str, kernel: str = ""):
    """Unpack a cuda-python result tuple, raising a readable error on failure."""
    drv = _drv()
    err = result[0] if isinstance(result, tuple) else result
    if err != drv.CUresult.CUDA_SUCCESS:
        name = drv.cuGetErrorName(err)[1]
        name = name.decode() if isinstance(name, bytes) else str(name)
        text = drv.cuGetErrorString(err)[1]
        text = text.decode() if isinstance(text, bytes) else str(text)
        who = f" in kernel {kernel}" if kernel else ""
        hint = {
            "CUDA_ERROR_ILLEGAL_ADDRESS": " (an out-of-bounds or misaligned access; run with KERNELC_INTERPRET=1 "
                                          "to find the line)",
            "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES": " (too many registers or threads for this launch; lower num_warps "
                                                  "or the block sizes)",
            "CUDA_ERROR_INVALID_VALUE": "",
        }.get(name, "")
        raise CudaError(f"{what}{who} failed: {name}: {text}{hint}")
    if isinstance(result, tuple):
        return result[1] if len(result) == 2 else result[1:]
    return None


def ensure_context(device: int = 0):
    """Make torch's primary context current (initialising CUDA through torch)."""
    import torch
    torch.cuda.init()
    torch.cuda.set_device(device) if torch.cuda.current_device() != device else None
    torch.cuda.current_stream(device)
    drv = _drv()
    ctx = check(drv.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if ctx is None or int(ctx) == 0:
        dev = check(drv.cuDeviceGet(device), "cuDeviceGet")
        ctx = check(drv.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
        check(drv.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    return ctx


@functools.lru_cache(maxsize=None)
def device_properties(device: int = 0) -> dict:
    drv = _drv()
    dev = check(drv.cuDeviceGet(device), "cuDeviceGet")
    A = drv.CUdevice_attribute

    def attr(a):
        return check(drv.cuDeviceGetAttribute(a, dev), "cuDeviceGetAttribute")

    return {
        "max_shared_optin": attr(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
        "max_shared_per_sm": attr(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
        "num_sms": attr(A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
        "max_regs_per_block": attr(A.CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK),
        "max_threads_per_sm": attr(A.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR),
        "major": attr(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
        "minor": attr(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR),
        "clock_rate": attr(A.CU_DEVICE_ATTRIBUTE_CLOCK_RATE),
        "memory_clock_rate": attr(A.CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE),
        "bus_width": attr(A.CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH),
    }


def _smem_min() -> int:
    from ..options import OptionError, get
    raw = get("KERNELC_LAUNCH_SMEM_MIN")
    try:
        return int(raw) if raw else 0
    except ValueError:
        raise OptionError(f"KERNELC_LAUNCH_SMEM_MIN={raw!r} is not a number of bytes") from None


class LoadedFunction:
    """A cubin loaded into the current context: the CUfunction and what a launch needs."""

    def __init__(self, cubin: bytes, name: str, shared: int, num_warps: int, n_regs: int, device: int = 0,
                 total_shared: Optional[int] = None):
        drv = _drv()
        ensure_context(device)
        props = device_properties(device)
        pad = max(0, _smem_min() - shared)  # occupancy experiments only (KERNELC_LAUNCH_SMEM_MIN; default none)
        shared += pad
        total = shared if total_shared is None else total_shared + pad
        if total > props["max_shared_optin"]:
            raise OutOfResources(total, props["max_shared_optin"], "shared memory", name)
        regs_needed = n_regs * 32 * num_warps
        if regs_needed > props["max_regs_per_block"]:
            raise OutOfResources(regs_needed, props["max_regs_per_block"], "registers per block", name)
        self.module = check(drv.cuModuleLoadData(cubin), "cuModuleLoadData", name)
        self.function = check(drv.cuModuleGetFunction(self.module, name.encode()), "cuModuleGetFunction", name)
        if shared > 48 * 1024:
            check(drv.cuFuncSetAttribute(self.function,
                                         drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                         shared), "cuFuncSetAttribute", name)
        self.handle = int(self.function)
        self.name = name
        self.shared = shared
        self.threads = 32 * num_warps


# -- the launch itself: a direct call into libcuda with a reusable argument buffer -----------------

@functools.lru_cache(maxsize=None)
def _libcuda():
    lib = ctypes.CDLL("libcuda.so.1")
    f = lib.cuLaunchKernel
    f.restype = ctypes.c_int
    f.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
                  ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    return f


CTYPE = {"ptr": ctypes.c_uint64, "i1": ctypes.c_int8, "i8": ctypes.c_int8, "i16": ctypes.c_int16,
         "i32": ctypes.c_int32, "i64": ctypes.c_int64, "u8": ctypes.c_uint8, "u16": ctypes.c_uint16,
         "u32": ctypes.c_uint32, "u64": ctypes.c_uint64, "fp16": ctypes.c_uint16, "bf16": ctypes.c_uint16,
         "fp32": ctypes.c_float, "fp64": ctypes.c_double}
# a host descriptor's CUtensorMap (Hopper TMA): 128 bytes passed by value (encoded by runtime/tensor_map.py)
TENSOR_MAP_BYTES = 128
TensorMapBuffer = ctypes.c_uint64 * (TENSOR_MAP_BYTES // 8)  # the launch buffer's field type (8-byte aligned)
CTYPE["tmap"] = TensorMapBuffer


class ArgBuffer:
    """A ctypes struct per kernel signature holding the parameter values, plus the void* array that
    cuLaunchKernel reads; refilled in place on every launch (no per-call allocation)."""

    def __init__(self, kinds: Tuple[str, ...]):
        self.kinds = tuple(kinds)
        fields = [(f"a{i}", CTYPE[k]) for i, k in enumerate(kinds)]
        self.struct_t = type("KernelArgs", (ctypes.Structure,), {"_fields_": fields})
        self.struct = self.struct_t()
        n = max(1, len(kinds))
        self.ptrs = (ctypes.c_void_p * n)()
        base = ctypes.addressof(self.struct)
        for i, (name, _) in enumerate(fields):
            self.ptrs[i] = base + getattr(self.struct_t, name).offset
        self.ptrs_addr = ctypes.addressof(self.ptrs)
        self.setters = [f"a{i}" for i in range(len(kinds))]


CUDA_ERROR_INVALID_CONTEXT = 201


def context_made_current(err, device: int = 0) -> bool:
    """After a launch failed with CUDA_ERROR_INVALID_CONTEXT: make the primary context current in this
    thread and say so (the caller launches again). A thread that has not touched CUDA yet (torch's autograd
    thread, on an H100 2026-11-27: the attention backward's first launch) has no current context."""
    if int(err) != CUDA_ERROR_INVALID_CONTEXT:
        return False
    ensure_context(device)
    return True


def launch(fn: LoadedFunction, grid, stream: int, buf: ArgBuffer) -> None:
    gx, gy, gz = grid
    err = _libcuda()(fn.handle, gx, gy, gz, fn.threads, 1, 1, fn.shared, stream, buf.ptrs_addr, None)
    if err and context_made_current(err):
        err = _libcuda()(fn.handle, gx, gy, gz, fn.threads, 1, 1, fn.shared, stream, buf.ptrs_addr, None)
    if err:
        check(_drv().CUresult(err), "cuLaunchKernel", fn.name)


_CONFIG = None


def _load_config():
    global _CONFIG
    from .active import driver as config
    _CONFIG = config
    return config


class _DriverModule(types.ModuleType):
    """This module's class: Triton's ``triton.runtime.driver.active`` / ``driver.driver`` (runtime/active.py) as
    properties, looked up on every access so that ``driver.set_active`` takes effect. A property, not a module
    ``__getattr__``: host code asks for ``active`` several times a call (tutorial 06's forward five times), and
    the ``__getattr__`` path (under the Triton alias, two nested functions) cost ~0.4 us each on the CPU stand-in."""

    @property
    def active(self):
        return (_CONFIG or _load_config()).active

    @property
    def driver(self):
        return _CONFIG or _load_config()


sys.modules[__name__].__class__ = _DriverModule
