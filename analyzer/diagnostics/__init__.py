"""Performance diagnostics: each a function ``(KernelFacts) -> list[Diagnostic]``, listed in ``REGISTRY``.

=====  ============================  ========================================================================
 no.   id                            finds
=====  ============================  ========================================================================
 1     ``no-tensor-cores``           a ``dot`` that compiled to FFMA (fp32 'ieee', tiny tiles, types)
 2     ``hopper-no-wgmma``           a dot on mma.sync (HMMA/QMMA) where wgmma (HGMMA/QGMMA) applies on sm_90a
 3     ``low-utilisation``           fewer programs than SMs / than the GPU holds at once
 3     ``low-occupancy``             resident warps capped by registers or shared memory
 4     ``uncoalesced-access``        < 50% sector efficiency (sectors per warp request from the layout and
                                     the address, ``sectors.py``), gathers, lg_throttle samples
 4     ``layout-conversion``         (info) the compiler converts an access's layout: sectors it buys, shared
                                     memory it costs (emitted by the ``uncoalesced-access`` check)
 4     ``unvectorised-access``       accesses narrower than 16 B because of alignment or masks
 5     ``register-spills``           spill stores/loads (local memory) in the SASS
 6     ``latency-bound-loop``        a tensor-core loop whose operand loads are not prefetched
 7     ``barrier-stalls``            barrier / shared-memory stalls, or reductions spread over too many warps
 8     ``hopper-no-tma``             a wgmma loop whose operand tiles come through pointers, not TMA (sm_90a)
 9     ``fp8-upcast``                an fp8 dot upcast to fp16 (target before sm_89, or K not a multiple of 32)
 9     ``fp8-transposed-operand``    an fp8 operand not K-major in memory (row-major B), staged byte by byte
 11    ``small-tiles``               tile configs outside the user's list that the target model (feed rate,
                                     waves, pipeline depth) expects >= 1.3x faster (``analyzer/space.py``)
 10    ``straggler-rank``            merged (torchrun) profiles: the slow rank, its scope and kernels, the
                                     collective the others waited in (a profile check, ``PROFILE_REGISTRY``)
=====  ============================  ========================================================================

A :class:`Diagnostic` carries a severity (``error`` > ``warning`` > ``info``; only warnings and errors
count as findings), the source line, the evidence in numbers, the fix in words, and ``changes``:
config deltas (``{"num_warps": 8}``, ``{"BLOCK_M": 64, "BLOCK_N": 64}``) that
:mod:`analyzer.suggest` turns into ``kernelc.Config`` candidates.
"""
from __future__ import annotations

from typing import List

from .diagnostic import SEVERITIES, SEVERITY_RANK, Check, Diagnostic  # noqa: F401 (the public names)


def _registry() -> List[tuple]:
    from . import barriers, fp8, latency, memory, sectors, spills, tensor_cores, tiles, tma, utilisation, wgmma
    return [
        (1, "no-tensor-cores", tensor_cores.check),
        (2, "hopper-no-wgmma", wgmma.check),
        (3, "low-utilisation", utilisation.check_grid),
        (3, "low-occupancy", utilisation.check_occupancy),
        (4, "uncoalesced-access", sectors.check),
        (4, "uncoalesced-access", memory.check),
        (5, "register-spills", spills.check),
        (6, "latency-bound-loop", latency.check),
        (7, "barrier-stalls", barriers.check),
        (8, "hopper-no-tma", tma.check),
        (9, "fp8-upcast", fp8.check_upcast),
        (9, "fp8-transposed-operand", fp8.check_transposed),
        (11, "small-tiles", tiles.check),
    ]


REGISTRY: List[tuple] = []


def _profile_registry() -> List[tuple]:
    from . import stragglers
    return [(10, "straggler-rank", stragglers.check_profile)]


PROFILE_REGISTRY: List[tuple] = []  # checks of a whole profile tree (not of one kernel's facts)


def profile_registry() -> List[tuple]:
    if not PROFILE_REGISTRY:
        PROFILE_REGISTRY.extend(_profile_registry())
    return PROFILE_REGISTRY


def run_profile(root, only: Optional[List[str]] = None) -> List[Diagnostic]:
    """The profile-level diagnostics of a profile tree, most severe first (a failing check is an
    info diagnostic, as in :func:`run`)."""
    out: List[Diagnostic] = []
    for number, ident, check in profile_registry():
        if only and ident not in only:
            continue
        try:
            out.extend(check(root))
        except Exception as e:
            out.append(Diagnostic("analyzer-error", number, f"check {ident} failed", "info",
                                  f"internal error in the {ident} check: {type(e).__name__}: {e}",
                                  "report this as an analyzer bug"))
    out.sort(key=lambda d: (SEVERITY_RANK.get(d.severity, 9), d.number))
    return out


def registry() -> List[tuple]:
    if not REGISTRY:
        REGISTRY.extend(_registry())
    return REGISTRY


def run(facts, only: Optional[List[str]] = None) -> List[Diagnostic]:
    """All diagnostics of a kernel, most severe first.  A check that fails is reported as an info
    diagnostic naming the failure rather than breaking the report."""
    out: List[Diagnostic] = []
    for number, ident, check in registry():
        if only and ident not in only:
            continue
        try:
            out.extend(check(facts))
        except Exception as e:  # a bug in one check must not hide the others
            out.append(Diagnostic("analyzer-error", number, f"check {ident} failed", "info",
                                  f"internal error in the {ident} check: {type(e).__name__}: {e}",
                                  "report this as an analyzer bug"))
    out.sort(key=lambda d: (SEVERITY_RANK.get(d.severity, 9), d.number, d.line or 0))
    return out
