"""For each kernel without dots of issue 21's sets, the builds the assembler's fill policy can weigh, on CPU:
the unbounded build (or its fill), the launch bound's build, and the build one occupancy step down (a register
ceiling that fits one more block per SM). Per build: registers, spills, blocks per SM, mean global loads in
flight per thread (``cubintools.sass.mean_loads_in_flight``) and that times the resident warps.

    python3 bench/experiments/mb_gaps/step_down_survey.py [names...]

Writes results/step_down_survey.json. Nothing here needs a GPU.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)
os.environ.setdefault("KERNELC_CACHE_DIR", tempfile.mkdtemp(prefix="mb_gaps_survey_"))

from kernel_sets import all_cases, compile_case  # noqa: E402


def survey(name, case):
    from cubintools.sass import instructions, mean_loads_in_flight
    from cubintools.target import parse_target
    from kernelc.compiler.backend import ptxas as P
    tgt = parse_target("sm_90a")
    L = tgt.limits
    ck = compile_case(case)
    ptx = ck.asm["ptx"].encode()
    bounds = P.launch_bounds(ptx.decode())
    (entry, threads), = bounds.items()
    free_ptx = P._MAXNTID_RE.sub(b"", ptx)
    free = P._nvjitlink_cubin(free_ptx, tgt, 3, (), "x")
    r = free.resources[entry]
    builds = {"free": free}
    cap = P.step_ceiling(r.registers, threads, r.shared, L)
    if cap and cap > r.registers:
        builds[f"fill@{cap}"] = P._nvjitlink_cubin(free_ptx, tgt, 3, (f"-maxrregcount={cap}",), "x")
    builds["bound"] = P._nvjitlink_cubin(ptx, tgt, 3, (), "x")
    now = P.blocks_per_sm(r.registers, threads, r.shared, L)
    down = next((c for c in range(r.registers - r.registers % 8, 15, -8)
                 if P.blocks_per_sm(c, threads, r.shared, L) > now), None) if now else None
    if down:
        builds[f"down@{down}"] = P._nvjitlink_cubin(free_ptx, tgt, 3, (f"-maxrregcount={down}",), "x")
    out = {"entry": entry, "threads": threads, "compiled": {"regs": ck.n_regs,
                                                            "notes": [ln for ln in ck.artifacts.ptxas_log.splitlines()
                                                                      if ln.startswith("kernelc:")]}}
    for label, b in builds.items():
        f = b.resources[entry]
        mlf = mean_loads_in_flight(instructions(b.cubin))
        blocks = P.blocks_per_sm(f.registers, threads, f.shared, L)
        out[label] = {"regs": f.registers, "spills": f.spills, "frame": f.stack_frame, "blocks": blocks,
                      "mlf": mlf, "per_sm": round(blocks * threads // 32 * mlf, 1)}
    return out


def main(argv):
    cases = {k: v for k, v in all_cases().items() if not argv or any(a in k for a in argv)}
    res = {}
    for name, case in cases.items():
        try:
            res[name] = survey(name, case)
        except Exception as e:  # a case that does not compile here is reported, not fatal
            res[name] = {"error": f"{type(e).__name__}: {e}"}
        r = res[name]
        print(f"{name:44s} " + ("  ".join(f"{k} {v['regs']}r/{v['blocks']}b/{v['mlf']}/{v['per_sm']}"
                                          + (f"/spill{v['spills']}" if v['spills'] else "")
                                          for k, v in r.items() if isinstance(v, dict) and "regs" in v and k != "compiled")
                                if "error" not in r else r["error"]), flush=True)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    path = os.path.join(HERE, "results", "step_down_survey.json" if not argv else f"step_down_survey_{'_'.join(argv)}.json")
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
