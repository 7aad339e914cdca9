"""``kl.target_info``: what the kernel is being compiled for (Triton's ``triton.language.target_info``).

Compile-time questions, answered from the compilation's target (``sm_90a`` -> capability 90); the
interpreter answers for the machine's GPU if it has one, else for kernelc's default target (sm_90a).
"""
from __future__ import annotations

import sys
from typing import NamedTuple

from .core import has_builder, current_builder


class GPUTarget(NamedTuple):
    backend: str
    arch: int
    warp_size: int


def _arch_string() -> str:
    arch = getattr(current_builder(), "arch", None) if has_builder() else None
    if arch:
        return str(arch)
    torch = sys.modules.get("torch")  # the language layer does not reach into the runtime's device code
    try:
        if torch is not None and torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            return f"sm_{major}{minor}"
    except Exception:
        pass
    return "sm_90a"


def current_target() -> GPUTarget:
    digits = "".join(c for c in _arch_string() if c.isdigit())
    return GPUTarget("cuda", int(digits or 90), 32)


def is_cuda() -> bool:
    return True


def cuda_capability_geq(major, minor=0) -> bool:
    """True when the target's compute capability is at least ``major.minor``."""
    from .core import _unwrap
    cap = current_target().arch
    return (cap // 10, cap % 10) >= (int(_unwrap(major)), int(_unwrap(minor)))


def is_hip() -> bool:
    return False


def is_hip_cdna3() -> bool:
    return False


def is_hip_cdna4() -> bool:
    return False
