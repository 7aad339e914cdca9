"""Is a memory-bound row's gap to Triton in the code or around it? (GPU)

For each case of bench/bench_memory_bound.py named on the command line (all of them by default), one process
times four columns in interleaved rounds (median of do_bench's medians, every round kept):

- ``kernelc``: kernelc's build through kernelc's launcher (the bench's column);
- ``kernelc[triton cubin]``: Triton 3.6's cubin of the same source, loaded and launched by kernelc's runtime
  through a second copy of the example module (the same wrapper, argument buffer and launch call; Triton's two
  hidden scratch pointers are passed as null, as Triton's launcher passes them when the kernel needs none);
- ``triton`` and ``triton[control]``: Triton's own launch, twice (the control's ratio is the noise floor);
- ``kernelc[TAG]`` for each ``--variant TAG:KERNELC_VAR=VALUE[,...]``: kernelc's build under those knobs, compiled in
  this process into a cache of its own (as bench_memory_bound's variant columns), e.g.
  ``tptxas:KERNELC_ASSEMBLER=ptxas,KERNELC_PTXAS=<Triton's ptxas>``: kernelc's PTX assembled by Triton's assembler.

If ``kernelc[triton cubin]`` times like ``triton``, a gap is the code's; if like ``kernelc``, it is the launch
or anything else outside the code. Each swapped column is checked against Triton's output first.

    python3 bench/experiments/mb_gaps/swap_cubin.py [--rounds R] [--out PATH] [--variant TAG:VAR=V,...] [prefixes...]
"""
from __future__ import annotations

import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)


def _triton_compiled(tfn):
    """The one CompiledKernel in a Triton 3.6 JITFunction's cache (after one call)."""
    out = []
    for caches in tfn.device_caches.values():
        out.extend(caches[0].values())
    if len(out) != 1:
        raise RuntimeError(f"{tfn}: {len(out)} Triton builds cached, expected one")
    k = out[0]
    return k.result() if hasattr(k, "result") else k


def swap_in(kfn, tfn) -> dict:
    """Point ``kfn``'s (kernelc JIT function, one specialisation loaded) launch at Triton's cubin of ``tfn``."""
    from kernelc.runtime.driver import ArgBuffer, LoadedFunction
    from kernelc.runtime.fastpath import make_launch
    from kernelc.runtime.launcher import get_state
    ents = list(get_state(kfn)["cache"].values())
    if len(ents) != 1:
        raise RuntimeError(f"{kfn}: {len(ents)} kernelc specialisations loaded, expected one")
    ent = ents[0]
    tk = _triton_compiled(tfn)
    md = tk.metadata
    if getattr(md, "global_scratch_size", 0) or getattr(md, "profile_scratch_size", 0):
        raise RuntimeError(f"{tk.name}: Triton's build needs global scratch; not swapped")
    if md.num_warps != ent.function.threads // 32:
        raise RuntimeError(f"{tk.name}: Triton {md.num_warps} warps, kernelc {ent.function.threads // 32}")
    ent.function = LoadedFunction(tk.asm["cubin"], tk.name, md.shared, md.num_warps, getattr(tk, "n_regs", 0) or 0, ent.device,
                                  total_shared=md.shared)
    if any(isinstance(k, tuple) for k in ent.kinds) or ent.compiled.global_scratch_bytes:
        raise RuntimeError(f"{tk.name}: descriptors or scratch in kernelc's build; not swapped")
    ent.buffer = ArgBuffer(tuple(ent.kinds) + ("ptr", "ptr"))   # global_scratch, profile_scratch: null
    ent.launch = make_launch(ent, kfn, ent.cmask) if ent.cmask is not None else None
    return {"triton_regs": getattr(tk, "n_regs", None), "triton_shared": md.shared, "kernelc_regs": ent.compiled.n_regs,
            "kernelc_shared": ent.compiled.shared}


