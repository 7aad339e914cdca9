"""Tutorial 09's flattened persistent kernels under several kernelc knob settings in one process, against Triton 3.6
(docs/triton-tutorials.md, "09 persistent GEMMs: the accumulator reset in the tile branch").

    python3 bench/experiments/tutorial_gaps/acc_reset_ab.py --tutorials DIR [--triton-site DIR] [--rounds 5]
        [--ks 512,4096] [--variants defaults,acc_reset,...] [--kernels ptr,tma,desc] [--out FILE.json]

Kernels (M = N = 8192 fp16 at each K of ``--ks``, ``b`` given as (N, K) as the tutorial passes it):
``ptr``: ``matmul_kernel_persistent`` at 128x256x64 s4 w8 and 128x128x64 s3 w4 (both tuners' picks);
``tma``: ``matmul_kernel_tma_persistent`` and ``desc``: ``matmul_kernel_descriptor_persistent`` (FLATTEN=True),
at 128x256x64 s3 w8, not subtiled. ``VARIANTS`` names the kernelc settings (environment knobs).

kernelc's process loads the tutorial's kernels once per variant (their own ``@jit`` objects), sets the variant's
knobs before each one's first launch (compile knobs are read at compile time), checks every result against torch,
then times them with ``do_bench`` (warmup 25 ms, rep 100 ms) in ``--rounds`` rounds, the variants' order rotating
by round. Triton's process times the same launches. Per point: the median TFLOP/s over the rounds, and every
round's. The tutorial file is not part of this repository. Nothing here is a test.
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

VARIANTS = {
    "defaults": {},
    "acc_reset": {"KERNELC_FLATTEN_ACC_RESET": "1"},
    "words": {"KERNELC_WGMMA_DESC_WORDS": "1"},
    "acc_reset_words": {"KERNELC_FLATTEN_ACC_RESET": "1", "KERNELC_WGMMA_DESC_WORDS": "1"},
}
# every knob any variant sets: a variant leaves the others at their defaults
_KNOBS = sorted({k for v in VARIANTS.values() for k in v})

_CHILD = r"""
import importlib.util, json, os, statistics, sys, time
a = json.loads(sys.argv[1])
kc = a["impl"] == "kernelc"
if kc:
    from kernelc.compat import install
    install()
import torch, triton
from triton.testing import do_bench
from triton.tools.tensor_descriptor import TensorDescriptor
NUM_SMS = torch.cuda.get_device_properties("cuda").multi_processor_count
triton.set_allocator(lambda size, align, stream: torch.empty(size, device="cuda", dtype=torch.int8))
variants = list(a["variants"]) if kc else ["triton"]

def setknobs(v):
    if kc:
        for k in a["knobs"]:
            os.environ.pop(k, None)
        os.environ.update(a["variants"][v])

def load(name):
    spec = importlib.util.spec_from_file_location(name, a["mod"])
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    return m

mods = {}
for v in variants:   # each variant's own @jit objects: the first launch compiles under the knobs set then
    setknobs(v)
    mods[v] = load("tut09_" + v)

def close(got, ref):
    err = (got.float() - ref).abs().max().item()
    return err, bool(torch.allclose(got.float(), ref, atol=1e-1, rtol=1e-2))

cases = []   # (label, {variant: fn}, flop, C, ref)
M = N = 8192
torch.manual_seed(0)
for K in a["ks"]:
    A = torch.randn((M, K), device="cuda", dtype=torch.float16)
    B = torch.randn((N, K), device="cuda", dtype=torch.float16)
    Bt = B.T
    ref = torch.matmul(A, Bt).float()
    for kern, (bm, bn, bk, s, w) in a["cases"]:
        grid = (min(NUM_SMS, triton.cdiv(M, bm) * triton.cdiv(N, bn)),)
        C = torch.empty((M, N), device="cuda", dtype=torch.float16)
        fns = {}
        for v in variants:
            m = mods[v]
            if kern == "ptr":
                fns[v] = lambda m=m, C=C, A=A, Bt=Bt, K=K, bm=bm, bn=bn, bk=bk, s=s, w=w, grid=grid: \
                    m.matmul_kernel_persistent[grid](A, Bt, C, M, N, K, A.stride(0), A.stride(1), Bt.stride(0),
                        Bt.stride(1), C.stride(0), C.stride(1), BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk,
                        GROUP_SIZE_M=8, NUM_SMS=NUM_SMS, num_stages=s, num_warps=w)
            elif kern == "tma":
                ad = TensorDescriptor.from_tensor(A, [bm, bk]); bd = TensorDescriptor.from_tensor(B, [bn, bk])
                cd = TensorDescriptor.from_tensor(C, [bm, bn])
                fns[v] = lambda m=m, ad=ad, bd=bd, cd=cd, K=K, bm=bm, bn=bn, bk=bk, s=s, w=w, grid=grid: \
                    m.matmul_kernel_tma_persistent[grid](ad, bd, cd, M, N, K, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn,
                        BLOCK_SIZE_K=bk, GROUP_SIZE_M=8, FP8_OUTPUT=False, EPILOGUE_SUBTILE=False, NUM_SMS=NUM_SMS,
                        WARP_SPECIALIZE=False, num_stages=s, num_warps=w)
            else:
                fns[v] = lambda m=m, C=C, A=A, B=B, K=K, bm=bm, bn=bn, bk=bk, s=s, w=w, grid=grid: \
                    m.matmul_kernel_descriptor_persistent[grid](A, B, C, M, N, K, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn,
                        BLOCK_SIZE_K=bk, GROUP_SIZE_M=8, EPILOGUE_SUBTILE=False, NUM_SMS=NUM_SMS,
                        WARP_SPECIALIZE=False, FLATTEN=True, num_stages=s, num_warps=w)
        name = {"ptr": "matmul_kernel_persistent", "tma": "matmul_kernel_tma_persistent",
                "desc": "matmul_kernel_descriptor_persistent"}[kern]
        cases.append((f"09 {name} {bm}x{bn}x{bk} s{s} w{w} K={K}", fns, 2.0 * M * N * K, C, ref))

