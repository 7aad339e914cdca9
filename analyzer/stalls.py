"""Warp stall reasons: normalised names, one-line meanings, and the groups the diagnostics use.

CUPTI names a reason ``smsp__pcsamp_warps_issue_stalled_long_scoreboard`` (and a ``_not_issued``
twin); kprof profiles store ``stalled_long_scoreboard`` metrics and Proton ``stalled_<Reason>``.
:func:`normalize` turns all of them into ``long_scoreboard``.  The meanings follow NVIDIA's
Nsight Compute "Warp State" documentation.  When the profiler's own table
(``profiler.pcsampling.stall_reasons``) is installed its descriptions are preferred.
"""
from __future__ import annotations

from typing import Dict, Iterable, Mapping

_PREFIXES = ("smsp__pcsamp_warps_issue_stalled_", "stalled_", "stall_")
_SUFFIXES = ("_not_issued",)

#: Samples of warps that were issuing: not a stall.
NOT_STALLS = frozenset({"selected"})

MEANINGS: Dict[str, str] = {
    "long_scoreboard": "waiting for a global/local memory (L1TEX) result",
    "short_scoreboard": "waiting for a shared-memory or MUFU result",
    "mio_throttle": "the shared-memory/special-instruction queue (MIO) is full",
    "lg_throttle": "the local/global memory instruction queue is full (too many memory instructions)",
    "barrier": "waiting at a block-wide barrier (bar.sync) for the other warps",
    "membar": "waiting for a memory fence",
    "math_pipe_throttle": "the math pipe (e.g. tensor cores) is busy: compute bound",
    "wait": "fixed-latency dependency (a few cycles between dependent instructions)",
    "dispatch_stall": "the dispatcher could not issue",
    "drain": "waiting for memory stores to drain at exit",
    "tex_throttle": "the texture/L1TEX queue is full",
    "imc_miss": "constant cache miss",
    "branch_resolving": "waiting for a branch target",
    "no_instructions": "instruction cache miss",
    "sleeping": "warp is sleeping",
    "misc": "miscellaneous",
    "not_selected": "eligible but another warp issued",
    "selected": "issuing (not a stall)",
    "gmma": "waiting for a warpgroup MMA (wgmma) to complete",
}

#: Stall groups the diagnostics test.
MEMORY_LATENCY = frozenset({"long_scoreboard"})
MEMORY_THROUGHPUT = frozenset({"lg_throttle", "tex_throttle", "drain"})
BARRIER_SMEM = frozenset({"barrier", "short_scoreboard", "mio_throttle", "membar"})


def normalize(name: str) -> str:
    """``smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued`` / ``stalled_Long_Scoreboard``
    -> ``long_scoreboard``."""
    n = name.strip().lower()
    for p in _PREFIXES:
        if n.startswith(p):
            n = n[len(p):]
            break
    for s in _SUFFIXES:
        if n.endswith(s):
            n = n[: -len(s)]
    return n


def meaning(reason: str) -> str:
    reason = normalize(reason)
    try:  # the profiler's table (profiler.pcsampling.stall_reasons), when present
        from profiler.pcsampling import stall_reasons as sr  # type: ignore
        table = getattr(sr, "REASONS", None)
        if isinstance(table, Mapping) and reason in table:
            return str(getattr(table[reason], "meaning", table[reason]))
    except Exception:
        pass
    return MEANINGS.get(reason, reason.replace("_", " "))


def merge(into: Dict[str, float], stalls: Mapping[str, float]) -> None:
    for k, v in stalls.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v:
            key = normalize(k)
            into[key] = into.get(key, 0) + v


def stalled_total(stalls: Mapping[str, float]) -> float:
    return sum(v for k, v in stalls.items() if k not in NOT_STALLS)


def share(stalls: Mapping[str, float], reasons: Iterable[str], of: float) -> float:
    if of <= 0:
        return 0.0
    rs = set(reasons)
    return sum(v for k, v in stalls.items() if k in rs) / of
