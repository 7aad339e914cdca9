"""analyzer: what is wrong with a kernel, on which line, and which configs to try.

Reads a kprof (or Proton) profile and the kernels' compiled artifacts (the kernelc disk cache entry
named in the profile or bundled next to it, or, when asked, a recompilation from the kernel's source),
and reports per hot kernel:
the hottest source lines with their stall reasons, diagnostics with evidence and a fix, and
``kernelc.Config`` suggestions as a ready-to-paste ``@kernelc.autotune`` block.

API::

    import analyzer
    rep = analyzer.analyze("run.hatchet", kernel="matmul", arch="sm_90a")
    print(rep.render())                  # terminal text (rich colours on a TTY)
    data = rep.to_json()                 # the JSON layout documented in analyzer.report
    rep.kernels[0].findings              # warnings and errors (Diagnostic objects)

    ck = kernelc.compile(kernel, signature=..., constexprs=..., target="sm_90a")
    rep = analyzer.analyze_compiled(ck, grid=(4, 1, 1))    # static analysis, no profile

Command line: ``kprof-analyze profile.hatchet [--kernel REGEX] [--json] [--arch sm_90a] [--verify script.py]``.
"""
from __future__ import annotations

import re
from typing import Optional

from .diagnostics import Diagnostic, SEVERITIES
from .facts import Device, KernelFacts, facts_from_compiled
from .report import KernelReport, Report, SCHEMA
from .suggest import Suggestion, autotune_block, suggest

__all__ = ["analyze", "analyze_compiled", "analyze_facts", "Report", "KernelReport", "KernelFacts", "Diagnostic",
           "Suggestion", "Device", "SEVERITIES", "SCHEMA", "AnalyzerError"]


class AnalyzerError(ValueError):
    """Bad input (unreadable profile, no matching kernel); the message is one line."""


def _unsampled_note(sampler: dict, metrics: Optional[dict] = None) -> str:
    n = float((metrics or {}).get("num_samples") or 0)
    if n > 0:
        # samples on the kernel frame but none on lines: code without a line table (cuDNN, cuBLAS, torch)
        stalls = sorted(((k[len("stalled_"):], float(v)) for k, v in (metrics or {}).items()
                         if k.startswith("stalled_") and isinstance(v, (int, float)) and v > 0), key=lambda kv: -kv[1])
        stalled = float((metrics or {}).get("num_stalled_samples") or 0)
        top = ", ".join(f"{k} {100 * v / n:.0f}%" for k, v in stalls[:3])
        return (f"the kernel was sampled ({n:.0f} samples, {100 * stalled / n:.0f}% stalled"
                + (f"; top stall reasons: {top}" if top else "") + ") but its code has no line table (a library "
                "kernel built without line info), so the samples cannot be put on source lines")
    warned = [str(w) for w in sampler.get("warnings") or [] if "overflow" in str(w) or "lost" in str(w)]
    return ("the profile was sampled (kprof -m pcsampling) but has no samples for this kernel"
            + (f"; the sampler warned: {warned[0]}" if warned else
               "; it may have run too briefly for the sampling period, or its samples were dropped"))


def analyze_facts(facts: KernelFacts, *, rank: int = 1, validate: bool = True, n_lines: int = 8) -> KernelReport:
    """Diagnostics, hot lines and suggestions for one kernel's facts."""
    from . import diagnostics as D
    from .lines import hot_lines
    from .ranking import rank as by_saving
    from .roofline import roofline
    rl = roofline(facts)
    diags = by_saving(facts, D.run(facts), rl)
    sugg = suggest(facts, diags, validate=validate)
    return KernelReport(rank, facts, hot_lines(facts, n_lines), diags, sugg, autotune_block(facts, sugg), rl)