recs = {}
for label, fns, flop, C, ref in cases:   # first launches (compiles) and checks
    for v in variants:
        setknobs(v)
        r = recs.setdefault((label, v), {"case": label, "variant": v, "flop": flop, "tflops": []})
        try:
            C.fill_(float("nan"))
            t0 = time.perf_counter(); fns[v](); torch.cuda.synchronize()
            r["first_s"] = round(time.perf_counter() - t0, 3)
            r["max_err"], r["ok"] = close(C, ref)
        except Exception as e:
            r["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        print(json.dumps({k: r[k] for k in r if k != "tflops"}), flush=True)
json.dump(list(recs.values()), open(a["out"], "w"), indent=1)
for rnd in range(a["rounds"]):
    k = rnd % len(variants)
    order = variants[k:] + variants[:k]
    for label, fns, flop, C, ref in cases:
        for v in order:
            r = recs[(label, v)]
            if r.get("ok"):
                r["tflops"].append(flop / do_bench(fns[v], warmup=25, rep=100) * 1e-9)
                r["median"] = statistics.median(r["tflops"])
    json.dump(list(recs.values()), open(a["out"], "w"), indent=1)   # every round: a cut run keeps the rounds done
    print(f"round {rnd} done", flush=True)
"""

CASES = {"ptr": [(128, 256, 64, 4, 8), (128, 128, 64, 3, 4)], "tma": [(128, 256, 64, 3, 8)],
         "desc": [(128, 256, 64, 3, 8)]}


def run(impl, mod, args, variants):
    work = tempfile.mkdtemp(prefix=f"accab_{impl}_")
    out = os.path.join(work, "out.json")
    env = dict(os.environ)
    env["TRITON_CACHE_DIR"] = os.path.join(work, "tc")
    env["KERNELC_CACHE_DIR"] = os.path.join(work, "kc")
    env["PYTHONPATH"] = (args.triton_site if impl == "triton" else ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    cases = [(k, c) for k in args.kernels.split(",") if k for c in CASES[k]]
    payload = dict(impl=impl, mod=mod, out=out, cases=cases, ks=[int(k) for k in args.ks.split(",")],
                   rounds=args.rounds, variants={v: VARIANTS[v] for v in variants}, knobs=_KNOBS)
    try:
        r = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(payload)], env=env, cwd=ROOT,
                           timeout=args.timeout, capture_output=True, text=True)
        sys.stdout.write(r.stdout)
        sys.stderr.write(r.stderr[-3000:])
    except subprocess.TimeoutExpired as e:   # the rounds finished before the cut are in `out`
        part = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        sys.stdout.write(part + f"\n{impl}: cut after {args.timeout} s\n")
    if not os.path.exists(out):
        return []
    return json.load(open(out))


def main(argv=None) -> int:
    sys.path.insert(0, HERE)
    from tutorial_sweep import kernel_module
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tutorials", default=os.path.join(ROOT, ".ext", "tutorials"))
    ap.add_argument("--triton-site", default="")
    ap.add_argument("--no-triton", action="store_true")
    ap.add_argument("--variants", default="defaults,acc_reset,acc_reset_words", help=f"of {', '.join(VARIANTS)}")
    ap.add_argument("--kernels", default="ptr,tma,desc", help=f"of {', '.join(CASES)}")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ks", default="512,4096")
    ap.add_argument("--timeout", type=int, default=240, help="seconds per process (kernelc's, then Triton's)")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "acc_reset_ab.json"))
    a = ap.parse_args(argv)
    variants = [v for v in a.variants.split(",") if v]
    for v in variants:
        if v not in VARIANTS:
            ap.error(f"unknown variant {v!r} (known: {', '.join(VARIANTS)})")
    mod = os.path.join(tempfile.mkdtemp(prefix="accab_"), "k09.py")
    with open(mod, "w") as f:
        f.write(kernel_module(os.path.join(a.tutorials, "09-persistent-matmul.py")))
    recs = run("kernelc", mod, a, variants)
    if not a.no_triton:
        recs += run("triton", mod, a, variants)
    table = {}
    for r in recs:
        table.setdefault(r["case"], {})[r["variant"]] = r
    cols = variants + ["triton"]
    print("case | " + " | ".join(cols) + " | " + " | ".join(f"{v}/triton" for v in variants)
          + " (median TFLOP/s over rounds)")
    for case, vs in table.items():
        cell = lambda v: (f"{vs[v]['median']:.1f}" if "median" in vs.get(v, {}) else  # noqa: E731
                          vs.get(v, {}).get("error", "FAIL" if v in vs else "-")[:40])
        ratio = lambda x, y: (f"{vs[x]['median'] / vs[y]['median']:.3f}"  # noqa: E731
                              if "median" in vs.get(x, {}) and "median" in vs.get(y, {}) else "-")
        print(f"{case} | " + " | ".join(cell(v) for v in cols) + " | "
              + " | ".join(ratio(v, "triton") for v in variants))
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    json.dump(recs, open(a.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
