"""Which kernels nobody here wrote does ``passes/l2_reuse.py`` mark, and what do they re-read? (CPU, sm_90a)

Each driver calls a library's own host code on small CPU tensors (kernelc's interpreter runs the kernels); a launch
hook compiles every launched kernel offline, as ``warmup`` does on CPU (``runtime/launcher.compile_offline``: the
launch's own signature, constexprs and warps), under each ``KERNELC_L2_REUSE`` value given, and records: the loads
marked (``l2='evict_last'`` in the tile IR), the rule's inputs (``passes/l2_reuse.reuse_stats``: bytes a program
loads through the marked loads, bytes it moves in all, the period's operand), the grid, and whether the PTX
differs from ``off``'s. Drivers: Liger-Kernel's rope (fwd, bwd; cos_bs 1 and bsz), llama4_rope, qwen2vl_mrope,
Triton's tutorials 01-06 (their own host functions, small shapes).

    python3 bench/experiments/mem27/l2_scan.py [--liger /work/main/.ext/liger] [--tutorials DIR]
        [--modes off,evict_last,...] [--out X.json]
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import re
import sys
import tempfile
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def main(argv) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--liger", default="/work/main/.ext/liger")
    ap.add_argument("--tutorials", default="/work/main/.ext/tutorials")
    ap.add_argument("--modes", default="off,evict_last")
    ap.add_argument("--only", default="", help="drivers whose name contains this")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    os.environ["KERNELC_INTERPRET"] = "1"
    from kernelc.compat import install
    install()
    import torch
    from kernelc.runtime import hooks
    from kernelc.runtime.launcher import compile_offline
    try:
        from kernelc.compiler.passes.l2_reuse import reuse_stats
    except ImportError:   # a tree before mem27
        reuse_stats = None
    modes = a.modes.split(",")
    seen, rows = set(), []
    current = {"driver": None}

    def enter(rec):
        fn = rec.function
        values = dict(zip(fn.arg_names, rec._values))
        key = (fn.__name__, current["driver"], tuple(sorted((n, repr(v)) for n, v, c in
                                                             zip(fn.arg_names, rec._values, rec._cmask) if c)))
        if key in seen:
            return
        seen.add(key)
        row = {"driver": current["driver"], "kernel": fn.__name__, "grid": list(rec.grid),
               "num_warps": rec.num_warps, "constexprs": {n: repr(v) for n, v, c in
                                                         zip(fn.arg_names, rec._values, rec._cmask) if c},
               "modes": {}}
        for m in modes:
            os.environ["KERNELC_L2_REUSE"] = m
            os.environ["KERNELC_CACHE_DIR"] = tempfile.mkdtemp(prefix="l2scan_")
            try:
                ck = compile_offline(fn, values, rec.num_warps, rec.num_stages)
                ptx = ck.asm["ptx"]
                r = {"marked": ck.asm["tir"].count("l2='evict_last'"),
                     "cache_hint_loads": len(re.findall(r"L2::cache_hint", ptx)),
                     "ptx_sha1": hashlib.sha1(re.sub(r'\.file\s+\d+ "[^"]*"', "", ptx).encode()).hexdigest()[:12],
                     "regs": ck.n_regs}
                if "l2_reuse_stats" in ck.asm:
                    r["stats"] = ck.asm["l2_reuse_stats"]
            except Exception as e:
                r = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
            row["modes"][m] = r
        base = row["modes"].get("off", {}).get("ptx_sha1")
        row["changed"] = sorted(m for m, r in row["modes"].items() if base and r.get("ptx_sha1") not in (None, base))
        rows.append(row)
        print(f"{row['driver']:28s} {row['kernel']:36s} grid {row['grid']} "
              + " ".join(f"{m}:{r.get('marked', 'ERR')}" for m, r in row["modes"].items())
              + (f" changed {row['changed']}" if row["changed"] else ""), flush=True)
    hooks.register(enter=enter)

    drivers = []
    lig = os.path.join(a.liger, "src", "liger_kernel", "ops")

    def liger_rope():
        m = _load(os.path.join(lig, "rope.py"), "l2scan_liger_rope")
        for cos_bs in (1, 2):   # q, k: (bsz, heads, seq, head_dim) as Liger's callers pass them
            q, k = torch.randn(2, 4, 3, 16), torch.randn(2, 2, 3, 16)
            cos, sin = torch.randn(cos_bs, 3, 16), torch.randn(cos_bs, 3, 16)
            m.rope_forward(q, k, cos, sin)
            m.rope_backward(q.clone(), k.clone(), cos, sin)
    drivers.append(("liger rope", liger_rope))

    def liger_llama4():
        m = _load(os.path.join(lig, "llama4_rope.py"), "l2scan_liger_llama4")
        q, k = torch.randn(2, 3, 4, 32), torch.randn(2, 3, 2, 32)
        freqs = torch.polar(torch.ones(3, 16), torch.randn(3, 16))
        m.llama4_rope_forward(q, k, freqs)
    drivers.append(("liger llama4_rope", liger_llama4))

    def liger_mrope():
        m = _load(os.path.join(lig, "qwen2vl_mrope.py"), "l2scan_liger_mrope")
        q, k = torch.randn(2, 4, 3, 16), torch.randn(2, 2, 3, 16)
        cos, sin = torch.randn(3, 2, 3, 16), torch.randn(3, 2, 3, 16)
        m.qwen2vl_mrope_forward(q, k, cos, sin, [2, 3, 3])
    drivers.append(("liger qwen2vl_mrope", liger_mrope))

    def tutorial(fname, calls):
        def run():
            m = _load(os.path.join(a.tutorials, fname), "l2scan_" + re.sub(r"\W", "_", fname))
            calls(m)
        return run
    # the tutorials' own host functions at small shapes (their __main__ parts do not run: loaded as modules)
    drivers.append(("tutorial 01 vector-add", tutorial("01-vector-add.py", lambda m: m.add(torch.rand(300), torch.rand(300)))))
    drivers.append(("tutorial 02 fused-softmax", tutorial("02-fused-softmax.py", lambda m: m.softmax(torch.randn(5, 70)))))
    drivers.append(("tutorial 03 matmul", tutorial("03-matrix-multiplication.py", lambda m: m.matmul(
        torch.randn(64, 64, dtype=torch.float16), torch.randn(64, 64, dtype=torch.float16)))))
    drivers.append(("tutorial 04 dropout", tutorial("04-low-memory-dropout.py", lambda m: m.seeded_dropout(
        torch.randn(100), 0.5, 123))))

    def ln(m):
        x = torch.randn(8, 64, requires_grad=True)
        w, b = torch.randn(64, requires_grad=True), torch.randn(64, requires_grad=True)
        y = m.layer_norm(x, (64,), w, b, 1e-5)
        y.backward(torch.randn_like(y))
    drivers.append(("tutorial 05 layer-norm", tutorial("05-layer-norm.py", ln)))
    for name, fn in drivers:
        if a.only and a.only not in name:
            continue
        current["driver"] = name
        try:
            fn()
        except Exception as e:   # a driver that cannot run here is reported, the others still run
            rows.append({"driver": name, "error": f"{type(e).__name__}: {str(e)[:300]}"})
            print(f"{name}: ERROR {type(e).__name__}: {str(e)[:200]}", flush=True)
            traceback.print_exc(limit=3)
    out = {"modes": modes, "rows": rows,
           "marked_somewhere": sorted({(r["driver"], r["kernel"]) for r in rows if "modes" in r
                                       and any(x.get("marked") for x in r["modes"].values())})}
    print("marked:", out["marked_somewhere"])
    if a.out:
        with open(a.out, "w") as f:
            json.dump(out, f, indent=1, default=list)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
