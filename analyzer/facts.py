"""``KernelFacts``: everything the diagnostics read about one kernel, gathered in one place.

A :class:`KernelFacts` joins three sources:

* the profile: time, launch count, grid, launch options, per-line PC samples and stall reasons;
* the compiled kernel (disk cache or recompilation): registers, spills, shared memory, SASS
  instructions with their lines, the compiler's reports on memory accesses and dots, the tile IR;
* the device: SM count and the architecture's resource limits.

Any of them may be missing (a profile of a kernel whose cache is gone and whose source moved, a
profile without samples); each diagnostic checks what it needs.  :func:`facts_from_compiled` builds
facts from a :class:`kernelc.compiler.artifact.CompiledKernel` alone (the CPU tests use it).
"""
from __future__ import annotations

import ast
import linecache
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Tuple

from . import stalls as S
from . import tir as T
from .occupancy import Occupancy, occupancy

#: SM counts assumed when the profile has no device_info (the usual datacenter part of each arch).
DEFAULT_SMS = {80: 108, 86: 84, 89: 128, 90: 132, 100: 148, 120: 84}

TENSOR_CORE_OPCODES = ("HMMA", "HGMMA", "IMMA", "IGMMA", "QMMA", "QGMMA", "DMMA", "BMMA", "UTCHMMA", "UTCQMMA",
                       "UTCIMMA")


def base(path: Optional[str]) -> str:
    return (path or "").replace("\\", "/").rsplit("/", 1)[-1]


@dataclass
class Device:
    """The GPU the analysis is for: target arch (``sm_90a``), SM count, clock."""
    arch: str = "sm_90a"
    num_sms: int = 132
    clock_khz: Optional[int] = None
    source: str = "assumed"          # "profile" | "assumed"
    memory_clock_khz: Optional[int] = None   # with bus_width_bits: the DRAM bandwidth (profile device_info)
    bus_width_bits: Optional[int] = None

    @property
    def sm(self) -> int:
        from cubintools.target import parse_target
        return parse_target(self.arch).sm

    @property
    def limits(self):
        from cubintools.target import ARCH_LIMITS, parse_target
        sm = parse_target(self.arch).sm
        if sm in ARCH_LIMITS:
            return ARCH_LIMITS[sm]
        # the nearest older architecture's limits are the best guess for an unknown one
        older = [k for k in ARCH_LIMITS if k <= sm]
        return ARCH_LIMITS[max(older) if older else min(ARCH_LIMITS)]

    @classmethod
    def for_arch(cls, arch: str, num_sms=None, clock_khz=None, source: Optional[str] = None) -> "Device":
        """``num_sms`` / ``clock_khz`` from a profile are used only when they are plausible positive
        integers (a zero, negative, non-finite or non-numeric value is replaced by the architecture's
        default: the diagnostics divide by them)."""
        from cubintools.target import parse_target
        t = parse_target(arch)
        num_sms = positive_int(num_sms, 100_000)
        clock_khz = positive_int(clock_khz, 100_000_000)
        sms = num_sms or DEFAULT_SMS.get(t.sm, 132)
        return cls(t.arch, sms, clock_khz, (source or "profile") if num_sms else "assumed")

    @property
    def dram_bytes_per_s(self) -> Optional[float]:
        """DRAM bandwidth from the profile's memory clock and bus width (double data rate)."""
        if self.memory_clock_khz and self.bus_width_bits:
            return 2.0 * self.memory_clock_khz * 1e3 * self.bus_width_bits / 8
        return None

    def to_json(self) -> dict:
        return {"arch": self.arch, "num_sms": self.num_sms, "clock_khz": self.clock_khz, "source": self.source,
                "memory_clock_khz": self.memory_clock_khz, "bus_width_bits": self.bus_width_bits}


