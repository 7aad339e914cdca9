"""The pointer-load GEMMs of tutorials 09 (``matmul_kernel``, ``matmul_kernel_persistent``) and 08
(``grouped_matmul_kernel``) at fixed configs, under kernelc variants and Triton 3.6, side by side on one GPU
(docs/triton-tutorials.md, "09/08 pointer-load GEMMs").

    python3 bench/experiments/tutorial_gaps/pointer_gemms.py --tutorials DIR [--triton-site DIR]
        [--variants base,store4,...] [--only 08|09] [--out FILE.json]

One process per variant: kernelc with the environment of the variant (``VARIANTS``), and Triton. Each
loads the tutorials' ``@triton.jit`` functions (autotune dropped, ``tutorial_sweep.kernel_module``),
launches each kernel at each config on the timed shape and, under kernelc, on a ragged one (masks), checks
both against torch and times the timed shape with ``triton.testing.do_bench`` (the tutorials' timer; the kernelc
process uses kernelc's). 09: M = N = 8192, K = 512 fp16 (the tutorial's default; `--ks` for others), ``b`` given as ``B.T`` of
a contiguous (N, K) tensor as the tutorial does. 08: four GEMMs of (M, 8192) x (8192, 8192) (its
``m-8192-k-8192`` table, M = 128 and 1024) and the check's sizes (1024, 512, 256, 128 cubed), through
device arrays of pointers as the tutorial's ``group_gemm_fn``; a grid of ``NUM_SM`` programs.
The tutorial files are not part of this repository.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))

# (BM, BN, BK, stages, warps): the picks of both tuners on an H100 (call C1)
CONFIGS_09 = [(128, 128, 64, 3, 4), (128, 256, 64, 4, 8)]
# (BM, BN, BK, NUM_SM-or-0 for the device's): the two configs the tuners picked in call C1
CONFIGS_08 = [(128, 128, 64, 0), (64, 128, 64, 0)]
VARIANTS = {
    # main's code: 4-byte stores from the MMA layout, wgmma descriptors rebuilt per k step
    "base": {"KERNELC_STORE_SMEM_DISCOUNT": "1", "KERNELC_WGMMA_DESC_STEPPED": "0"},
    "desc": {"KERNELC_STORE_SMEM_DISCOUNT": "1", "KERNELC_WGMMA_DESC_STEPPED": "1"},   # descriptors stepped only
    # the branch's defaults: both (the epilogue through shared memory to 16-byte stores)
    "store4": {"KERNELC_STORE_SMEM_DISCOUNT": "4", "KERNELC_WGMMA_DESC_STEPPED": "1"},
    "store4_flatten": {"KERNELC_STORE_SMEM_DISCOUNT": "4", "KERNELC_WGMMA_DESC_STEPPED": "1",
                       "KERNELC_FLATTEN_LOOPS": "1"},
    # branch pp09: this tree's defaults (the pointer persistent loop nested), flattened with the epilogue's
    # conversion in as many pieces as the layouts split on (Triton's scratch), and in the fewest that fit
    "branch": {},
    "flat": {"KERNELC_FLATTEN_LOOPS": "on", "KERNELC_CVT_PIECES": "max"},
    "flat_fit": {"KERNELC_FLATTEN_LOOPS": "on", "KERNELC_CVT_PIECES": "fit"},
    # branch pp10: flattened with the tile values the K loop reads carried from step to step (the default of
    # KERNELC_FLATTEN_CARRY_TILES, so `flat` above has it too), and recomputed on every step (pp09's loop)
    "flat_recompute": {"KERNELC_FLATTEN_LOOPS": "on", "KERNELC_FLATTEN_CARRY_TILES": "0"},
    # the pointer persistent loop nested whatever the default (tma: only TMA K loops are flattened)
    "nested": {"KERNELC_FLATTEN_LOOPS": "tma"},
}

_CHILD = r"""
import importlib.util, json, sys, time
a = json.loads(sys.argv[1])
if a["impl"] == "kernelc":
    from kernelc.compat import install
    install()
import torch, triton
spec = importlib.util.spec_from_file_location("tut_kernels", a["mod"])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
from triton.testing import do_bench
NUM_SMS = torch.cuda.get_device_properties("cuda").multi_processor_count
out = []

def record(rec, fn, check, timed):
    try:
        t0 = time.perf_counter(); fn(); torch.cuda.synchronize(); rec["first_s"] = round(time.perf_counter() - t0, 3)
        rec["max_err"], rec["ok"] = check()
        if timed and rec["ok"]:
            ms = do_bench(fn, warmup=25, rep=100)
            rec["ms"] = ms
            rec["tflops"] = rec["flop"] / ms * 1e-9
    except Exception as e:   # a config that does not fit: recorded, the others go on
        rec["error"] = f"{type(e).__name__}: {str(e)[:300]}"
    print(json.dumps(rec), flush=True)
    out.append(rec)

