"""Compilation targets: which GPU architecture and PTX ISA version a kernel is built for.

A :class:`Target` names an architecture (``sm_80``, ``sm_86``, ``sm_89``, ``sm_90a``, ...) and the PTX ISA
version written into the PTX.  :func:`target_for_device` maps a device's compute capability to the target
kernelc builds for it (``sm_90a`` on Hopper: wgmma and setmaxnreg need the arch-specific ``a`` target, and
ptxas rejects wgmma for plain ``sm_90``).  An explicit ``override`` argument replaces the choice, e.g. ``"sm_80"``
or ``"sm_90a+ptx86"`` (kernelc passes its ``KERNELC_TARGET`` knob here).

PTX ISA version
---------------
The PTX must be accepted by two tools: LLVM's NVPTX backend, which writes it, and nvJitLink's ptxas, which
turns it into a cubin.  The default is the newest version both accept (checked on these versions):

* llvmlite 0.50 / LLVM 22.1 accepts ``+ptx90`` and ignores ``+ptx91`` with a warning (falling back to the
  arch's minimum);
* nvJitLink 13.0.88 accepts ``.version 9.0`` and rejects 9.1 ("Unsupported .version 9.1; current version is
  '9.0'").

So the default is PTX ISA 9.0 (``+ptx90``).  The runtime loads the cubin, not the PTX; with driver 580 (CUDA
13.0) cubins built this way load and run, and the driver also JITs the PTX 9.0 text itself (checked on the
GPU: docs/performance.md, "Targets and binaries").
Each arch also has a minimum PTX version (LLVM writes it when no ``+ptx`` feature is given); those minima are in
``MIN_PTX_VERSION`` and were read from LLVM 22's output.

Device limits
-------------
``ARCH_LIMITS`` holds per-architecture resource limits used for occupancy estimates and out-of-resource errors.
SM counts are facts of a device, not of an architecture, and are not here.  Sources:

* shared memory per SM (the largest carveout), blocks per SM, the shared-memory allocation unit (128 B) and the
  register allocation unit (256 registers per warp) are NVIDIA's ``cuda_occupancy.h`` (CUDA 13.0):
  ``cudaOccAlignUpShmemSizeVoltaPlus`` (8.0: up to 164 KB, 8.6/8.9: 100 KB, 9.0: 228 KB),
  ``cudaOccMaxBlocksPerMultiprocessor`` (8.0: 32, 8.6: 16, 8.9: 24, 9.0: 32),
  ``cudaOccSMemAllocationGranularity`` and ``cudaOccRegAllocationGranularity``;
* the opt-in maximum per block is the per-SM capacity less the 1 KB the driver reserves per block
  (``reservedSharedMemPerBlock``): 163 KB = 166912 B, 99 KB = 101376 B, 227 KB = 232448 B;
* 65536 registers per SM, at most 255 registers per thread, 1024 threads per block and the resident threads
  per SM (2048 on 8.0 and 9.0, 1536 on 8.6 and 8.9) are device attributes (``cuDeviceGetAttribute``).  The whole
  9.0 row was read from a Hopper device with driver 580 (docs/performance.md); the 8.x threads-per-SM values are
  those of the CUDA programming guide's compute-capability table and were not read from a device here.  The
  255-register limit per thread is the ISA's (ptxas: "maximum register limit 256", R0-R254 plus RZ).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Optional, Tuple

__all__ = [
    "ArchLimits", "ARCH_LIMITS", "Target", "parse_target", "target_for_device", "default_ptx_version",
    "MIN_PTX_VERSION", "LLVM_MAX_PTX", "NVJITLINK_MAX_PTX", "ARCH_SPECIFIC_DEFAULT",
]

KB = 1024


@dataclass(frozen=True)
class ArchLimits:
    """Per-SM and per-block resource limits of one GPU architecture (see the module docstring for sources)."""
    max_shared_per_block_optin: int   # bytes a block may use after cuFuncSetAttribute(MAX_DYNAMIC_SHARED...)
    max_shared_per_sm: int            # bytes, largest shared-memory carveout
    max_threads_per_sm: int
    max_blocks_per_sm: int
    registers_per_sm: int = 65536
    max_regs_per_thread: int = 255
    max_threads_per_block: int = 1024
    reserved_shared_per_block: int = 1 * KB
    default_shared_per_block: int = 48 * KB   # without the opt-in
    shared_alloc_unit: int = 128              # bytes
    reg_alloc_unit: int = 256                 # registers per warp
    sub_partitions: int = 4                   # an SM's register file is split evenly among them
    warp_size: int = 32

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // self.warp_size


#: Resource limits by SM version (``90`` covers ``sm_90`` and ``sm_90a``).
ARCH_LIMITS = {
    80: ArchLimits(max_shared_per_block_optin=163 * KB, max_shared_per_sm=164 * KB,
                   max_threads_per_sm=2048, max_blocks_per_sm=32),
    86: ArchLimits(max_shared_per_block_optin=99 * KB, max_shared_per_sm=100 * KB,
                   max_threads_per_sm=1536, max_blocks_per_sm=16),
    89: ArchLimits(max_shared_per_block_optin=99 * KB, max_shared_per_sm=100 * KB,
                   max_threads_per_sm=1536, max_blocks_per_sm=24),
    90: ArchLimits(max_shared_per_block_optin=227 * KB, max_shared_per_sm=228 * KB,
                   max_threads_per_sm=2048, max_blocks_per_sm=32),
}

#: The lowest PTX ISA version (x10) LLVM 22 writes for each arch.
MIN_PTX_VERSION = {
    "sm_80": 70, "sm_86": 71, "sm_87": 74, "sm_89": 78, "sm_90": 78, "sm_90a": 80,
    "sm_100": 86, "sm_100a": 86, "sm_120a": 87,
}

#: Newest PTX ISA version (x10) the NVPTX backend accepts, by LLVM major version (checked for 22 only).
LLVM_MAX_PTX = {22: 90}

#: Newest PTX ISA version (x10) nvJitLink's ptxas accepts, by nvJitLink (major, minor) (checked for 13.0).
NVJITLINK_MAX_PTX = {(13, 0): 90}

#: Architectures for which kernelc builds the arch-specific ("a") variant by default.
ARCH_SPECIFIC_DEFAULT = {90: "sm_90a"}

_ARCH_RE = re.compile(r"^(?:sm_?|compute_?)?(\d{2,3})([af]?)$")


def _normalize_arch(arch: str) -> str:
    m = _ARCH_RE.match(arch.strip().lower())
    if not m:
        raise ValueError(f"not a GPU architecture: {arch!r} (expected e.g. 'sm_80', 'sm_90a')")
    return f"sm_{m.group(1)}{m.group(2)}"


#: LLVM major version of each checked llvmlite release (so the version is known without loading LLVM).
LLVMLITE_LLVM = {"0.50": 22}


@lru_cache(maxsize=None)
def _llvm_max_ptx() -> int:
    try:
        import llvmlite  # the package only: cheap, unlike llvmlite.binding
        major = LLVMLITE_LLVM.get(".".join(llvmlite.__version__.split(".")[:2]))
        if major is None:
            from llvmlite import binding as llvm
            major = llvm.llvm_version_info[0]
    except Exception:  # pragma: no cover - llvmlite is a hard dependency
        return min(LLVM_MAX_PTX.values())
    if major in LLVM_MAX_PTX:
        return LLVM_MAX_PTX[major]
    known = sorted(LLVM_MAX_PTX)
    # A newer LLVM accepts at least what the newest checked one did; an older one is not trusted beyond minima.
    return LLVM_MAX_PTX[known[-1]] if major > known[-1] else 0


@lru_cache(maxsize=None)
def _nvjitlink_max_ptx() -> int:
    try:
        # the wheel's version from its dist-info name (13.0.88 -> (13, 0)): a directory listing, while
        # importlib.metadata costs ~12 ms to import and loading the library ~10 ms
        ver = _dist_version("nvidia_nvjitlink")
    except Exception:
        try:
            from cuda.bindings import nvjitlink
            ver = tuple(nvjitlink.version())
        except Exception:
            return min(NVJITLINK_MAX_PTX.values())
    if ver in NVJITLINK_MAX_PTX:
        return NVJITLINK_MAX_PTX[ver]
    known = sorted(NVJITLINK_MAX_PTX)
    return NVJITLINK_MAX_PTX[known[-1]] if ver > known[-1] else 0


def _dist_version(dist: str) -> Tuple[int, int]:
    import sys
    for d in sys.path:
        try:
            names = os.listdir(d or ".")
        except OSError:
            continue
        for n in names:
            if n.startswith(dist + "-") and n.endswith(".dist-info"):
                parts = n[len(dist) + 1:-len(".dist-info")].split(".")
                return int(parts[0]), int(parts[1])
    from importlib.metadata import version
    return tuple(int(x) for x in version(dist.replace("_", "-")).split(".")[:2])


def default_ptx_version(arch: str) -> int:
    """The PTX ISA version (x10, e.g. 90 for 9.0) used for ``arch``: the newest that both LLVM and nvJitLink
    accept, and never below the arch's minimum."""
    arch = _normalize_arch(arch)
    floor = MIN_PTX_VERSION.get(arch, 0)
    cap = min(_llvm_max_ptx(), _nvjitlink_max_ptx())
    return max(floor, cap)