def analyze_compiled(compiled, *, grid=None, device: Optional[Device] = None, function=None,
                     validate: bool = True) -> Report:
    """Static analysis of a :class:`kernelc.compiler.artifact.CompiledKernel` (no profile needed)."""
    facts = facts_from_compiled(compiled, grid=grid, device=device, function=function)
    return Report(kernels=[analyze_facts(facts, validate=validate)])


def analyze(profile_path: str, kernel: Optional[str] = None, arch: Optional[str] = None, *, top: int = 5,
            validate: bool = True, n_lines: int = 8, min_share: float = 0.0, source_policy=None) -> Report:
    """Analyse the hot kernelc kernels of a profile.

    ``kernel`` is a regular expression on kernel names (``re.search``, case-insensitive);
    ``arch`` (``"sm_90a"``) is the target to analyse for: artifacts built for another target are
    recompiled, and a kernel whose cache entry is gone is recompiled for it; ``top`` limits the
    number of kernels (ranked by GPU time); ``validate`` compiles each suggested config on the CPU to
    check it.  Raises :class:`AnalyzerError` for an unreadable profile or a pattern that matches
    nothing.  ``source_policy`` (:class:`analyzer.load.SourcePolicy`) says whether a kernel's source
    file may be imported to recompile it; by default nothing is imported (no user code runs).
    """
    from profiler.format import ProfileFormatError
    from . import load as LD
    try:
        root, device_info = LD.read(profile_path)
    except ProfileFormatError as e:
        raise AnalyzerError(str(e)) from None
    if arch:
        try:
            from cubintools.target import parse_target
            parse_target(arch)
        except ValueError as e:
            raise AnalyzerError(f"--arch {arch!r}: {e}") from None
    groups, others, total = LD.kernel_groups(root)
    rep = Report(profile=str(profile_path), total_time_ns=total, other_kernels=others)
    from . import diagnostics as D
    rep.profile_diagnostics = D.run_profile(root)
    if kernel:
        try:
            pat = re.compile(kernel, re.IGNORECASE)
        except re.error as e:
            raise AnalyzerError(f"--kernel {kernel!r} is not a valid regular expression: {e}") from None
        matched = [g for g in groups if pat.search(g.name)]
        if not matched:
            names = sorted({g.name for g in groups})
            raise AnalyzerError(f"--kernel {kernel!r} matches none of the profile's kernelc kernels "
                                f"({', '.join(names) if names else 'none'})")
        groups = matched
        rep.other_kernels = [o for o in others if pat.search(o.name)]
    if not groups and not rep.profile_diagnostics:
        rep.notes.append("the profile has no kernelc kernel frames (kprof frames with a 'kprof' kernel record, or "
                         "sampled kernels)")
    selected = [g for g in groups if not total or g.time_ns / total >= min_share] if min_share else groups
    if top and len(selected) > top:
        rep.notes.append(f"showing the {top} hottest of {len(selected)} kernelc kernels (--top)")
        selected = selected[:top]
    sampler = (root.extra or {}).get("pcsampling") if isinstance(root.extra, dict) else None
    for i, g in enumerate(selected, 1):
        dev = LD.device_for(device_info, g.device_id, arch)
        facts = LD.build_facts(g, dev, arch=arch, total_ns=total, source_policy=source_policy or LD.NO_IMPORT,
                               profile_path=str(profile_path))
        if isinstance(sampler, dict) and not facts.total_samples:
            # a sampled profile in which this kernel got no samples: say why, not "run with pcsampling"
            frame_samples: dict = {}   # samples CUPTI put on the kernel frames themselves (no line children)
            for f in g.frames:
                for k, v in f.metrics.items():
                    if (k in ("num_samples", "num_stalled_samples") or str(k).startswith("stalled_")) \
                            and isinstance(v, (int, float)):
                        frame_samples[k] = frame_samples.get(k, 0) + v
            facts.notes.append(_unsampled_note(sampler, frame_samples))
        rep.kernels.append(analyze_facts(facts, rank=i, validate=validate, n_lines=n_lines))
    return rep