if "09" in a["only"]:
    shapes = [(8192, 8192, k, True) for k in a["ks"]] + \
        ([(1000, 1240, 520, False)] if a["impl"] == "kernelc" and a["ragged"] else [])
    for (M, N, K, timed) in shapes:   # the ragged shape checks kernelc's masks (Triton's are not in question)
        torch.manual_seed(0)
        A = torch.randn((M, K), device="cuda", dtype=torch.float16)
        B = torch.randn((N, K), device="cuda", dtype=torch.float16)
        Bt = B.T
        ref = torch.matmul(A, Bt).float()
        for (bm, bn, bk, s, w) in a["configs09"]:
            C = torch.empty((M, N), device="cuda", dtype=torch.float16)
            def check(C=C):
                err = (C.float() - ref).abs().max().item()
                return err, bool(torch.allclose(C.float(), ref, atol=1e-1, rtol=1e-2))
            grid1 = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
            gridp = (min(NUM_SMS, triton.cdiv(M, bm) * triton.cdiv(N, bn)),)
            cfg = dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8, num_stages=s, num_warps=w)
            runs = {
                "matmul_kernel": lambda C=C: mod.matmul_kernel[grid1](
                    A, Bt, C, M, N, K, A.stride(0), A.stride(1), Bt.stride(0), Bt.stride(1), C.stride(0), C.stride(1),
                    **cfg),
                "matmul_kernel_persistent": lambda C=C: mod.matmul_kernel_persistent[gridp](
                    A, Bt, C, M, N, K, A.stride(0), A.stride(1), Bt.stride(0), Bt.stride(1), C.stride(0), C.stride(1),
                    NUM_SMS=NUM_SMS, **cfg),
            }
            for name, fn in runs.items():
                C.zero_()
                record({"kernel": name, "shape": [M, N, K], "config": [bm, bn, bk, s, w], "flop": 2.0 * M * N * K},
                       fn, check, timed)

if "08" in a["only"]:
    def group(ms, n, k):
        torch.manual_seed(0)
        As = [torch.randn((m, k), device="cuda", dtype=torch.float16) for m in ms]
        Bs = [torch.randn((k, n), device="cuda", dtype=torch.float16) for _ in ms]
        Cs = [torch.empty((m, n), device="cuda", dtype=torch.float16) for m in ms]
        dev = lambda xs, dt=None: torch.tensor(xs, device="cuda", dtype=dt)
        arrays = (dev([x.data_ptr() for x in As]), dev([x.data_ptr() for x in Bs]), dev([x.data_ptr() for x in Cs]),
                  dev(sum(([m, n, k] for m in ms), []), torch.int32),
                  dev(sum(([A.stride(0), B.stride(0), C.stride(0)] for A, B, C in zip(As, Bs, Cs)), []), torch.int32))
        return As, Bs, Cs, arrays
    for (label, ms, n, k, timed) in (("check", None, None, None, False), ("m128", [128] * 4, 8192, 8192, True),
                                     ("m1024", [1024] * 4, 8192, 8192, True)):
        if ms is None:  # the tutorial's check: 1024, 512, 256, 128 cubed
            sizes = [1024, 512, 256, 128]
            torch.manual_seed(0)
            As = [torch.randn((s, s), device="cuda", dtype=torch.float16) for s in sizes]
            Bs = [torch.randn((s, s), device="cuda", dtype=torch.float16) for s in sizes]
            Cs = [torch.empty((s, s), device="cuda", dtype=torch.float16) for s in sizes]
            dev = lambda xs, dt=None: torch.tensor(xs, device="cuda", dtype=dt)
            arrays = (dev([x.data_ptr() for x in As]), dev([x.data_ptr() for x in Bs]), dev([x.data_ptr() for x in Cs]),
                      dev(sum(([s, s, s] for s in sizes), []), torch.int32),
                      dev(sum(([s, s, s] for s in sizes), []), torch.int32))
            flop = sum(2.0 * s ** 3 for s in sizes)
            timed = True
        else:
            As, Bs, Cs, arrays = group(ms, n, k)
            flop = sum(2.0 * m * n * k for m in ms)
        refs = [torch.matmul(A, B).float() for A, B in zip(As, Bs)]
        def check():
            err = max((C.float() - r).abs().max().item() for C, r in zip(Cs, refs))
            return err, all(bool(torch.allclose(C.float(), r, atol=1e-1, rtol=1e-2)) for C, r in zip(Cs, refs))
        for (bm, bn, bk, nsm) in a["configs08"]:
            nsm = nsm or NUM_SMS
            fn = lambda bm=bm, bn=bn, bk=bk, nsm=nsm: mod.grouped_matmul_kernel[(nsm,)](
                *arrays, len(As), NUM_SM=nsm, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk)
            for C in Cs:
                C.zero_()
            record({"kernel": "grouped_matmul_kernel", "shape": label, "config": [bm, bn, bk, nsm], "flop": flop},
                   fn, check, timed)
