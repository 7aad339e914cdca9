"""Instruction sampling (``mode="pcsampling"``): CUPTI PC sampling with stall reasons, attributed to
SASS instructions and kernel source lines.

* :class:`PCSampler` -- standalone sampling (``with PCSampler(period=10) as s: run()``).
* :func:`attach` / :func:`finish` -- what a kprof session calls when its mode is ``pcsampling``
  (the session protocol is documented in :mod:`.integration`).
* :mod:`.attribution` -- samples -> instructions -> lines -> profile frames, pure Python.
* :mod:`.stall_reasons` -- stall-reason names, the family counted, meanings and advice.
* :mod:`.cupti_pc` -- the ctypes binding of CUPTI's PC sampling API.
* :mod:`.fixture` -- recorded samples as JSON test data.

See ``profiler/pcsampling/README.md`` for the design, the profile layout and the caveats.
"""

from .attribution import KernelAttribution, KernelCode, PCCounts, SampleTable, annotate, attribute
from .integration import annotate_tree, attach, finish, parse_mode, sampler_of
from .sampler import PCSampler, demangle, register_module_cubin
from .stall_reasons import FAMILY, REASONS, describe

__all__ = [
    "PCSampler", "attach", "finish", "parse_mode", "sampler_of", "annotate_tree", "register_module_cubin",
    "SampleTable", "PCCounts", "KernelCode", "KernelAttribution", "attribute", "annotate", "demangle",
    "FAMILY", "REASONS", "describe",
]
