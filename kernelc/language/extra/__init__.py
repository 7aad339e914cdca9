"""``kl.extra``: device-library functions (Triton's ``triton.language.extra``).

``kl.extra.libdevice`` (also ``kl.extra.cuda.libdevice``) holds NVIDIA libdevice's math functions;
``kl.extra.cuda`` the CUDA-specific helpers (``globaltimer``, ``smid``, ``num_warps``, ...).
"""
from . import cuda, libdevice  # noqa: F401

__all__ = ["cuda", "libdevice"]
