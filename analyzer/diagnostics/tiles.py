"""11. Tile configs outside the user's list that the target model expects to be faster (``small-tiles``).

For a tensor-core dot with tile constexprs, :mod:`analyzer.space` scores the current config and
every candidate (tiles, BLOCK_K, num_warps, num_stages) on feed rate (tile intensity against what
the tensor cores need), wave quantisation and pipeline depth.  When the best candidate the user did
not list scores :data:`analyzer.space.MIN_SPEEDUP` x higher, this is a warning (an info when the
launch did not record M and N: the wave term then rests on a guess) whose ``changes`` are the best
candidates; :mod:`analyzer.suggest` compiles them on the CPU and drops those that
spill or do not fit.

Two measured checks keep the model honest (the H100 corpus run of 2026-11-27 flagged the 64x128x32
config of the examples' matmul, whose own autotune list holds 128x256x64, with a 2.43x claim):

* with a measured time, the current config's score is at least the fraction of the tensor-core peak
  the kernel reached (the roofline's achieved FLOP/s): the model's pessimism about the current config
  is not a speedup;
* when the user's autotune list (importable module) already holds a config the model scores within
  :data:`analyzer.space.MIN_SPEEDUP` of its best, nothing is missing from the list: this config is one
  the autotuner weighs against better ones, and the report is an info naming that config.
"""
from __future__ import annotations

from typing import List

from .diagnostic import Diagnostic
from ._util import pct
from .. import space as SP
from ..facts import KernelFacts

N_CHANGES = 6


def _best_listed(facts: KernelFacts, names) -> "SP.Candidate | None":
    """The model's best config of the user's autotune list other than the profiled one (None when the
    list is unknown or holds only this config)."""
    cur = facts.config()
    best = None
    for c in SP.user_configs(facts)[1:]:
        try:
            vals = [int(c[names[k]]) for k in ("M", "N", "K")] + [int(c["num_warps"]), int(c["num_stages"])]
        except (KeyError, TypeError, ValueError):
            continue
        if all(cur.get(names[k]) == v for k, v in zip(("M", "N", "K"), vals)) and \
                (cur.get("num_warps"), cur.get("num_stages")) == tuple(vals[3:]):
            continue
        # the user's configs run: the model's conservative register estimate must not prune them
        sc = SP.score(facts, names, *vals, regs=facts.device.limits.max_regs_per_thread)
        if sc is not None and (best is None or sc.score > best.score):
            best = sc
    return best


def check(facts: KernelFacts) -> List[Diagnostic]:
    names = SP.dot_tile_names(facts)
    if names is None:
        return []
    cur = SP.current_score(facts, names, own_pipeline=False)
    if cur is None or cur.score <= 0:
        return []
    cands = SP.ranked(facts)
    if not cands:
        return []
    best = cands[0]
    from ..roofline import roofline
    rl = roofline(facts)
    measured = rl.flops_fraction if rl is not None and rl.plausible and rl.engine == "tensor cores" else None
    base = max(cur.score, measured or 0.0)
    gain = best.score / base
    if gain < SP.MIN_SPEEDUP:
        return []
    listed = _best_listed(facts, names)
    cx = facts.constexprs
    tile = "x".join(str(cx[names[k]]) for k in ("M", "N", "K"))
    btile = "x".join(str(best.config[names[k]]) for k in ("M", "N", "K"))
    ev = {"tile": tile, "model_score": round(cur.score, 3), "feed": cur.parts["feed"], "waves": cur.parts["waves"],
          "pipeline": cur.parts["pipeline"], "k_step": cur.parts["k_step"], "best_tile": btile, "best_num_warps": best.config["num_warps"],
          "best_num_stages": best.config["num_stages"], "best_model_score": round(best.score, 3),
          "model_speedup": round(gain, 2), "programs": cur.parts["programs"],
          "needed_intensity_flop_per_byte": SP.NEEDED_INTENSITY,
          "est_time_saved_share": round(1.0 - 1.0 / gain, 4)}
    if measured is not None:
        ev["measured_flops_fraction"] = round(measured, 4)
    limiting = min(("feed", cur.parts["feed"]), ("waves", cur.parts["waves"]), ("pipeline", cur.parts["pipeline"]),
                   ("k_step", cur.parts["k_step"]), key=lambda kv: kv[1])
    why = {"feed": f"a {tile} tile reaches {pct(cur.parts['feed'])} of the operand feed rate the tensor cores need "
                   f"({SP.NEEDED_INTENSITY:g} FLOP/byte)",
           "waves": f"{cur.parts['programs']} programs fill {pct(cur.parts['waves'])} of the last wave's slots",
           "pipeline": f"{facts.num_stages} stage(s) keep {max(0, facts.num_stages - 1)} loads in flight",
           "k_step": f"a K step of {cx[names['K']]} does {pct(cur.parts['k_step'])} useful MMA work against its fixed "
                     f"cost ({SP.STEP_CYCLES} cycles)"}[limiting[0]]
    msg = (f"the config model of {facts.device.arch} (operand feed, waves, pipeline depth, K step) expects {btile} with "
           f"num_warps={best.config['num_warps']}, num_stages={best.config['num_stages']} to be {gain:.2f}x faster "
           f"than the current {tile} (num_warps={facts.num_warps}, num_stages={facts.num_stages}): {why}")
    changes = []
    cur_cfg = facts.config()
    for c in cands[:N_CHANGES]:
        changes.append({k: v for k, v in c.config.items() if cur_cfg.get(k) != v})
    fix = (f"add configs outside the current list to the autotune space, largest first ({btile}, "
           f"num_warps={best.config['num_warps']}, num_stages={best.config['num_stages']}); the suggested configs "
           "below were compiled for the target and keep no spills; time them with kprof-analyze --verify")
    d0 = facts.dots[0] if facts.dots else {}
    # the wave term needs the problem size: guessed from the grid it is a hint, not a finding
    sev = "warning" if SP.sizes_known(facts, names) else "info"
    if sev == "info":
        msg += " (the launch's M and N are not recorded: programs estimated from the grid)"
    if listed is not None and listed.score * SP.MIN_SPEEDUP > best.score:
        ltile = "x".join(str(listed.config[names[k]]) for k in ("M", "N", "K"))
        ev.update({"best_listed_tile": ltile, "best_listed_model_score": round(listed.score, 3)})
        sev = "info"
        msg += (f"; the autotune list already holds {ltile} (num_warps={listed.config['num_warps']}, "
                f"num_stages={listed.config['num_stages']}), which the model scores within "
                f"{SP.MIN_SPEEDUP:g}x of the best: the autotuner picks among them, nothing is missing from the list")
    return [Diagnostic("small-tiles", 11, "faster tile configs outside the autotune list", sev, msg, fix,
                       facts.full_path(d0.get("file")) or d0.get("file"), d0.get("line"), None, ev, changes,
                       "static")]
