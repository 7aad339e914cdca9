"""Tile configs beyond the user's list, from a model of the target, pruned by compiling them on the CPU.

For a kernel whose tensor-core dot has tile constexprs (``BLOCK_M``/``BLOCK_N``/``BLOCK_K`` by any
name :func:`analyzer.diagnostics._util.dot_constexprs` recognises), every combination of tiles
(64..256 x 64..256 x 32..128), ``num_warps`` (4, 8) and ``num_stages`` (3..5) is scored by:

* **feed rate**: a program's K step moves ``(BM + BN) * BK`` elements for ``2 * BM * BN * BK`` FLOPs;
  its intensity ``2 * BM * BN / ((BM + BN) * bytes)`` against :data:`NEEDED_INTENSITY` (the tensor
  cores' peak over the bandwidth shared memory and L2 deliver to one SM) caps the tensor-core
  utilisation: ``min(1, intensity / needed)``;
* **waves**: programs (from the recorded sizes, else the grid scaled by the tile area) over
  ``SMs x blocks per SM`` (occupancy from the estimated registers and the pipeline's shared memory);
  a partial last wave idles the rest of the GPU;
* **pipeline depth**: ``num_stages`` - 1 loads in flight must cover the load latency
  (:data:`LATENCY_STAGES`);
* **K step**: each iteration's MMA work (``2 * BM * BN * BK`` over the SM's dense rate) against a
  fixed per-step cost (:data:`STEP_CYCLES`, an estimate ``--verify``/``--tune`` timings calibrate);
* **fit**: shared memory of the ring ``stages * (BM + BN) * BK * bytes`` within the opt-in limit;
  accumulator registers ``BM * BN / (32 * warps)`` + :data:`REG_OVERHEAD` within 255; wgmma's rule
  ``BM >= 16 * warps`` (a warpgroup spans 64 rows).

The model's score is relative: ``score(candidate) / score(current)`` is the estimated speedup.  The
best candidates not already in the user's list are compiled for the target (``kernelc.compile``) and
dropped when they spill, exceed shared memory or fail to compile.
"""
from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .facts import KernelFacts

TILES_MN = (64, 128, 256)
TILES_K = (32, 64, 128)
WARPS = (4, 8)
STAGES = (3, 4, 5)
NEEDED_INTENSITY = 96.0     # FLOP/byte: 989 TFLOP/s over ~10 TB/s of L2 + shared bandwidth (sm_90)
LATENCY_STAGES = 3          # loads in flight needed to hide global latency behind one K step
REG_OVERHEAD = 128          # registers besides the accumulator: kernelc sm_90a spills from 128 accumulator regs/thread
MIN_SPEEDUP = 1.3           # a model gain worth a finding
STEP_CYCLES = 100           # fixed cost of one K step (barrier, MMA wait, address update): an estimate


@dataclass
class Candidate:
    config: Dict[str, Any]
    score: float
    parts: Dict[str, float] = field(default_factory=dict)
    checked: Optional[Dict[str, Any]] = None


def dot_tile_names(facts: KernelFacts) -> Optional[Dict[str, str]]:
    from .diagnostics._util import dot_constexprs, tensor_core_dots
    for d in tensor_core_dots(facts) or facts.dots:
        names = dot_constexprs(facts, d)
        if all(names.values()) and len(set(names.values())) == 3:
            return names
    return None


def _elem_bytes(facts: KernelFacts) -> int:
    d = facts.dots[0] if facts.dots else {}
    t = str(d.get("a_dtype") or "fp16")
    return 1 if t.startswith("fp8") else (4 if t in ("fp32", "tf32") else 2)


def sizes_known(facts: KernelFacts, names: Dict[str, str]) -> bool:
    """Whether the launch recorded the problem's M and N (else programs are guessed from the grid)."""
    vals = {k: v for k, v in facts.arg_values.items() if isinstance(v, int) and not isinstance(v, bool)}
    return all(vals.get(names[d].split("_")[-1]) or vals.get(d) for d in ("M", "N"))


