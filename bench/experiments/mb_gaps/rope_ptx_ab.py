"""rope's 3% below Triton on an H200: which PTX difference costs it? (GPU)

Times, in one process with interleaved rounds (median of do_bench's medians, every round kept), the rope case
of bench/bench_memory_bound.py under:

- ``kernelc``: kernelc's build through kernelc's launcher (the bench's column);
- ``kernelc[triton cubin]``: Triton 3.6's own cubin, loaded and launched by kernelc's runtime (swap_cubin.py);
- ``ptx[NAME]``: each PTX file of ``--ptx-dir`` (default ``results/rope13/ptx``), assembled here by Triton's
  ptxas (``-arch=sm_90a -O3 -lineinfo``, the flags kernelc's standalone path uses) and launched by kernelc's
  runtime in the same way (a file with Triton's two scratch parameters gets them as null);
- ``kernelc[TAG]`` for each ``--variant TAG:KERNELC_VAR=VALUE[,...]``: kernelc's build under those knobs;
- ``triton`` and ``triton[control]``: Triton's own launch, twice (the noise floor).

The PTX files are kernelc's and Triton's PTX of the same source with one difference changed at a time
(``rope_ptx_variants.py`` wrote them on CPU; docs/performance.md, "rope: what in kernelc's PTX costs 3%").
Every column's output is checked against Triton's first. Registers, the SASS's load/store shape and the cubin's
sha256 are recorded so the cubins can be matched with the CPU's.

    python3 bench/experiments/mb_gaps/rope_ptx_ab.py [--rounds R] [--out PATH] [--ptx-dir DIR] [--variant TAG:VAR=V,...]
"""
from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)


def triton_ptxas() -> str:
    import triton
    exe = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
    if not os.path.isfile(exe):
        raise SystemExit(f"no ptxas at {exe}")
    return exe


def assemble(ptx_path: str, exe: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="rope-ab-") as d:
        out = os.path.join(d, "k.cubin")
        r = subprocess.run([exe, "-arch=sm_90a", "-O3", "-v", "-lineinfo", ptx_path, "-o", out],
                           capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"{ptx_path}: ptxas failed\n{r.stderr[-2000:]}")
        cubin = open(out, "rb").read()
    text = open(ptx_path).read()
    entry = re.search(r"\.entry\s+(\w+)\s*\((.*?)\)", text, re.S)
    regs = re.search(r"Used (\d+) registers", r.stdout + r.stderr)
    return {"cubin": cubin, "name": entry.group(1), "params": entry.group(2).count(".param"),
            "regs": int(regs.group(1)) if regs else 0, "sha256": hashlib.sha256(cubin).hexdigest()[:16],
            "shape": sass_shape(cubin)}


def sass_shape(cubin: bytes) -> str:
    """The SASS as loads (L), stores (S), exits (X) and the count of other instructions between them."""
    try:
        from cubintools import instructions
        ops = [i.opcode for i in instructions(cubin)]
    except Exception as e:   # the timing does not need it
        return f"? {type(e).__name__}"
    out, n = [], 0
    for op in ops:
        if op.startswith(("LDG", "STG", "EXIT")):
            if n:
                out.append(str(n))
                n = 0
            out.append("L" if op.startswith("LDG") else "S" if op.startswith("STG") else "X")
        elif not op.startswith(("NOP", "BRA")):
            n += 1
    return " ".join(out)


def load_cubin(kfn, cub: dict) -> None:
    """Point ``kfn``'s one loaded specialisation at ``cub``'s cubin (kernelc's launcher, argument buffer and
    launch call; parameters past kernelc's own are null pointers, as Triton's launcher passes its scratch)."""
    from kernelc.runtime.driver import ArgBuffer, LoadedFunction
    from kernelc.runtime.fastpath import make_launch
    from kernelc.runtime.launcher import get_state
    ents = list(get_state(kfn)["cache"].values())
    if len(ents) != 1:
        raise RuntimeError(f"{kfn}: {len(ents)} kernelc specialisations loaded, expected one")
    ent = ents[0]
    extra = cub["params"] - len(ent.kinds)
    if extra not in (0, 2) or any(isinstance(k, tuple) for k in ent.kinds) or ent.compiled.global_scratch_bytes:
        raise RuntimeError(f"{cub['name']}: {cub['params']} parameters against kernelc's {ent.kinds}")
    ent.function = LoadedFunction(cub["cubin"], cub["name"], 0, ent.function.threads // 32, cub["regs"],
                                  ent.device, total_shared=0)
    if extra:
        ent.buffer = ArgBuffer(tuple(ent.kinds) + ("ptr",) * extra)
    ent.launch = make_launch(ent, kfn, ent.cmask) if ent.cmask is not None else None


