"""Which build of the same kernelc PTX runs fastest on the GPU? (GPU; the CPU side is asm_matrix.py.)

asm_matrix.py (CPU) found that for the memory-bound rows the ptxas version (nvJitLink 13.0 against Triton's 12.8)
and the mode (relocatable against whole program) give the same SASS at the same register count: what differs
between kernelc's build and "kernelc's PTX through Triton's ptxas" (s18 R1b, s19 R1) is the register ceiling that
kernelc's fill policy (backend/ptxas.py) picks. Here each column is one build of a row kernel's PTX, loaded into
kernelc's launcher and timed interleaved against Triton's (bench/interleaved.py, as mem19/ptx_edits.py):

- ``kernelc``: kernelc's own build;
- ``--col ROW:TAG=RECIPE[@KNOB=V,...]``: ``kernelc[TAG]`` for rows starting with ROW: the kernel compiled by kernelc
  (under those knobs, if given), then its PTX assembled by RECIPE: ``free`` (nvJitLink, no ``.maxntid``, no
  ceiling), ``bound`` (nvJitLink with ``.maxntid``), ``capN`` (nvJitLink, no ``.maxntid``, ``-maxrregcount=N``),
  ``whole`` (Triton's ptxas, a whole program with ``.maxntid``, as Triton assembles), ``own`` (kernelc's build
  under the knobs, no reassembly); ``@MEM20_CONVERT_STORES=1`` compiles with every sector-saving store
  converted through shared memory (``convert_stores``);
- ``triton``, ``triton[control]`` (the A/A).

    python3 bench/experiments/mem20/builds.py [--rounds R] [--out PATH] [--budget S] --col ... [rows...]
"""
from __future__ import annotations

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)


def parse_cols(specs):
    """``ROW:TAG=RECIPE[@K=V,..]`` -> [(row prefix, tag, recipe, env)]."""
    out = []
    for s in specs:
        row, rest = s.split(":", 1)
        tag, rest = rest.split("=", 1)
        recipe, _, envs = rest.partition("@")
        env = dict(kv.split("=", 1) for kv in envs.split(",") if kv)
        out.append((row, tag, recipe or "own", env))
    return out


class convert_stores:
    """While a column compiles (``@MEM20_CONVERT_STORES=1``): passes/coalesce.py converts every store whose
    coalesced layout touches fewer sectors, whatever the conversion costs (its sector price made huge) -- the
    norm backwards' final fp32 dW/dB stores (32 bytes a lane, two 16-byte stores half a sector apart) then go
    through shared memory as Triton's do. An experiment's switch, not a knob: the column has a cache of its own."""

    def __init__(self, on: bool):
        self.on = on

    def __enter__(self):
        import kernelc.compiler.passes.coalesce as C
        self.old = C.SECTOR_BYTES
        if self.on:
            C.SECTOR_BYTES = 1 << 20

    def __exit__(self, *exc):
        import kernelc.compiler.passes.coalesce as C
        C.SECTOR_BYTES = self.old


def assemble(ptx: str, recipe: str) -> bytes:
    import asm_matrix as A
    if recipe == "whole":
        return A.ptxas_run(ptx, os.environ.get("MEM20_WHOLE_PTXAS") or A.TRITON_PTXAS)
    free = A._MAXNTID.sub("", ptx)
    if recipe == "free":
        return A.nvjitlink_link(free.encode(), "PTX")
    if recipe == "bound":
        return A.nvjitlink_link(ptx.encode(), "PTX")
    if recipe.startswith("cap"):
        return A.nvjitlink_link(free.encode(), "PTX", (f"-maxrregcount={int(recipe[3:])}",))
    raise ValueError(f"unknown recipe {recipe!r}")


def triton_ptxas() -> str:
    import importlib.util
    spec = importlib.util.find_spec("triton")
    return os.path.join(os.path.dirname(spec.origin), "backends", "nvidia", "bin", "ptxas")


def load_build(kfn, recipe: str) -> dict:
    """Reload ``kfn``'s one loaded specialisation from its own PTX assembled by ``recipe``."""
    from cubintools import inspect_cubin
    from kernelc.runtime.driver import LoadedFunction
    from kernelc.runtime.fastpath import make_launch
    from kernelc.runtime.launcher import get_state
    ents = list(get_state(kfn)["cache"].values())
    if len(ents) != 1:
        raise RuntimeError(f"{kfn}: {len(ents)} kernelc specialisations loaded, expected one")
    ent = ents[0]
    ck = ent.compiled
    if recipe == "own":
        return {"regs": ck.n_regs}
    cubin = assemble(ck.asm["ptx"], recipe)
    f = inspect_cubin(cubin).kernel(ck.name)
    dyn = ck.dynamic_shared
    ent.function = LoadedFunction(cubin, ck.name, dyn, ent.function.threads // 32, f.n_regs, ent.device,
                                  total_shared=ck.shared)
    ent.launch = make_launch(ent, kfn, ent.cmask) if ent.cmask is not None else None
    return {"regs": f.n_regs, "kernelc_regs": ck.n_regs, "local": f.frame_size}


