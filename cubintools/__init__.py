"""cubintools: read what a compiled CUDA binary says, without a GPU.

Shared by the compiler (which builds cubins), the profiler (which maps sampled PCs to lines) and the analyzer
(which maps stalls to SASS and lines).  It imports none of them: it depends only on pyelftools, nvdisasm
(``nvidia-cuda-nvdisasm``) and the standard library.

::

    from cubintools import inspect_cubin, SourceMap, instructions, parse_target
    info = inspect_cubin(cubin_bytes)          # functions, registers, shared/local memory, kernels
    smap = SourceMap.from_cubin(cubin_bytes)   # pc <-> (file, line) from .debug_line
    instrs = instructions(cubin_bytes)         # SASS instructions with their source lines (one nvdisasm run)
    parse_target("sm_90a").limits              # per-architecture resource limits

Modules: :mod:`.target` (targets, PTX version, device limits), :mod:`.cubin` (ELF facts), :mod:`.debugline`
(DWARF line table), :mod:`.sass` (nvdisasm), :mod:`.sourcemap` (pc <-> line maps), :mod:`.demangle`
(C++ symbol names).
"""
from __future__ import annotations

from .target import (ARCH_LIMITS, ARCH_SPECIFIC_DEFAULT, ArchLimits, Target, default_ptx_version, parse_target,
                     target_for_device)

# pyelftools and nvdisasm load on first use, so importing the package for a target or its limits stays cheap.
_LAZY = {
    "CubinInfo": ".cubin", "FunctionInfo": ".cubin", "inspect_cubin": ".cubin", "line_sequences": ".cubin",
    "LineSequence": ".debugline", "decode_debug_line": ".debugline",
    "Instr": ".sass", "disassemble": ".sass", "disassemble_with_instructions": ".sass", "instructions": ".sass",
    "parse_sass": ".sass", "SourceMap": ".sourcemap", "demangle": ".demangle",
}


def __getattr__(name):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(mod, __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "Target", "ArchLimits", "ARCH_LIMITS", "ARCH_SPECIFIC_DEFAULT", "parse_target", "target_for_device",
    "default_ptx_version", *_LAZY,
]
