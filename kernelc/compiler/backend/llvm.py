"""LLVM IR text -> optimised LLVM IR + PTX, with llvmlite's NVPTX backend.

* LLVM is initialised once per process (:func:`ensure_initialized`, thread-safe).
* Every compile gets its own ``LLVMContext`` and ``TargetMachine`` (both cost microseconds), so compiles on
  several threads do not share LLVM state.  libdevice is kept as bitcode bytes and parsed into each context.
* Optimisation uses the new pass manager (``create_pass_builder`` + ``PipelineTuningOptions``), i.e. the
  ``default<O3>`` pipeline, into which the NVPTX target adds its own passes (NVVMReflect among them).

libdevice
---------
Accurate math (``__nv_erff``, ``__nv_sinf``, ``__nv_expf``, ...) comes from NVIDIA's ``libdevice.10.bc``, found with
``cuda.pathfinder.find_bitcode_lib("device")`` (PyPI ``nvidia-nvvm`` puts it under
``nvidia/cu13/nvvm/libdevice/``), else ``$KERNELC_LIBDEVICE``, else ``$CUDA_HOME/nvvm/libdevice``.  It is linked
only into modules that declare ``__nv_*`` functions.  Before linking, every libdevice definition is made
``linkonce_odr``: the IR linker then brings in only the functions the kernel references (and what they call),
and the optimiser drops them once inlined.  (Linked whole, its 575 functions cost ~400 ms of optimisation and
~300 ms of PTX emission per kernel.)  Each set of needed functions is extracted once per process into a small
bitcode module (~30 ms, mostly parsing the 460 KB library) and later compiles link that (~0.5 ms).

libdevice branches on ``__nvvm_reflect("__CUDA_FTZ")``, ``("__CUDA_PREC_SQRT")`` and ``("__CUDA_ARCH")``.
LLVM 22's NVVMReflect answers ``__CUDA_FTZ`` from the module flag ``nvvm-reflect-ftz`` (absent = 0: denormals
kept), ``__CUDA_ARCH`` from the target, and every other name with 0 -- it does *not* read a
``nvvm-reflect-prec-sqrt`` module flag (checked: ``__nv_sqrtf`` became ``sqrt.approx.f32`` with that flag set to
1).  So the backend sets the LLVM option ``-nvvm-reflect-add=__CUDA_PREC_SQRT=1`` once per process, which makes
``__nv_sqrtf`` IEEE-rounded (``sqrt.rn.f32``).  libdevice has no ``__CUDA_PREC_DIV`` query.  A module that wants
flush-to-zero sets ``!{i32 4, !"nvvm-reflect-ftz", i32 1}`` in ``!llvm.module.flags`` itself.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Dict, FrozenSet, Optional, Tuple

from kernelc.errors import CompilationError

from cubintools.target import Target, parse_target

from .consumer_order import ATTRIBUTE as CONSUMER_ORDER, order_by_consumers

__all__ = ["ensure_initialized", "llvm_to_ptx", "link_libdevice", "libdevice_path", "needed_libdevice_functions"]

_init_lock = threading.Lock()
_initialized = False

#: Values the NVVMReflect pass substitutes for libdevice's queries that LLVM does not take from module flags.
REFLECT_OPTIONS = ("__CUDA_PREC_SQRT=1",)


def _llvm():
    from llvmlite import binding as llvm
    return llvm


def ensure_initialized() -> None:
    """Initialise LLVM's targets and asm printers and the NVVMReflect options, once per process."""
    global _initialized
    if _initialized:
        return
    with _init_lock:
        if _initialized:
            return
        llvm = _llvm()
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        for opt in REFLECT_OPTIONS:
            llvm.set_option("kernelc", f"-nvvm-reflect-add={opt}")
        _initialized = True


# ------------------------------------------------------------------------------------------------ libdevice
_libdevice_lock = threading.Lock()
_libdevice_bytes: Optional[bytes] = None
_libdevice_subsets: Dict[FrozenSet[str], bytes] = {}


def libdevice_path() -> str:
    """Path of ``libdevice.10.bc``; raises :class:`CompilationError` if none is installed."""
    from ...options import get
    env = get("KERNELC_LIBDEVICE")
    if env:
        if os.path.isfile(env):
            return env
        raise CompilationError(f"KERNELC_LIBDEVICE={env} does not exist")
    try:
        from cuda import pathfinder
        return pathfinder.find_bitcode_lib("device")
    except Exception:
        pass
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root:
            cand = os.path.join(root, "nvvm", "libdevice", "libdevice.10.bc")
            if os.path.isfile(cand):
                return cand
    raise CompilationError(
        "this kernel calls libdevice math functions (__nv_*) but libdevice.10.bc was not found: "
        "install the PyPI package nvidia-nvvm (it ships nvidia/cu13/nvvm/libdevice/libdevice.10.bc) "
        "or set KERNELC_LIBDEVICE to the file")


def _libdevice_bitcode() -> bytes:
    global _libdevice_bytes
    if _libdevice_bytes is None:
        with _libdevice_lock:
            if _libdevice_bytes is None:
                with open(libdevice_path(), "rb") as f:
                    _libdevice_bytes = f.read()
    return _libdevice_bytes


