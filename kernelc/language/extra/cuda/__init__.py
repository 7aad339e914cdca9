"""``kl.extra.cuda``: CUDA-specific device helpers with Triton 3.6's names.

In compiled kernels they read PTX special registers or issue ``griddepcontrol`` instructions; in the
interpreter ``globaltimer`` is the host clock in ns, ``smid`` is 0, ``num_warps``/``num_threads``
follow the launch's ``num_warps`` and the grid-dependency controls do nothing (programs run in order).
"""
from __future__ import annotations

from . import libdevice  # noqa: F401
from ._impl import (convert_custom_float8_sm70, convert_custom_float8_sm80, gdc_launch_dependents,  # noqa: F401
                    gdc_wait, globaltimer, num_threads, num_warps, smid)
from . import gdc, utils  # noqa: E402,F401  (Triton's submodule paths)

__all__ = ["libdevice", "globaltimer", "num_threads", "num_warps", "smid", "convert_custom_float8_sm70",
           "convert_custom_float8_sm80", "gdc_launch_dependents", "gdc_wait"]
