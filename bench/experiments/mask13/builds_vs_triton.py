"""For each kernel without dots of mb_gaps/kernel_sets.py: the builds kernelc's assembler can weigh (unbounded or
filled, launch bound, one step down: mb_gaps/step_down_survey.py), the build the compiler keeps, and Triton 3.6's
cubin of the same source (whole-program ptxas, .maxntid as a limit): registers, blocks per SM, mean global loads
in flight a thread and per SM (resident warps x that). Nothing here needs a GPU.

    python3 bench/experiments/mask13/builds_vs_triton.py [--triton-site DIR] [--out FILE.json] [names...]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "mb_gaps"))
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "tutorial_gaps"))
os.environ.setdefault("KERNELC_CACHE_DIR", tempfile.mkdtemp(prefix="mask13_builds_"))

from kernel_sets import all_cases, _kv, _value  # noqa: E402
from step_down_survey import survey  # noqa: E402


def triton_build(case, site):
    from cpu_compare import compile_triton, kernel_module
    from cubintools.target import parse_target
    from kernelc.compiler.backend import ptxas as P
    path, kernel, sig_text, cx_text, warps, stages = case
    sig = _kv(sig_text)
    cx = {k: _value(v) for k, v in _kv(cx_text).items()}
    div = {n: 16 for n, t in sig.items() if t.startswith("*") or t in ("i32", "i64")}
    fd, mod_path = tempfile.mkstemp(suffix=".py", prefix="mask13_")
    with os.fdopen(fd, "w") as f:
        f.write(kernel_module(path))
    try:
        r = compile_triton(site, mod_path, kernel, sig, cx, div, warps, stages, True)
    finally:
        os.unlink(mod_path)
    L = parse_target("sm_90a").limits
    threads = 32 * warps
    # Triton's shared memory is dynamic: count it, as the launch does
    blocks = P.blocks_per_sm(r["n_regs"], threads, r["shared"], L)
    return {"regs": r["n_regs"], "blocks": blocks, "shared": r["shared"], "mlf": r["mean_loads_in_flight"],
            "per_sm": round(blocks * warps * r["mean_loads_in_flight"], 1), "sass": r["sass_total"]}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--triton-site", default="/work/ext/triton_site")
    ap.add_argument("--out")
    ap.add_argument("names", nargs="*")
    a = ap.parse_args(argv)
    cases = {k: v for k, v in all_cases().items() if not a.names or any(n in k for n in a.names)}
    res = {}
    for name, case in cases.items():
        try:
            r = survey(name, case)
            r["triton"] = triton_build(case, a.triton_site)
        except Exception as e:  # reported, not fatal
            r = {"error": f"{type(e).__name__}: {e}"}
        res[name] = r
        print(f"{name:30s} " + ("  ".join(f"{k} {v['regs']}r/{v['blocks']}b/{v['mlf']:.2f}/{v['per_sm']}"
                                          + (f"/spill{v['spills']}" if v.get('spills') else "")
                                          for k, v in r.items() if isinstance(v, dict) and "regs" in v and k != "compiled")
                                + f"  | kept {r['compiled']['regs']}r" if "error" not in r else r["error"]), flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
