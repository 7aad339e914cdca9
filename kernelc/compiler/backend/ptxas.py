"""PTX -> cubin in-process with nvJitLink (PyPI ``nvidia-nvjitlink``; works without a GPU or driver).

``ptx_to_cubin`` runs nvJitLink's ptxas with ``-Xptxas=-v`` so that the info log carries ptxas's resource
report, which :func:`parse_ptxas_report` turns into :class:`FunctionResources` per function::

    ptxas info    : Compiling entry function 'vadd' for 'sm_90a'
    ptxas info    : Function properties for vadd
    ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 22 registers, used 0 barriers, 4096 bytes smem, 380 bytes cmem[0]

Notes: the option count given to ``nvjitlink.create`` must equal ``len(opts)`` (a larger count crashes the
process); ``-lineinfo`` is not an nvJitLink option, and none is needed: ptxas keeps the ``.loc`` line table of
the PTX in the cubin's ``.debug_line``.
"""
from __future__ import annotations

import functools
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

from kernelc.errors import CompilationError

from cubintools.target import parse_target

__all__ = ["CubinResult", "FunctionResources", "ptx_to_cubin", "parse_ptxas_report", "launch_bounds", "fits_block"]


@dataclass
class FunctionResources:
    """One function's entry in the ptxas ``-v`` report (bytes unless named otherwise)."""
    name: str
    is_entry: bool = False
    registers: int = 0
    barriers: int = 0
    shared: int = 0            # static shared memory ("bytes smem")
    stack_frame: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    cmem: Dict[int, int] = field(default_factory=dict)   # constant bank -> bytes

    @property
    def spills(self) -> int:
        """Bytes spilled to local memory (stores + loads); 0 for a kernel that does not spill."""
        return self.spill_stores + self.spill_loads


@dataclass
class CubinResult:
    cubin: bytes
    info_log: str
    resources: Dict[str, FunctionResources] = field(default_factory=dict)
    warnings: List[str] = field(default_factory=list)


_COMPILING_RE = re.compile(r"Compiling (entry )?function '([^']+)'")
_PROPS_RE = re.compile(r"Function properties for (\S+)")
_FRAME_RE = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED_RE = re.compile(r"Used (\d+) registers")
_BARRIERS_RE = re.compile(r"used (\d+) barriers")
_SMEM_RE = re.compile(r"(\d+) bytes smem")
_CMEM_RE = re.compile(r"(\d+) bytes cmem\[(\d+)\]")


def parse_ptxas_report(log: str) -> Dict[str, FunctionResources]:
    """Per-function resources from a ptxas ``-v`` info log."""
    out: Dict[str, FunctionResources] = {}
    current: Optional[FunctionResources] = None

    def get(name: str) -> FunctionResources:
        if name not in out:
            out[name] = FunctionResources(name)
        return out[name]

    for line in log.splitlines():
        m = _COMPILING_RE.search(line)
        if m:
            current = get(m.group(2))
            current.is_entry = current.is_entry or bool(m.group(1))
            continue
        m = _PROPS_RE.search(line)
        if m:
            current = get(m.group(1))
            continue
        if current is None:
            continue
        m = _FRAME_RE.search(line)
        if m:
            current.stack_frame, current.spill_stores, current.spill_loads = map(int, m.groups())
            continue
        m = _USED_RE.search(line)
        if m:
            current.registers = int(m.group(1))
            b = _BARRIERS_RE.search(line)
            if b:
                current.barriers = int(b.group(1))
            s = _SMEM_RE.search(line)
            if s:
                current.shared = int(s.group(1))
            for size, bank in _CMEM_RE.findall(line):
                current.cmem[int(bank)] = int(size)
    return out


_tls = threading.local()


def _nvjitlink():
    from cuda.bindings import nvjitlink
    return nvjitlink


def _log(nvjitlink, handle, which: str) -> str:
    size = getattr(nvjitlink, f"get_{which}_log_size")(handle)
    if not size:
        return ""
    buf = bytearray(size)
    getattr(nvjitlink, f"get_{which}_log")(handle, buf)
    return buf.rstrip(b"\x00").decode("utf-8", "replace")