def main(argv) -> int:
    import torch
    from bench.bench_memory_bound import (CONTROL, _env, _err, _regs, _time, cases, column_env, kernelc_variant,
                                          parse_variants)
    from bench.common import triton_twin
    from examples.kernels import memory_bound as K
    from swap_cubin import swap_in

    def opt(flag, default):
        if flag in argv:
            i = argv.index(flag)
            v = argv[i + 1]
            del argv[i:i + 2]
            return v
        return default
    rounds = int(opt("--rounds", 7))
    out_path = opt("--out", os.path.join(HERE, "results", "rope13", "rope_ptx_ab.json"))
    ptx_dir = opt("--ptx-dir", os.path.join(HERE, "results", "rope13", "ptx"))
    variants = parse_variants(argv)
    exe = triton_ptxas()
    cubins = {}
    for p in sorted(glob.glob(os.path.join(ptx_dir, "*.ptx"))):
        try:
            cubins[os.path.basename(p)[:-4]] = assemble(p, exe)
        except Exception as e:   # one variant must not hide the others
            print(f"{p}: {type(e).__name__}: {str(e)[:300]}", flush=True)
    manifest_path = os.path.join(ptx_dir, "manifest.json")
    expected = json.load(open(manifest_path)) if os.path.exists(manifest_path) else {}
    for tag, c in cubins.items():   # the same cubin as rope_ptx_variants.py built on CPU?
        c["as_on_cpu"] = expected.get(tag, {}).get("sha256") == c["sha256"]
    root = tempfile.mkdtemp(prefix="rope-ab-")
    V = [(f"kernelc[{tag}]", kernelc_variant(tag), column_env(root, tag, env)) for tag, env in variants]
    T = triton_twin("memory_bound")
    name, (make, call, ref, nbytes) = next((n, c) for n, c in cases().items() if n.startswith("rope"))
    row = {"benchmark": name, "cubins": {k: {f: v for f, v in c.items() if f != "cubin"} for k, c in cubins.items()}}
    args = make()
    call(K, *[a.clone() for a in args])
    want = call(T, *[a.clone() for a in args])
    impls = [("kernelc", K)]
    S = kernelc_variant("swap")
    call(S, *[a.clone() for a in args])
    row["swapped"] = swap_in(S.rope_kernel, T.rope_kernel)
    impls.append(("kernelc[triton cubin]", S))
    for tag, cub in cubins.items():
        mod = kernelc_variant(f"ptx_{tag}")
        call(mod, *[a.clone() for a in args])
        load_cubin(mod.rope_kernel, cub)
        impls.append((f"ptx[{tag}]", mod))
    for n, mod, env in V:   # compiles (first call) under the variant's knobs
        with _env(env):
            call(mod, *[a.clone() for a in args])
        row.setdefault("regs", {})[n] = _regs(mod)
        impls.append((n, mod))
    row.setdefault("regs", {})["kernelc"] = _regs(K)
    for n, mod in impls:
        row[f"{n}_max_abs_err_vs_triton"] = _err(call(mod, *[a.clone() for a in args]), want)
    impls.append(("triton", T))
    impls.append((CONTROL, T))
    times = {n: [] for n, _ in impls}
    for rnd in range(rounds):
        order = impls[rnd % len(impls):] + impls[:rnd % len(impls)]
        for n, mod in order:
            times[n].append(_time(lambda mod=mod: call(mod, *args)))
    for n, t in times.items():
        row[f"{n}_ms"] = statistics.median(t)
        row[f"{n}_rounds_ms"] = t
    tri = row["triton_ms"]
    tri_rounds = times["triton"]
    for n in times:
        if n != "triton":
            row[f"{n}/triton"] = tri / row[f"{n}_ms"]
            # rounds in which this column beat Triton's own launch of the same round
            row[f"{n}_rounds_faster"] = sum(a < b for a, b in zip(times[n], tri_rounds))
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    with open(out_path, "w") as f:
        json.dump({"rounds": rounds, "gpu": torch.cuda.get_device_name(), "variants": dict(variants), "row": row},
                  f, indent=1)
    print(f"{name} on {torch.cuda.get_device_name()}, {rounds} rounds; x / triton, rounds faster than triton, "
          f"max err, registers, SASS shape")
    for n in times:
        if n == "triton":
            continue
        c = cubins.get(n[4:-1]) if n.startswith("ptx[") else None
        regs = c["regs"] if c else row.get("regs", {}).get(n, "")
        print(f"  {n:28s} {row[f'{n}/triton']:.4f}  {row[f'{n}_rounds_faster']}/{rounds}  "
              f"err {row.get(f'{n}_max_abs_err_vs_triton', '-')}  r {regs}  "
              f"{(c['shape'] + ('' if c['as_on_cpu'] else '  (not the CPU cubin)')) if c else ''}", flush=True)
    return 0


if __name__ == "__main__":
    if "-h" in sys.argv or "--help" in sys.argv:
        print(__doc__)
        sys.exit(0)
    sys.exit(main(sys.argv[1:]))
