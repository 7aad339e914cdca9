"""What GPU (if any) this process can use; probed once, cheaply, and never raising."""
from __future__ import annotations

import functools
import sys

from ..options import _raw, get as _option, raw_reader


def interpret_requested() -> bool:
    """``KERNELC_INTERPRET`` asks for the CPU interpreter even where a GPU is usable."""
    # unset (the common case) answers from the raw environment alone: launches and Triton host code ask this several
    # times a call (tutorial 06's forward: six), and the typed read costs a few times more
    if _raw("KERNELC_INTERPRET") is None:
        return False
    return _option("KERNELC_INTERPRET")


# the knobs that decide what JITFunction.warmup returns besides its arguments (KERNELC_OVERRIDE can force constexprs
# and options, KERNELC_INTERPRET the interpreter's offline compile), raw: part of its memo key, read without parsing
warmup_knobs = raw_reader("KERNELC_OVERRIDE", "KERNELC_INTERPRET")
_cuda_device = None  # torch's current-device query, once torch has initialised CUDA


def current_device() -> int:
    """torch's current CUDA device, 0 before torch has initialised CUDA (and without a GPU)."""
    if _cuda_device is not None:
        return _cuda_device()
    return _init_current_device()


def _init_current_device() -> int:
    global _cuda_device
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        # torch.cuda.current_device() without its lazy-init check on every call (CUDA stays initialised)
        _cuda_device = torch._C._cuda_getDevice
        return _cuda_device()
    return 0


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


def default_target():
    """The target ``kernelc.compile`` builds for when none is named: the current GPU's, else sm_90a."""
    from ..compiler.backend import parse_target, target_for_device
    try:
        if cuda_available():
            import torch
            major, minor = torch.cuda.get_device_capability()
            return target_for_device(major, minor)
    except Exception:
        pass
    return parse_target("sm_90a")
