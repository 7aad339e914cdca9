"""``kl.extra.cuda.libdevice``: the same functions as ``kl.extra.libdevice`` (Triton's second path)."""
from ..libdevice import *  # noqa: F401,F403
from ..libdevice import SYMBOLS, TABLE, __all__  # noqa: F401
