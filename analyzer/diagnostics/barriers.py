"""7. Barrier / shared-memory stalls.

From samples: ``barrier``, ``short_scoreboard``, ``mio_throttle`` and ``membar`` together make up at
least 40 % of the kernel's stalled samples (60 % for tensor-core kernels, whose pipelines synchronise
every stage) and more than ``long_scoreboard`` (else the barriers mostly wait for other warps'
memory loads); the lines where they dominate are named, mapped back from inlined library code to
the kernel's line.

Two measured reasons make these stalls an info rather than a finding (the H100 corpus run of
2026-11-27 flagged the examples' well-tuned matmuls and softmaxes):

* a tensor-core kernel whose SASS holds no more barriers than it has loops: each is the pipeline's
  stage barrier, which the loop needs; the wait there is the tile config's or the pipeline depth's
  (``small-tiles``, ``latency-bound-loop``), not too many synchronisations;
* a measured time whose roofline says the kernel is memory- or compute-bound (at least
  :data:`analyzer.roofline.BOUND_FRACTION` of a peak): warps wait at barriers while DRAM or the tensor
  cores are busy, so removing barriers does not remove the bound.

Static: a reduction whose tile gives each thread fewer than 2 elements while spanning several
warps (e.g. 256 elements on 16 warps): every such reduction goes through shared memory with two
barriers while most threads hold nothing useful.  The fix is fewer warps for the tile.
"""
from __future__ import annotations

from typing import Dict, List

from .diagnostic import Diagnostic
from ._util import is_tensor_core_kernel, numel, pct, source_of, stalls_text
from .. import stalls as S
from ..facts import KernelFacts

KERNEL_SHARE = 0.40
KERNEL_SHARE_TC = 0.60
LINE_SHARE = 0.50
MIN_STALLED = 50
ELEMS_PER_THREAD = 2
# tile-IR ops that may go through shared memory or synchronise besides a layout conversion (conservative)
SMEM_OPS = {"reduce", "scan", "dot", "histogram", "sort", "bitonic_merge", "gather", "trans", "atomic_rmw",
            "atomic_cas", "barrier", "descriptor_load", "descriptor_store", "cat", "join", "split", "flip",
            "inline_asm", "asm", "reshape"}