@dataclass
class LineStat:
    """PC samples of one source line of a kernel."""
    file: str
    line: int
    samples: float = 0.0
    stalled: float = 0.0
    stalls: Dict[str, float] = field(default_factory=dict)
    opcodes: Dict[str, float] = field(default_factory=dict)

    def share(self, reasons: Iterable[str]) -> float:
        """Fraction of this line's samples stalled on ``reasons``."""
        return S.share(self.stalls, reasons, self.samples)

    def top_stalls(self, n: int = 2) -> List[Tuple[str, float]]:
        items = [(k, v) for k, v in self.stalls.items() if k not in S.NOT_STALLS and v > 0]
        items.sort(key=lambda kv: (-kv[1], kv[0]))
        return items[:n]


@dataclass
class KernelFacts:
    name: str
    device: Device = field(default_factory=Device)
    time_ns: float = 0.0
    count: int = 0
    share: Optional[float] = None            # of the profile's GPU time
    grid: Optional[Tuple[int, int, int]] = None
    grids: List[Tuple[Tuple[int, int, int], float]] = field(default_factory=list)  # (grid, time) per launch shape
    num_warps: int = 4
    num_stages: int = 3
    launch_known: bool = True                 # False: warps/stages are defaults (a library kernel's are unknown)
    constexprs: Dict[str, Any] = field(default_factory=dict)
    signature: Dict[str, str] = field(default_factory=dict)
    arg_values: Dict[str, Any] = field(default_factory=dict)   # scalar launch arguments, when recorded
    metrics: Dict[str, float] = field(default_factory=dict)    # launch-metadata totals (flops*, bytes)
    launch_args: List[dict] = field(default_factory=list)     # recorded arguments: name, kind, dtype/shape/strides or value
    cache_key: Optional[str] = None
    compiled: Any = None
    artifact_origin: str = "none"            # "cache" | "recompiled" | "compiled" | "none"
    n_regs: int = 0
    n_spills: int = 0
    shared: int = 0
    local_bytes: int = 0
    sass: List[Any] = field(default_factory=list)          # cubintools.sass.Instr
    memory_accesses: List[dict] = field(default_factory=list)
    dots: List[dict] = field(default_factory=list)
    compile_log: List[str] = field(default_factory=list)
    tir: T.TirFacts = field(default_factory=T.TirFacts)
    source: Optional[dict] = None            # {"file", "first_line", "lines"}
    lines: Dict[Tuple[str, int], LineStat] = field(default_factory=dict)
    total_samples: float = 0.0
    total_stalled: float = 0.0
    stall_totals: Dict[str, float] = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)
    function: Any = None                     # the @jit function, when importable (for recompiling candidates)
    source_policy: Any = None                # analyzer.load.SourcePolicy: may the source file be imported
    import_refusal: Optional[str] = None     # why the source file was not imported (and how to allow it)
    specialization: Dict[str, Any] = field(default_factory=dict)  # {"divisibility": {...}, "equal_to_1": [...]}
    specialization_known: bool = True        # False: recompiled without the launch's specialisation
    _occ: Optional[Occupancy] = None
    _files: Dict[str, str] = field(default_factory=dict)

    # -- derived -----------------------------------------------------------------------------
    @property
    def num_programs(self) -> Optional[int]:
        if not self.grid:
            return None
        n = 1
        for g in self.grid:
            n *= max(1, int(g))
        return n

    @property
    def has_samples(self) -> bool:
        return self.total_samples > 0

    @property
    def occupancy(self) -> Optional[Occupancy]:
        if self._occ is None and self.launch_known and (self.n_regs or self.compiled is not None or self.shared):
            self._occ = occupancy(self.num_warps, self.n_regs, self.shared, self.device.limits)
        return self._occ

    def opcodes(self, *prefixes: str) -> List[Any]:
        """SASS instructions whose opcode starts with one of ``prefixes`` (``"HMMA"`` matches
        ``HMMA.16816.F32``)."""
        out = []
        for ins in self.sass:
            head = ins.opcode.split(".", 1)[0]
            if head in prefixes:
                out.append(ins)
        return out

    @property
    def tensor_core_instructions(self) -> List[Any]:
        return self.opcodes(*TENSOR_CORE_OPCODES)

    def line_stat(self, file: Optional[str], line: Optional[int]) -> Optional[LineStat]:
        if line is None:
            return None
        return self.lines.get((base(file), int(line)))

    def source_text(self, file: Optional[str], line: Optional[int]) -> Optional[str]:
        """The text of ``file:line`` (from the profile's stored source, else the file on disk)."""
        if line is None:
            return None
        src = self.source or {}
        if src.get("lines") and (file is None or base(file) == base(src.get("file"))):
            i = int(line) - int(src.get("first_line") or 1)
            if 0 <= i < len(src["lines"]):
                return str(src["lines"][i]).rstrip()
        path = self.full_path(file)
        if path and os.path.isfile(path):
            text = linecache.getline(path, int(line))
            if text:
                return text.rstrip("\n").rstrip()
        return None

    @property
    def kernel_file(self) -> Optional[str]:
        """The file that defines the kernel (profile source, @jit function, else the reports' file)."""
        src = (self.source or {}).get("file")
        if src:
            return src
        fn = self.function
        if fn is not None and getattr(fn, "file", None):
            return fn.file
        files = [a.get("file") for a in self.memory_accesses + self.dots if a.get("file")]
        return max(set(files), key=files.count) if files else None

    def user_lines(self, file: Optional[str], line: Optional[int]) -> List[Tuple[str, int]]:
        """Kernel-file lines behind ``file:line``: itself when it is in the kernel's file, else the
        lines whose ops inline it (a library combine function -> the reductions calling it)."""
        if line is None:
            return []
        kf = base(self.kernel_file) if self.kernel_file else None
        if kf and base(file) == kf:
            return [(base(file), int(line))]
        return self.tir.user_lines(file or "", int(line), kf)

    def full_path(self, file: Optional[str]) -> Optional[str]:
        if not file:
            return (self.source or {}).get("file")
        if os.path.isabs(file):
            return file
        b = base(file)
        if b in self._files:
            return self._files[b]
        src = (self.source or {}).get("file")
        if src and base(src) == b:
            return src
        return None

    def add_files(self, paths: Iterable[Optional[str]]) -> None:
        for p in paths:
            if p and os.path.isabs(p):
                self._files.setdefault(base(p), p)

    def location(self, file: Optional[str], line: Optional[int]) -> str:
        return f"{base(file) or '?'}:{line}" if line is not None else (base(file) or "?")

    def constexpr_for(self, value: int, hints: Iterable[str] = ()) -> Optional[str]:
        """The tile constexpr whose value is ``value`` (name hints such as ``"M"`` break ties)."""
        names = [k for k, v in self.constexprs.items() if isinstance(v, int) and not isinstance(v, bool)
                 and v == value]
        if not names:
            return None
        for h in hints:
            for k in names:
                ku = k.upper()
                if ku.endswith("_" + h) or ku.endswith(h) and len(ku) > len(h) and not ku[-len(h) - 1].isalpha():
                    return k
            for k in names:
                if k.upper().endswith(h):
                    return k
        return names[0] if len(names) == 1 else None

    def tile_constexprs(self) -> Dict[str, int]:
        """Constexprs that look like tile sizes: power-of-two ints with upper-case names."""
        out = {}
        for k, v in self.constexprs.items():
            if isinstance(v, int) and not isinstance(v, bool) and v >= 1 and v & (v - 1) == 0 and k[:1].isupper():
                out[k] = v
        return out

    def loop_lines(self) -> List[T.Loop]:
        return self.tir.loops

    def in_loop(self, file: Optional[str], line: int) -> bool:
        if self.tir.loops:
            return bool(self.tir.loops_of_line(file or "", line))
        return any(lo <= line <= hi for lo, hi in self._ast_loops())

    def _ast_loops(self) -> List[Tuple[int, int]]:
        path = self.full_path(None)
        try:
            if path and os.path.isfile(path):
                tree = ast.parse(open(path).read())
                off = 0
            elif self.source and self.source.get("lines"):
                import textwrap
                tree = ast.parse(textwrap.dedent("\n".join(self.source["lines"])))
                off = int(self.source.get("first_line") or 1) - 1
            else:
                return []
        except (SyntaxError, OSError, ValueError):
            return []
        out = []
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == self.name:
                for sub in ast.walk(node):
                    if isinstance(sub, (ast.For, ast.While)):
                        out.append((sub.lineno + off, (sub.end_lineno or sub.lineno) + off))
        return out

    def hot_lines(self, n: int = 10) -> List[LineStat]:
        items = sorted(self.lines.values(), key=lambda s: (-s.samples, s.file, s.line))
        return [s for s in items if s.samples > 0][:n]

    def config(self) -> Dict[str, Any]:
        """The launch configuration as a flat dict (tile constexprs + num_warps + num_stages)."""
        return dict(self.tile_constexprs(), num_warps=self.num_warps, num_stages=self.num_stages)