@functools.lru_cache(maxsize=None)
def ptxas_binary() -> Optional[str]:
    """A standalone ptxas (``$KERNELC_PTXAS``, cuda.pathfinder, the one Triton ships), or None."""
    from ...options import OptionError, get
    env = get("KERNELC_PTXAS")
    if env:
        if not os.path.isfile(env):
            raise OptionError(f"KERNELC_PTXAS={env!r}: no such file (unset it to use the installed ptxas)")
        return env
    try:
        from cuda import pathfinder
        path = pathfinder.find_nvidia_binary_utility("ptxas")
        if path:
            return path
    except Exception:
        pass
    import importlib.util
    spec = importlib.util.find_spec("triton")
    if spec is not None and spec.submodule_search_locations:
        for root in spec.submodule_search_locations:
            cand = os.path.join(root, "backends", "nvidia", "bin", "ptxas")
            if os.path.isfile(cand) and os.access(cand, os.X_OK):
                return cand
    return None


_MINNCTA = b".minnctapersm 1\n"


def _standalone(ptx: str, target, opt_level: int, extra: Sequence[str], exe: str) -> CubinResult:
    """ptxas as a program: nvJitLink assembles for a link step and then ignores ``setmaxnreg`` (C7504,
    "to maintain compatibility across compilation units"), which a warp-specialised kernel needs.

    Where ptxas ignores every ``setmaxnreg`` anyway because it cannot tell the register count at entry (C7508: the
    consumers then keep the entry's 65536 / threads registers and spill), the kernel is assembled again with
    ``.minnctapersm 1`` after its ``.maxntid``, which fixes that count. Only then: on kernels whose setmaxnreg
    already held, the directive moves ptxas's allocation (a D=128 backward kernel from 0 to 16 bytes of spills)."""
    res = _standalone_once(ptx, target, opt_level, extra, exe)
    if "C7508" in res.info_log and "setmaxnreg" in ptx:
        data = ptx.encode() if isinstance(ptx, str) else bytes(ptx)
        bounded = _MAXNTID_RE.sub(lambda m: m.group(0) + _MINNCTA, data)
        if bounded != data:
            again = _standalone_once(bounded.decode(), target, opt_level, extra, exe)
            if "C7508" not in again.info_log:
                again.info_log = ("kernelc: ptxas ignored setmaxnreg (C7508: register count at entry unknown); "
                                  "assembled again with .minnctapersm 1\n") + again.info_log
                return again
    return res


