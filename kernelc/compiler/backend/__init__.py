"""The binary backend: LLVM IR text -> PTX -> cubin -> SASS, and what the runtime, profiler and analyzer need.

::

    from kernelc.compiler.backend import compile_llir, target_for_device
    art = compile_llir(llir_text, target_for_device(9, 0), "add_kernel")
    art.ptx, art.cubin, art.n_regs, art.n_spills, art.shared, art.local_bytes
    art.source_map.pc_to_line(0x40)          # ("/home/me/add.py", 12)
    art.sass, art.instructions               # lazily, one nvdisasm run (~0.2 s) on first use
    art.timings                              # {"llvm_parse": s, "libdevice": s, "llvm_opt": s, "llc": s, ...}

Modules: :mod:`.llvm` (IR -> PTX, libdevice), :mod:`.ptxas` (PTX -> cubin with nvJitLink, ptxas report).
Targets, cubin facts, line tables, SASS and source maps live in the :mod:`cubintools` package, which the
profiler and analyzer use too; the names are re-exported here for the compiler's callers.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

from cubintools.target import ARCH_LIMITS, ArchLimits, Target, parse_target
from cubintools.target import target_for_device as _target_for_device
from kernelc.errors import CompilationError

ENV_TARGET = "KERNELC_TARGET"

# The heavy stages (llvmlite, nvJitLink, pyelftools) load on first use, so loading a cached kernel
# (which needs none of them) stays fast.
_LAZY = {
    "CubinInfo": "cubintools.cubin", "FunctionInfo": "cubintools.cubin", "inspect_cubin": "cubintools.cubin",
    "line_sequences": "cubintools.cubin",
    "link_libdevice": ".llvm", "llvm_to_ptx": ".llvm",
    "CubinResult": ".ptxas", "FunctionResources": ".ptxas", "parse_ptxas_report": ".ptxas", "ptx_to_cubin": ".ptxas",
    "Instr": "cubintools.sass", "disassemble": "cubintools.sass",
    "disassemble_with_instructions": "cubintools.sass", "instructions": "cubintools.sass",
    "parse_sass": "cubintools.sass", "SourceMap": "cubintools.sourcemap",
}


def __getattr__(name):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(mod, __name__), name)
    globals()[name] = value
    return value


def target_for_device(major: int, minor: int, override=None) -> Target:
    """The target kernelc compiles for on a device of compute capability ``major.minor``; ``override``, else
    the ``KERNELC_TARGET`` environment variable (e.g. ``sm_80``, ``sm_90a+ptx86``), replaces the choice."""
    if override is None:
        from ...options import OptionError, get
        override = get(ENV_TARGET)
        if override is not None:
            try:
                return parse_target(override)
            except ValueError as e:
                raise OptionError(f"{ENV_TARGET}={override!r}: {e}") from None
    return _target_for_device(major, minor, override)

__all__ = [
    "BinaryArtifacts", "compile_llir", "compile_ptx",
    "Target", "ArchLimits", "ARCH_LIMITS", "parse_target", "target_for_device",
    "llvm_to_ptx", "link_libdevice", "ptx_to_cubin", "CubinResult", "FunctionResources", "parse_ptxas_report",
    "inspect_cubin", "CubinInfo", "FunctionInfo", "line_sequences",
    "disassemble", "instructions", "disassemble_with_instructions", "parse_sass", "Instr", "SourceMap",
]


@dataclass
class BinaryArtifacts:
    """Everything compiled for one kernel.

    ``n_regs`` registers per thread; ``n_spills`` bytes of spill stores + loads reported by ptxas (0 = no spills);
    ``shared`` static shared memory in bytes; ``local_bytes`` the per-thread stack frame (local memory, spills
    included).  ``sass`` and ``instructions`` are computed on first use by one nvdisasm run, and that run's time is
    added to ``timings["nvdisasm"]``.
    """
    name: str
    target: Target
    ptx: str
    llir_opt: str
    cubin: bytes
    source_map: SourceMap
    n_regs: int
    n_spills: int
    shared: int
    local_bytes: int
    timings: Dict[str, float]
    resources: Optional[FunctionResources] = None
    cubin_info: Optional[CubinInfo] = field(default=None, repr=False)
    ptxas_log: str = field(default="", repr=False)
    _sass: Optional[str] = field(default=None, repr=False, compare=False)
    _instructions: Optional[List[Instr]] = field(default=None, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def _disassemble(self) -> None:
        with self._lock:
            if self._sass is not None:
                return
            t0 = time.perf_counter()
            from cubintools.sass import disassemble_with_instructions
            text, instrs = disassemble_with_instructions(self.cubin)
            self.timings["nvdisasm"] = time.perf_counter() - t0
            self._instructions = instrs
            self._sass = text

    @property
    def sass(self) -> str:
        """SASS text (``nvdisasm -c -g``) of the whole cubin."""
        if self._sass is None:
            self._disassemble()
        return self._sass

    @property
    def instructions(self) -> List[Instr]:
        """SASS instructions of the kernel (``name``) with their source lines."""
        if self._instructions is None:
            self._disassemble()
        return [i for i in self._instructions if i.function == self.name]

    @property
    def all_instructions(self) -> List[Instr]:
        """SASS instructions of every function in the cubin (the kernel and non-inlined callees)."""
        if self._instructions is None:
            self._disassemble()
        return list(self._instructions)

    @property
    def asm(self) -> Dict[str, object]:
        """``{"llir": ..., "ptx": ..., "cubin": ...}``; ``"sass"`` is added by callers that want it."""
        return {"llir": self.llir_opt, "ptx": self.ptx, "cubin": self.cubin}


def _finish(name: Optional[str], target: Target, ptx: str, llir_opt: str, res: CubinResult, timings: Dict[str, float],
            eager_sass: bool) -> BinaryArtifacts:
    t0 = time.perf_counter()
    from cubintools.cubin import inspect_cubin
    from cubintools.sourcemap import SourceMap
    info = inspect_cubin(res.cubin)
    if name is None:
        if len(info.kernels) != 1:
            raise CompilationError(f"the module has {len(info.kernels)} kernels ({', '.join(info.kernels)}); "
                                   f"name one")
        name = info.kernels[0]
    if name not in info.functions or not info.functions[name].is_entry:
        kernels = ", ".join(info.kernels) or "none"
        raise CompilationError(f"kernel {name!r} is not an entry function of the compiled module "
                               f"(kernels: {kernels}); is it marked as a kernel in !nvvm.annotations?")
    fn = info.functions[name]
    t1 = time.perf_counter()
    smap = SourceMap.from_cubin(res.cubin, default_function=name)
    if "wgmma.mma_async" in ptx:
        from .mma_lines import place_wgmma_lines
        place_wgmma_lines(smap, res.cubin, ptx)   # ptxas leaves these without a line of their own
    t2 = time.perf_counter()
    timings["cubin_info"] = t1 - t0
    timings["source_map"] = t2 - t1
    report = res.resources.get(name)
    n_spills = report.spills if report is not None else 0
    art = BinaryArtifacts(
        name=name, target=target, ptx=ptx, llir_opt=llir_opt, cubin=res.cubin, source_map=smap,
        n_regs=fn.n_regs, n_spills=n_spills, shared=fn.shared, local_bytes=fn.frame_size, timings=timings,
        resources=report, cubin_info=info, ptxas_log=res.info_log)
    if eager_sass:
        art._disassemble()
    return art


def compile_llir(llir_text: str, target="sm_90a", name: Optional[str] = None, *, opt_level: int = 3,
                 ptxas_options: Sequence[str] = (), eager_sass: bool = False, fill_step: bool = False,
                 fill_policy: Optional[str] = None, keep_blocks: bool = False,
                 occupancy_step: bool = False, loads_first: bool = False) -> BinaryArtifacts:
    """Compile one kernel's LLVM IR text to PTX, cubin and (lazily) SASS.

    ``target`` is a :class:`Target` or a spec such as ``"sm_90a"``; ``name`` is the kernel's symbol (default: the
    only kernel in the module).  ``ptxas_options`` go to nvJitLink as given (e.g. ``"-maxrregcount=128"``).
    ``fill_step``: the tile IR's ``registers="fill_step"``; ``fill_policy``, ``keep_blocks``: its ``fill_policy`` and
    ``fill_keep_blocks``; ``occupancy_step``, ``loads_first``: its ``registers="occupancy_step"`` and
    ``registers="loads_first"`` (``ptxas.ptx_to_cubin``).
    Raises :class:`kernelc.errors.CompilationError` if LLVM or ptxas rejects the code.
    """
    target = parse_target(target)
    timings: Dict[str, float] = {}
    t0 = time.perf_counter()
    from .llvm_pool import to_cubin
    # concurrent compiles (autotuning) run LLVM and the assembler in worker processes: llvmlite and nvJitLink
    # each let one call of a process in at a time
    ptx, llir_opt, res = to_cubin(llir_text, target, opt_level, timings, extra=tuple(ptxas_options), fill_step=fill_step,
                                    fill_policy=fill_policy, keep_blocks=keep_blocks, occupancy_step=occupancy_step,
                                    loads_first=loads_first)
    art = _finish(name, target, ptx, llir_opt, res, timings, eager_sass)
    timings["total"] = time.perf_counter() - t0 - timings.get("nvdisasm", 0.0)
    return art


def compile_ptx(ptx: str, target="sm_90a", name: Optional[str] = None, *, opt_level: int = 3,
                ptxas_options: Sequence[str] = ()) -> BinaryArtifacts:
    """Like :func:`compile_llir` for PTX text (hand-written or cached PTX)."""
    from .ptxas import ptx_to_cubin
    target = parse_target(target)
    timings: Dict[str, float] = {}
    t0 = time.perf_counter()
    res = ptx_to_cubin(ptx, target, opt_level=opt_level, extra=tuple(ptxas_options))
    timings["ptxas"] = time.perf_counter() - t0
    art = _finish(name, target, ptx, "", res, timings, eager_sass=False)
    timings["total"] = time.perf_counter() - t0
    return art
