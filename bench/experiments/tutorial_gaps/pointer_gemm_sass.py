"""The pointer-load GEMMs of tutorials 09 and 08, compiled on CPU by kernelc and by Triton 3.6 (sm_90a), their
SASS split into regions and compared (docs/triton-tutorials.md, "09/08 pointer-load GEMMs").

    python3 bench/experiments/tutorial_gaps/pointer_gemm_sass.py --tutorials DIR [--all-configs]
        [--triton-site DIR] [--out FILE.json] [--sass-dir DIR]

Kernels and configs: 09's ``matmul_kernel`` and ``matmul_kernel_persistent`` at the configs both autotuners
picked on an H100 (call C1: 128x128x64 s3 w4 and 128x256x64 s4 w8), 08's ``grouped_matmul_kernel`` at its two
picks (128x128x64 and 64x128x64, 4 warps, 3 stages); argument types as ``tutorial_sweep.py`` gives them (the
tutorials' benchmark launches). ``--all-configs`` adds every autotune config of the two 09 kernels and records
which compile and their shared memory (kernelc raises OutOfResources past 232448 bytes; Triton compiles
and its launch fails).

Regions, from the SASS (``nvdisasm``): the **main loop** (the innermost backward-branch loop with the most
MMAs), the **prologue** (everything before it) and the **epilogue** (everything after it); in a kernel whose
main loop sits in an outer loop (kernelc's persistent tile loop), the **tile setup** (the outer loop's
instructions before the main loop) and the **tile epilogue** (after it, up to the outer loop's branch) instead
of prologue/epilogue; a flattened loop (Triton's persistent kernel) is one main loop that holds its epilogue.
The **step**: the shortest path through the main loop (a flattened loop's K step that ends no tile).
Per region: instructions, and counts by kind (cp.async ``LDGSTS``, ``HGMMA``, wgmma arrive/wait, ``BAR``,
global stores by width, shared stores (``STS``/``STSM``) and loads, fp32->fp16 packs, integer address math,
predicates, uniform-datapath ops, local memory). Nothing here is a test.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)

import tutorial_sweep as ts  # noqa: E402

PICKS = {  # kernel -> [(constexprs, warps, stages)]
    "matmul_kernel": [(dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64, GROUP_SIZE_M=8), 4, 3),
                      (dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=64, GROUP_SIZE_M=8), 8, 4)],
    "matmul_kernel_persistent": [(dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64, GROUP_SIZE_M=8), 4, 3),
                                 (dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=64, GROUP_SIZE_M=8), 8, 4)],
    "grouped_matmul_kernel": [(dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64, NUM_SM=ts.NUM_SMS), 4, 3),
                              (dict(BLOCK_SIZE_M=64, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64, NUM_SM=ts.NUM_SMS), 4, 3)],
}

KINDS = collections.OrderedDict([
    ("LDGSTS", lambda o: o.startswith("LDGSTS")),
    ("LDG", lambda o: o.startswith("LDG.")),
    ("HGMMA", lambda o: o.startswith("HGMMA")),
    ("WARPGROUP", lambda o: o.startswith("WARPGROUP")),
    ("DEPBAR", lambda o: o.startswith(("DEPBAR", "LDGDEPBAR"))),
    ("BAR", lambda o: o.startswith("BAR")),
    ("STG.128", lambda o: o.startswith("STG") and ".128" in o),
    ("STG.64", lambda o: o.startswith("STG") and ".64" in o),
    ("STG.32", lambda o: o.startswith("STG") and not (".128" in o or ".64" in o or ".U16" in o or ".U8" in o)),
    ("STG.16", lambda o: o.startswith("STG") and ".U16" in o),
    ("STSM", lambda o: o.startswith("STSM")),
    ("STS", lambda o: o.startswith("STS") and not o.startswith("STSM")),
    ("LDS", lambda o: o.startswith("LDS") and not o.startswith("LDSM")),
    ("LDSM", lambda o: o.startswith("LDSM")),
    ("F2FP", lambda o: o.startswith("F2FP")),
    ("int math", lambda o: o.split(".")[0] in ("IMAD", "IADD3", "LEA", "LOP3", "SHF", "IABS", "VIADD", "SGXT",
                                               "IMNMX", "VIMNMX", "PRMT")),
    ("predicates", lambda o: o.split(".")[0] in ("ISETP", "SEL", "PLOP3", "P2R", "R2P")),
    ("uniform", lambda o: o.startswith("U") and not o.startswith("UTMA")),
    ("R2UR", lambda o: o.startswith("R2UR")),
    ("FENCE/MEMBAR", lambda o: o.startswith(("FENCE", "MEMBAR"))),
    ("LDL/STL", lambda o: o.startswith(("LDL", "STL"))),
    ("NOP", lambda o: o == "NOP"),
])


def _kinds(ops) -> dict:
    out = {"instructions": len(ops)}
    for k, f in KINDS.items():
        n = sum(1 for o in ops if f(o))
        if n:
            out[k] = n
    return out


def _loops(instrs, labels):
    """[(start pc, end pc)] of every backward branch's loop."""
    out = []
    for pc, op, ops in instrs:
        if not op.startswith("BRA"):
            continue
        m = re.search(r"`\(\.L_x_(\d+)\)", ops)
        tgt = labels.get(m.group(1)) if m else None
        if tgt is not None and tgt <= pc:
            out.append((tgt, pc))
    return out