def _standalone_once(ptx: str, target, opt_level: int, extra: Sequence[str], exe: str) -> CubinResult:
    import subprocess
    import tempfile
    opts = [o[len("-Xptxas="):] if o.startswith("-Xptxas=") else o for o in extra]
    with tempfile.TemporaryDirectory(prefix="kernelc-ptxas-") as d:
        src, out = os.path.join(d, "kernel.ptx"), os.path.join(d, "kernel.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        cmd = [exe, f"-arch={target.arch}", f"-O{int(opt_level)}", "-v", "-lineinfo", *opts, src, "-o", out]
        r = subprocess.run(cmd, capture_output=True, text=True)
        info = (r.stdout or "") + (r.stderr or "")
        if r.returncode != 0:
            raise CompilationError(f"ptxas failed for {target.arch} ({exe}):\n{info.strip()}")
        with open(out, "rb") as f:
            cubin = f.read()
    warnings = [ln.strip() for ln in info.splitlines() if "warning" in ln.lower()]
    return CubinResult(cubin, info, parse_ptxas_report(info), warnings)


#: The newest PTX ISA (x10) each CUDA 12 release's ptxas reads (CUDA 13.m reads 9.m).
_PTXAS_12_ISA = {0: 80, 1: 81, 2: 82, 3: 83, 4: 84, 5: 85, 6: 85, 8: 87, 9: 88}


@functools.lru_cache(maxsize=None)
def ptxas_max_ptx(exe: str) -> int:
    """The newest PTX ISA version (x10) the ptxas at ``exe`` reads, from its ``--version`` (0 if unknown)."""
    import subprocess
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    m = re.search(r"release (\d+)\.(\d+)", out)
    if not m:
        return 0
    major, minor = int(m.group(1)), int(m.group(2))
    if major >= 13:
        return 90 + 10 * (major - 13) + minor
    return _PTXAS_12_ISA.get(minor, 0) if major == 12 else 0


def _ptx_version(ptx: str) -> int:
    m = re.search(r"^\.version (\d+)\.(\d+)", ptx, re.M)
    return int(m.group(1)) * 10 + int(m.group(2)) if m else 0


def standalone_assembler(ptx: str) -> Optional[str]:
    """The standalone ptxas that assembles ``ptx`` under KERNELC_ASSEMBLER, or None for nvJitLink.

    A standalone ptxas compiles the kernel as a whole program, as Triton does; nvJitLink compiles it
    relocatable for a link step, and ptxas then allocates registers differently: a SwiGLU row of 16384
    bf16 over 16 warps takes 123 registers relocatable (``ptxas -c``, also through nvJitLink) against 36
    as a whole program, the same PTX and ptxas (docs/triton-tutorials.md)."""
    from ...options import OptionError, get
    mode = get("KERNELC_ASSEMBLER")
    exe = ptxas_binary() if mode != "nvjitlink" or "setmaxnreg" in ptx else None
    if exe is None:
        if mode == "ptxas":
            raise OptionError("KERNELC_ASSEMBLER=ptxas: no standalone ptxas found (set KERNELC_PTXAS to one)")
        return None
    if "setmaxnreg" in ptx:
        return exe   # nvJitLink ignores setmaxnreg (C7504)
    if mode == "auto" and ptxas_max_ptx(exe) < _ptx_version(ptx):
        return None  # an older ptxas (e.g. Triton's) that cannot read this PTX
    return exe


def fit_target_to_assembler(tgt):
    """``tgt`` with its default PTX version lowered to the newest the standalone ptxas reads, so that
    KERNELC_ASSEMBLER=auto (or ptxas) can use an older ptxas (Triton 3.6's, CUDA 12.8: PTX 8.7) rather than fall
    back to nvJitLink. An explicitly chosen PTX version, or one below the arch's minimum, is kept."""
    from cubintools.target import MIN_PTX_VERSION, Target, default_ptx_version
    from ...options import get
    if get("KERNELC_ASSEMBLER") == "nvjitlink" or tgt.ptx_version != default_ptx_version(tgt.arch):
        return tgt
    exe = ptxas_binary()
    cap = ptxas_max_ptx(exe) if exe else 0
    if cap >= tgt.ptx_version or cap < MIN_PTX_VERSION.get(tgt.arch, 0):
        return tgt
    return Target(tgt.arch, cap, tgt.features)


def ptx_to_cubin(ptx: str, target="sm_90a", *, opt_level: int = 3, extra: Sequence[str] = (),
                 name: str = "kernel.ptx", fill_step: bool = False, fill_policy: Optional[str] = None,
                 keep_blocks: bool = False, occupancy_step: bool = False, loads_first: bool = False) -> CubinResult:
    """Assemble ``ptx`` into a cubin for ``target``: with a standalone ptxas as a whole program where
    :func:`standalone_assembler` finds one, else with nvJitLink.

    ``extra`` options are passed to ptxas / nvJitLink as given (e.g. ``"-Xptxas=-warn-spills"``).
    ``fill_step``: under nvJitLink without the launch bound, give the kernel the registers it can have without
    losing a block per SM (:func:`_fill_step`; the tile IR's ``registers`` attribute says when), and weigh the builds
    ``fill_policy`` names (the tile IR's ``fill_policy``, loads or step; None: KERNELC_FILL_POLICY); ``keep_blocks``
    (the tile IR's ``fill_keep_blocks``, a one-pass kernel): no build with fewer blocks per SM than the unbounded one.
    ``occupancy_step`` (the tile IR's ``registers="occupancy_step"``): under nvJitLink without the launch bound, a
    register ceiling one occupancy step lower where it spills nothing (:func:`_occupancy_step`), as for a
    kernel without dots under KERNELC_OCCUPANCY_STEP=nodots (the default; off: neither).
    ``loads_first`` (the tile IR's ``registers="loads_first"``): under nvJitLink without the launch bound, the build
    without a ceiling unless it leaves some of a thread's global loads after the first use of one, then the most
    blocks per SM (at most :data:`LOADS_FIRST_STEPS` fewer) at which they all issue first (:func:`_loads_first`).
    Raises :class:`CompilationError` with ptxas's error log when the PTX does not assemble.
    """
    target = parse_target(target)
    exe = standalone_assembler(ptx if isinstance(ptx, str) else bytes(ptx).decode())
    if exe is not None:
        return _standalone(ptx, target, opt_level, extra, exe)
    data = ptx.encode() if isinstance(ptx, str) else bytes(ptx)
    from ...options import get
    bounds = launch_bounds(data.decode("utf-8", "replace"))
    if bounds and not get("KERNELC_NVJITLINK_LAUNCH_BOUND"):
        unbounded = _MAXNTID_RE.sub(b"", data)
        free = _nvjitlink_cubin(unbounded, target, opt_level, extra, name)
        over = _misfits(free, bounds, target)
        if not over and loads_first:
            return _loads_first(free, unbounded, bounds, target, opt_level, extra, name)
        if not over:
            step = get("KERNELC_OCCUPANCY_STEP")
            if step == "all" or (step == "nodots" and (fill_step or occupancy_step)):
                stepped = _occupancy_step(free, unbounded, bounds, target, opt_level, extra, name)
                if stepped is not free:
                    return stepped
            if fill_step:
                filled = _fill_step(free, unbounded, bounds, target, opt_level, extra, name)
                if (fill_policy or get("KERNELC_FILL_POLICY")) == "loads":
                    return _more_loads_in_flight(filled, data, bounds, target, opt_level, extra, name,
                                                 unbounded if get("KERNELC_FILL_STEP_DOWN") else None, free,
                                                 keep_blocks)
                return filled
            return free
        res = _nvjitlink_cubin(data, target, opt_level, extra, name)
        res.info_log = "".join(f"kernelc: without .maxntid {n} takes {r} registers, more than {t} threads can "
                               f"have; assembled again with it\n" for n, r, t in over) + res.info_log
        return res
    return _nvjitlink_cubin(data, target, opt_level, extra, name)


# -- the launch bound under nvJitLink ------------------------------------------------------------------------
#
# nvJitLink always runs ptxas relocatable (``-c``: it warns that ``-ewp`` conflicts with ``--compile-only``).
# In that mode ptxas takes an explicit register ceiling -- the one a ``.maxntid`` implies (65536 / threads) or
# ``-maxrregcount`` -- as the number of registers to use, not as a limit: a SwiGLU-backward row at 512
# threads gets 111 registers with the bound and 64 without it, the same 64 as a whole-program ptxas, which
# treats the bound as a limit (ptxas 13.0; docs/performance.md, 2026-11-27). So by default
# (KERNELC_NVJITLINK_LAUNCH_BOUND=0) the bound is left out, and put back only for a kernel whose registers then
# would not fit its block.

_MAXNTID_RE = re.compile(rb"^[ \t]*\.maxntid[^\n]*\n", re.M)
_ENTRY_RE = re.compile(r"\.entry\s+([A-Za-z_$%][\w$]*)")
_BOUND_RE = re.compile(r"\.maxntid\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?")


def launch_bounds(ptx: str) -> Dict[str, int]:
    """Threads per block each entry of ``ptx`` declares with ``.maxntid`` (entries without one left out)."""
    out: Dict[str, int] = {}
    for m in _ENTRY_RE.finditer(ptx):
        body = ptx.find("{", m.end())
        b = _BOUND_RE.search(ptx, m.end(), body if body >= 0 else len(ptx))
        if b:
            out[m.group(1)] = int(b.group(1)) * int(b.group(2) or 1) * int(b.group(3) or 1)
    return out


def fits_block(registers: int, threads: int, limits) -> bool:
    """Whether a block of ``threads`` threads using ``registers`` registers each can launch.

    Warps go round-robin to the SM's sub-partitions, each with its own quarter of the register file, so the
    fullest one decides: 9 warps of 224 registers need 3 * 7168 > 16384 there, though 9 * 7168 <= 65536."""
    warps = -(-threads // limits.warp_size)
    per_warp = -(-registers * limits.warp_size // limits.reg_alloc_unit) * limits.reg_alloc_unit
    fullest = -(-warps // limits.sub_partitions)
    return (registers <= limits.max_regs_per_thread
            and fullest * per_warp <= limits.registers_per_sm // limits.sub_partitions)


def blocks_per_sm(registers: int, threads: int, shared: int, limits) -> int:
    """Blocks of ``threads`` threads, ``registers`` registers each and ``shared`` bytes of static shared memory
    that one SM holds at once (0 if one does not fit)."""
    warps = -(-threads // limits.warp_size)
    per_warp = -(-registers * limits.warp_size // limits.reg_alloc_unit) * limits.reg_alloc_unit
    per_sub = limits.registers_per_sm // limits.sub_partitions
    k = 0
    while -(-(k + 1) * warps // limits.sub_partitions) * per_warp <= per_sub:
        k += 1
    k = min(k, limits.max_threads_per_sm // (warps * limits.warp_size), limits.max_blocks_per_sm)
    if shared:
        k = min(k, limits.max_shared_per_sm // (shared + limits.reserved_shared_per_block))
    return k


# a register ceiling lower than this share of the unbounded count is not tried: the step is for kernels just
# above an occupancy boundary (a row kernel at 70 registers, 64 for two 16-warp blocks), not for squeezing a
# matmul's accumulators
OCCUPANCY_STEP_MIN_SHARE = 0.85


def occupancy_step_target(registers: int, threads: int, shared: int, limits) -> Optional[int]:
    """The largest register count (a multiple of 8) at which one more block of this kernel fits an SM, if it
    is at least OCCUPANCY_STEP_MIN_SHARE of ``registers``; else None."""
    now = blocks_per_sm(registers, threads, shared, limits)
    if now == 0:
        return None
    r = registers - registers % 8
    while r >= max(32, int(registers * OCCUPANCY_STEP_MIN_SHARE)):
        if r < registers and blocks_per_sm(r, threads, shared, limits) > now:
            return r
        r -= 8
    return None


def _same_wgmma_waits(a: bytes, b: bytes) -> bool:
    """Whether two cubins wait for their wgmmas alike: the same ``WARPGROUP.DEPBAR`` waits (how many groups each
    leaves in flight) in program order. False where the SASS cannot be read."""
    try:
        from cubintools.sass import instructions
        waits = [[i.operands for i in instructions(c) if i.opcode.startswith("WARPGROUP.DEPBAR")] for c in (a, b)]
    except Exception:  # no disassembler here: nothing says the waits are kept
        return False
    return waits[0] == waits[1]


def _one_entry(free: CubinResult, bounds: Dict[str, int], target):
    """(entry, threads, its resources or None, the target's limits) of a module with one bounded entry, as
    kernelc emits; None for several entries or a target without known limits."""
    if len(bounds) != 1:
        return None
    (entry, threads), = bounds.items()
    try:
        limits = target.limits
    except KeyError:
        return None
    return entry, threads, free.resources.get(entry), limits


def _occupancy_step(free: CubinResult, data: bytes, bounds: Dict[str, int], target, opt_level, extra, name):
    """``free`` again with a register ceiling one occupancy step lower, kept if nothing spills
    (KERNELC_OCCUPANCY_STEP; one entry per module, as kernelc emits)."""
    one = _one_entry(free, bounds, target)
    if one is None:
        return free
    entry, threads, r, limits = one
    cap = occupancy_step_target(r.registers, threads, r.shared, limits) if r is not None else None
    if cap is None:
        return free
    try:
        stepped = _nvjitlink_cubin(data, target, opt_level, (*extra, f"-maxrregcount={cap}"), name)
    except CompilationError:   # an instruction needs more (C7602: a 128x128 wgmma's accumulator): keep the free build
        return free
    s = stepped.resources.get(entry)
    if s is None or s.spills or s.stack_frame > r.stack_frame:
        return free
    if b"wgmma" in data and not _same_wgmma_waits(free.cubin, stepped.cubin):
        # under the lower ceiling ptxas waited for wgmmas the free build keeps in flight (the examples' causal
        # backward: every tail serialised): the block it gains was not measured to pay for that
        return free
    stepped.info_log = (f"kernelc: {entry} at {cap} registers (unbounded: {r.registers}) runs "
                        f"{blocks_per_sm(s.registers, threads, s.shared, limits)} blocks an SM, not "
                        f"{blocks_per_sm(r.registers, threads, r.shared, limits)}\n") + stepped.info_log
    return stepped


def step_ceiling(registers: int, threads: int, shared: int, limits) -> Optional[int]:
    """The most registers (a multiple of 8, or the launch bound's min(65536 / threads, 255)) at which this kernel
    still runs as many blocks per SM as at ``registers``; None if one block does not fit."""
    now = blocks_per_sm(registers, threads, shared, limits)
    if now == 0:
        return None
    top = min(limits.max_regs_per_thread, limits.registers_per_sm // threads)
    best = registers
    for r in [*range(registers - registers % 8 + 8, top + 1, 8), top]:   # blocks fall as registers grow
        if r > best and blocks_per_sm(r, threads, shared, limits) == now:
            best = r
    return best


FILL_STEP_MIN_HEADROOM = 8


def _fill_step(free: CubinResult, data: bytes, bounds: Dict[str, int], target, opt_level, extra, name):
    """``free`` again with its occupancy step's register ceiling (:func:`step_ceiling`), kept if nothing spills.

    Relocatable ptxas without a ceiling allocates as few registers as it can and, to get there, issues a row's
    loads late, next to their first use; registers below the next occupancy step buy no block per SM. GeGLU's
    backward row (16384 bf16, 16 warps): 70 registers, one block per SM and 4 of its 12 loads issued before the
    first use; at the ceiling 128 it takes 104, still one block, and measured 11% faster (the launch bound's
    code, H200 2026-11-27, docs/performance.md). One entry per module, as kernelc emits.

    Only the static shared memory is known here: where the dynamic part limits the blocks, the registers still
    keep the count they allow, so the ceiling is lower than it could be and no block is lost."""
    one = _one_entry(free, bounds, target)
    if one is None:
        return free
    entry, threads, r, limits = one
    cap = step_ceiling(r.registers, threads, r.shared, limits) if r is not None else None
    # only where registers decide the blocks per SM (not threads or shared memory) and a step's headroom is at
    # least FILL_STEP_MIN_HEADROOM: a second ptxas run for a few registers more is not worth its compile time
    if cap is None or cap - r.registers < FILL_STEP_MIN_HEADROOM or \
            blocks_per_sm(r.registers, threads, r.shared, limits) == blocks_per_sm(8, threads, r.shared, limits):
        return free
    filled = _nvjitlink_cubin(data, target, opt_level, (*extra, f"-maxrregcount={cap}"), name)
    f = filled.resources.get(entry)
    if f is None or f.spills or f.stack_frame > r.stack_frame or \
            blocks_per_sm(f.registers, threads, f.shared, limits) != blocks_per_sm(r.registers, threads, r.shared, limits):
        return free
    filled.info_log = (f"kernelc: {entry} at up to {cap} registers (unbounded: {r.registers}, now {f.registers}), "
                       f"{blocks_per_sm(f.registers, threads, f.shared, limits)} blocks an SM either way\n") + filled.info_log
    return filled


#: How many blocks per SM :func:`_loads_first` may give up for a build that issues all of a thread's loads first.
LOADS_FIRST_STEPS = 2


def _loads_first(free: CubinResult, data: bytes, bounds: Dict[str, int], target, opt_level, extra, name):
    """``free`` if it issues every global load of a thread before the first use of any; else the build at the most
    blocks per SM (down to :data:`LOADS_FIRST_STEPS` fewer) whose register ceiling lets ptxas do so without spilling,
    or ``free`` if none does.

    A tile copied through a layout conversion (a transpose: every load feeds the shared-memory stores, nothing else
    to overlap with) keeps its whole tile in flight only when all its loads issue before the first store; below
    that ptxas issues them in groups, one memory latency a group (the fp32 64x64 transpose without a ceiling issues
    3-4 of its 8 128-bit loads first; measured in docs/performance.md, issue 21). One entry per module, as kernelc
    emits."""
    one = _one_entry(free, bounds, target)
    if one is None or one[2] is None:
        return free
    entry, threads, r, limits = one
    from cubintools.sass import cubin_loads_before_first_use
    try:
        issued, total = cubin_loads_before_first_use(free.cubin)
    except Exception:   # no way to read the SASS here: keep the build
        return free
    if issued >= total:
        return free
    blocks = blocks_per_sm(r.registers, threads, r.shared, limits)
    top = min(limits.max_regs_per_thread, limits.registers_per_sm // threads)
    tried = set()
    for k in range(blocks - 1, max(blocks - LOADS_FIRST_STEPS, 1) - 1, -1):
        fits = [c for c in range(8, top + 1, 8) if blocks_per_sm(c, threads, r.shared, limits) >= k]
        cap = max(fits) if fits else None
        if cap is None or cap <= r.registers or cap in tried:
            continue
        tried.add(cap)
        try:
            res = _nvjitlink_cubin(data, target, opt_level, (*extra, f"-maxrregcount={cap}"), name)
        except CompilationError:
            continue
        f = res.resources.get(entry)
        if f is None or f.spills or f.stack_frame > r.stack_frame:
            continue
        got, _ = cubin_loads_before_first_use(res.cubin)
        if got >= total:
            res.info_log = (f"kernelc: {entry} at up to {cap} registers ({f.registers}, "
                            f"{blocks_per_sm(f.registers, threads, f.shared, limits)} blocks an SM) issues its {total} "
                            f"global loads before their first use; without a ceiling {r.registers} registers, "
                            f"{blocks} blocks and {issued}\n") + res.info_log
            return res
    return free


def loads_in_flight_per_sm(res: CubinResult, entry: str, threads: int, limits) -> Optional[float]:
    """Resident warps per SM x the global loads a thread has in flight (``cubintools.sass.mean_loads_in_flight``
    over the cubin's SASS): the memory requests an SM keeps outstanding, which a memory-bound kernel's
    bandwidth follows (Little's law). None where the build spills or its SASS cannot be read.

    The SASS is read from the instruction encodings (``cubintools.sm90_fields``, no process) where the table
    there covers every instruction, else disassembled with nvdisasm (~0.4 s)."""
    r = res.resources.get(entry)
    if r is None or r.spills:
        return None
    try:
        from cubintools.sass import cubin_loads_in_flight
        per_thread = cubin_loads_in_flight(res.cubin)
    except Exception:  # no disassembler here: the policy has nothing to weigh
        return None
    warps = -(-threads // limits.warp_size)
    return blocks_per_sm(r.registers, threads, r.shared, limits) * warps * per_thread


def step_down_ceiling(registers: int, threads: int, shared: int, limits) -> Optional[int]:
    """The most registers (a multiple of 8, at least 16) at which one more block of this kernel fits an SM than at
    ``registers``; None where registers do not decide the blocks (threads or shared memory do) or none fits."""
    now = blocks_per_sm(registers, threads, shared, limits)
    if now == 0:
        return None
    for r in range(registers - registers % 8, 15, -8):
        if r < registers and blocks_per_sm(r, threads, shared, limits) > now:
            return r
    return None


def _more_loads_in_flight(chosen: CubinResult, data: bytes, bounds: Dict[str, int], target, opt_level, extra, name,
                          unbounded: Optional[bytes] = None, free: Optional[CubinResult] = None,
                          keep_blocks: bool = False):
    """``chosen`` (the unbounded or filled build), the launch bound's build or, given the ``unbounded`` PTX
    (KERNELC_FILL_STEP_DOWN), the build one occupancy step down, whichever keeps the most global loads in flight
    per SM (:func:`loads_in_flight_per_sm`; KERNELC_FILL_POLICY=loads; a tie keeps the earlier).

    With its ceiling at 65536 / threads, relocatable ptxas spends registers on issuing a row's loads early; without
    it, it issues them next to their use. More registers can cost a block per SM, so the builds are weighed by
    what both change: a layer-norm forward row (8192 fp16, 8 warps) unbounded has 64 registers, 4 blocks and 0.9
    loads in flight (29 per SM), bounded 80 registers, 3 blocks and 1.8 (43 per SM), and the bounded build measured
    1.21x Triton against 0.98x (H100, 2026-11-27, docs/performance.md). The other way, a softmax row (4096 fp32,
    16 warps, a grid-stride loop) has 40 registers and 3 blocks unbounded, 32 registers and 4 blocks one step down,
    with the same 1.3 loads in flight a thread. ``free``, the build without a ceiling when ``chosen`` is the filled
    one, is weighed too: in consumer order (backend/consumer_order.py) geglu's backward row keeps 4.3 loads in
    flight a thread at 77 registers and 2.8 filled to 120, one block either way. ``keep_blocks`` (a one-pass kernel,
    passes/register_budget.py): a build with fewer blocks per SM than ``chosen`` is not weighed (the fp32 transpose at
    40 registers and 12 blocks measured 0.6% faster than the bound's 56 and 9, which keep more loads in flight)."""
    one = _one_entry(chosen, bounds, target)
    if one is None or one[2] is None:
        return chosen
    entry, threads, r, limits = one
    now_blocks = blocks_per_sm(r.registers, threads, r.shared, limits)
    builds = [(chosen, r, "")]
    fr = free.resources.get(entry) if free is not None and free is not chosen else None
    if fr is not None and not fr.spills and blocks_per_sm(fr.registers, threads, fr.shared, limits) >= now_blocks:
        builds.append((free, fr, "without a register ceiling"))
    cap = step_down_ceiling(r.registers, threads, r.shared, limits) if unbounded is not None else None
    # the two candidate builds depend only on ``chosen``: assembled side by side (nvJitLink releases the GIL), a
    # kernel's first call waits for one ptxas run here, not two (tutorial 05's dx kernel: 0.49 s -> ~0.36 s)
    jobs = [(data, extra)] + ([(unbounded, (*extra, f"-maxrregcount={cap}"))] if cap is not None else [])
    if len(jobs) == 1:
        built = [_nvjitlink_cubin(data, target, opt_level, extra, name)]
    else:
        with ThreadPoolExecutor(len(jobs)) as pool:
            built = list(pool.map(lambda job: _nvjitlink_cubin(job[0], target, opt_level, job[1], name), jobs))
    bound = built[0]
    b = bound.resources.get(entry)
    # one block per SM where there were more: between two blocks (a row kernel's rows) the SM has no load in flight
    # at all, which the loads within a block do not show (geglu fwd: 93 registers and one 16-warp block measured
    # 0.87x Triton against 1.05x at 36 registers and three, H200 2026-11-27)
    if b is not None and b.registers != r.registers and b.stack_frame <= r.stack_frame and \
            blocks_per_sm(b.registers, threads, b.shared, limits) >= (now_blocks if keep_blocks else min(2, now_blocks)):
        builds.append((bound, b, "with its launch bound"))
    if cap is not None:
        down = built[1]
        d = down.resources.get(entry)
        if d is not None and not d.spills and d.stack_frame <= r.stack_frame and \
                blocks_per_sm(d.registers, threads, d.shared, limits) > now_blocks:
            builds.append((down, d, f"one occupancy step down (at most {cap} registers)"))
    if len(builds) == 1:
        return chosen
    # side by side where a build needs nvdisasm (~0.4 s a process on a 2-core CPU)
    with ThreadPoolExecutor(len(builds)) as pool:
        per_sm = list(pool.map(lambda bld: loads_in_flight_per_sm(bld[0], entry, threads, limits), builds))
    if any(v is None for v in per_sm):
        return chosen
    best = max(range(len(builds)), key=lambda i: (per_sm[i], -i))
    if best == 0:
        return chosen
    res, f, how = builds[best]
    res.info_log = (f"kernelc: {entry} {how}: {f.registers} registers, "
                    f"{blocks_per_sm(f.registers, threads, f.shared, limits)} blocks and {per_sm[best]:.0f} loads in "
                    f"flight per SM, against {r.registers}, {now_blocks} and {per_sm[0]:.0f}\n") + res.info_log
    return res


def _misfits(res: CubinResult, bounds: Dict[str, int], target) -> List[tuple]:
    """(entry, registers, threads) of each entry whose registers do not fit its block (-1: not reported)."""
    try:
        limits = target.limits
    except KeyError:   # no table for this arch: keep the bound rather than guess
        return [(n, -1, t) for n, t in bounds.items()]
    out = []
    for name, threads in bounds.items():
        r = res.resources.get(name)
        if r is None or not fits_block(r.registers, threads, limits):
            out.append((name, r.registers if r else -1, threads))
    return out


def _nvjitlink_cubin(data: bytes, target, opt_level: int, extra: Sequence[str], name: str) -> CubinResult:
    nvjitlink = _nvjitlink()
    # ptxas's level goes through -Xptxas: nvJitLink's own -O accepts only 0 and 3.
    opts = [f"-arch={target.arch}", f"-Xptxas=-O{int(opt_level)}", "-Xptxas=-v", *extra]
    from . import cubin_cache
    root = cubin_cache.cache_dir()
    if root is not None:
        ckey = cubin_cache.key(data, opts, nvjitlink.version(), name)
        hit = cubin_cache.read(root, ckey)
        if hit is not None:
            return _nvjitlink_result(*hit)
    try:
        handle = nvjitlink.create(len(opts), opts)   # the count MUST be len(opts)
    except nvjitlink.nvJitLinkError as e:
        raise CompilationError(f"nvJitLink rejected the options {opts}: {e}") from None
    try:
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), name)
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as e:
            err = _log(nvjitlink, handle, "error").strip()
            raise CompilationError(f"ptxas failed for {target.arch} ({e}):\n{err}") from None
        size = nvjitlink.get_linked_cubin_size(handle)
        buf = bytearray(size)
        nvjitlink.get_linked_cubin(handle, buf)
        info = _log(nvjitlink, handle, "info")
    finally:
        nvjitlink.destroy(handle)
    if root is not None:
        cubin_cache.write(root, ckey, bytes(buf), info)
    return _nvjitlink_result(bytes(buf), info)


def _nvjitlink_result(cubin: bytes, info: str) -> CubinResult:
    warnings = [ln.strip() for ln in info.splitlines() if "warning" in ln.lower()]
    return _report_from_cubin(CubinResult(cubin, info, parse_ptxas_report(info), warnings))


def _report_from_cubin(res: CubinResult) -> CubinResult:
    """``res`` with every kernel of its cubin in ``resources``: an entry the info log does not report is read
    from the cubin (registers, shared memory, stack frame; spills unknown, so 0) and the log says so.

    nvJitLink 13.0 (the GPU machines', 2026-11-27) leaves the report out when it assembles a PTX it has
    assembled before, in this process or an earlier one. Without it the launch-bound decision saw no registers
    and put the bound back on a kernel that fits (``_misfits``): every bench column after the first compiled
    with the bound (docs/performance.md, "The variant columns")."""
    try:
        from cubintools import inspect_cubin
        info = inspect_cubin(res.cubin)
    except Exception:  # not a cubin we can read: keep what the log says
        return res
    for name, f in info.functions.items():
        r = res.resources.get(name)
        if f.is_entry and (r is None or (r.registers == 0 and f.n_regs)):   # absent, or no "Used N registers"
            res.resources[name] = FunctionResources(name, is_entry=True, registers=f.n_regs, shared=f.shared,
                                                    stack_frame=f.frame_size)
            res.info_log = (f"kernelc: no ptxas report for {name} in nvJitLink's log; registers ({f.n_regs}) read "
                            f"from the cubin\n") + res.info_log
    return res