def dedupe(items: Iterable[str]) -> List[str]:
    seen, out = set(), []
    for x in items:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out


def sass_of(compiled) -> List[Any]:
    """The kernel's SASS instructions (one nvdisasm run; [] if nvdisasm is unavailable)."""
    art = getattr(compiled, "artifacts", None)
    try:
        if art is not None and hasattr(art, "instructions"):
            return list(art.instructions)
        from cubintools.sass import instructions
        return [i for i in instructions(compiled.asm["cubin"]) if i.function in ("", compiled.name)]
    except Exception:
        return []


def apply_compiled(facts: KernelFacts, ck) -> None:
    """Fill ``facts`` from a compiled kernel."""
    facts.compiled = ck
    facts.n_regs = int(ck.n_regs or 0)
    facts.n_spills = int(ck.n_spills or 0)
    facts.shared = int(ck.shared or 0)
    facts.local_bytes = int(ck.local_bytes or 0)
    facts.num_warps = int(getattr(ck, "launch_warps", ck.num_warps))  # a producer warp counts for occupancy
    facts.num_stages = int(ck.num_stages)
    facts.launch_known = True
    if ck.constexprs:
        facts.constexprs = {k: _literal(v) for k, v in ck.constexprs.items()}
    if ck.signature:
        facts.signature = dict(ck.signature)
    reports = ck.reports or {}
    facts.memory_accesses = list(reports.get("memory_accesses") or [])
    facts.dots = list(reports.get("dots") or [])
    facts.compile_log = dedupe(ck.compile_log or [])
    asm = ck.asm
    tir_text = asm.get("tir") if hasattr(asm, "get") else None
    facts.tir = T.parse(tir_text)
    if facts.tir.divisibility or facts.tir.equal_to_1:
        facts.specialization = {"divisibility": dict(facts.tir.divisibility),
                                "equal_to_1": list(facts.tir.equal_to_1)}
    facts.sass = sass_of(ck)
    facts.add_files([a.get("file") for a in facts.memory_accesses] + [d.get("file") for d in facts.dots])
    smap = getattr(ck, "source_map", None)
    if smap is not None:
        facts.add_files(getattr(smap, "files", []) or [])
    facts.add_files(getattr(i, "file", None) for i in facts.sass)
    facts._occ = None


