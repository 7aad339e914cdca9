"""A stand-in CUDA for timing kernelc's host launch path on a machine without a GPU.

Kernels compile for real (sm_90a, the CPU stand-in target); what a GPU would do is faked below the Python path:
module loading (no cubin is loaded), the device and stream queries torch would answer, the tensor-map encode, and
the launch itself, which goes through cuda-python's ``cuLaunchKernel`` (kernelc's default route) into a stand-in
libcuda whose cuLaunchKernel returns CUDA_SUCCESS (``KERNELC_LAUNCH_IMPL=ctypes`` reaches the same function).
Tensors stay on the CPU. Autotuning picks by a fixed fake timing (the first config wins).

Only for host-time experiments: ``install()`` monkeypatches kernelc's runtime in this process.
"""
from __future__ import annotations

import ctypes
import os
import subprocess
import tempfile
import types

# A stand-in libcuda: cuLaunchKernel returns CUDA_SUCCESS, cuGetProcAddress hands out it or a function that does
# the same, so cuda-python's own bindings load it and marshal their arguments as on a GPU machine.
_C = r"""
#include <string.h>
#include <stdint.h>
static int ok(void) { return 0; }
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void *stream, void **params, void **extra) { return 0; }
int cuDriverGetVersion(int *v) { *v = 13000; return 0; }
int cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags, int *status) {
    if (status) *status = 0;
    if (!strcmp(symbol, "cuLaunchKernel")) *pfn = (void *)cuLaunchKernel;
    else if (!strcmp(symbol, "cuDriverGetVersion")) *pfn = (void *)cuDriverGetVersion;
    else if (!strncmp(symbol, "cuGetProcAddress", 16)) *pfn = (void *)cuGetProcAddress_v2;
    else *pfn = (void *)ok;
    return 0;
}
int cuGetProcAddress(const char *symbol, void **pfn, int version, uint64_t flags) {
    return cuGetProcAddress_v2(symbol, pfn, version, flags, 0);
}
"""


def _fake_libcuda():
    """Load the stand-in as ``libcuda.so.1`` (by soname, before cuda-python looks for it); returns its
    cuLaunchKernel as a ctypes function (for ``KERNELC_LAUNCH_IMPL=ctypes``)."""
    d = tempfile.mkdtemp(prefix="fakecuda_")
    src, lib = os.path.join(d, "fake.c"), os.path.join(d, "libcuda.so.1")
    with open(src, "w") as f:
        f.write(_C)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", lib, src], check=True)
    f = ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL).cuLaunchKernel
    f.restype = ctypes.c_int
    f.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
                  ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    return f


PROPS = {"max_shared_optin": 232448, "max_shared_per_sm": 233472, "num_sms": 132, "max_regs_per_block": 65536,
         "max_threads_per_sm": 2048, "major": 9, "minor": 0, "clock_rate": 1980000, "memory_clock_rate": 2619000,
         "bus_width": 5120}


class FakeLoaded:
    def __init__(self, cubin, name, shared, num_warps, n_regs, device=0, total_shared=None):
        self.module = None
        from cuda.bindings import driver
        self.function = driver.CUfunction(0x1000)
        self.handle = 0x1000
        self.name = name
        self.shared = shared
        self.threads = 32 * num_warps


def install():
    import torch
    from kernelc.runtime import device, driver, jit, tensor_map, scratch, active
    launch_fn = _fake_libcuda()
    device.cuda_available = lambda: True
    jit._fast_enabled = True
    jit.JITFunction._use_interpreter = lambda self, values: False
    torch._C._cuda_getDevice = lambda: 0
    torch._C._cuda_getCurrentRawStream = lambda d: 0
    torch.cuda.current_device = lambda: 0
    torch.cuda.is_current_stream_capturing = lambda: False
    torch.cuda.get_device_name = lambda *a: "fake H100"
    torch.cuda.get_device_capability = lambda *a: (9, 0)
    torch.cuda.current_stream = lambda *a: types.SimpleNamespace(cuda_stream=0)
    driver.LoadedFunction = FakeLoaded
    driver._libcuda = lambda: launch_fn
    driver.device_properties = lambda device=0: PROPS
    tensor_map.encode = lambda p: bytes(128)
    scratch._allocate = lambda nbytes, device, stream=None: torch.empty(max(nbytes, 1), dtype=torch.uint8)
    from kernelc.runtime import tuning
    tuning._tuner_bench = lambda tuner, fn: (fn(), 1.0)[1]
    active._gpu = lambda: True
    # torch.empty(..., device="cuda") in the host code of the patterns: allocate on the CPU instead
    real_empty = torch.empty

    def empty(*a, device=None, **kw):
        return real_empty(*a, **kw)
    torch.empty = empty
