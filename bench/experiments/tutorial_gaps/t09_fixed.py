"""Tutorial 09's six kernels at fixed configs, kernelc and Triton 3.6 in alternating processes on one GPU, so that
the process-to-process spread of each implementation is measured next to the ratio (docs/triton-tutorials.md,
"09: what moved between F9 and F10").

    python3 bench/experiments/tutorial_gaps/t09_fixed.py --tutorials DIR [--triton-site DIR] [--passes 3]
        [--variants kernelc,kernelc_u0,triton] [--ks 512,4096] [--warm] [--out FILE.json]

Why: in the tenth session's F10 run three of 09's TMA kernels read 0.91-0.96 of Triton, against 1.00-1.02 in F9.
Both runs autotuned to the same configs, and kernelc's own TFLOP/s did not move; Triton's did (by up to 8%). A
single pair of processes cannot separate a change in kernelc from the spread between processes; this runs each
variant ``--passes`` times, in rotating order, each time in a fresh process (compiled kernels come from a cache dir
per variant, so only the first pass compiles).

Variants: ``kernelc`` (defaults), ``kernelc_u0`` (``KERNELC_UNIFORM_WARPGROUP=0``), ``triton``, and other kernelc
knob settings named in ``VARIANTS``; ``--kernels`` keeps some of the cases. Each process:
the tutorial's ``@triton.jit`` functions (autotune and launch metadata dropped), M = N = 8192 fp16, every case
checked against torch, then timed with ``triton.testing.do_bench`` (warmup 25 ms, rep 100 ms) ``--reps`` times;
a case's reading is the median. The tutorial file is not part of this repository. Nothing here is a test.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))

# (kernel, BN, BK, stages, warps, EPILOGUE_SUBTILE); BM = 128. The picks of F9/F10's autotuners on an H100 (both
# implementations), plus the 8-warp 128x256 neighbours where kernelc's knob changes the code.
CASES = [("matmul_kernel", 128, 64, 3, 8, None), ("matmul_kernel", 256, 64, 3, 8, None),
         ("matmul_kernel_persistent", 256, 64, 4, 8, None), ("matmul_kernel_persistent", 256, 64, 3, 8, None),
         ("matmul_kernel_tma", 128, 64, 3, 4, None), ("matmul_kernel_tma", 256, 64, 3, 8, None),
         ("matmul_kernel_tma_persistent", 256, 64, 4, 8, True),
         ("matmul_kernel_descriptor_persistent", 256, 64, 4, 8, True),
         ("matmul_kernel_descriptor_persistent_ws", 256, 64, 3, 4, False),
         ("matmul_kernel_descriptor_persistent_ws", 128, 64, 4, 8, False),
         ("matmul_kernel_persistent", 128, 64, 3, 4, None)]
VARIANTS = {"kernelc": ("kernelc", {}), "kernelc_u0": ("kernelc", {"KERNELC_UNIFORM_WARPGROUP": "0"}),
            "kernelc_mw0": ("kernelc", {"KERNELC_COPY_MAD_WIDE": "0"}), "triton": ("triton", {})}
# (branch desc11 measured two more with this script in call H11b: KERNELC_FLATTEN_ACC_RESET=1 and that plus
# KERNELC_WGMMA_DESC_WORDS=1; both knobs were removed after it: docs/triton-tutorials.md, "09 persistent GEMMs: the
# accumulator reset in the tile branch")

_CHILD = r"""
import importlib.util, json, statistics, sys, time
a = json.loads(sys.argv[1])
if a["impl"] == "kernelc":
    from kernelc.compat import install
    install()