def main(argv) -> int:
    import torch
    import tempfile
    from bench.bench_memory_bound import (CONTROL, _env, _err, _regs, _time, cases, column_env, kernelc_variant,
                                          paired_ratio_ci, parse_variants)
    from bench.common import triton_twin
    from examples.kernels import memory_bound as K
    rounds, out_path = 7, os.path.join(HERE, "results", "swap_cubin.json")
    if "--rounds" in argv:
        i = argv.index("--rounds")
        rounds = int(argv[i + 1])
        del argv[i:i + 2]
    if "--out" in argv:
        i = argv.index("--out")
        out_path = argv[i + 1]
        del argv[i:i + 2]
    variants = parse_variants(argv)
    root = tempfile.mkdtemp(prefix="swap-cubin-")
    V = [(f"kernelc[{tag}]", kernelc_variant(tag), column_env(root, tag, env)) for tag, env in variants]
    T = triton_twin("memory_bound")
    rows = []
    for name, (make, call, ref, nbytes) in cases().items():
        if argv and not any(name.startswith(a) for a in argv):
            continue
        row = {"benchmark": name}
        try:
            args = make()
            call(K, *[a.clone() for a in args])
            want = call(T, *[a.clone() for a in args])
            S = kernelc_variant("swap")          # its own JIT state: K keeps kernelc's build
            call(S, *[a.clone() for a in args])
            swapped = {}
            try:
                for kname, kfn in vars(S).items():
                    if hasattr(kfn, "arg_names") and getattr(kfn, "_cuda_state", {}).get("cache"):
                        swapped[kname] = swap_in(kfn, getattr(T, kname))
                row["swap_max_abs_err_vs_triton"] = _err(call(S, *[a.clone() for a in args]), want)
            except Exception as e:   # time the other columns all the same
                import traceback
                traceback.print_exc()
                row["swap_error"] = f"{type(e).__name__}: {str(e)[:300]}"
                S = None
            row["swapped"] = swapped
            row["regs"] = {"kernelc": _regs(K)}
            for n, mod, env in V:   # compiles (first call) under the variant's knobs
                with _env(env):
                    row[f"{n}_max_abs_err_vs_triton"] = _err(call(mod, *[a.clone() for a in args]), want)
                row["regs"][n] = _regs(mod)
            impls = [("kernelc", lambda: call(K, *args)), ("kernelc[triton cubin]", lambda: call(S, *args)),
                     ("triton", lambda: call(T, *args)), (CONTROL, lambda: call(T, *args))]
            if S is None:
                del impls[1]
            impls[1:1] = [(n, (lambda mod=mod: call(mod, *args))) for n, mod, _ in V]
            times = {n: [] for n, _ in impls}
            for rnd in range(rounds):
                order = impls[rnd % len(impls):] + impls[:rnd % len(impls)]
                for n, fn in order:
                    times[n].append(_time(fn))
            for n, t in times.items():
                row[f"{n}_ms"] = statistics.median(t)
                row[f"{n}_rounds_ms"] = t
            for n in times:
                if n != "triton":
                    row[f"{n}/triton"] = row["triton_ms"] / row[f"{n}_ms"]
                    # the rounds' paired 95% interval (bench_memory_bound.paired_ratio_ci): Triton's time is the
                    # mean of its two columns in each round, except for the control itself
                    ci = paired_ratio_ci(times[n], times["triton"], None if n == CONTROL else times[CONTROL])
                    if ci is not None:
                        row[f"{n}/triton_ci95"] = [round(v, 5) for v in ci]
            print(name, {k: round(v, 4) for k, v in row.items() if k.endswith("/triton")},
                  {k: v for k, v in row.items() if k.endswith("_ci95")},
                  row["swapped"], row["regs"], "err", row.get("swap_max_abs_err_vs_triton"), flush=True)
        except Exception as e:  # one failing case must not hide the others
            import traceback
            traceback.print_exc()
            row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        rows.append(row)
        torch.cuda.empty_cache()
        # written after every row: a run cut by a time limit keeps the rows it finished
        os.makedirs(os.path.dirname(out_path), exist_ok=True)
        with open(out_path, "w") as f:
            json.dump({"rounds": rounds, "gpu": torch.cuda.get_device_name(), "variants": dict(variants),
                       "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    if "-h" in sys.argv or "--help" in sys.argv:
        print(__doc__)
        sys.exit(0)
    sys.exit(main(sys.argv[1:]))
