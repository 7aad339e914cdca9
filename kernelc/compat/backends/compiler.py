"""``triton.backends.compiler``: ``GPUTarget`` and the backend base class."""
from __future__ import annotations

import abc
from enum import Enum

from ...runtime.active import GPUTarget  # noqa: F401


class Language(Enum):
    TRITON = 0
    GLUON = 1


class BaseBackend(metaclass=abc.ABCMeta):
    """Triton's backend interface, reduced to what code outside Triton reads."""

    supports_native_tensor_specialization = True

    def __init__(self, target: GPUTarget) -> None:
        self.target = target
        if not self.supports_target(target):
            raise ValueError(f"{type(self).__name__} does not support {target}")

    @staticmethod
    @abc.abstractmethod
    def supports_target(target: GPUTarget) -> bool:
        raise NotImplementedError

    @abc.abstractmethod
    def hash(self) -> str:
        raise NotImplementedError


class KernelcBackend(BaseBackend):
    """kernelc's CUDA backend (LLVM NVPTX -> nvJitLink)."""

    binary_ext = "cubin"

    @staticmethod
    def supports_target(target: GPUTarget) -> bool:
        return target.backend == "cuda"

    def hash(self) -> str:
        from ...compiler.artifact import COMPILER_VERSION
        return f"kernelc-{COMPILER_VERSION}-sm{self.target.arch}"

    def parse_options(self, options: dict):
        from types import SimpleNamespace
        return SimpleNamespace(num_warps=4, num_stages=3, num_ctas=1, extern_libs=None, **options)
