"""``kprof-analyze --html FILE``: the viewer's HTML report with the analysis on each kernel page.

The page itself is :mod:`profiler.viewer.html_report`; this module only turns each analysed kernel
(:class:`~analyzer.report.KernelReport`) into the ``analysis`` entries it shows: diagnostics with
their evidence, the ``@kernelc.autotune`` block, the build facts with occupancy, and the full SASS
listing from the artifacts (the profile itself stores only the sampled instructions).
"""
from __future__ import annotations

from typing import Any, Dict, List

from .occupancy import LIMIT_NAMES
from .report import KernelReport, Report


def _label(k: KernelReport) -> str:
    f = k.facts
    parts = [f"warps {f.num_warps}", f"stages {f.num_stages}"] if f.launch_known else []
    parts += [f"{a}={b}" for a, b in f.tile_constexprs().items()]
    return ", ".join(parts)


def kernel_entry(k: KernelReport) -> Dict[str, Any]:
    """One analysed kernel variant as the page's ``analysis`` entry."""
    f = k.facts
    j = k.to_json()
    occ = f.occupancy
    facts: Dict[str, Any] = {"num_warps": j["num_warps"], "num_stages": j["num_stages"],
                             "target": j["artifacts"]["target"], "origin": f.artifact_origin,
                             "constexprs": j["constexprs"]}
    if f.compiled is not None or f.n_regs:  # without artifacts these are unknown, not 0
        facts.update(n_regs=f.n_regs, n_spills=f.n_spills, shared=f.shared)
    if f.grid:
        facts["grid"] = list(f.grid)
    if occ:
        facts["occupancy"] = (f"{occ.active_warps}/{occ.max_warps} warps per SM ({100 * occ.fraction:.0f}%, "
                              f"limited by {LIMIT_NAMES[occ.limiter]})")
    sass = [{"pc": int(i.pc), "text": i.text, "file": i.file, "line": i.line, "samples": 0, "stalls": {}}
            for i in f.sass]
    override = k.suggestions[0].override(f.name) if k.suggestions else None
    return {"label": _label(k), "rank": k.rank, "facts": facts, "notes": list(f.notes),
            "diagnostics": j["diagnostics"], "autotune": k.autotune or None, "override": override,
            "sass": sass}


def analysis_entries(rep: Report) -> Dict[str, List[Dict[str, Any]]]:
    """Kernel name -> its analysed variants, hottest first (the order of the report)."""
    out: Dict[str, List[Dict[str, Any]]] = {}
    for k in rep.kernels:
        out.setdefault(k.name, []).append(kernel_entry(k))
    return out


def write_html_report(path: str, rep: Report) -> str:
    """Write the HTML report of ``rep.profile`` with the analysis; returns the path."""
    from profiler.viewer import html_report, tree
    profile = tree.load(rep.profile)
    return html_report.write_report(path, profile, analysis=analysis_entries(rep), tool="kprof-analyze",
                                    notes=rep.notes)