def _warps_for(n: int, per_thread: int) -> int:
    w = max(1, n // (32 * per_thread))
    p = 1
    while p * 2 <= w:
        p *= 2
    return min(p, 32)


def _conversion_only(facts: KernelFacts) -> Dict:
    """{(file, line): [bytes]} of the compiler's layout conversions when they are the kernel's only
    shared-memory users (no reduction, dot or atomic in the tile IR), else {}."""
    if not facts.tir.ops or facts.dots:
        return {}
    if any(o.op.rsplit(".", 1)[-1] in SMEM_OPS for o in facts.tir.ops):
        return {}
    from .sectors import _conversions
    return _conversions(facts)


def check(facts: KernelFacts) -> List[Diagnostic]:
    out: List[Diagnostic] = []
    # static: reductions spread too thin over many warps
    bars = facts.opcodes("BAR")
    small = []
    if facts.num_warps > 1:
        for op in facts.tir.ops_named("reduce"):
            shape = facts.tir.operand_shape(op, 0)
            n = numel(shape)
            if n and n / (32 * facts.num_warps) < ELEMS_PER_THREAD:
                small.append((op, n))
    changes: List[Dict[str, int]] = []
    if small:
        n = max(x for _, x in small)
        for per in (8, 4):
            w = _warps_for(n, per)
            if w < facts.num_warps and {"num_warps": w} not in changes:
                changes.append({"num_warps": w})
    stalled = facts.total_stalled
    bs = ls = 0.0
    if facts.total_samples and stalled >= MIN_STALLED:
        bs = S.share(facts.stall_totals, S.BARRIER_SMEM, stalled)
        ls = S.share(facts.stall_totals, S.MEMORY_LATENCY, stalled)
    # Warps of a memory-bound kernel wait at barriers for the warps whose loads are late: barrier
    # stalls are the problem only when they outweigh the memory waits.  Pipelined tensor-core loops
    # synchronise every stage by design: a higher bar.
    threshold = KERNEL_SHARE_TC if is_tensor_core_kernel(facts) else KERNEL_SHARE
    if bs >= threshold and bs > ls:
        lines = []
        for s in facts.hot_lines(30):
            sh = s.share(S.BARRIER_SMEM)
            if sh >= LINE_SHARE:
                lines.append((s, sh))
        lines.sort(key=lambda x: -x[0].samples * x[1])
        first = lines[0][0] if lines else None
        dominant = max(((r, facts.stall_totals.get(r, 0.0)) for r in S.BARRIER_SMEM), key=lambda kv: kv[1])[0]
        ev = {"barrier_smem_share_of_stalled": round(bs, 4), "stalled_samples": stalled,
              "kernel_stalls": {k: round(v / stalled, 4) for k, v in sorted(facts.stall_totals.items(),
                                                                          key=lambda kv: -kv[1])[:5] if k != "selected"},
              "lines": [{"file": s.file, "line": s.line, "samples": s.samples, "share": round(sh, 4),
                         "stalls": stalls_text(s.stalls, s.samples)} for s, sh in lines[:3]],
              "barriers_in_sass": len(bars)}
        if small:
            ev["reductions"] = [{"line": op.line, "elements": n, "warps": facts.num_warps} for op, n in small]
        if dominant in ("barrier", "membar"):
            fix = ("fewer block-wide synchronisations: fewer warps for small tiles (a reduction inside one warp needs "
                   "no barrier), fuse reductions, or do more work per barrier")
        else:
            fix = ("less shared-memory traffic per useful instruction: avoid layout conversions through shared "
                   "memory, use wider shared accesses, and avoid bank conflicts (swizzled layouts)")
        where = facts.location(first.file, first.line) if first else facts.name
        file, line = (first.file, first.line) if first else (None, None)
        via = ""
        if first:
            users = facts.user_lines(first.file, first.line)
            if users and users != [(first.file, first.line)]:
                # library code (a reduction's combine function): point at the kernel's own line
                via = f" (inlined into line {', '.join(str(ln) for _, ln in users)})"
                file, line = users[0]
                ev["inlined_into"] = [ln for _, ln in users]
        msg = (f"{where}{via}: {pct(bs)} of the stalled samples wait on barriers/shared memory "
               f"({stalls_text(facts.stall_totals, stalled)})")
        if first:
            msg += f"; this line has {pct(first.samples / facts.total_samples)} of the samples"
        sev, title = "warning", "barrier / shared-memory bound"
        conv = _conversion_only(facts)
        if conv and not small:
            # no reduction, dot or atomic: the compiler's layout conversions are the kernel's only shared-memory
            # traffic, so these stalls are their cost, which the layout-conversion report shows on its line
            ev["conversion_lines"] = sorted(ln for _f, ln in conv)
            ev["conversion_shared_bytes"] = sum(sum(v) for v in conv.values())
            sev, title = "info", "barrier / shared-memory stalls of the compiler's layout conversion"
            msg += (f"; the kernel's only shared-memory traffic is the layout conversion at line(s) "
                    f"{', '.join(map(str, ev['conversion_lines']))} ({ev['conversion_shared_bytes']} bytes a program): "
                    "this is its cost (see layout-conversion)")
            fix = ("compute the tile in the layout memory wants (index it with the contiguous dim last) so that no "
                   "conversion is needed, or accept the conversion's cost")
        if sev == "warning" and not small:
            from ..roofline import roofline
            rl = roofline(facts)
            loops = len(facts.tir.loops) if facts.tir.loops else len(facts._ast_loops())
            # a pipelined loop needs one barrier before it reads a stage, and one more when its refill follows
            # the dots (a wgmma kept in flight: Triton's order, kernelc's default for cp.async rings); a layout
            # conversion through shared memory (a GEMM's epilogue to 16-byte stores) two more, outside the loop
            from .sectors import _conversions
            n_conv = sum(len(v) for v in _conversions(facts).values()) if facts.tir.ops else 0
            if is_tensor_core_kernel(facts) and loops and len(bars) <= 2 * loops + 2 * n_conv:
                ev["loops"] = loops
                ev["conversions"] = n_conv
                sev, title = "info", "barrier waits of a pipelined tensor-core loop"
                msg += (f"; the SASS has {len(bars)} barrier(s) for {loops} loop(s): the pipeline's stage barriers, "
                        "which the loop needs (its wait is the tile config's and pipeline depth's: see small-tiles, "
                        "latency-bound-loop)")
            elif rl is not None and rl.plausible and rl.bound in ("memory", "compute"):
                frac = rl.bytes_fraction if rl.bound == "memory" else rl.flops_fraction
                ev["roofline_bound"] = rl.bound
                ev["bound_fraction_of_peak"] = round(frac or 0.0, 4)
                sev, title = "info", f"barrier waits of a {rl.bound}-bound kernel"
                msg += (f"; the kernel is {rl.bound}-bound at {pct(frac or 0.0)} of the peak "
                        f"{'DRAM bandwidth' if rl.bound == 'memory' else 'FLOP/s'}: warps wait at the barriers while "
                        f"{'their loads stream from DRAM' if rl.bound == 'memory' else 'the math units work'}, so "
                        "fewer barriers would not remove the bound")
        out.append(Diagnostic("barrier-stalls", 7, title, sev, msg, fix,
                              facts.full_path(file) or file, line, source_of(facts, file, line), ev, changes,
                              "static+samples" if small else "samples"))
        return out
    if small and bars:
        op, n = max(small, key=lambda x: x[1])
        lines = sorted({op2.line for op2, _ in small})
        ev = {"reductions": [{"line": o.line, "elements": x, "elements_per_thread": round(x / (32 * facts.num_warps), 3)}
                             for o, x in small], "num_warps": facts.num_warps, "barriers_in_sass": len(bars)}
        if facts.total_samples and stalled:
            ev["barrier_smem_share_of_stalled"] = round(bs, 4)
        fix = ("use fewer warps for this tile so reductions stay within a warp (shuffles, no barriers)"
               + (f": num_warps={changes[0]['num_warps']}" if changes else ""))
        out.append(Diagnostic(
            "barrier-stalls", 7, "reductions spread over too many warps", "warning",
            f"{facts.location(op.file, op.line)}: {len(small)} reduction(s) of {n} elements on {facts.num_warps} warps "
            f"({n / (32 * facts.num_warps):.2g} elements per thread) at line(s) {', '.join(map(str, lines))}: each "
            f"crosses warps through shared memory and barriers ({len(bars)} BAR in the SASS)",
            fix, facts.full_path(op.file) or op.file, op.line, source_of(facts, op.file, op.line), ev, changes))
    return out


__all__ = ["check"]