def main(argv) -> int:
    import argparse
    import tempfile
    import torch
    import asm_matrix as A
    A.TRITON_PTXAS = triton_ptxas()
    from bench.bench_memory_bound import (CONTROL, _env, _err, _regs, cases, column_env, interleaved_round,
                                          kernelc_variant, log_ratio_ci, median_ci)
    from bench.common import triton_twin
    from examples.kernels import memory_bound as K
    ap = argparse.ArgumentParser()
    ap.add_argument("rows", nargs="*")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", os.path.join(HERE, "results")), "builds.json"))
    ap.add_argument("--budget", type=float, default=float("inf"), help="seconds after which no new row starts")
    ap.add_argument("--col", action="append", default=[])
    a = ap.parse_args(argv)
    deadline = time.time() + a.budget
    cols = parse_cols(a.col)
    from cuda.bindings import nvjitlink
    print("nvJitLink", nvjitlink.version(), "whole-program ptxas", A.TRITON_PTXAS, flush=True)
    root = tempfile.mkdtemp(prefix="mem20-builds-")
    T = triton_twin("memory_bound")
    table = cases()
    names = [n for r in a.rows for n in table if n.startswith(r)] if a.rows else list(table)
    rows = []
    for name in dict.fromkeys(names):
        if time.time() > deadline:
            print(f"{name}: skipped (--budget spent)", flush=True)
            continue
        make, call, ref, nbytes = table[name]
        row = {"benchmark": name, "builds": {}, "errs": {}}
        try:
            with _env(column_env(root, "kernelc")):   # never a build another process left on disk
                args = make()
                call(K, *[x.clone() for x in args])
            want = call(T, *[x.clone() for x in args])
            impls = [("kernelc", lambda: call(K, *args))]
            row["regs"] = {"kernelc": _regs(K)}
            for rp, tag, recipe, env in cols:
                if not name.startswith(rp):
                    continue
                n = f"kernelc[{tag}]"
                try:
                    M = kernelc_variant(f"b_{tag}")
                    with _env(column_env(root, tag, env)), convert_stores(env.get("MEM20_CONVERT_STORES") == "1"):
                        call(M, *[x.clone() for x in args])
                    fns = {kn: kf for kn, kf in vars(M).items()
                           if hasattr(kf, "arg_names") and getattr(kf, "_cuda_state", {}).get("cache")}
                    row["builds"][tag] = {"recipe": recipe, "env": env,
                                          **{kn: load_build(kf, recipe) for kn, kf in fns.items()}}
                    row["errs"][tag] = _err(call(M, *[x.clone() for x in args]), want)
                except Exception as e:
                    import traceback
                    traceback.print_exc()
                    row["builds"][tag] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
                    continue
                impls.append((n, lambda M=M: call(M, *args)))
            impls += [("triton", lambda: call(T, *args)), (CONTROL, lambda: call(T, *args))]
            rds = [interleaved_round(dict(impls), CONTROL, keep=False) for _ in range(a.rounds)]
            row["rounds"] = rds
            print(name, flush=True)
            for n in rds[0]["log"]:
                logs = [rd["log"][n] for rd in rds]
                ci, mci = log_ratio_ci(logs), median_ci(logs)
                row[f"{n}/triton_ci95"] = [round(v, 5) for v in ci] if ci else None
                row[f"{n}/triton_median_ci95"] = [round(v, 5) for v in mci] if mci else None
                b = row["builds"].get(n[8:-1], {}) if n.startswith("kernelc[") else {}
                regs = [v.get("regs") for v in b.values() if isinstance(v, dict)]
                print(f"   {n:22s} {row[f'{n}/triton_ci95']}  regs {regs or row['regs'].get('kernelc')}", flush=True)
            print("   errs", row["errs"], flush=True)
        except Exception as e:  # one failing row must not hide the others
            import traceback
            traceback.print_exc()
            row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        rows.append(row)
        torch.cuda.empty_cache()
        os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
        with open(a.out, "w") as f:   # after every row: a run cut short keeps the rows it finished
            json.dump({"rounds": a.rounds, "gpu": torch.cuda.get_device_name(), "cols": a.col,
                       "nvjitlink": list(nvjitlink.version()), "rows": rows}, f, indent=1)
    return 0


def check(argv) -> int:
    """CPU: each ``--col``'s recipe (knobs ignored) on each named kernel of asm_matrix.CASES; registers printed."""
    import asm_matrix as A
    from cubintools import inspect_cubin
    from kernelc.compat import install
    install()
    from examples.kernels import memory_bound as K
    from kernelc.compiler.compiler import compile as kcompile
    kernels = [x for x in argv if not x.startswith("-")]
    recipes = [r for r in ("free", "bound", "whole", "cap32", "cap48") if r]
    for kname in kernels:
        sig_s, cx, nw = A.CASES[kname]
        sig = dict(p.split("=") for p in sig_s.split(","))
        ck = kcompile(getattr(K, kname), sig, cx, "sm_90a", nw, 3,
                      divisibility={n: 16 for n, t in sig.items() if t.startswith("*") or t in ("i32", "i64")})
        out = {"own": ck.n_regs}
        for r in recipes:
            f = inspect_cubin(assemble(ck.asm["ptx"], r)).kernel(ck.name)
            out[r] = (f.n_regs, f.frame_size)
        print(kname, out, flush=True)
    return 0


if __name__ == "__main__":
    if "--check" in sys.argv:
        sys.exit(check(sys.argv[1:]))
    sys.exit(main(sys.argv[1:]))
