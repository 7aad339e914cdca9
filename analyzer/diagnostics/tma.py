"""8. Hopper without TMA: a wgmma dot loop whose operand tiles come through pointers (cp.async).

On sm_90a kernelc copies a tile addressed through a tensor descriptor with TMA, straight into the
swizzled layout wgmma reads, on one thread, completing on an mbarrier; pointer tiles go through
``cp.async`` issued by every thread, with address arithmetic per element; the measured gain is in
docs/performance.md ("TMA"). The fix is a
source change, one line per operand: a descriptor made in the kernel needs nothing from the host
(kernelc builds its CUtensorMap on the device).

Static: ``info`` (the examples' pointer matmul is a correct, tuned kernel; this is the next step).
With samples: ``warning`` when the loop's operand loads hold at least ``LOAD_SHARE`` of the samples.
"""
from __future__ import annotations

from typing import List

from .diagnostic import Diagnostic
from ._util import dot_dims, loads_in_loop, pct, source_of, target_arch
from ..facts import KernelFacts, base

LOAD_SHARE = 0.2
TITLE = "wgmma operands loaded through pointers, not TMA"


def _operand_loads(loads: List[dict], m: int, n: int, k: int) -> List[dict]:
    """The loop's pointer loads shaped like an operand of an MxNxK dot, contiguous along a dim."""
    shapes = ([m, k], [k, m], [k, n], [n, k])
    return [a for a in loads if a.get("engine") != "tma" and list(a.get("shape") or ()) in shapes
            and max(a.get("contiguity") or [1]) > 1]


def _load_share(facts: KernelFacts, loads: List[dict]) -> float:
    if not facts.total_samples:
        return 0.0
    lines = {(base(a.get("file")), a.get("line")) for a in loads}
    stats = [facts.line_stat(f, ln) for f, ln in lines]
    return sum(s.samples for s in stats if s) / facts.total_samples


def check(facts: KernelFacts) -> List[Diagnostic]:
    arch = target_arch(facts)
    if facts.device.sm != 90 or not str(arch).endswith("a"):
        return []
    out: List[Diagnostic] = []
    seen = set()
    for d in facts.dots:
        if d.get("engine") != "wgmma":
            continue
        loops = facts.tir.loops_of_line(d.get("file") or "", d.get("line") or 0)
        if not loops or id(loops[-1]) in seen:
            continue
        loop = loops[-1]
        seen.add(id(loop))
        m, n, k = dot_dims(d)
        loads = _operand_loads(loads_in_loop(facts, loop), m, n, k)
        if not loads:
            continue
        share = _load_share(facts, loads)
        lines = sorted({a.get("line") for a in loads})
        ev = {"dot": f"{m}x{k} @ {k}x{n}", "dot_line": d.get("line"), "load_lines": lines,
              "load_kinds": sorted({str(a.get("kind")) for a in loads}), "target": arch}
        if facts.total_samples:
            ev["load_share_of_kernel"] = round(share, 4)
        severity = "warning" if share >= LOAD_SHARE else "info"
        msg = (f"{facts.location(loop.file, loop.line)}: the {m}x{n}x{k} wgmma loop loads its operand tiles at line"
               f"{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))} through pointers (cp.async, every "
               "thread computing addresses); on sm_90a a tensor descriptor copies each tile with one TMA instruction "
               "into the layout wgmma reads")
        if share >= LOAD_SHARE:
            msg += f"; those lines hold {pct(share)} of the kernel's samples"
        fix = ("address the operands through tensor descriptors made in the kernel, e.g. before the loop "
               "`a_desc = kl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1], "
               "block_shape=[BLOCK_M, BLOCK_K])` and in it `a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])` "
               "(out-of-bounds elements read as zero, so the masks go); the base must be 16-byte aligned and the "
               "row strides multiples of 16 bytes, as torch tensors with such shapes are. On Hopper this took a "
               "matmul from 0.74-0.81x to 0.91-0.97x cuBLAS (examples/kernels/matmul.py vs matmul_tma.py)")
        out.append(Diagnostic("hopper-no-tma", 8, TITLE, severity, msg, fix, facts.full_path(loop.file) or loop.file,
                              loop.line, source_of(facts, loop.file, loop.line), ev, [],
                              "static+samples" if facts.total_samples else "static"))
    return out
