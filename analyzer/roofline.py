"""A roofline per kernel: achieved FLOP/s and bytes/s against the device's peaks.

The counts come from the profile's launch metadata (``flops*``, ``bytes``) when the kernel's
``launch_metadata`` gave them; else from the compiler's static count of one program (every global
access's tile bytes, ``2*M*N*K`` per dot), times the loop trips the recorded arguments give (``K //
BLOCK_K`` for a dot loop), times the number of programs.  Masks are taken as all-true (the count is an
upper bound for ragged edges).

A dot in a loop whose trip count the launch did not record (a loop over the sequence, not over a dot's K: an
attention kernel's key or query blocks) is counted once, so the FLOP count is then only a lower bound
(``flops_lower_bound``): the roofline does not call such a kernel latency-bound, nor give it a headroom, from a count
that may be a small fraction of its work (the attention backward's dK/dV kernel on an H200, 2026-11-29: 0.8% of the
tensor-core peak counted against ~54% done; docs/attention.md, "att21").

That static byte count is what the programs request, not what DRAM moves: a tiled matmul re-reads each
operand tile from L2 once per program row/column (the H100 corpus run of 2026-11-27 put a 4096^3 fp16
matmul at 190-250 % of DRAM peak), and a loop whose trip count is not recorded (a persistent softmax
walking rows) is counted once (the same run put a softmax moving 2.8 TB/s at 16 %).  When the launch
recorded its tensor arguments (shape, strides, dtype), the DRAM bytes are the compulsory traffic
instead: the span of every tensor the kernel loads from, plus the span of every tensor it stores to
(:func:`dram_bytes`), capped by the static count when that count has no uncounted loop (a kernel
that touches part of a tensor).  Without a measured time the kernel is classified by its arithmetic
intensity against the ridge point ``peak FLOP/s / peak bytes/s``.

Peaks are per SM and clock (the architecture's dense tensor-core and FFMA rates), times the
profile's SM count and clock; DRAM bandwidth from the profile's memory clock and bus width, else the
architecture's usual datacenter part.  ``latency-bound``: neither reaches :data:`BOUND_FRACTION` of its peak.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional

from .facts import KernelFacts

# dense FLOP per clock per SM: (fp16/bf16 tensor cores, fp32 FFMA); clocks in kHz; DRAM bytes/s
_PER_SM_CLOCK = {80: (2048, 128), 86: (1024, 256), 89: (1024, 256), 90: (4096, 256), 100: (8192, 256),
                 120: (1024, 256)}
_DEFAULT_CLOCK_KHZ = {80: 1410000, 86: 1740000, 89: 2520000, 90: 1980000, 100: 1965000, 120: 2400000}
_DEFAULT_DRAM = {80: 2.04e12, 86: 0.94e12, 89: 1.0e12, 90: 3.35e12, 100: 8.0e12, 120: 1.79e12}
BOUND_FRACTION = 0.5


@dataclass
class Roofline:
    flops: float                  # per kernel launch set (all launches in the profile, or one grid statically)
    bytes: float
    source: str                   # "launch_metadata" | "static" | "static+footprint" (DRAM bytes from the tensors)
    peak_flops: float
    peak_bytes_per_s: float
    engine: str                   # "tensor cores" | "fp32 FFMA"
    time_s: Optional[float] = None
    flops_lower_bound: bool = False  # a dot's loop trips not counted (static count): the true FLOPs may be far more

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else float("inf")

    @property
    def ridge(self) -> float:
        return self.peak_flops / self.peak_bytes_per_s

    @property
    def flops_fraction(self) -> Optional[float]:
        return self.flops / self.time_s / self.peak_flops if self.time_s else None

    @property
    def bytes_fraction(self) -> Optional[float]:
        return self.bytes / self.time_s / self.peak_bytes_per_s if self.time_s else None

    @property
    def bound(self) -> str:
        """"compute", "memory", "latency", or "unknown" where the FLOP count is a lower bound that does not already
        make the kernel compute-bound (its true FLOP rate may pass the bytes' or the line)."""
        if self.time_s:
            f, b = self.flops_fraction or 0.0, self.bytes_fraction or 0.0
            if self.flops_lower_bound:
                return "compute" if f >= BOUND_FRACTION and f >= b else "unknown"
            if max(f, b) < BOUND_FRACTION:
                return "latency"
            return "compute" if f >= b else "memory"
        if self.intensity >= self.ridge:
            return "compute"
        return "unknown" if self.flops_lower_bound else "memory"

    @property
    def headroom(self) -> Optional[float]:
        """1 - the larger fraction of peak reached (None without a time, or with a FLOP count that is only a lower
        bound: the headroom would be an upper bound)."""
        if not self.time_s or self.flops_lower_bound:
            return None
        return max(0.0, 1.0 - max(self.flops_fraction or 0.0, self.bytes_fraction or 0.0))

    @property
    def plausible(self) -> bool:
        """Whether the measured fractions are physically possible (<= 100 % of both peaks).  More bytes
        per second than DRAM delivers means the data came from L2 (a small tensor launched again) or the
        count or time is off: the headroom then says nothing (None without a time)."""
        if not self.time_s:
            return False
        return max(self.flops_fraction or 0.0, self.bytes_fraction or 0.0) <= 1.0

    def to_json(self) -> Dict:
        out = {"bound": self.bound, "flops": self.flops, "bytes": self.bytes, "source": self.source,
               "flops_lower_bound": self.flops_lower_bound,
               "intensity_flop_per_byte": round(self.intensity, 3) if self.bytes else None,
               "ridge_flop_per_byte": round(self.ridge, 3), "peak_flops": self.peak_flops,
               "peak_bytes_per_s": self.peak_bytes_per_s, "engine": self.engine}
        if self.time_s:
            out.update({"time_s": self.time_s, "flops_per_s": self.flops / self.time_s,
                        "bytes_per_s": self.bytes / self.time_s,
                        "flops_pct_of_peak": round(100 * (self.flops_fraction or 0), 2),
                        "bytes_pct_of_peak": round(100 * (self.bytes_fraction or 0), 2),
                        "headroom_pct": None if self.headroom is None else round(100 * self.headroom, 2)})
        return out


def peaks(facts: KernelFacts, tensor_cores: bool) -> tuple:
    sm = facts.device.sm
    key = sm if sm in _PER_SM_CLOCK else max([k for k in _PER_SM_CLOCK if k <= sm] or [90])
    tc, ffma = _PER_SM_CLOCK[key]
    clock_hz = (facts.device.clock_khz or _DEFAULT_CLOCK_KHZ[key]) * 1e3
    per_clk = tc if tensor_cores else ffma
    bw = facts.device.dram_bytes_per_s or _DEFAULT_DRAM[key]
    return per_clk * facts.device.num_sms * clock_hz, bw


def _trips(facts: KernelFacts, a: dict, dot_k_trips: int) -> int:
    if dot_k_trips > 1 and facts.in_loop(a.get("file"), int(a.get("line") or 0)):
        return dot_k_trips
    return 1


def _dot_trips(facts: KernelFacts) -> int:
    """K // BLOCK_K for a dot loop when the launch recorded an argument named like the dot's K."""
    from .diagnostics._util import dot_constexprs, dot_dims
    for d in facts.dots:
        kname = dot_constexprs(facts, d).get("K")
        k_tile = dot_dims(d)[2]
        cands = [kname.split("_")[-1]] if kname else []
        cands += ["K"]
        for n in cands:
            v = facts.arg_values.get(n)
            if isinstance(v, int) and not isinstance(v, bool) and v > k_tile:
                return max(1, -(-v // k_tile))
    return 1


def uncounted_dot_loop(facts: KernelFacts) -> bool:
    """Whether a dot sits in a loop whose trips :func:`static_counts` does not multiply in (no recorded argument
    names the loop's extent as a dot's K): its FLOPs are then counted once a program."""
    if _dot_trips(facts) > 1:
        return False
    return any(facts.in_loop(d.get("file"), int(d.get("line") or 0)) for d in facts.dots)


def static_counts(facts: KernelFacts) -> tuple:
    """(flops, bytes) of one program from the compiler's reports (masks taken as all-true)."""
    from .diagnostics._util import dot_dims, numel
    trips = _dot_trips(facts)
    flops = 0.0
    for d in facts.dots:
        m, n, k = dot_dims(d)
        inloop = facts.in_loop(d.get("file"), int(d.get("line") or 0))
        flops += 2.0 * m * n * k * (trips if inloop else 1)
    nbytes = 0.0
    for a in facts.memory_accesses:
        nbytes += numel(a.get("shape")) * int(a.get("elem_bytes") or 4) * _trips(facts, a, trips)
    return flops, nbytes


_DTYPE_BYTES = {"float64": 8, "int64": 8, "uint64": 8, "complex64": 8, "float32": 4, "int32": 4, "uint32": 4,
                "float16": 2, "bfloat16": 2, "int16": 2, "uint16": 2, "int8": 1, "uint8": 1, "bool": 1}


def _dtype_bytes(dtype) -> Optional[int]:
    t = str(dtype or "").rsplit(".", 1)[-1]
    if t in _DTYPE_BYTES:
        return _DTYPE_BYTES[t]
    if t.startswith("float8"):
        return 1
    return None


def tensor_span_bytes(arg: dict) -> Optional[int]:
    """Bytes between a recorded tensor argument's first and last element (its shape and strides;
    contiguous strides when none were recorded), None when the record lacks them."""
    eb = _dtype_bytes(arg.get("dtype"))
    shape = arg.get("shape")
    if eb is None or not isinstance(shape, (list, tuple)):
        return None
    try:
        shape = [int(x) for x in shape]
        if any(x <= 0 for x in shape):
            return 0
        strides = arg.get("strides")
        if not isinstance(strides, (list, tuple)) or len(strides) != len(shape):
            n = 1
            for x in shape:
                n *= x
            return n * eb
        return (1 + sum((x - 1) * abs(int(st)) for x, st in zip(shape, strides))) * eb
    except (TypeError, ValueError):
        return None


def _spans(facts: KernelFacts) -> Dict[str, int]:
    """{argument name: span in bytes} of the launch's recorded tensor arguments."""
    spans = {}
    for a in facts.launch_args:
        if a.get("kind") == "tensor" and isinstance(a.get("name"), str):
            b = tensor_span_bytes(a)
            if b is not None:
                spans[a["name"]] = b
    return spans


def dram_bytes(facts: KernelFacts) -> Optional[float]:
    """Compulsory DRAM bytes of one launch, None without recorded tensor arguments (no ``args`` in the
    profile, a static analysis).

    Per tensor and direction (loads, stores: a tensor read and written moves twice): its span, capped
    by the static count of the accesses to it when that count has no uncounted loop (a kernel that
    reads one row of a large tensor moves the row, not the tensor).  Accesses whose address names no
    tensor (non-affine: ``% M`` offsets, gathers) count against the tensors no other access names."""
    spans = _spans(facts)
    if not spans or not facts.memory_accesses:
        return None
    from .diagnostics._util import numel
    trips = _dot_trips(facts)
    progs = facts.num_programs or 1
    static: Dict[tuple, float] = {}
    uncounted = set()
    for a in facts.memory_accesses:
        # a non-affine address (``% M`` offsets, a gather) names no base: grouped under None
        base = (a.get("address") or {}).get("base")
        base = base if base in spans else None
        kind = "store" if str(a.get("kind") or "").startswith(("store", "atomic")) else "load"
        t = _trips(facts, a, trips)
        key = (base, kind)
        if a.get("line") and t == 1 and facts.in_loop(a.get("file"), int(a.get("line") or 0)):
            uncounted.add(key)
        static[key] = static.get(key, 0.0) + numel(a.get("shape")) * int(a.get("elem_bytes") or 4) * t * progs
    named = {b for b, _ in static if b is not None}
    # accesses without a base read or write the tensors no other access names (else any of them)
    rest = sum(v for k, v in spans.items() if k not in named) or sum(spans.values())
    total = 0.0
    for (b, kind), v in static.items():
        span = spans[b] if b is not None else rest
        total += span if (b, kind) in uncounted else min(span, v)
    return total


def roofline(facts: KernelFacts) -> Optional[Roofline]:
    from .diagnostics._util import is_tensor_core_kernel
    tc = is_tensor_core_kernel(facts)
    pf, pb = peaks(facts, tc)
    engine = "tensor cores" if tc else "fp32 FFMA"
    # a time measured on another device (an interpreted launch, a profile without device_info) says
    # nothing about this GPU's peaks: classify by intensity then
    time_s = facts.time_ns * 1e-9 if facts.time_ns and facts.device.source == "profile" else None
    flops = sum(v for k, v in facts.metrics.items() if k.startswith("flops"))
    nbytes = facts.metrics.get("bytes", 0.0)
    if flops or nbytes:
        return Roofline(flops, nbytes, "launch_metadata", pf, pb, engine, time_s)
    if not facts.memory_accesses and not facts.dots:
        return None
    f1, b1 = static_counts(facts)
    progs = facts.num_programs or 1
    launches = max(1, facts.count) if time_s else 1
    nbytes, source = b1 * progs, "static"
    fp = dram_bytes(facts)
    if fp is not None:
        nbytes, source = fp, "static+footprint"
    return Roofline(f1 * progs * launches, nbytes * launches, source, pf, pb, engine, time_s,
                    flops_lower_bound=uncounted_dot_loop(facts))


def sector_fraction(facts: KernelFacts, rl: Optional[Roofline], inefficient) -> Optional[float]:
    """The kernel's bytes per second counting the whole sectors its accesses fetch, against the DRAM
    peak (None without a measured time).  ``inefficient``: (access, sector efficiency) pairs; each
    moves ``1 / efficiency`` times its bytes.  Part of that traffic may come from L2 (a column walk's
    neighbouring programs share sectors), so this can pass 100 %: it says whether memory traffic, not
    latency, bounds the kernel (>= :data:`BOUND_FRACTION`)."""
    if rl is None or not rl.time_s:
        return None
    from .diagnostics._util import numel
    trips = _dot_trips(facts)
    progs, launches = facts.num_programs or 1, max(1, facts.count)
    spans = _spans(facts)
    waste = 0.0
    for a, eff in inefficient:
        if not 0 < eff < 1:
            continue
        t = _trips(facts, a, trips)
        moved = numel(a.get("shape")) * int(a.get("elem_bytes") or 4) * t * progs
        base = (a.get("address") or {}).get("base")
        if t == 1 and base in spans and a.get("line") and facts.in_loop(a.get("file"), int(a.get("line"))):
            moved = spans[base]      # a loop the static count does not multiply in: the tensor it walks
        waste += moved * launches * (1.0 / eff - 1.0)
    return (rl.bytes + waste) / rl.time_s / rl.peak_bytes_per_s


def memory_bound(facts: KernelFacts) -> bool:
    r = roofline(facts)
    return r is not None and r.bound == "memory"


def access_share(facts: KernelFacts, access: dict) -> float:
    """The access's share of the kernel's bytes (static count): how much of a memory-bound kernel's
    time it can account for."""
    from .diagnostics._util import numel
    _, total = static_counts(facts)
    trips = _dot_trips(facts)
    mine = numel(access.get("shape")) * int(access.get("elem_bytes") or 4) * _trips(facts, access, trips)
    return min(1.0, mine / total) if total else 0.0