def needed_libdevice_functions(module) -> FrozenSet[str]:
    """Names of the ``__nv_*`` functions ``module`` declares but does not define."""
    return frozenset(f.name for f in module.functions if f.is_declaration and f.name.startswith("__nv_"))


def _libdevice_subset(names: FrozenSet[str]) -> bytes:
    """Bitcode of a module holding the libdevice functions ``names`` need (linkonce_odr), cached per process."""
    with _libdevice_lock:
        cached = _libdevice_subsets.get(names)
    if cached is not None:
        return cached
    llvm = _llvm()
    ctx = llvm.create_context()
    lib = llvm.parse_bitcode(_libdevice_bitcode(), context=ctx)
    defined = {f.name for f in lib.functions if not f.is_declaration}
    missing = sorted(n for n in names if n not in defined)
    if missing:
        raise CompilationError(f"libdevice has no function(s) {', '.join(missing)}")
    for f in lib.functions:
        if not f.is_declaration:
            f.linkage = "linkonce_odr"
    stub_src = "".join(f"declare void @{n}()\n" for n in sorted(names))
    stub = llvm.parse_assembly(stub_src, context=ctx)
    # Declarations with the wrong type are fine: the linker resolves by name and keeps the definition's type.
    stub.triple = lib.triple
    stub.data_layout = lib.data_layout
    stub.link_in(lib)
    data = stub.as_bitcode()
    with _libdevice_lock:
        _libdevice_subsets[names] = data
    return data


def link_libdevice(module) -> FrozenSet[str]:
    """Link the libdevice functions ``module`` declares into it (no-op if it declares none).

    Returns the set of ``__nv_*`` names that were linked.  Only referenced functions are linked, as
    ``linkonce_odr`` so that the optimiser can drop them after inlining.
    """
    names = needed_libdevice_functions(module)
    if not names:
        return names
    llvm = _llvm()
    lib = llvm.parse_bitcode(_libdevice_subset(names), context=getattr(module, "_context", None))
    lib.triple = module.triple
    lib.data_layout = module.data_layout
    module.link_in(lib)
    return names


# ------------------------------------------------------------------------------------------------ compile
def _target_machine(target: Target, opt_level: int):
    llvm = _llvm()
    return llvm.Target.from_triple(target.triple).create_target_machine(
        cpu=target.llvm_cpu, features=target.llvm_features, opt=opt_level, reloc="default", codemodel="default")


def _first_lines(text: str, n: int = 20) -> str:
    lines = str(text).strip().splitlines()
    return "\n".join(lines[:n]) + ("\n..." if len(lines) > n else "")


def llvm_to_ptx(llir_text: str, target="sm_90a", opt_level: int = 3,
                timings: Optional[Dict[str, float]] = None) -> Tuple[str, str]:
    """Optimise LLVM IR text and emit PTX for ``target``.

    Returns ``(ptx_text, optimized_llir_text)``.  Raises :class:`CompilationError` for IR that does not parse
    or verify, or that LLVM cannot lower.  If ``timings`` is given, the seconds spent in ``llvm_parse``,
    ``libdevice``, ``llvm_opt`` and ``llc`` (PTX emission) are added to it.
    """
    ensure_initialized()
    target = parse_target(target)
    llvm = _llvm()
    t0 = time.perf_counter()
    ctx = llvm.create_context()
    try:
        mod = llvm.parse_assembly(llir_text, context=ctx)
        mod.verify()
    except RuntimeError as e:
        raise CompilationError(f"invalid LLVM IR:\n{_first_lines(e)}") from None
    tm = _target_machine(target, opt_level)
    if not mod.triple:
        mod.triple = target.triple
    if not mod.data_layout:
        mod.data_layout = str(tm.target_data)
    t1 = time.perf_counter()
    link_libdevice(mod)
    t2 = time.perf_counter()
    if opt_level > 0:
        pto = llvm.create_pipeline_tuning_options(speed_level=opt_level)
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
    else:
        # Even at O0, NVVMReflect must fold libdevice's queries: run the O1 pipeline if libdevice was linked.
        if any(f.name.startswith("__nv_") for f in mod.functions if not f.is_declaration):
            pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=1))
            pb.getModulePassManager().run(mod, pb)
    t3 = time.perf_counter()
    optimized = str(mod)
    if CONSUMER_ORDER in optimized:
        # the tile IR asked for consumer order (passes/instruction_order.py); NVPTX prints in source order
        optimized = order_by_consumers(optimized)
        mod = llvm.parse_assembly(optimized, context=ctx)
        mod.verify()
    try:
        ptx = tm.emit_assembly(mod)
    except RuntimeError as e:
        raise CompilationError(f"LLVM could not generate PTX for {target.arch}:\n{_first_lines(e)}") from None
    t4 = time.perf_counter()
    if timings is not None:
        for k, v in (("llvm_parse", t1 - t0), ("libdevice", t2 - t1), ("llvm_opt", t3 - t2), ("llc", t4 - t3)):
            timings[k] = timings.get(k, 0.0) + v
    return ptx, optimized
