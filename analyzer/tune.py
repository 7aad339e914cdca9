"""``kprof-analyze --tune``: time the current and the suggested configs on synthetic inputs shaped like
the profiled launch, without re-running the user's program.

The launch hook records every argument (tensors: dtype, shape, strides; scalars: value) and the grid.
:func:`synthetic_args` rebuilds them: float tensors ``randn``, integer and boolean tensors zeros (index
tensors then point at element 0 and masks stay in range), scalars as recorded, the same strides.  A
candidate that changes the constexprs the grid is computed from gets the recorded grid scaled by the
tile ratio along a 1-D grid; on a multi-dimensional grid such candidates are skipped (the grid function
is not recorded).  The candidates are the report's suggestions plus, for a tensor-core kernel with tile
constexprs, :func:`analyzer.space.tune_space` (the usual Hopper configs and the model's best, compiled on
the CPU first, spilling ones dropped).  Each config is launched through the kernel's ``@jit`` function
and timed with ``kernelc.testing.do_bench`` (median); results are rows, the best speedup and the
winning ``@kernelc.autotune`` block.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from .facts import KernelFacts

_TORCH_DTYPES = {"float16": "float16", "bfloat16": "bfloat16", "float32": "float32", "float64": "float64",
                 "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8",
                 "bool": "bool", "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2"}


class TuneError(ValueError):
    """The launch cannot be replayed (an argument was not recorded); the message names it."""


def synthetic_args(facts: KernelFacts, device: str = "cuda", seed: int = 0) -> List[Any]:
    import torch
    rec = {a.get("name"): a for a in facts.launch_args}
    g = torch.Generator(device="cpu").manual_seed(seed)
    out = []
    for name, ty in facts.signature.items():
        a = rec.get(name)
        if a is None:
            raise TuneError(f"argument {name!r} of {facts.name} is not recorded in the profile (re-profile with "
                            "this kprof version to record argument shapes)")
        kind = a.get("kind")
        if kind == "tensor":
            dt = getattr(torch, _TORCH_DTYPES.get(str(a.get("dtype")), str(a.get("dtype"))), None)
            if dt is None:
                raise TuneError(f"argument {name!r}: unknown dtype {a.get('dtype')!r}")
            shape = [int(x) for x in a.get("shape") or []]
            strides = a.get("strides")
            if strides is None:   # recorded before strides were: contiguous
                strides, acc = [], 1
                for s in reversed(shape):
                    strides.insert(0, acc)
                    acc *= max(1, s)
            size = 1 + sum((s - 1) * st for s, st in zip(shape, strides)) if all(shape) else 0
            if dt.is_floating_point:
                base = torch.randn(size, generator=g).to(dt)
            else:
                base = torch.zeros(size, dtype=dt)
            out.append(base.to(device).as_strided(shape, [int(x) for x in strides]))
        elif kind in ("int", "float", "bool"):
            out.append(a.get("value"))
        else:
            raise TuneError(f"argument {name!r} of kind {kind!r} cannot be synthesised")
    return out


def grid_for(facts: KernelFacts, cfg: Dict[str, Any]) -> Optional[Tuple[int, ...]]:
    """The recorded grid for ``cfg`` (None when the candidate changes a multi-dimensional grid)."""
    from .diagnostics._util import grid_constexprs
    grid = tuple(facts.grid or (1, 1, 1))
    names = [n for n in grid_constexprs(facts) if cfg.get(n) != facts.constexprs.get(n)]
    if not names:
        return grid
    if any(x > 1 for x in grid[1:]):
        return None
    from . import space as SP
    dn = SP.dot_tile_names(facts)
    if dn and set(names) <= {dn["M"], dn["N"]} and SP.sizes_known(facts, dn):
        # the recorded grid is cdiv(M, BM) * cdiv(N, BN) (grid_constexprs matched it): exact for any tile
        return (int(SP.problem_programs(facts, dn, cfg[dn["M"]], cfg[dn["N"]])), 1, 1)
    scale = 1.0
    for n in names:
        scale *= facts.constexprs[n] / cfg[n]
    return (max(1, int(round(grid[0] * scale))), 1, 1)


def candidates(facts: KernelFacts, suggestions, *, space: bool = True, n: Optional[int] = None,
               pruned: Optional[List[Dict[str, Any]]] = None) -> List[Any]:
    """The suggestions, then the compiled :func:`analyzer.space.tune_space` candidates not among them
    (``pruned`` collects rows for those dropped by the compile: spills, too much shared memory)."""
    from . import space as SP
    from .suggest import Suggestion
    out = list(suggestions)
    if not space:
        return out
    seen = [s.config for s in out] + [facts.config()]
    cur = facts.config()
    dropped: List[Any] = []
    kept = SP.tune_space(facts, dropped=dropped, **({"n": n} if n is not None else {}))
    for c in dropped:
        if pruned is not None:
            ch = c.checked or {}
            why = (f"spills {ch.get('n_spills')} bytes" if ch.get("ok") else ch.get("error"))
            pruned.append({"config": dict(cur, **c.config), "status": f"pruned on the CPU: {why}",
                           "from": ["tune-space"], "checked": ch})
    for c in kept:
        cfg = dict(cur, **c.config)
        if cfg in seen:
            continue
        seen.append(cfg)
        out.append(Suggestion(cfg, {k: v for k, v in cfg.items() if cur.get(k) != v}, ["tune-space"], c.checked))
    return out


def tune(facts: KernelFacts, suggestions, *, device: str = "cuda", space: bool = True) -> Dict[str, Any]:
    """{"rows": [...], "winner": config | None, "best_speedup": x | None, "autotune": text,
    "skipped": reason | None}; ``space`` adds :func:`analyzer.space.tune_space`'s candidates."""
    try:
        import torch
        has_gpu = torch.cuda.is_available()
    except ImportError:
        has_gpu = False
    if not has_gpu:
        return {"rows": [], "winner": None, "autotune": "",
                "skipped": "--tune needs a CUDA GPU (none found): the candidates were not timed"}
    from .load import kernel_function
    fn = facts.function or (kernel_function(facts) if facts.signature else None)
    if fn is None:
        why = facts.import_refusal or f"the source of {facts.name} is not importable"
        return {"rows": [], "winner": None, "autotune": "", "skipped": f"--tune launches the kernel from its source: {why}"}
    if facts.function is None:
        facts.function = fn          # tune_space compiles its candidates from it
    try:
        args = synthetic_args(facts, device)
    except TuneError as e:
        return {"rows": [], "winner": None, "autotune": "", "skipped": str(e)}
    from kernelc.testing import do_bench
    from .suggest import Suggestion, autotune_block
    pruned: List[Dict[str, Any]] = []
    suggestions = candidates(facts, suggestions, space=space, pruned=pruned)
    current = Suggestion(facts.config(), {}, [])
    rows = []
    for s in [current] + list(suggestions):
        g = grid_for(facts, s.config)
        row = {"config": s.config, "changes": s.changes, "grid": list(g) if g else None, "from": s.fixes}
        if g is None:
            row["status"] = "skipped: the grid function is not recorded for a multi-dimensional grid"
            rows.append(row)
            continue
        cx = dict(facts.constexprs)
        cx.update(s.kwargs)
        kw = dict(cx, num_warps=int(s.config.get("num_warps", 4)), num_stages=int(s.config.get("num_stages", 3)))
        try:
            fn[g](*args, **kw)
            torch.cuda.synchronize()
            row["time_ms"] = float(do_bench(lambda: fn[g](*args, **kw), return_mode="median"))
            row["status"] = "ok"
        except Exception as e:
            row["status"] = f"failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        rows.append(row)
    rows.extend(pruned)
    base = rows[0].get("time_ms")
    for r in rows:
        if base and r.get("time_ms"):
            r["speedup"] = round(base / r["time_ms"], 3)
    timed = [(r, s) for r, s in zip(rows, [current] + list(suggestions)) if r.get("time_ms")]
    if not timed:
        return {"rows": rows, "winner": None, "best_speedup": None, "autotune": "", "skipped": None}
    best_row, best = min(timed, key=lambda rs: rs[0]["time_ms"])
    ordered = [best] + [s for _, s in sorted(timed, key=lambda rs: rs[0]["time_ms"]) if s is not best and s is not current]
    return {"rows": rows, "winner": best.config, "best_speedup": best_row.get("speedup"),
            "autotune": autotune_block(facts, ordered), "skipped": None}


def render(name: str, result: Dict[str, Any]) -> str:
    from profiler.textsafe import term_escape
    lines = [f"--tune {term_escape(name)}:"]
    if result.get("skipped"):
        lines.append(f"  skipped: {result['skipped']}")
        return "\n".join(lines) + "\n"
    for r in result["rows"]:
        t = f"{r['time_ms'] * 1e3:9.1f} us" if r.get("time_ms") else "        -   "
        sp = f"{r['speedup']:.2f}x" if r.get("speedup") else "  -  "
        lines.append(f"  {t}  {sp}  {r['config']}  {r['status']}")
    if result.get("winner"):
        lines.append(f"  winner: {result['winner']}")
        if result.get("best_speedup"):
            lines.append(f"  best speedup: {result['best_speedup']:.2f}x over the profiled config")
        lines.extend("  " + ln for ln in result["autotune"].splitlines())
    return "\n".join(lines) + "\n"
