"""The analysis report: terminal text (coloured with rich on a TTY, plain otherwise) and JSON.

JSON layout (``Report.to_json()``, ``kprof-analyze --json``), schema ``"kprof-analyze/1"``::

    {
      "schema": "kprof-analyze/1",
      "profile": "run.hatchet",                       # null for static analysis
      "total_time_ns": 24204000.0,                    # all kernels in the profile
      "kernels": [                                    # hot kernelc kernels, by time
        {
          "rank": 1, "name": "matmul_kernel",
          "time_ns": 8590000.0, "count": 10, "share": 0.355,     # share of total_time_ns (null if unknown)
          "grid": [2048, 1, 1], "programs": 2048,
          "num_warps": 8, "num_stages": 4, "constexprs": {"BLOCK_M": 128, ...},
          "cache_key": "77e0...",
          "artifacts": {"origin": "cache"|"recompiled"|"compiled"|"none", "target": "sm_90a",
                        "n_regs": 168, "n_spills": 0, "shared_bytes": 98304, "local_bytes": 0},
          "device": {"arch": "sm_90a", "num_sms": 132, "clock_khz": 1980000, "source": "profile"|"assumed"},
          "occupancy": {"blocks_per_sm", "limiter", "active_warps", "max_warps", "fraction", "by_warps",
                        "by_blocks", "by_registers", "by_shared", ...} | null,
          "roofline": {"bound": "compute"|"memory"|"latency"|"unknown", "flops", "bytes", "source": "launch_metadata"|
                       "static"|"static+footprint", "peak_flops", "peak_bytes_per_s", "engine", "intensity_flop_per_byte",
                       "ridge_flop_per_byte", [with a time:] "flops_pct_of_peak", "bytes_pct_of_peak",
                       "headroom_pct", ...} | null,
          "samples": {"total": 1580, "stalled": 1285, "stalls": {"long_scoreboard": 470, ...}},
          "hot_lines": [{"file", "line", "samples", "share", "stalled_share",
                         "stalls": [{"reason", "share"}], "hot_instruction", "source"}],
          "diagnostics": [{"id", "number",  # ordered by evidence.est_time_saved_share (biggest win first) "title", "severity": "error"|"warning"|"info", "message",
                           "file", "line", "source", "evidence": {...numbers...}, "fix",
                           "changes": [{...config delta...}], "basis": "static"|"samples"|"static+samples"}],
          "suggestions": [{"config", "changes", "fixes": [ids], "checked": {...}|null,
                           "kernelc_config": "kernelc.Config(...)", "override": "name:K=V,..."}],
          "autotune": "@kernelc.autotune(...)" | null,
          "notes": ["..."]
        }
      ],
      "other_kernels": [{"name", "time_ns", "count"}],  # not kernelc kernels (torch, cuBLAS)
      "notes": ["..."],
      "profile_diagnostics": [{...diagnostic...}],  # whole-profile checks, e.g. straggler-rank (merged profiles)
      "verification": [...],                         # only with --verify (see analyzer.verify)
      "tuning": [{"rank", "name", "rows", "winner", "best_speedup", "autotune", "skipped"}]
                                                     # only with --tune (analyzer.tune; also in each kernel)
    }
"""
from __future__ import annotations

import io
import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from profiler.textsafe import term_escape

from . import stalls as S
from .diagnostics import Diagnostic
from .facts import KernelFacts
from .lines import HotLine
from .occupancy import LIMIT_NAMES
from .suggest import Suggestion

SCHEMA = "kprof-analyze/1"

Seg = Tuple[str, Optional[str]]     # (text, rich style)

SEVERITY_STYLE = {"error": "bold red", "warning": "bold yellow", "info": "cyan"}


