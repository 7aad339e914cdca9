"""Warp stall reasons of PC sampling: CUPTI's names -> kprof's short names -> what they mean.

CUPTI reports, for every sampled PC, how many samples found the warp in each state.  The names are
read from the device at run time (``cuptiPCSamplingGetStallReasons``); on sm_90 there are 40 of
them, in two families::

    smsp__pcsamp_warps_issue_stalled_long_scoreboard              all samples
    smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued   samples where the warp also
                                                                  issued nothing that cycle

The ``_not_issued`` family is a subset of the other one, so adding both double-counts.  kprof
counts **one family: the one without ``_not_issued``** (Nsight Compute's "Warp Stall Sampling (All
Samples)"), so ``num_samples`` of an instruction is the number of times a warp was found at it, and
``num_stalled_samples = num_samples - selected`` ("selected" means the warp was issuing).

The table below is data the analyzer reuses: short name -> title, meaning, and what usually helps.
Reasons CUPTI reports that are not in it (a newer GPU) still count, with a generic description.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

__all__ = [
    "StallReason", "REASONS", "NOT_STALLED", "FAMILY", "short_name", "is_counted", "describe",
    "counted_reasons",
]

PREFIX = "smsp__pcsamp_warps_issue_stalled_"
NOT_ISSUED_SUFFIX = "_not_issued"
# The counted family, named the way Nsight Compute names its source-view column.
FAMILY = "all samples (names without _not_issued)"
# Samples that are not stalls: the warp was issuing an instruction.
NOT_STALLED = frozenset({"selected"})


@dataclass(frozen=True)
class StallReason:
    name: str      # kprof's short name, e.g. "long_scoreboard" (metric "stalled_long_scoreboard")
    title: str     # a few words, for tables
    meaning: str   # what the warp was waiting for
    advice: str    # what usually helps (kernelc terms where they apply)


def _r(name: str, title: str, meaning: str, advice: str) -> StallReason:
    return StallReason(name, title, meaning, advice)


REASONS: dict[str, StallReason] = {r.name: r for r in (
    _r("selected", "issuing",
       "The warp was selected by the scheduler and issued an instruction: not a stall.",
       "Nothing to fix; a line dominated by 'selected' is simply doing a lot of work."),
    _r("not_selected", "eligible, not selected",
       "The warp was ready to issue but the scheduler picked another warp.",
       "Usually a good sign (enough ready warps). Many of these with low throughput means the issue "
       "slot itself is the limit: do less work per element (fewer instructions)."),
    _r("long_scoreboard", "global/local memory",
       "Waiting for data from L1TEX: a global, local (spill) or texture load that has not returned.",
       "Hide the latency: more pipeline stages (num_stages) for loads feeding a dot, more warps or "
       "programs in flight, coalesced and vectorized accesses (contiguous offsets, 16-byte aligned "
       "pointers); remove register spills (local memory)."),
    _r("short_scoreboard", "shared memory / special math",
       "Waiting for an MIO result: a shared-memory load, a special function (exp, log, rsqrt, sin), "
       "a shuffle or a dynamic branch target.",
       "Avoid shared-memory bank conflicts, use fast-math variants (exp2 instead of exp), reuse "
       "values loaded from shared memory, reduce shuffles in reductions."),
    _r("mio_throttle", "MIO queue full",
       "The MIO instruction queue (shared memory, special math, shuffles) was full.",
       "Issue fewer, wider shared-memory accesses (vectorized or ldmatrix), fewer special-math "
       "instructions per element."),
    _r("lg_throttle", "LSU queue full",
       "The local/global memory instruction queue was full: too many memory instructions in flight.",
       "Vectorize global accesses (fewer, wider loads/stores), remove spills, batch stores."),
    _r("math_pipe_throttle", "math pipe busy",
       "The warp waited for an execution pipe (FMA, ALU, tensor core) that was busy.",
       "The kernel is compute bound on that pipe: use tensor cores for dots (fp16/bf16/tf32 "
       "inputs), lower-precision math, or spread work over other pipes."),
    _r("wait", "fixed-latency dependency",
       "Waiting on a fixed-latency dependency (an arithmetic result a few cycles away).",
       "More independent work per thread (instruction-level parallelism), or more warps; mostly "
       "inherent in tight arithmetic chains."),
    _r("barrier", "CTA barrier",
       "Waiting at a CTA-wide barrier for sibling warps.",
       "Balance the work between warps before barriers, reduce the number of barriers (e.g. fewer "
       "reduction steps through shared memory), deeper pipelining so warps arrive together."),
    _r("membar", "memory barrier",
       "Waiting for a memory fence.",
       "Avoid unneeded fences and atomics with strong ordering."),
    _r("branch_resolving", "branch resolution",
       "Waiting for a branch target to be computed or the warp's PC to be updated.",
       "Fewer divergent branches: use masks (kl.where) instead of data-dependent control flow."),
    _r("no_instructions", "no instruction",
       "No instruction was available: an instruction-cache miss, or right after a branch.",
       "Smaller code: less unrolling, fewer specialisations in one kernel."),
    _r("dispatch_stall", "dispatch stall",
       "The dispatcher could not issue the selected instruction (pipeline interlock).",
       "Rare; usually nothing to do at the source level."),
    _r("drain", "drain after exit",
       "After EXIT, waiting for the warp's memory stores to drain.",
       "Usually small; large values mean many outstanding stores at kernel end."),
    _r("imc_miss", "constant cache miss",
       "Waiting for an immediate constant cache miss (kernel arguments, constants).",
       "Usually a start-up cost; many distinct constants in a loop can cause it."),
    _r("tex_throttle", "TEX queue full",
       "The texture/L1TEX instruction queue was full.",
       "Fewer, wider memory instructions."),
    _r("sleeping", "sleeping",
       "The warp was sleeping (nanosleep, yield) or all its threads were blocked.",
       "Check spin-waits and yields."),
    _r("misc", "miscellaneous",
       "A stall reason the hardware does not classify further.",
       "No specific advice."),
    _r("gmma", "warpgroup MMA",
       "Waiting on a warpgroup matrix-multiply (wgmma) operation or its operands (Hopper).",
       "Keep more wgmma groups in flight (deeper pipelining), feed operands from shared memory in "
       "time (more stages)."),
    _r("tmem", "tensor memory",
       "Waiting on tensor memory (Blackwell).",
       "Overlap tensor-memory traffic with compute."),
)}


def short_name(cupti_name: str) -> str:
    """``smsp__pcsamp_warps_issue_stalled_long_scoreboard[_not_issued]`` -> ``long_scoreboard``.

    Names that do not follow the ``..._stalled_<reason>`` pattern keep their last ``__`` part,
    lower-cased, with ``pcsamp_`` dropped.
    """
    name = cupti_name.strip()
    if name.endswith(NOT_ISSUED_SUFFIX):
        name = name[: -len(NOT_ISSUED_SUFFIX)]
    if "_stalled_" in name:
        return name.split("_stalled_", 1)[1].lower()
    tail = name.rsplit("__", 1)[-1].lower()
    return re.sub(r"^pcsamp_", "", tail)


def is_counted(cupti_name: str, all_names: Iterable[str] = ()) -> bool:
    """Whether a reason belongs to the family kprof counts (see the module docstring).

    A name without ``_stalled_`` (e.g. a plain sample counter) is counted only if no name of the
    device has the ``_stalled_`` form, so a device with an unexpected naming scheme still gets
    samples instead of none.
    """
    if cupti_name.endswith(NOT_ISSUED_SUFFIX):
        return False
    if "_stalled_" in cupti_name:
        return True
    return not any("_stalled_" in n for n in all_names)


def counted_reasons(table: Iterable[tuple[int, str]]) -> dict[int, str]:
    """``{cupti index: short name}`` for the counted family of a device's ``(index, name)`` table."""
    table = list(table)
    names = [n for _, n in table]
    out: dict[int, str] = {}
    for index, name in table:
        if is_counted(name, names):
            out[int(index)] = short_name(name)
    return out


def describe(name: str) -> StallReason:
    """The table entry for a short name (``stalled_`` prefix and case ignored); a generic entry for
    a reason the table does not know."""
    key = name.lower()
    if key.startswith("stalled_"):
        key = key[len("stalled_"):]
    r = REASONS.get(key)
    if r is not None:
        return r
    return StallReason(key, key.replace("_", " "),
                       f"Warp stall reason '{key}' as reported by CUPTI for this GPU.",
                       "See Nsight Compute's warp stall reason documentation for this GPU.")
