"""``kl.extra.cuda.utils``: Triton's module of the special-register helpers (see ``kl.extra.cuda``)."""
from ._impl import convert_custom_float8_sm70, convert_custom_float8_sm80, globaltimer, num_threads, num_warps, smid  # noqa: F401