def regions(cubin: bytes) -> dict:
    instrs, labels = ts.sass_functions(cubin)
    main = ts.main_loop(instrs, labels)
    if main is None:
        return {"whole": _kinds([o for _, o, _ in instrs])}
    lo, hi = main
    outer = [(a, b) for a, b in _loops(instrs, labels) if a < lo and b > hi]
    ops = lambda f: [o for p, o, _ in instrs if f(p)]  # noqa: E731
    out = {"main_loop": _kinds(ops(lambda p: lo <= p <= hi))}
    if outer:
        a, b = min(outer, key=lambda r: r[1] - r[0])
        out["prologue"] = _kinds(ops(lambda p: p < a))
        out["tile_setup"] = _kinds(ops(lambda p: a <= p < lo))
        out["tile_epilogue"] = _kinds(ops(lambda p: hi < p <= b))
        out["after_tiles"] = _kinds(ops(lambda p: p > b))
    else:
        out["prologue"] = _kinds(ops(lambda p: p < lo))
        out["epilogue"] = _kinds(ops(lambda p: p > hi))
    out["main_loop"]["holds_epilogue"] = any(o.startswith("STG") for o in ops(lambda p: lo <= p <= hi))
    # the shortest trip through the main loop: in a flattened loop, a K step that ends no tile (its tile-change
    # and epilogue branches skipped; cubintools/paths.py)
    from cubintools.paths import step_path
    from cubintools.sass import disassemble, parse_sass
    text = disassemble(cubin, line_info=False)
    trip = step_path(text, parse_sass(text))
    if trip is not None:
        out["step"] = _kinds([i.opcode for i in trip])
    out["whole"] = _kinds([o for _, o, _ in instrs])
    return out


