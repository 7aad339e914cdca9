"""Helpers shared by the diagnostics: dot dimensions, tile sizes, which constexprs set the grid."""
from __future__ import annotations

import math
import re
from typing import Any, Dict, List, Optional, Tuple

from ..facts import KernelFacts, base


def pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def dot_dims(d: dict) -> Tuple[int, int, int]:
    a, b = d.get("a_shape") or [0, 0], d.get("b_shape") or [0, 0]
    return int(a[-2]), int(b[-1]), int(a[-1])


def dot_constexprs(facts: KernelFacts, d: dict) -> Dict[str, Optional[str]]:
    """Names of the constexprs that set a dot's M, N and K (None where no constexpr matches)."""
    m, n, k = dot_dims(d)
    return {"M": facts.constexpr_for(m, ("M",)), "N": facts.constexpr_for(n, ("N",)),
            "K": facts.constexpr_for(k, ("K",))}


FP8_TYPES = ("fp8e4nv", "fp8e5")
FP8_MMA_K = 32          # the k of every fp8 MMA shape: mma.sync m16n8k32, wgmma m64nNk32
FP8_MMA_SM = 89         # first architecture with fp8 tensor-core instructions (Ada; Hopper adds wgmma)
# "fp8e4nv x fp8e5 -> fp16: why" (kernelc/compiler/passes/fp8_dot.py): the types the kernel wrote
_UPCAST_TYPES = re.compile(r"^\s*(\w+) x (\w+) ->")


def target_arch(facts: KernelFacts) -> str:
    """The arch the kernel was compiled for (``sm_90a``); the analysed device's when unknown."""
    return getattr(getattr(facts.compiled, "target", None), "arch", None) or facts.device.arch


def target_sm(facts: KernelFacts) -> int:
    """The compute capability the kernel was compiled for, as a number (``sm_90a`` -> 90)."""
    from cubintools.target import parse_target
    return parse_target(target_arch(facts)).sm


def fp8_types(d: dict) -> Optional[Tuple[str, str]]:
    """The fp8 operand types of a dot as the kernel wrote them, also when the compiler upcast them to
    fp16 (the report's dtypes are then fp16); None for a dot that is not fp8."""
    a, b = str(d.get("a_dtype")), str(d.get("b_dtype"))
    if a in FP8_TYPES and b in FP8_TYPES:
        return a, b
    m = _UPCAST_TYPES.match(d.get("fp8_upcast") or "")
    return (m.group(1), m.group(2)) if m else None


def dot_types(d: dict) -> str:
    """A dot's operand types for messages: ``fp16``, ``fp8e4nv x fp8e5``, ``fp8e4nv x fp8e4nv upcast to fp16``."""
    fp8 = fp8_types(d)
    if fp8 is None:
        return str(d.get("a_dtype"))
    return " x ".join(fp8) + (" upcast to fp16" if d.get("fp8_upcast") else "")


def sass_counts(facts: KernelFacts, *opcodes: str) -> Dict[str, int]:
    """``{"qgmma_instructions": n, ...}``: how many SASS instructions have each opcode (its first field)."""
    return {f"{op.lower()}_instructions": len(facts.opcodes(op)) for op in opcodes}


def fp8_unpacks(facts: KernelFacts) -> int:
    """fp8 -> fp16 conversions in the SASS (``F2FP.F16.E4M3.UNPACK_B``): how ptxas runs fp8 ``mma.sync`` on
    sm_90, which has fp8 tensor cores only for wgmma (QGMMA), as HMMAs on converted operands."""
    return len([i for i in facts.opcodes("F2FP")
                if "UNPACK" in i.opcode and (".E4M3" in i.opcode or ".E5M2" in i.opcode)])


def tensor_core_dots(facts: KernelFacts) -> List[dict]:
    return [d for d in facts.dots if d.get("engine") in ("wgmma", "mma.sync")]


def is_tensor_core_kernel(facts: KernelFacts) -> bool:
    if tensor_core_dots(facts):
        return True
    return bool(not facts.dots and facts.tensor_core_instructions)


def numel(shape) -> int:
    n = 1
    for s in shape or ():
        n *= int(s)
    return n


def largest_tile(facts: KernelFacts) -> int:
    """Elements of the largest tile the kernel holds (accesses, dot accumulators)."""
    sizes = [numel(a.get("shape")) for a in facts.memory_accesses]
    for d in facts.dots:
        m, n, _ = dot_dims(d)
        sizes.append(m * n)
    return max(sizes) if sizes else 0


def next_pow2(x: float) -> int:
    x = max(1.0, float(x))
    return 1 << math.ceil(math.log2(x))


def line_share(facts: KernelFacts, file: Optional[str], line: Optional[int]) -> Optional[float]:
    s = facts.line_stat(file, line)
    if s is None or not facts.total_samples:
        return None
    return s.samples / facts.total_samples


def source_of(facts: KernelFacts, file: Optional[str], line: Optional[int]) -> Optional[str]:
    t = facts.source_text(file, line)
    return t.strip() if t else None


def valid_warps(nw: int, max_threads: int = 1024) -> bool:
    return 1 <= nw <= max_threads // 32 and nw & (nw - 1) == 0


