"""``triton.backends`` under the alias: the one backend kernelc has, in the shape torch reads.

torch imports ``triton.backends.compiler`` (``torch/_inductor/runtime/hints.py``) as soon as it
believes Triton is installed and looks up ``triton.backends.backends`` (``torch/utils/_triton.py``);
these modules let those imports and checks succeed. They describe kernelc; they do not make
torch.compile generate kernelc kernels.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Type

from .compiler import BaseBackend, GPUTarget, KernelcBackend  # noqa: F401
from .driver import DriverBase, GPUDriver, KernelcDriver  # noqa: F401


@dataclass(frozen=True)
class Backend:
    compiler: Type[BaseBackend]
    driver: Type[DriverBase]


#: backend name -> Backend, as Triton's ``triton.backends.backends``
backends: Dict[str, Backend] = {"nvidia": Backend(KernelcBackend, KernelcDriver)}