@dataclass
class KernelReport:
    rank: int
    facts: KernelFacts
    hot_lines: List[HotLine] = field(default_factory=list)
    diagnostics: List[Diagnostic] = field(default_factory=list)
    suggestions: List[Suggestion] = field(default_factory=list)
    autotune: str = ""
    roofline: Any = None               # analyzer.roofline.Roofline, None without counts
    tuning: Optional[Dict[str, Any]] = None   # --tune: analyzer.tune.tune()'s result for this kernel

    @property
    def name(self) -> str:
        return self.facts.name

    @property
    def findings(self) -> List[Diagnostic]:
        return [d for d in self.diagnostics if d.is_finding]

    def ids(self, findings_only: bool = True) -> List[str]:
        return [d.id for d in (self.findings if findings_only else self.diagnostics)]

    def to_json(self) -> dict:
        f = self.facts
        occ = f.occupancy
        target = getattr(getattr(f.compiled, "target", None), "arch", None)
        return {
            "rank": self.rank, "name": f.name, "time_ns": f.time_ns, "count": f.count,
            "share": round(f.share, 6) if f.share is not None else None,
            "grid": list(f.grid) if f.grid else None, "programs": f.num_programs,
            "num_warps": f.num_warps if f.launch_known else None,
            "num_stages": f.num_stages if f.launch_known else None,
            "constexprs": {k: v for k, v in f.constexprs.items() if _jsonable(v)},
            "cache_key": f.cache_key,
            "artifacts": {"origin": f.artifact_origin, "target": target, "n_regs": f.n_regs, "n_spills": f.n_spills,
                          "shared_bytes": f.shared, "local_bytes": f.local_bytes},
            "device": f.device.to_json(),
            "occupancy": occ.to_json() if occ else None,
            "roofline": self.roofline.to_json() if self.roofline is not None else None,
            "samples": {"total": f.total_samples, "stalled": f.total_stalled,
                        "stalls": dict(sorted(f.stall_totals.items(), key=lambda kv: -kv[1]))},
            "hot_lines": [h.to_json() for h in self.hot_lines],
            "diagnostics": [d.to_json() for d in self.diagnostics],
            "suggestions": [s.to_json(f.name) for s in self.suggestions],
            "autotune": self.autotune or None,
            "notes": list(f.notes),
            **({"tuning": self.tuning} if self.tuning is not None else {}),
        }


def _jsonable(v) -> bool:
    try:
        json.dumps(v)
        return True
    except (TypeError, ValueError):
        return False


@dataclass
class Report:
    kernels: List[KernelReport] = field(default_factory=list)
    profile: Optional[str] = None
    total_time_ns: float = 0.0
    other_kernels: List[Any] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    verification: Optional[List[Dict[str, Any]]] = None
    profile_diagnostics: List[Diagnostic] = field(default_factory=list)  # whole-profile checks (stragglers)
    tuning: Optional[List[Dict[str, Any]]] = None   # --tune: [{"rank", "name", **tune() result}] per kernel

    # -- queries ------------------------------------------------------------------------------
    def kernel(self, name: str) -> KernelReport:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(f"no kernel {name!r} in the report (kernels: {', '.join(k.name for k in self.kernels)})")

    @property
    def findings(self) -> List[Diagnostic]:
        return [d for d in self.profile_diagnostics if d.is_finding] + [d for k in self.kernels for d in k.findings]

    # -- JSON -----------------------------------------------------------------------------------
    def to_json(self) -> dict:
        out = {
            "schema": SCHEMA, "profile": self.profile, "total_time_ns": self.total_time_ns,
            "kernels": [k.to_json() for k in self.kernels],
            "other_kernels": [{"name": o.name, "time_ns": o.time_ns, "count": o.count} for o in self.other_kernels],
            "notes": list(self.notes),
            "profile_diagnostics": [d.to_json() for d in self.profile_diagnostics],
        }
        if self.verification is not None:
            out["verification"] = self.verification
        if self.tuning is not None:
            out["tuning"] = self.tuning
        return out

    def json_text(self) -> str:
        return json.dumps(self.to_json(), indent=2, default=str)

    # -- text -----------------------------------------------------------------------------------
    def lines(self, width: int = 100) -> List[List[Seg]]:
        return _render(self, width)

    def render(self, color: Optional[bool] = None, width: Optional[int] = None) -> str:
        """The report as text; ``color=None`` colours only when stdout is a terminal (and NO_COLOR is
        unset)."""
        if width is None:
            width = shutil.get_terminal_size((100, 24)).columns
        if color is None:
            color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        # Names, files and source lines come from the profile: every segment is escaped for the
        # terminal (term_escape), with or without colour.
        lines = [[(term_escape(t), s) for t, s in ln] for ln in self.lines(width)]
        if not color:
            return "\n".join("".join(t for t, _ in ln).rstrip() for ln in lines) + "\n"
        try:
            from rich.console import Console
            from rich.text import Text
        except ImportError:  # pragma: no cover - rich is a dependency
            return self.render(color=False, width=width)
        buf = io.StringIO()
        console = Console(file=buf, force_terminal=True, width=max(width, 40), highlight=False, soft_wrap=True)
        for ln in lines:
            console.print(Text.assemble(*[(t, s or "") for t, s in ln]))
        return buf.getvalue()

    def print(self, file=None, color: Optional[bool] = None) -> None:
        file = file or sys.stdout
        if color is None:
            color = file.isatty() and not os.environ.get("NO_COLOR") if hasattr(file, "isatty") else False
        file.write(self.render(color=color))


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"


