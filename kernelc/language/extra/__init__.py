"""``kl.extra``: device-library functions (Triton's ``triton.language.extra``).

``kl.extra.libdevice`` (also ``kl.extra.cuda.libdevice``) holds NVIDIA libdevice's math functions;
``kl.extra.cuda`` the CUDA-specific helpers (``globaltimer``, ``smid``, ``num_warps``, ...);
``kl.extra.hip`` exists only to say that AMD's helpers are not supported.
"""
from . import cuda, hip, libdevice  # noqa: F401

__all__ = ["cuda", "hip", "libdevice"]
