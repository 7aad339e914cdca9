"""Turn diagnostics into concrete ``kernelc.Config`` candidates and a ready-to-paste autotune block.

Each finding (warning or error) proposes config deltas (``Diagnostic.changes``).  Candidates are
the profiled config with one delta applied, plus one combining the first delta of every finding.
When the kernel's source can be imported, every candidate is compiled for the analysed target on
the CPU and checked: it must compile (fit in shared memory, ...) and the static diagnostics are run
on the result, so a candidate that keeps the problem it was meant to fix ranks last and the report
can say "checked: 28 registers, no spills, 100 % occupancy".

Example::

    sugg = suggest(facts, diags)
    print(autotune_block(facts, sugg))
    # @kernelc.autotune(
    #     configs=[
    #         kernelc.Config({"BLOCK": 2048}, num_warps=4, num_stages=1),  # fixes low-occupancy
    #         kernelc.Config({"BLOCK": 2048}, num_warps=1, num_stages=1),  # the profiled config
    #     ],
    #     key=["n"],
    # )
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .diagnostics import Diagnostic
from .facts import KernelFacts

MAX_CONFIGS = 4
VALIDATE_BUDGET_S = 20.0


@dataclass
class Suggestion:
    config: Dict[str, Any]                 # tile constexprs + num_warps + num_stages
    changes: Dict[str, Any]                # the delta from the profiled config
    fixes: List[str] = field(default_factory=list)      # diagnostic ids it addresses
    checked: Optional[Dict[str, Any]] = None            # result of compiling it (None: not checked)

    @property
    def kwargs(self) -> Dict[str, Any]:
        return {k: v for k, v in self.config.items() if k not in ("num_warps", "num_stages")}

    def kernelc_config(self) -> str:
        kw = ", ".join(f"{k!r}: {v!r}" for k, v in self.kwargs.items()).replace("'", '"')
        return (f"kernelc.Config({{{kw}}}, num_warps={self.config.get('num_warps', 4)}, "
                f"num_stages={self.config.get('num_stages', 3)})")

    def override(self, kernel: str) -> str:
        """The ``KERNELC_OVERRIDE`` value forcing this config on ``kernel``."""
        from kernelc.runtime.override import format_override
        return format_override(kernel, self.config)

    def make_config(self):
        import kernelc
        return kernelc.Config(self.kwargs, num_warps=self.config.get("num_warps", 4),
                              num_stages=self.config.get("num_stages", 3))

    def to_json(self, kernel: str) -> dict:
        return {"config": self.config, "changes": self.changes, "fixes": self.fixes, "checked": self.checked,
                "kernelc_config": self.kernelc_config(), "override": self.override(kernel)}


def _apply(base: Dict[str, Any], delta: Dict[str, Any]) -> Dict[str, Any]:
    out = dict(base)
    out.update(delta)
    return out


def candidates(facts: KernelFacts, diags: List[Diagnostic]) -> List[Suggestion]:
    """Unchecked candidates, most promising first."""
    current = facts.config()
    findings = [d for d in diags if d.is_finding and d.changes]
    out: List[Suggestion] = []

    def add(delta: Dict[str, Any], fixes: List[str]):
        cfg = _apply(current, delta)
        if cfg == current:
            return
        for s in out:
            if s.config == cfg:
                for f in fixes:
                    if f not in s.fixes:
                        s.fixes.append(f)
                return
        out.append(Suggestion(cfg, {k: v for k, v in cfg.items() if current.get(k) != v}, list(fixes)))

    if len(findings) > 1:
        merged: Dict[str, Any] = {}
        ids: List[str] = []
        for d in findings:  # most severe first: its values win on conflicts
            for k, v in d.changes[0].items():
                merged.setdefault(k, v)
            if d.id not in ids:
                ids.append(d.id)
        add(merged, ids)
    depth = max((len(d.changes) for d in findings), default=0)
    for i in range(depth):
        for d in findings:
            if i < len(d.changes):
                add(d.changes[i], [d.id])
    return out


def _grid_after(facts: KernelFacts, cfg: Dict[str, Any]):
    if not facts.grid:
        return None
    from .diagnostics._util import grid_constexprs
    p = facts.num_programs
    scale = 1.0
    for name in grid_constexprs(facts):
        old, new = facts.constexprs.get(name), cfg.get(name)
        if isinstance(old, int) and isinstance(new, int) and new:
            scale *= old / new
    return (max(1, int(round(p * scale))), 1, 1)


def check(facts: KernelFacts, s: Suggestion, target: str) -> Dict[str, Any]:
    """Compile a candidate on the CPU and run the static diagnostics on it."""
    import kernelc
    from . import diagnostics as D
    from .facts import facts_from_compiled
    from .load import specialization
    fn = facts.function
    cx = dict(facts.constexprs)
    cx.update(s.kwargs)
    div, eq1, _known = specialization(facts, {})
    t0 = time.perf_counter()
    try:
        ck = kernelc.compile(fn, signature=dict(facts.signature), constexprs=cx, target=target,
                             num_warps=int(s.config.get("num_warps", 4)), num_stages=int(s.config.get("num_stages", 3)),
                             divisibility=div, equal_to_1=eq1)
    except Exception as e:
        return {"ok": False, "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
    f2 = facts_from_compiled(ck, grid=_grid_after(facts, s.config), device=facts.device, function=fn, name=facts.name)
    f2.arg_values = dict(facts.arg_values)
    remaining = [d.id for d in D.run(f2) if d.is_finding]
    occ = f2.occupancy
    engines = sorted({d.get("engine") for d in f2.dots if d.get("engine")})
    return {"ok": True, "target": target, "n_regs": f2.n_regs, "n_spills": f2.n_spills, "shared_bytes": f2.shared,
            "occupancy": round(occ.fraction, 4) if occ else None, "dot_engines": engines,
            "remaining": remaining, "fixed": [i for i in s.fixes if i not in remaining],
            "compile_s": round(time.perf_counter() - t0, 3)}


def suggest(facts: KernelFacts, diags: List[Diagnostic], *, validate: bool = True,
            max_configs: int = MAX_CONFIGS, budget_s: float = VALIDATE_BUDGET_S) -> List[Suggestion]:
    """Config suggestions for a kernel (checked by compiling them when ``validate`` and the kernel's
    source is importable)."""
    cands = candidates(facts, diags)
    if not cands:
        return []
    cands = cands[: max(max_configs * 2, max_configs)]
    fn = None
    if validate and facts.signature:
        from .load import kernel_function
        fn = kernel_function(facts)
        if fn is None and facts.import_refusal:
            facts.notes.append(f"suggested configs not compile-checked: {facts.import_refusal}")
    if fn is None:
        return cands[:max_configs]
    target = getattr(getattr(facts.compiled, "target", None), "arch", None) or facts.device.arch
    t_end = time.perf_counter() + budget_s
    kept: List[Suggestion] = []
    for s in cands:
        if time.perf_counter() > t_end:
            kept.append(s)
            continue
        s.checked = check(facts, s, target)
        if s.checked.get("ok") and s.fixes and not s.checked.get("fixed"):
            continue        # compiled, it still has every problem it was meant to fix
        if s.checked.get("ok") and s.checked.get("n_spills") and not facts.n_spills:
            facts.notes.append(f"suggested config {s.changes} dropped: it spills {s.checked['n_spills']} bytes "
                               f"on {target}")
            continue        # a new config must not trade the problem for spills
        if s.checked.get("ok"):
            kept.append(s)
        else:
            facts.notes.append(f"suggested config {s.changes} dropped: it does not compile for {target} "
                               f"({s.checked.get('error')})")

    from .diagnostics._util import is_tensor_core_kernel
    latency_hidden_by_warps = not is_tensor_core_kernel(facts)

    def rank(item):
        i, s = item
        c = s.checked or {}
        if not c:
            return (1, 0, 0, 0.0, i)
        unfixed = len([x for x in s.fixes if x in c.get("remaining", [])])
        occ = -(c.get("occupancy") or 0.0) if latency_hidden_by_warps else 0.0
        return (0 if unfixed == 0 else 2, len(c.get("remaining", [])), c.get("n_spills") or 0, occ, i)

    kept = [s for _, s in sorted(enumerate(kept), key=rank)]
    return kept[:max_configs]


def autotune_key(facts: KernelFacts) -> List[str]:
    """Size-like integer arguments (not strides, not pointers) for ``autotune(key=...)``."""
    keys = []
    for name, ty in facts.signature.items():
        t = str(ty)
        if t.startswith("*") or not t.startswith(("i", "u")) or t == "i1":
            continue
        if "stride" in name.lower():
            continue
        keys.append(name)
    return keys


def autotune_block(facts: KernelFacts, suggestions: List[Suggestion], *, include_current: bool = True) -> str:
    """``@kernelc.autotune(configs=[kernelc.Config(...), ...], key=[...])`` as Python text."""
    if not suggestions:
        return ""
    lines = ["@kernelc.autotune(", "    configs=["]
    for s in suggestions:
        note = ", ".join(s.fixes) if s.fixes else "suggested"
        c = s.checked or {}
        if c.get("ok"):
            extra = f"{c.get('n_regs')} regs, {c.get('n_spills')} spill bytes"
            if c.get("occupancy") is not None:
                extra += f", occupancy {100 * c['occupancy']:.0f}%"
            note += f" (checked: {extra})"
        lines.append(f"        {s.kernelc_config()},  # fixes {note}")
    if include_current:
        cur = Suggestion(facts.config(), {}, [])
        if all(s.config != cur.config for s in suggestions):
            lines.append(f"        {cur.kernelc_config()},  # the profiled config")
    lines.append("    ],")
    keys = autotune_key(facts)
    lines.append(f"    key={keys!r},".replace("'", '"'))
    lines.append(")")
    return "\n".join(lines)