json.dump(out, open(a["out"], "w"), indent=1)
"""


def run(impl: str, env_extra: dict, mods: dict, triton_site: str, only, timeout: int, ragged: bool = True,
        ks=(512,)):
    work = tempfile.mkdtemp(prefix=f"ptrgemm_{impl}_")
    out = os.path.join(work, "out.json")
    env = dict(os.environ, **env_extra)
    env["TRITON_CACHE_DIR"] = os.path.join(work, "tc")
    env["KERNELC_CACHE_DIR"] = os.path.join(work, "kc")
    env["PYTHONPATH"] = (triton_site if impl == "triton" else ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    payload = dict(impl=impl, mod=mods["k"], only=only, configs09=CONFIGS_09, configs08=CONFIGS_08, out=out,
                   ragged=ragged, ks=ks)
    try:
        r = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(payload)], env=env, cwd=work, timeout=timeout,
                           capture_output=True, text=True)
    except subprocess.TimeoutExpired as e:
        part = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        recs = [json.loads(x) for x in part.splitlines() if x.startswith("{")]
        return recs or {"error": f"timeout after {timeout} s"}
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr[-3000:])
    if r.returncode or not os.path.exists(out):
        return {"error": r.stderr.strip().splitlines()[-5:] if r.stderr.strip() else f"exit {r.returncode}"}
    return json.load(open(out))


def main(argv=None) -> int:
    sys.path.insert(0, HERE)
    from tutorial_sweep import kernel_module
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tutorials", default=os.path.join(ROOT, ".ext", "tutorials"))
    ap.add_argument("--triton-site", default="")
    ap.add_argument("--no-triton", action="store_true")
    ap.add_argument("--variants", default="base,store4,desc,store4_flatten")
    ap.add_argument("--only", default="08,09")
    ap.add_argument("--timeout", type=int, default=90, help="seconds per process")
    ap.add_argument("--no-ragged", action="store_true", help="skip kernelc's check at a ragged shape (4 compiles less)")
    ap.add_argument("--ks", default="512", help="09's K values (M = N = 8192), comma-separated")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "pointer_gemms.json"))
    a = ap.parse_args(argv)
    mod = os.path.join(tempfile.mkdtemp(prefix="ptrgemm_"), "k0809.py")
    text = kernel_module(os.path.join(a.tutorials, "09-persistent-matmul.py"))
    text += "\n" + kernel_module(os.path.join(a.tutorials, "08-grouped-gemm.py"))
    with open(mod, "w") as f:
        f.write(text)
    # Triton first, then the variants in the order given (a run cut by the overall limit loses the last)
    runs = {} if a.no_triton else {"triton": ("triton", {})}
    runs.update({f"kernelc_{v}": ("kernelc", VARIANTS[v]) for v in a.variants.split(",") if v})
    res = {}
    for label, (impl, env) in runs.items():
        print(f"== {label} {env}", flush=True)
        res[label] = run(impl, env, {"k": mod}, a.triton_site, a.only.split(","), a.timeout, not a.no_ragged,
                         [int(k) for k in a.ks.split(",")])
    rows = {}
    for label, recs in res.items():
        if isinstance(recs, dict):
            print(f"{label}: {recs['error']}")
            continue
        for r in recs:
            key = (r["kernel"], str(r["shape"]), tuple(r["config"]))
            rows.setdefault(key, {})[label] = (r.get("tflops") if r.get("ok") and "tflops" in r else
                                              "ok" if r.get("ok") else "FAIL" if "ok" in r else "err")
    labels = list(res)
    print("kernel shape config | " + " | ".join(labels) + " (TFLOP/s; ok = checked, not timed)")
    for key, v in rows.items():
        cells = [f"{v[x]:.1f}" if isinstance(v.get(x), float) else str(v.get(x)) for x in labels]
        print(" ".join(str(k) for k in key) + " | " + " | ".join(cells))
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    json.dump(res, open(a.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