def grid_constexprs(facts: KernelFacts) -> List[str]:
    """The tile constexprs that the grid is (most likely) computed from, e.g. ``["BLOCK_M", "BLOCK_N"]``.

    1. With recorded scalar arguments: constexprs ``C`` with ``cdiv(arg, C) == programs`` (or a pair
       with ``cdiv(a1, C1) * cdiv(a2, C2) == programs``); none when nothing matches (a persistent grid).
    2. Else the M and N tile constexprs of the kernel's dot.
    3. Else the largest tile constexpr (the Triton convention ``grid = cdiv(n, BLOCK)``).
    """
    tiles = facts.tile_constexprs()
    p = facts.num_programs
    if not tiles or not p:
        return []
    ints = {k: v for k, v in facts.arg_values.items() if isinstance(v, int) and not isinstance(v, bool) and v > 1}
    if facts.arg_values:
        # a dot's M and N tiles first: with equal tiles and sizes (32x32x32 on 4096^3) BLOCK_K matches too
        for d in facts.dots:
            names = dot_constexprs(facts, d)
            c1, c2 = names["M"], names["N"]
            if c1 in tiles and c2 in tiles and c1 != c2 and any(
                    a1 != a2 and -(-v1 // tiles[c1]) * -(-v2 // tiles[c2]) == p
                    for a1, v1 in ints.items() for a2, v2 in ints.items()):
                return [c1, c2]
        for c, cv in sorted(tiles.items(), key=lambda kv: -kv[1]):
            for _a, av in ints.items():
                if -(-av // cv) == p:
                    return [c]
        names = sorted(tiles)
        for i, c1 in enumerate(names):
            for c2 in names[i + 1:]:
                for a1, v1 in ints.items():
                    for a2, v2 in ints.items():
                        if a1 != a2 and -(-v1 // tiles[c1]) * -(-v2 // tiles[c2]) == p:
                            return [c1, c2]
        return []   # the sizes are known and no tile divides them into the grid (e.g. a persistent grid)
    for d in facts.dots:
        names = dot_constexprs(facts, d)
        if names["M"] and names["N"] and names["M"] != names["N"]:
            return [names["M"], names["N"]]
    return [max(tiles.items(), key=lambda kv: (kv[1], kv[0]))[0]]


def shrink_for_programs(facts: KernelFacts, factor: int, floor: int = 16) -> Optional[Dict[str, int]]:
    """Config delta that divides the grid constexprs by ``factor`` in total (powers of two), so that
    about ``factor`` times more programs are launched; None if nothing can shrink."""
    names = grid_constexprs(facts)
    if not names or factor <= 1:
        return None
    tiles = facts.tile_constexprs()
    vals = {n: tiles[n] for n in names}
    # a grid constexpr that is a tile dimension keeps the tile at least as big as the threads of a
    # 1-D program; one that is not (a CHUNK walked in BLOCK steps) stays >= the tile constexprs
    # smaller than it
    tile_dims = {int(d) for a in facts.memory_accesses for d in (a.get("shape") or ())}
    one_d = all(len([d for d in (a.get("shape") or ()) if d > 1]) <= 1 for a in facts.memory_accesses)
    floors = {}
    for n, v in vals.items():
        if len(vals) > 1:
            floors[n] = floor
        elif v in tile_dims:
            floors[n] = max(floor, 32 * facts.num_warps if one_d else floor)
        else:
            floors[n] = max([floor] + [tv for tn, tv in tiles.items() if tn not in vals and tv < v])
    left = factor
    changed = dict(vals)
    while left > 1:
        n = max(changed, key=lambda k: (changed[k] / floors[k], k))
        if changed[n] // 2 < floors[n]:
            break
        changed[n] //= 2
        left //= 2
    delta = {k: v for k, v in changed.items() if v != vals[k]}
    return delta or None


def loads_in_loop(facts: KernelFacts, loop) -> List[dict]:
    out = []
    for a in facts.memory_accesses:
        if str(a.get("kind", "")).startswith("load") and (base(a.get("file")), a.get("line")) in loop.body_lines:
            out.append(a)
    return out


def fmt_shape(shape) -> str:
    return "x".join(str(s) for s in shape or ()) or "scalar"


def stalls_text(stalls: Dict[str, float], total: float, n: int = 3) -> str:
    items = sorted(((k, v) for k, v in stalls.items() if k != "selected" and v > 0), key=lambda kv: -kv[1])[:n]
    return ", ".join(f"{k} {pct(v / total)}" for k, v in items) if total else ""


def basis_of(ev: Dict[str, Any]) -> str:
    """A diagnostic's basis: ``static+samples`` when its evidence holds the line's samples."""
    return "static+samples" if "line_samples" in ev else "static"


def evidence_samples(facts: KernelFacts, file, line, reasons=()) -> Dict[str, Any]:
    """Sample numbers of a line for a diagnostic's evidence ({} without samples)."""
    s = facts.line_stat(file, line)
    if s is None or not facts.total_samples or not s.samples:
        return {}
    ev: Dict[str, Any] = {"line_samples": s.samples, "line_share_of_kernel": round(s.samples / facts.total_samples, 4)}
    for r in reasons:
        ev[f"{r}_share_of_line"] = round(s.stalls.get(r, 0.0) / s.samples, 4)
    return ev


def _scaled_by(facts: KernelFacts, text: Optional[str]) -> Optional[str]:
    """A constexpr or argument that multiplies the offsets on the line (``offs * STRIDE``)."""
    if not text:
        return None
    for m in re.finditer(r"\*\s*([A-Za-z_]\w*)", text):
        name = m.group(1)
        if name in facts.constexprs:
            return f"{name}={facts.constexprs[name]}"
        if name in facts.signature and not str(facts.signature[name]).startswith("*"):
            return name
    return None