def problem_programs(facts: KernelFacts, names: Dict[str, str], bm: int, bn: int) -> Optional[int]:
    """Programs a (bm, bn) tile needs: from the recorded M and N, else the grid scaled by tile area."""
    vals = {k: v for k, v in facts.arg_values.items() if isinstance(v, int) and not isinstance(v, bool)}
    m = vals.get(names["M"].split("_")[-1]) or vals.get("M")
    n = vals.get(names["N"].split("_")[-1]) or vals.get("N")
    if m and n:
        return -(-m // bm) * -(-n // bn)
    p = facts.num_programs
    if not p:
        return None
    cur = facts.constexprs[names["M"]] * facts.constexprs[names["N"]]
    return max(1, round(p * cur / (bm * bn)))


def score(facts: KernelFacts, names: Dict[str, str], bm: int, bn: int, bk: int, nw: int, ns: int,
          regs: Optional[int] = None, shared: Optional[int] = None) -> Optional[Candidate]:
    from .occupancy import occupancy
    lim = facts.device.limits
    eb = _elem_bytes(facts)
    smem = shared if shared is not None else ns * (bm + bn) * bk * eb
    if smem > lim.max_shared_per_block_optin:
        return None
    r = regs if regs is not None else bm * bn // (32 * nw) + REG_OVERHEAD
    if r > lim.max_regs_per_thread:
        return None
    occ = occupancy(nw, min(r, 255), smem, lim)
    per_sm = max(1, occ.blocks_per_sm)
    feed = min(1.0, (2.0 * bm * bn / ((bm + bn) * eb)) / NEEDED_INTENSITY)
    progs = problem_programs(facts, names, bm, bn)
    waves_eff = 1.0
    if progs:
        slots = facts.device.num_sms * per_sm
        waves = math.ceil(progs / slots)
        waves_eff = progs / (waves * slots)
        # fewer programs than SMs: the idle SMs are lost outright
        waves_eff = min(waves_eff, progs / facts.device.num_sms) if progs < facts.device.num_sms else waves_eff
    pipe = min(1.0, (ns - 1) / (LATENCY_STAGES - 1)) if ns > 1 else 0.5
    from .roofline import _PER_SM_CLOCK
    per_clk = _PER_SM_CLOCK.get(facts.device.sm, (4096, 256))[0] * (2 if eb == 1 else 1)
    work = 2.0 * bm * bn * bk / per_clk
    step = work / (work + STEP_CYCLES)
    cfg = {names["M"]: bm, names["N"]: bn, names["K"]: bk, "num_warps": nw, "num_stages": ns}
    return Candidate(cfg, feed * waves_eff * pipe * step, {"feed": round(feed, 3), "waves": round(waves_eff, 3),
                                                    "pipeline": round(pipe, 3), "k_step": round(step, 3), "smem": smem, "regs_est": r,
                                                    "blocks_per_sm": per_sm, "programs": progs or 0})


def current_score(facts: KernelFacts, names: Dict[str, str], *, own_pipeline: bool = True) -> Optional[Candidate]:
    """The current config's score; ``own_pipeline=False`` scores it with a full pipeline, so that the
    gain of a candidate is the tiles' and warps' alone (a shallow pipeline is latency-bound-loop's)."""
    cx = facts.constexprs
    ns = facts.num_stages if own_pipeline else max(facts.num_stages, LATENCY_STAGES)
    return score(facts, names, cx[names["M"]], cx[names["N"]], cx[names["K"]], facts.num_warps, ns,
                 regs=facts.n_regs or None, shared=facts.shared or None)


def _kernel_module(facts: KernelFacts):
    """The module that defines the kernel: the @jit function's, else the kernel's source file when this
    process already imported it or the source policy allows importing it (None otherwise)."""
    import sys
    fn = facts.function
    if fn is not None:
        return sys.modules.get(getattr(getattr(fn, "fn", None), "__module__", "") or "")
    from . import load as LD
    try:
        path = LD.kernel_source_file(facts)
        return LD.import_module_from(path, facts.source_policy or LD.NO_IMPORT) if path else None
    except Exception:       # refused by the policy, or the module fails to import: the list is unknown
        return None


def user_configs(facts: KernelFacts) -> List[Dict[str, Any]]:
    """The configs of the user's ``@kernelc.autotune`` list when its module is importable, plus the
    profiled config."""
    out = [facts.config()]
    mod = _kernel_module(facts)
    for obj in (vars(mod).values() if mod else ()):
        if type(obj).__name__ == "Autotuner" and getattr(getattr(obj, "fn", None), "__name__", None) == facts.name:
            for c in obj.configs:
                out.append(dict(c.kwargs, num_warps=c.num_warps, num_stages=c.num_stages))
    return out


def ranked(facts: KernelFacts) -> List[Candidate]:
    """Model-ranked candidates (best first), without the user's configs."""
    names = dot_tile_names(facts)
    if names is None:
        return []
    have = user_configs(facts)
    keys = ("M", "N", "K")
    seen = {tuple(c.get(names[k]) for k in keys) + (c.get("num_warps"), c.get("num_stages")) for c in have}
    out = []
    for bm, bn, bk, nw, ns in itertools.product(TILES_MN, TILES_MN, TILES_K, WARPS, STAGES):
        if (bm, bn, bk, nw, ns) in seen:
            continue
        c = score(facts, names, bm, bn, bk, nw, ns)
        if c is not None:
            out.append(c)
    # ties: fewer stages and warps, smaller K (less shared memory, faster to compile)
    out.sort(key=lambda c: (-c.score, c.config["num_stages"], c.config["num_warps"], c.parts["smem"]))
    return out


def compile_check(facts: KernelFacts, cand: Candidate, target: str) -> Dict[str, Any]:
    import kernelc
    from .load import specialization
    cx = dict(facts.constexprs)
    cx.update({k: v for k, v in cand.config.items() if k not in ("num_warps", "num_stages")})
    div, eq1, _ = specialization(facts, {})
    t0 = time.perf_counter()
    try:
        ck = kernelc.compile(facts.function, signature=dict(facts.signature), constexprs=cx, target=target,
                             num_warps=cand.config["num_warps"], num_stages=cand.config["num_stages"],
                             divisibility=div, equal_to_1=eq1)
    except Exception as e:
        return {"ok": False, "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
    engines = sorted({d.get("engine") for d in (ck.reports or {}).get("dots", []) if d.get("engine")})
    return {"ok": True, "target": target, "n_regs": int(ck.n_regs or 0), "n_spills": int(ck.n_spills or 0),
            "shared_bytes": int(ck.shared or 0), "dot_engines": engines, "compile_s": round(time.perf_counter() - t0, 2)}


def explore(facts: KernelFacts, *, keep: int = 3, budget_s: float = 30.0, target: Optional[str] = None) -> List[Candidate]:
    """The best ``keep`` candidates that compile without spills (each with its model speedup in
    ``parts["model_speedup"]``); unchecked (``checked`` None) when the source is not importable."""
    names = dot_tile_names(facts)
    if names is None:
        return []
    cur = current_score(facts, names)
    base = cur.score if cur is not None and cur.score > 0 else None
    cands = ranked(facts)
    for c in cands:
        c.parts["model_speedup"] = round(c.score / base, 2) if base else None
    if facts.function is None or not facts.signature:
        return cands[:keep]
    target = target or getattr(getattr(facts.compiled, "target", None), "arch", None) or facts.device.arch
    out: List[Candidate] = []
    t_end = time.perf_counter() + budget_s
    for c in cands:
        if len(out) >= keep or time.perf_counter() > t_end:
            break
        c.checked = compile_check(facts, c, target)
        ok = c.checked.get("ok") and not c.checked.get("n_spills")
        if ok:
            # re-score with the real registers and shared memory
            real = score(facts, names, *(c.config[names[k]] for k in ("M", "N", "K")), c.config["num_warps"],
                         c.config["num_stages"], regs=c.checked["n_regs"], shared=c.checked["shared_bytes"])
            if real is not None:
                c.parts.update(real.parts)
                c.score = real.score
                c.parts["model_speedup"] = round(c.score / base, 2) if base else None
                out.append(c)
    out.sort(key=lambda c: -c.score)
    return out


# -- the candidates kprof-analyze --tune times ---------------------------------------------------

# configs a Hopper user tries first (BM, BN, BK, num_warps, num_stages): timed whenever they fit the model
HOPPER_USUAL = ((128, 128, 64, 4, 3), (128, 128, 64, 8, 3), (128, 128, 64, 4, 4), (128, 128, 64, 8, 4),
                (128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (256, 128, 64, 8, 3))
TUNE_TIMED = 8              # compiled candidates --tune times (besides the current config and the suggestions)
TUNE_COMPILE_BUDGET_S = 60.0
WS_NAMES = ("WARP_SPECIALIZE", "WARP_SPECIALISE", "WS")


def ws_constexpr(facts: KernelFacts) -> Optional[str]:
    """The kernel's boolean warp-specialisation constexpr (``WARP_SPECIALIZE``), None when it has none:
    warp specialisation is a per-loop choice of the kernel's source (``kl.range(..., warp_specialize=)``)."""
    for k, v in facts.constexprs.items():
        if isinstance(v, bool) and k.upper() in WS_NAMES:
            return k
    return None


def _key(c: Candidate, names: Dict[str, str]) -> tuple:
    return tuple(c.config[names[k]] for k in ("M", "N", "K")) + (c.config["num_warps"], c.config["num_stages"])


def tune_space(facts: KernelFacts, *, n: int = TUNE_TIMED, budget_s: float = TUNE_COMPILE_BUDGET_S,
               target: Optional[str] = None, dropped: Optional[List[Candidate]] = None) -> List[Candidate]:
    """The candidates ``--tune`` times: on sm_90 the usual Hopper configs (:data:`HOPPER_USUAL`) that fit,
    then the model's best (:func:`ranked`), each with warp specialisation on and off when the kernel
    has a ``WARP_SPECIALIZE`` constexpr; every one compiled for the target on the CPU first and dropped
    when it fails to compile or spills (too much shared memory fails the compile).  At most ``n`` are
    kept, in that order; compiling stops after ``budget_s``.  Unchecked (``checked`` None) when the
    kernel's source is not importable.  ``dropped`` collects the compiled candidates that were pruned."""
    names = dot_tile_names(facts)
    if names is None:
        return []
    cands = ranked(facts)
    cur = current_score(facts, names)
    base = cur.score if cur is not None and cur.score > 0 else None
    for c in cands:
        c.parts["model_speedup"] = round(c.score / base, 2) if base else None
    if facts.device.sm >= 90:
        by_key = {_key(c, names): c for c in cands}
        have = {tuple(u.get(names[k]) for k in ("M", "N", "K")) + (u.get("num_warps"), u.get("num_stages"))
                for u in user_configs(facts)}
        usual = []
        for k in HOPPER_USUAL:
            # the register estimate is conservative (128x256 on 8 warps): the compile decides
            c = by_key.get(k) or (None if k in have else
                                  score(facts, names, *k, regs=facts.device.limits.max_regs_per_thread))
            if c is not None:
                c.parts.setdefault("model_speedup", round(c.score / base, 2) if base else None)
                usual.append(c)
        cands = usual + [c for c in cands if c not in usual]
    ws = ws_constexpr(facts)
    if ws:
        cands = [Candidate(dict(c.config, **{ws: v}), c.score, dict(c.parts)) for c in cands for v in (True, False)]
    if facts.function is None or not facts.signature:
        return cands[:n]
    target = target or getattr(getattr(facts.compiled, "target", None), "arch", None) or facts.device.arch
    out: List[Candidate] = []
    t_end = time.perf_counter() + budget_s
    for c in cands:
        if len(out) >= n or time.perf_counter() > t_end:
            break
        c.checked = compile_check(facts, c, target)
        if c.checked.get("ok") and not c.checked.get("n_spills"):
            out.append(c)
        elif dropped is not None:
            dropped.append(c)
    return out