def _kib(b: int) -> str:
    return f"{b / 1024:.1f} KiB" if b >= 1024 else f"{b} B"


def _wrap(text: str, width: int, indent: int) -> List[str]:
    import textwrap
    return textwrap.wrap(text, max(30, width - indent), break_long_words=False, break_on_hyphens=False) or [""]


def _render(rep: Report, width: int) -> List[List[Seg]]:
    out: List[List[Seg]] = []

    def line(*segs: Seg):
        out.append(list(segs))

    head = "kprof-analyze"
    if rep.profile:
        head += f"  {rep.profile}"
    parts = []
    if rep.kernels:
        parts.append(f"{len(rep.kernels)} kernelc kernel{'s' if len(rep.kernels) != 1 else ''}")
    if rep.total_time_ns:
        parts.append(f"{_ms(rep.total_time_ns)} GPU time in total")
    if rep.kernels:
        d = rep.kernels[0].facts.device
        parts.append(f"device {d.arch}, {d.num_sms} SMs{' (assumed)' if d.source == 'assumed' else ''}")
    line((head, "bold"), ("  |  " + "  |  ".join(parts) if parts else "", None))
    for n in rep.notes:
        line(("note: ", "dim"), (n, "dim"))
    for d in rep.profile_diagnostics:
        _render_profile_diagnostic(d, line, width)
    if not rep.kernels:
        line(("no kernelc kernels to analyse", "yellow"))
    for k in rep.kernels:
        _render_kernel(k, line, width)
    if rep.other_kernels:
        line(("", None))
        names = ", ".join(f"{o.name[:60]} ({_ms(o.time_ns)})" for o in rep.other_kernels[:5])
        more = f" and {len(rep.other_kernels) - 5} more" if len(rep.other_kernels) > 5 else ""
        line(("not kernelc kernels (no artifacts, not analysed): ", "dim"), (names + more, "dim"))
    if rep.verification is not None:
        _render_verification(rep.verification, line)
    return out


def _render_profile_diagnostic(d: Diagnostic, line, width: int) -> None:
    line(("", None))
    line((f"{d.severity}: ", SEVERITY_STYLE.get(d.severity)), (f"[{d.id}] {d.title}", "bold"))
    for i, w in enumerate(_wrap(d.message, width, 8)):
        line(("    " if i else "    ", None), (w, None))
    if d.is_finding:
        for i, w in enumerate(_wrap(d.fix, width, 10)):
            line(("    fix: " if i == 0 else "         ", "green"), (w, None))