import torch, triton
from triton.tools.tensor_descriptor import TensorDescriptor
from triton.testing import do_bench
spec = importlib.util.spec_from_file_location("k09", a["mod"])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
NUM_SMS = torch.cuda.get_device_properties("cuda").multi_processor_count
triton.set_allocator(lambda size, align, stream: torch.empty(size, device="cuda", dtype=torch.int8))
out = []
M = N = 8192
for K in a["ks"]:
    torch.manual_seed(0)
    A = torch.randn((M, K), device="cuda", dtype=torch.float16)
    B = torch.randn((N, K), device="cuda", dtype=torch.float16)
    Bt = B.T
    ref = torch.matmul(A, Bt).float()
    for (kern, bn, bk, s, w, st) in a["cases"]:
        bm = 128
        tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
        C = torch.empty((M, N), device="cuda", dtype=torch.float16)
        cfg = dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8, num_stages=s, num_warps=w)
        ptr_args = (A, Bt, C, M, N, K, A.stride(0), A.stride(1), Bt.stride(0), Bt.stride(1), C.stride(0), C.stride(1))
        if kern == "matmul_kernel":
            fn = lambda: mod.matmul_kernel[(tiles,)](*ptr_args, **cfg)
        elif kern == "matmul_kernel_persistent":
            fn = lambda: mod.matmul_kernel_persistent[(min(NUM_SMS, tiles),)](*ptr_args, NUM_SMS=NUM_SMS, **cfg)
        elif kern == "matmul_kernel_tma":
            ad = TensorDescriptor.from_tensor(A, [bm, bk]); bd = TensorDescriptor.from_tensor(B, [bn, bk])
            cd = TensorDescriptor.from_tensor(C, [bm, bn])
            fn = lambda: mod.matmul_kernel_tma[(tiles,)](ad, bd, cd, M, N, K, FP8_OUTPUT=False,
                                                          WARP_SPECIALIZE=False, **cfg)
        elif kern == "matmul_kernel_tma_persistent":
            ad = TensorDescriptor.from_tensor(A, [bm, bk]); bd = TensorDescriptor.from_tensor(B, [bn, bk])
            cd = TensorDescriptor.from_tensor(C, [bm, bn // 2 if st else bn])
            fn = lambda: mod.matmul_kernel_tma_persistent[(min(NUM_SMS, tiles),)](ad, bd, cd, M, N, K,
                FP8_OUTPUT=False, EPILOGUE_SUBTILE=st, NUM_SMS=NUM_SMS, WARP_SPECIALIZE=False, **cfg)
        else:
            ws = kern.endswith("_ws")
            fn = lambda: mod.matmul_kernel_descriptor_persistent[(min(NUM_SMS, tiles),)](A, B, C, M, N, K,
                EPILOGUE_SUBTILE=st, NUM_SMS=NUM_SMS, WARP_SPECIALIZE=ws, FLATTEN=not ws, **cfg)
        rec = {"kernel": kern, "K": K, "config": [bm, bn, bk, s, w, st]}
        try:
            C.fill_(float("nan"))
            t0 = time.perf_counter(); fn(); torch.cuda.synchronize(); rec["first_s"] = round(time.perf_counter() - t0, 3)
            rec["max_err"] = (C.float() - ref).abs().max().item()
            rec["ok"] = bool(torch.allclose(C.float(), ref, atol=1e-1, rtol=1e-2))
            ms = [do_bench(fn, warmup=25, rep=100) for _ in range(a["reps"])]
            rec["ms_all"] = ms
            rec["tflops"] = 2.0 * M * N * K / statistics.median(ms) * 1e-9
        except Exception as e:
            rec["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        print(json.dumps(rec), flush=True)
        out.append(rec)
        json.dump(out, open(a["out"], "w"), indent=1)
"""


def run_once(label, mod, a, work):
    impl, extra = VARIANTS[label]
    os.makedirs(work, exist_ok=True)
    out = os.path.join(work, f"{label}_{len(os.listdir(work))}.json")
    env = dict(os.environ, **extra)
    env["TRITON_CACHE_DIR"] = os.path.join(a.cache_root, label, "tc")
    env["KERNELC_CACHE_DIR"] = os.path.join(a.cache_root, label, "kc")
    env["PYTHONPATH"] = (a.triton_site if impl == "triton" else ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    cases = [c for c in CASES if not a.kernels or c[0] in a.kernels.split(",")]
    payload = dict(impl=impl, mod=mod, out=out, cases=cases, ks=[int(k) for k in a.ks.split(",")], reps=a.reps)
    try:
        r = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(payload)], env=env, cwd=ROOT,
                           timeout=a.timeout, capture_output=True, text=True)
        if r.returncode:
            sys.stderr.write(f"{label}: rc {r.returncode}\n{r.stderr[-2000:]}\n")
    except subprocess.TimeoutExpired:   # the cases finished before the cut are in `out`
        sys.stderr.write(f"{label}: cut after {a.timeout} s\n")
    return json.load(open(out)) if os.path.exists(out) else []


def report(passes, labels, a, final=False):
    """The table (printed) and the JSON of the passes so far: written after every process, so a run cut short keeps
    what it measured."""
    rows = {}
    for v, runs in passes.items():
        for recs in runs:
            for r in recs:
                key = (r["kernel"], r["K"], tuple(r["config"]))
                cell = rows.setdefault(key, {}).setdefault(v, [])
                cell.append(r["tflops"] if r.get("ok") else None)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    json.dump({"cases": CASES, "variants": {k: VARIANTS[k][1] for k in labels}, "passes": passes, "complete": final},
              open(a.out, "w"), indent=1)
    if not final:
        return
    print("kernel K (BM BN BK stages warps subtile) | median TFLOP/s over passes [min-max] per variant | "
          "ratios of medians to triton")
    for key, vs in rows.items():
        cells, med = [], {}
        for v in labels:
            xs = [x for x in vs.get(v, []) if x is not None]
            if xs:
                med[v] = statistics.median(xs)
                cells.append(f"{v} {med[v]:.1f} [{min(xs):.1f}-{max(xs):.1f}]")
            else:
                cells.append(f"{v} FAIL/none")
        ratios = [f"{v}/triton {med[v] / med['triton']:.3f}" for v in labels if v != "triton" and v in med
                  and "triton" in med]
        print(f"{key[0]} K={key[1]} {key[2]} | " + " | ".join(cells) + " | " + " ".join(ratios), flush=True)


def main(argv=None) -> int:
    sys.path.insert(0, HERE)
    from tutorial_sweep import kernel_module
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tutorials", default=os.path.join(ROOT, ".ext", "tutorials"))
    ap.add_argument("--triton-site", default="")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--ks", default="512,4096")
    ap.add_argument("--kernels", default="", help="only these kernels of CASES (comma-separated names; default all)")
    ap.add_argument("--timeout", type=int, default=150, help="seconds per process")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "t09_fixed.json"))
    ap.add_argument("--warm", action="store_true", help="first compile every variant in parallel processes "
                    "(one GPU; that pass's timings are dropped)")
    a = ap.parse_args(argv)
    work = tempfile.mkdtemp(prefix="t09f_")
    a.cache_root = os.path.join(work, "cache")
    mod = os.path.join(work, "k09.py")
    with open(mod, "w") as f:
        f.write(kernel_module(os.path.join(a.tutorials, "09-persistent-matmul.py")))
    # each process's own JSON (the cases it finished) beside --out
    runs = os.path.splitext(os.path.abspath(a.out))[0] + "_runs"
    os.makedirs(runs, exist_ok=True)
    labels = a.variants.split(",")
    passes = {v: [] for v in labels}
    if a.warm:   # compile every variant at once (timings of this pass are dropped), so the passes below only load
        import concurrent.futures
        warm = argparse.Namespace(**{**vars(a), "reps": 1})
        with concurrent.futures.ThreadPoolExecutor(len(labels)) as ex:
            for v, recs in zip(labels, ex.map(lambda v: run_once(v, mod, warm, os.path.join(runs, "warm", v)),
                                              labels)):
                print(f"warm {v}: {len(recs)} cases", flush=True)
    for p in range(a.passes):
        for v in labels[p % len(labels):] + labels[:p % len(labels)]:   # rotate who goes first
            passes[v].append(run_once(v, mod, a, runs))
            print(f"pass {p} {v}: {len(passes[v][-1])} cases", flush=True)
            report(passes, labels, a)
    report(passes, labels, a, final=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
