"""What kernelc's assembler decides for every kernel of kernel_sets.py under this process's options: registers,
blocks per SM, the assembler's ``kernelc:`` notes, a hash of the cubin, and the time spent in ``ptx_to_cubin``
(best of ``--repeat`` assemblies of the same PTX, warm process).

    python3 bench/experiments/mb_gaps/decisions.py [--repeat N] [--out FILE.json] [names...]

Run it under two settings (e.g. KERNELC_FILL_STEP_DOWN=0 and 1, or two trees) and compare the files with
``--compare A.json B.json``. Nothing here needs a GPU.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)
os.environ.setdefault("KERNELC_CACHE_DIR", tempfile.mkdtemp(prefix="mb_gaps_decisions_"))

from kernel_sets import all_cases, compile_case  # noqa: E402


def decide(case, repeat):
    from cubintools.target import parse_target
    from kernelc.compiler.backend import ptxas as P
    ck = compile_case(case)
    ptx = ck.asm["ptx"]
    fill = "registers='fill_step'" in (ck.asm.get("tir") or ck.asm.get("tir_final") or "") or None
    tgt = parse_target("sm_90a")
    (entry, threads), = P.launch_bounds(ptx).items()
    times = []
    res = None
    for _ in range(repeat):
        t = time.perf_counter()
        res = P.ptx_to_cubin(ptx, tgt, fill_step=True)
        times.append(time.perf_counter() - t)
    f = res.resources[entry]
    return {"regs_compiled": ck.n_regs, "regs": f.registers,
            "blocks": P.blocks_per_sm(f.registers, threads, f.shared, tgt.limits),
            "cubin_sha1": hashlib.sha1(res.cubin).hexdigest()[:16],
            "notes": [ln for ln in res.info_log.splitlines() if ln.startswith("kernelc:")],
            "assemble_s": round(min(times), 3), "fill_marked": fill}


def compare(a_path, b_path):
    a, b = json.load(open(a_path)), json.load(open(b_path))
    same = diff = 0
    ta = tb = 0.0
    for k in a["rows"]:
        if k not in b["rows"]:
            continue
        ra, rb = a["rows"][k], b["rows"][k]
        ta += ra["assemble_s"]
        tb += rb["assemble_s"]
        if ra["cubin_sha1"] == rb["cubin_sha1"]:
            same += 1
        else:
            diff += 1
            print(f"DIFFERENT {k}: {ra['regs']}r/{ra['blocks']}b -> {rb['regs']}r/{rb['blocks']}b  {rb['notes']}")
    print(f"{same} identical cubins, {diff} different; assembly {ta:.2f} s -> {tb:.2f} s")
    return diff


def main(argv):
    if argv[:1] == ["--compare"]:
        return 1 if compare(argv[1], argv[2]) else 0
    repeat, out = 1, None
    if "--repeat" in argv:
        i = argv.index("--repeat")
        repeat = int(argv[i + 1])
        del argv[i:i + 2]
    if "--out" in argv:
        i = argv.index("--out")
        out = argv[i + 1]
        del argv[i:i + 2]
    cases = {k: v for k, v in all_cases().items() if not argv or any(a in k for a in argv)}
    rows = {}
    for name, case in cases.items():
        rows[name] = r = decide(case, repeat)
        print(f"{name:36s} {r['regs']:4d}r {r['blocks']:3d}b {r['assemble_s']:6.3f}s  {' | '.join(r['notes'])}",
              flush=True)
    env = {k: v for k, v in os.environ.items() if k.startswith("KERNELC_") and k != "KERNELC_CACHE_DIR"}
    if out:
        with open(out, "w") as f:
            json.dump({"env": env, "repeat": repeat, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