def _render_kernel(k: KernelReport, line, width: int) -> None:
    f = k.facts
    line(("", None))
    share = f" ({100 * f.share:.1f}% of GPU time)" if f.share is not None else ""
    timing = ""
    if f.time_ns:
        timing = f"  {_ms(f.time_ns)}{share}, {f.count} launch{'es' if f.count != 1 else ''}"
        if f.count:
            timing += f", {f.time_ns / f.count / 1e3:.1f} us each"
    line((f"[{k.rank}] ", "bold"), (f.name, "bold magenta"), (timing, None))
    cfg = []
    if f.grid:
        cfg.append(f"grid {'x'.join(map(str, f.grid))} ({f.num_programs} programs)")
    if f.launch_known:
        cfg.append(f"warps {f.num_warps}")
        cfg.append(f"stages {f.num_stages}")
    cx = ", ".join(f"{a}={b!r}" if isinstance(b, str) else f"{a}={b}" for a, b in f.constexprs.items())
    if cx:
        cfg.append(cx)
    if cfg:
        line(("    launch: ", "dim"), (", ".join(cfg), None))
    if f.compiled is not None:
        target = getattr(getattr(f.compiled, "target", None), "arch", "?")
        origin = {"cache": f"from the kernel cache ({str(f.cache_key)[:12]})", "recompiled": "recompiled from source",
                  "compiled": "compiled"}.get(f.artifact_origin, f.artifact_origin)
        res = f"{target} {origin}; {f.n_regs} registers, {f.n_spills} spill bytes, {_kib(f.shared)} shared memory"
        occ = f.occupancy
        if occ:
            res += (f"; occupancy {occ.active_warps}/{occ.max_warps} warps per SM ({100 * occ.fraction:.0f}%, "
                    f"{LIMIT_NAMES[occ.limiter]})")
        line(("    build : ", "dim"), (res, None))
    if k.roofline is not None:
        for i, w in enumerate(_wrap(_roofline_text(k.roofline), width, 14)):
            line(("    roofline: " if i == 0 else "              ", "dim"), (w, None))
    for n in f.notes:
        for i, w in enumerate(_wrap(n, width, 12)):
            line(("    note: " if i == 0 else "          ", "dim"), (w, "dim"))
    if k.hot_lines:
        stalled = f", {100 * f.total_stalled / f.total_samples:.0f}% stalled" if f.total_samples else ""
        line(("    hottest lines ", "bold"), (f"({f.total_samples:.0f} samples{stalled}):", None))
        rows = [("line", "samples", "%", "top stalls", "hot instruction", "source")]
        for h in k.hot_lines:
            stalls = ", ".join(f"{r} {100 * s:.0f}%" for r, s in h.top_stalls)
            loc = str(h.line) if f.source is None or h.file == os.path.basename(f.source.get("file") or "") \
                else f"{h.file}:{h.line}"
            text = (h.text or "").strip()
            if h.via:
                text = (f"(inlined into line {', '.join(str(ln) for _, ln in h.via)}) " + text).strip()
            rows.append((loc, f"{h.samples:.0f}", f"{100 * h.share:.1f}", stalls, h.hot_instruction or "", text))
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        for j, r in enumerate(rows):
            cells = [r[0].rjust(widths[0]), r[1].rjust(widths[1]), r[2].rjust(widths[2]), r[3].ljust(widths[3]),
                     r[4].ljust(widths[4])]
            style = "dim" if j == 0 else None
            line(("      " + "  ".join(cells) + "  ", style), (r[5], "dim" if j == 0 else "green"))
        reasons = list(dict.fromkeys(r for h in k.hot_lines for r, _ in h.top_stalls))
        for i, r in enumerate(reasons):
            for jj, w in enumerate(_wrap(f"{r}: {S.meaning(r)}", width, 14)):
                line(("      stalls: " if i == 0 and jj == 0 else "              ", "dim"), (w, "dim"))
    elif f.total_samples == 0 and not any("was sampled" in n for n in f.notes):
        line(("    no PC samples in the profile (run with kprof -m pcsampling for per-line stalls)", "dim"))
    if k.diagnostics:
        line(("    diagnostics:", "bold"))
        for d in k.diagnostics:
            sev = d.severity.upper()
            loc = f"  {d.location}" if d.location else ""
            line(("      ", None), (f"{sev:<7}", SEVERITY_STYLE.get(d.severity)), (f" {d.id}", "bold"),
                 (f" ({d.number}. {d.title}){loc}", "dim"))
            for w in _wrap(d.message, width, 14):
                line(("              ", None), (w, None))
            if d.source:
                line(("              > ", "dim"), (d.source.strip(), "green"))
            if d.evidence:
                ev = ", ".join(f"{a}={_fmt_ev(b)}" for a, b in d.evidence.items() if not isinstance(b, (list, dict)))
                for i, w in enumerate(_wrap(ev, width, 24)):
                    line(("              evidence: " if i == 0 else "                        ", "dim"), (w, "dim"))
            for i, w in enumerate(_wrap(d.fix, width, 19)):
                line(("              fix: " if i == 0 else "                   ", "bold green" if i == 0 else None),
                     (w, None))
    else:
        line(("    diagnostics: ", "bold"), ("no problems found", "green"))
    if k.suggestions:
        checked = any(s.checked for s in k.suggestions)
        target = next((s.checked.get("target") for s in k.suggestions if s.checked), None)
        note = f" (each compiled for {target} and re-checked)" if checked else " (not compiled: source not importable)"
        line(("    suggested configs", "bold"), (note + ":", "dim"))
        for t in k.autotune.splitlines():
            line(("      ", None), (t, "cyan"))
        line(("    try one without editing the code: ", "dim"),
             (f"KERNELC_OVERRIDE='{k.suggestions[0].override(f.name)}' python your_script.py", None))


