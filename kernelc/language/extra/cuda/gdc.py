"""``kl.extra.cuda.gdc``: Triton's module of the grid-dependency controls (see ``kl.extra.cuda``)."""
from ._impl import gdc_launch_dependents, gdc_wait  # noqa: F401