def positive_int(v, hi: int) -> Optional[int]:
    """``v`` as an int in ``1..hi`` if it is one (int, integral float or numeric text), else None."""
    if isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError, OverflowError):
        return None
    if not (1 <= f <= hi) or f != int(f):
        return None
    return int(f)


def _literal(v):
    """Constexpr values from the disk cache are repr() strings: turn them back into values."""
    if isinstance(v, str):
        try:
            return ast.literal_eval(v)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return v
    return v


def facts_from_compiled(ck, *, grid=None, device: Optional[Device] = None, time_ns: float = 0.0, count: int = 0,
                        function=None, name: Optional[str] = None) -> KernelFacts:
    """Facts of a compiled kernel without a profile (static analysis).  ``grid`` is the launch grid
    (an int or a tuple) if known."""
    dev = device or Device.for_arch(getattr(getattr(ck, "target", None), "arch", None) or "sm_90a")
    facts = KernelFacts(name=name or ck.name, device=dev, time_ns=time_ns, count=count)
    if grid is not None:
        g = (grid,) if isinstance(grid, int) else tuple(grid)
        facts.grid = tuple(int(x) for x in (tuple(g) + (1, 1, 1))[:3])
    apply_compiled(facts, ck)
    facts.artifact_origin = "compiled"
    facts.function = function
    return facts