def compile_both(job, mods, triton_site, sass_dir=""):
    row = {k: job[k] for k in ("kernel", "constexprs", "num_warps", "num_stages")}
    for impl in ("kernelc", "triton"):
        res = ts.compile_one(impl, mods[job["tutorial"]], job["fn"], job["sig"], job["cx"], job["eq1"],
                             job["num_warps"], job["num_stages"], triton_site, 300)
        if "error" in res:
            row[impl] = {"error": res["error"].splitlines()[-1][:300]}
            continue
        cubin = bytes.fromhex(res["cubin"])
        if sass_dir:
            from cubintools.sass import disassemble
            os.makedirs(sass_dir, exist_ok=True)
            tag = f"{job['kernel']}.{ts._cfg_label(row).replace(' ', '_')}.{impl}.sass"
            with open(os.path.join(sass_dir, tag), "w") as f:
                f.write(disassemble(cubin, line_info=False))
            with open(os.path.join(sass_dir, tag[:-len(".sass")] + ".ptx"), "w") as f:
                f.write(res.get("ptx", ""))
        from cubintools import inspect_cubin
        info = inspect_cubin(cubin)
        f = info.kernel(res["name"] if res["name"] in info.functions else None)
        row[impl] = {"n_regs": f.n_regs, "local_bytes": f.frame_size, "shared": res["shared"],
                     "regions": regions(cubin), "notes": [n for n in res.get("notes", []) if "store" in n]}
    return row


def _jobs(names, all_configs):
    for name in names:
        tut, sigf, cfgs = ts.KERNELS[name]
        if all_configs:
            picks = [(c["kw"], c["num_warps"], c["num_stages"]) for c in cfgs()]
        else:
            picks = PICKS[name]
        for kw, w, s in picks:
            sig, cx = sigf(kw)
            eq1 = {k: v for k, v in cx.items() if k.startswith("stride_")}
            cx = {k: v for k, v in cx.items() if k not in eq1}
            cx.update(kw)
            yield dict(kernel=name, fn=name, tutorial=tut, constexprs=kw, num_warps=w, num_stages=s, sig=sig, cx=cx,
                       eq1=eq1)


def _line(r, impl):
    d = r[impl]
    if "error" in d:
        return f"{impl:8s} error: {d['error'][:120]}"
    g = d["regions"]
    parts = [f"{impl:8s} regs {d['n_regs']:3d} spill {d['local_bytes']:4d} smem {d['shared']:6d}"]
    for reg in ("prologue", "tile_setup", "main_loop", "step", "tile_epilogue", "epilogue"):
        if reg in g:
            k = g[reg]
            extra = " ".join(f"{x}{k[x]}" for x in ("HGMMA", "LDGSTS", "STG.128", "STG.32", "STSM", "STS", "LDS", "BAR",
                                                             "R2UR")
                             if k.get(x))
            parts.append(f"{reg} {k['instructions']} ({extra})")
    return " | ".join(parts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tutorials", default=os.path.join(ROOT, ".ext", "tutorials"))
    ap.add_argument("--kernels", default=",".join(PICKS))
    ap.add_argument("--all-configs", action="store_true", help="every autotune config of the 09 kernels")
    ap.add_argument("--triton-site", default="/work/ext/triton_site")
    ap.add_argument("--sass-dir", default="", help="write each kernel's SASS and PTX here")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "pointer_gemm_sass.json"))
    a = ap.parse_args(argv)
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    tmp = tempfile.mkdtemp(prefix="ptr_gemm_sass_")
    mods = {}
    for t in ("08", "09"):
        mods[t] = os.path.join(tmp, f"tut{t}_kernels.py")
        with open(mods[t], "w") as f:
            f.write(ts.kernel_module(os.path.join(a.tutorials, ts.TUTORIAL_FILES[t])))
    names = [n for n in a.kernels.split(",") if n]
    if a.all_configs:
        names = [n for n in names if ts.KERNELS[n][0] == "09"]
    rows = []
    for job in _jobs(names, a.all_configs):
        r = compile_both(job, mods, a.triton_site, a.sass_dir)
        rows.append(r)
        print(f"{r['kernel']} {ts._cfg_label(r)}", flush=True)
        for impl in ("kernelc", "triton"):
            print("   " + _line(r, impl), flush=True)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump({"benchmark": "pointer_gemm_sass", "target": "sm_90a", "num_sms": ts.NUM_SMS,
                   "kernelc_env": {k: v for k, v in os.environ.items() if k.startswith("KERNELC_")},
                   "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
