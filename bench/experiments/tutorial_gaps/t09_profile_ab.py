"""Tutorial 09's own benchmark (its ``bench_fn`` on ``bench``'s inputs: a kernel ``reps`` times back to back inside a
profiler scope, after ``warmup_reps`` unprofiled launches; ``--rows`` picks bench's rows) under one runtime, with each autotuner held to the config that runtime's
autotuner took in session 23's call R1b, so no process tunes; run kernelc, Triton, Triton, kernelc:

    python3 bench/experiments/tutorial_gaps/t09_profile_ab.py --impl kernelc --tutorials DIR --out k.json
    python3 bench/experiments/tutorial_gaps/t09_profile_ab.py --summary k1.json t2.json t3.json k4.json

The profile is the tutorial's (``triton.profiler``: Proton under Triton, kprof under kernelc), read per frame as the
suite reads it (``bench/tutorial_runner.read_hatchet``: TFLOP/s over the frame's kernels). M = N = 8192, K = 512
fp16, the tutorial's default. R1b's one-run table read tma_persistent 0.879, descriptor_persistent 0.930 and
descriptor_persistent_ws 0.916 (kernelc/Triton TFLOP/s) where call R2 timed the same kernels level back to back
(``t09_b2b.py``): this says whether the tutorial's own measurement repeats those readings in alternated processes.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# kernel -> {WARP_SPECIALIZE: (BLOCK_SIZE_N, BLOCK_SIZE_K, EPILOGUE_SUBTILE or None, num_warps, num_stages)}, BM 128,
# GROUP_SIZE_M 8: each runtime's pick at M = N = 8192, K = 512 in call R1b
# (bench/results/triton_tutorials_09_s23_r1_h200.json.gz, "autotune")
PICKS = {
    "kernelc": {"matmul_kernel": {False: (256, 64, None, 8, 4)},
                "matmul_kernel_persistent": {False: (256, 64, None, 8, 3)},
                "matmul_kernel_tma": {False: (128, 64, None, 4, 3)},
                "matmul_kernel_tma_persistent": {False: (256, 64, True, 8, 4)},
                "matmul_kernel_descriptor_persistent": {False: (256, 64, True, 8, 4), True: (256, 64, False, 4, 3)}},
    "triton": {"matmul_kernel": {False: (128, 64, None, 4, 3)},
               "matmul_kernel_persistent": {False: (256, 64, None, 8, 3)},
               "matmul_kernel_tma": {False: (128, 64, None, 4, 2)},
               "matmul_kernel_tma_persistent": {False: (256, 64, True, 8, 4)},
               "matmul_kernel_descriptor_persistent": {False: (256, 64, False, 8, 3), True: (256, 64, False, 4, 3)}},
}


def _matches(cfg, pick) -> bool:
    bn, bk, sub, w, s = pick
    kw = cfg.kwargs
    return (kw.get("BLOCK_SIZE_M") == 128 and kw.get("BLOCK_SIZE_N") == bn and kw.get("BLOCK_SIZE_K") == bk
            and (sub is None or kw.get("EPILOGUE_SUBTILE") == sub) and cfg.num_warps == w and cfg.num_stages == s)


def hold_to_picks(mod, impl):
    """Each autotuner's configs cut to its picks; a kernel with a pick per WARP_SPECIALIZE gets an early prune that
    keeps the launch's one (Triton 3.6 keeps ``early_config_prune`` as an attribute, kernelc in ``prune_configs_by``).
    Returns {kernel: [config text]}."""
    held = {}
    for name, per_ws in PICKS[impl].items():
        tuner = getattr(mod, name)
        chosen = {}
        for ws, pick in per_ws.items():
            cfg = next((c for c in tuner.configs if _matches(c, pick)), None)
            if cfg is None:
                raise SystemExit(f"{name}: no config {pick} in the tutorial's list")
            chosen[ws] = cfg
        tuner.configs = list(dict.fromkeys(chosen.values()))
        if len(tuner.configs) > 1:
            def prune(configs, named_args, _chosen=chosen, **kwargs):
                ws = bool(kwargs.get("WARP_SPECIALIZE", named_args.get("WARP_SPECIALIZE", False)))
                return [_chosen[ws]]
            if hasattr(tuner, "early_config_prune"):
                tuner.early_config_prune = prune
            else:
                tuner.prune_configs_by = {"early_config_prune": prune}
        held[name] = [str(c) for c in tuner.configs]
    return held


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", choices=("kernelc", "triton"), required=True)
    ap.add_argument("--tutorials", required=True)
    ap.add_argument("--reps", type=int, default=3000)
    ap.add_argument("--warmup-reps", type=int, default=3000)
    ap.add_argument("--warm-only", action="store_true", help="compile the held configs (1 launch each), no profile")
    ap.add_argument("--rows", default="cublas,torch,naive,persistent,tma_persistent,tma,descriptor_persistent,"
                    "descriptor_persistent_ws", help="the tutorial's bench rows to run (default: all, its order)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    out_path = os.path.abspath(a.out)
    if a.impl == "kernelc":
        sys.path.insert(0, ROOT)
        from kernelc.compat import install
        install()
    sys.path.insert(0, ROOT)
    import importlib.util
    import torch
    import triton.profiler as proton
    spec = importlib.util.spec_from_file_location("t09prof", os.path.join(os.path.abspath(a.tutorials),
                                                                           "09-persistent-matmul.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # its benchmark runs under __main__ only
    res = {"impl": a.impl, "held": hold_to_picks(mod, a.impl), "reps": a.reps, "warmup_reps": a.warmup_reps}
    work = os.path.splitext(out_path)[0] + "_cwd"
    os.makedirs(work, exist_ok=True)
    os.chdir(work)  # the profile file lands here
    torch.manual_seed(0)
    # as the tutorial's __main__ and bench run them (bench's inputs, its bench_fn for each row), for the rows named;
    # --warm-only: one launch of each (compiles), its profile not read
    M = N = 8192
    K = 512
    A = torch.randn((M, K), device="cuda", dtype=torch.float16)
    B = torch.randn((K, N), device="cuda", dtype=torch.float16).T.contiguous()
    rows = {"cublas": (mod.cublas_matmul, A, B), "torch": (mod.torch_matmul, A, B), "naive": (mod.matmul, A, B.T),
            "persistent": (mod.matmul_persistent, A, B.T),
            "tma_persistent": (lambda x, y: mod.matmul_tma_persistent(x, y, False), A, B),
            "tma": (lambda x, y: mod.matmul_tma(x, y, False), A, B),
            "descriptor_persistent": (lambda x, y: mod.matmul_descriptor_persistent(x, y, False), A, B),
            "descriptor_persistent_ws": (lambda x, y: mod.matmul_descriptor_persistent(x, y, True), A, B)}
    if getattr(mod, "cublas", None) is None:
        rows.pop("cublas")
    names = [n for n in a.rows.split(",") if n in rows]
    res["rows"] = names
    proton.start("matmul", hook="triton")
    proton.deactivate()
    for n in names:
        fn, x, y = rows[n]
        mod.bench_fn(n, 1 if a.warm_only else a.reps, 0 if a.warm_only else a.warmup_reps, fn, x, y)
    proton.finalize()
    if not a.warm_only:
        from bench.tutorial_runner import read_hatchet
        res["frames"] = read_hatchet(os.path.join(work, "matmul.hatchet"))
    res["seconds"] = time.perf_counter() - t0
    with open(out_path, "w") as f:
        json.dump(res, f, indent=1)
    return 0


def summary(paths):
    """Per frame: each runtime's median over its processes of TFLOP/s, and kernelc/Triton (above 1: kernelc faster)."""
    per = {}
    for p in paths:
        d = json.load(open(p))
        for name, fr in (d.get("frames") or {}).items():
            if isinstance(fr, dict) and fr.get("tflops"):
                per.setdefault(name, {}).setdefault(d["impl"], []).append(fr["tflops"])
    lines = []
    for name in sorted(per):
        k, t = per[name].get("kernelc", []), per[name].get("triton", [])
        if k and t:
            lines.append(f"{name[:60]:60s} kernelc {statistics.median(k):6.1f} {[round(x, 1) for x in k]}  "
                         f"Triton {statistics.median(t):6.1f} {[round(x, 1) for x in t]}  "
                         f"k/T {statistics.median(k) / statistics.median(t):.3f}")
    return lines


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--summary":
        print("\n".join(summary(sys.argv[2:])))
        sys.exit(0)
    sys.exit(main())