def _roofline_text(r) -> str:
    src = {"launch_metadata": "launch metadata",
           "static+footprint": "FLOPs: static count x grid; bytes: the recorded tensors' compulsory DRAM traffic"}.get(
        r.source, "static count x grid, masks as all-true")
    if r.time_s and r.flops_lower_bound and r.bound == "unknown":
        return (f"bound not known: at least {r.flops / r.time_s / 1e12:.3g} TFLOP/s (>= {100 * r.flops_fraction:.1f}% "
                f"of {r.peak_flops / 1e12:.0f} on {r.engine}; a dot's loop trips were not counted), "
                f"{r.bytes / r.time_s / 1e12:.3g} TB/s ({100 * r.bytes_fraction:.1f}% of "
                f"{r.peak_bytes_per_s / 1e12:.2f}) ({src})")
    if r.time_s:
        return (f"{r.bound}-bound: {r.flops / r.time_s / 1e12:.3g} TFLOP/s ({100 * r.flops_fraction:.1f}% of "
                f"{r.peak_flops / 1e12:.0f} on {r.engine}), {r.bytes / r.time_s / 1e12:.3g} TB/s "
                f"({100 * r.bytes_fraction:.1f}% of {r.peak_bytes_per_s / 1e12:.2f}); headroom "
                + (f"{100 * r.headroom:.0f}%" if r.headroom is not None else "not known (FLOPs a lower bound)")
                + f" ({src})")
    if r.flops_lower_bound and r.bound == "unknown":
        return (f"bound not known: intensity at least {r.intensity:.3g} FLOP/byte vs ridge {r.ridge:.3g} (a dot's loop "
                f"trips were not counted; {src})")
    return (f"{r.bound}-bound by intensity: {r.intensity:.3g} FLOP/byte vs ridge {r.ridge:.3g} "
            f"({r.peak_flops / 1e12:.0f} TFLOP/s on {r.engine} / {r.peak_bytes_per_s / 1e12:.2f} TB/s; {src})")


def _fmt_ev(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _render_verification(rows: List[Dict[str, Any]], line) -> None:
    line(("", None))
    line(("verification ", "bold"), ("(the script re-run with each config forced through KERNELC_OVERRIDE):", "dim"))
    table = [("kernel", "config", "time/launch", "speedup", "status")]
    for r in rows:
        t = r.get("time_per_launch_ns")
        sp = r.get("speedup")
        table.append((r.get("kernel", ""), r.get("label", ""), f"{t / 1e3:.1f} us" if t else "-",
                      f"{sp:.2f}x" if sp else "-", r.get("status", "")))
    widths = [max(len(str(x[i])) for x in table) for i in range(5)]
    for j, r in enumerate(table):
        line(("  " + "  ".join(str(c).ljust(w) for c, w in zip(r, widths)), "dim" if j == 0 else None))