@dataclass(frozen=True)
class Target:
    """What to compile for: ``arch`` (``sm_90a``), PTX ISA ``ptx_version`` (x10; ``None`` picks
    :func:`default_ptx_version`) and extra LLVM target ``features`` (e.g. ``("+...",)``)."""
    arch: str = "sm_90a"
    ptx_version: Optional[int] = None
    features: Tuple[str, ...] = field(default=())

    def __post_init__(self):
        arch = _normalize_arch(self.arch)
        object.__setattr__(self, "arch", arch)
        ptx = self.ptx_version if self.ptx_version is not None else default_ptx_version(arch)
        if isinstance(ptx, str) or (isinstance(ptx, float)):
            ptx = int(round(float(ptx) * 10))
        if ptx < MIN_PTX_VERSION.get(arch, 0):
            raise ValueError(f"PTX ISA {ptx // 10}.{ptx % 10} is too old for {arch} "
                             f"(needs >= {MIN_PTX_VERSION[arch] // 10}.{MIN_PTX_VERSION[arch] % 10})")
        object.__setattr__(self, "ptx_version", int(ptx))
        object.__setattr__(self, "features", tuple(self.features))

    # -- derived names -------------------------------------------------------------------------------------
    @property
    def sm(self) -> int:
        """The SM version as a number: 90 for ``sm_90a``."""
        return int(re.match(r"sm_(\d+)", self.arch).group(1))

    @property
    def capability(self) -> Tuple[int, int]:
        """Compute capability, e.g. ``(9, 0)``."""
        return divmod(self.sm, 10)

    @property
    def arch_specific(self) -> bool:
        """True for ``sm_90a``-style targets whose code runs only on that exact architecture."""
        return self.arch.endswith(("a", "f"))

    @property
    def ptx_isa(self) -> str:
        """The PTX ISA version as written in ``.version``: ``"9.0"``."""
        return f"{self.ptx_version // 10}.{self.ptx_version % 10}"

    @property
    def triple(self) -> str:
        return "nvptx64-nvidia-cuda"

    @property
    def llvm_cpu(self) -> str:
        return self.arch

    @property
    def llvm_features(self) -> str:
        return ",".join((f"+ptx{self.ptx_version}",) + self.features)

    @property
    def limits(self) -> ArchLimits:
        """Resource limits of this architecture; ``KeyError`` if the table has none."""
        try:
            return ARCH_LIMITS[self.sm]
        except KeyError:
            raise KeyError(f"no resource limits known for {self.arch}; known: "
                           f"{', '.join(f'sm_{k}' for k in sorted(ARCH_LIMITS))}") from None

    @property
    def instruction_bytes(self) -> int:
        """Size of one SASS instruction (16 bytes on every arch since Volta)."""
        return 16

    def __str__(self) -> str:
        return self.arch if self.ptx_version == default_ptx_version(self.arch) else f"{self.arch}+ptx{self.ptx_version}"


def parse_target(spec) -> Target:
    """``"sm_90a"``, ``"90a"``, ``"sm_80+ptx86"`` or a :class:`Target` -> :class:`Target`."""
    if isinstance(spec, Target):
        return spec
    text = str(spec).strip()
    if not text:
        raise ValueError("empty target")
    parts = text.split("+")
    ptx = None
    features = []
    for extra in parts[1:]:
        m = re.fullmatch(r"ptx(\d)\.?(\d)", extra.strip().lower())
        if m:
            ptx = int(m.group(1)) * 10 + int(m.group(2))
        else:
            features.append("+" + extra.strip())
    return Target(parts[0], ptx_version=ptx, features=tuple(features))


def target_for_device(major: int, minor: int, override=None) -> Target:
    """The target kernelc compiles for on a device of compute capability ``major.minor``.

    ``override`` (a spec string or :class:`Target`) replaces the choice.  Hopper (9.0) gets ``sm_90a``; other
    devices get ``sm_<major><minor>``.
    """
    if override is not None:
        return parse_target(override)
    sm = major * 10 + minor
    return Target(ARCH_SPECIFIC_DEFAULT.get(sm, f"sm_{sm}"))
