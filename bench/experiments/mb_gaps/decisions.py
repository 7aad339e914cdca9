"""What kernelc's assembler decides for every kernel of kernel_sets.py under this process's options: registers,
blocks per SM, the assembler's ``kernelc:`` notes, a hash of the cubin, and the time spent in ``ptx_to_cubin``
(best of ``--repeat`` assemblies of the same PTX, warm process).

    python3 bench/experiments/mb_gaps/decisions.py [--repeat N] [--out FILE.json] [--nvdisasm] [names...]
    MB_GAPS_TREE=/tmp/main python3 bench/experiments/mb_gaps/decisions.py ...   # another tree's kernelc

Run it under two settings (e.g. KERNELC_FILL_STEP_DOWN=0 and 1, two trees, or with and without ``--nvdisasm``:
the fill policy's loads measured from nvdisasm's text, not from the encodings) and compare the files with
``--compare A.json B.json``. Nothing here needs a GPU.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)
if os.environ.get("MB_GAPS_TREE"):   # that tree's kernelc and cubintools (the kernels' sources stay this tree's)
    sys.path.insert(0, os.environ["MB_GAPS_TREE"])
os.environ.setdefault("KERNELC_CACHE_DIR", tempfile.mkdtemp(prefix="mb_gaps_decisions_"))

from kernel_sets import all_cases, compile_case  # noqa: E402


def _code_hash(cubin):
    """A hash of the cubin's instructions (its ``.text.*`` sections): the line table's file names (the temporary
    module a tutorial's kernels are loaded from) differ from run to run, the code does not."""
    from cubintools.cubin import _Elf
    h = hashlib.sha1()
    for sec in _Elf(cubin).sections:
        if sec.name.startswith(".text."):
            h.update(sec.name.encode() + sec.data())
    return h.hexdigest()[:16]


def decide(case, repeat):
    from cubintools.target import parse_target
    from kernelc.compiler.backend import ptxas as P
    ck = compile_case(case)
    ptx = ck.asm["ptx"]
    head = (ck.asm.get("tir") or ck.asm.get("tir_final") or "").split("\n", 1)[0]
    fill = "registers='fill_step'" in head or None
    m = re.search(r"fill_policy='(\w+)'", head)   # the tile IR's per-kernel policy (passes/register_budget.py)
    tgt = parse_target("sm_90a")
    (entry, threads), = P.launch_bounds(ptx).items()
    times = []
    res = None
    for _ in range(repeat):
        t = time.perf_counter()
        kw = {"keep_blocks": True} if "fill_keep_blocks=True" in head else {}   # a one-pass kernel (register_budget.py)
        res = P.ptx_to_cubin(ptx, tgt, fill_step=True, fill_policy=m.group(1) if m else None, **kw)
        times.append(time.perf_counter() - t)
    f = res.resources[entry]
    return {"regs_compiled": ck.n_regs, "regs": f.registers,
            "blocks": P.blocks_per_sm(f.registers, threads, f.shared, tgt.limits),
            "code_sha1": _code_hash(res.cubin),
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
        if ra["code_sha1"] == rb["code_sha1"] and ra["regs"] == rb["regs"]:
            same += 1
        else:
            diff += 1
            print(f"DIFFERENT {k}: {ra['regs']}r/{ra['blocks']}b -> {rb['regs']}r/{rb['blocks']}b  {rb['notes']}")
    print(f"{same} kernels with the same code, {diff} different; assembly {ta:.2f} s -> {tb:.2f} s")
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
    nvdisasm_only = "--nvdisasm" in argv
    if nvdisasm_only:
        argv.remove("--nvdisasm")
        import cubintools.sass as S
        S.encoded_loads_in_flight = lambda cubin: None   # the decoder gives up on everything
    import kernelc
    print(f"kernelc from {os.path.dirname(kernelc.__file__)}", flush=True)
    cases = {k: v for k, v in all_cases().items() if not argv or any(a in k for a in argv)}
    rows = {}
    for name, case in cases.items():
        rows[name] = r = decide(case, repeat)
        print(f"{name:36s} {r['regs']:4d}r {r['blocks']:3d}b {r['assemble_s']:6.3f}s  {' | '.join(r['notes'])}",
              flush=True)
    env = {k: v for k, v in os.environ.items() if k.startswith("KERNELC_") and k != "KERNELC_CACHE_DIR"}
    if out:
        with open(out, "w") as f:
            json.dump({"env": env, "tree": os.environ.get("MB_GAPS_TREE") or ROOT, "repeat": repeat,
                       "nvdisasm_only": nvdisasm_only, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
