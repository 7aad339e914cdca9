"""Tutorial 03's ``matmul_kernel`` at fixed autotune configs, under kernelc and under Triton 3.6, side by side
(a GPU is needed; docs/triton-tutorials.md, "03 matmul").

    python3 bench/experiments/tutorial_gaps/t03_configs.py --tutorials DIR [--triton-site DIR]
        [--runs kernelc,kernelc_sync,triton] [--dtypes fp16,fp8] [--out FILE.json]

Each run is its own process: ``kernelc`` (this tree's defaults), ``kernelc_sync`` (``KERNELC_WGMMA_ASYNC=0``:
the wgmma of a cp.async loop waited for in its iteration, main's default before 2026-11-27) and ``triton``.
(Call S3's run also had ``kernelc_nofence``, the rings pass's proxy fence patched out; that fence is gone since.)
The kernel is the tutorial's own ``@triton.jit`` function (``tutorial_sweep.kernel_module``: the autotuner
dropped, so the config is the one given) launched as the tutorial's ``matmul()`` launches it: fp16 A, B
row-major; fp8 (e5m2) A row-major and B = ``b.T`` as in its benchmark. Per (dtype, size, config): the largest
error against torch, ``ms`` (``triton.testing.do_bench``, as the tutorial times it) and ``ms_graph``
(``do_bench_cudagraph``: no host time), as TFLOP/s. The tutorial file is not part of this repository.
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

# (BM, BN, BK, stages, warps): the configs the two autotuners picked on an H200 (call S2, 2026-11-27)
CONFIGS = {"fp16": [(128, 256, 64, 3, 8), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4)],
           "fp8": [(256, 128, 128, 3, 8), (128, 256, 128, 3, 8)]}
SIZES = [1536, 4096]

_CHILD = r"""
import importlib.util, json, sys, time
a = json.loads(sys.argv[1])
if a["impl"] == "kernelc":
    from kernelc.compat import install
    install()
import torch, triton
spec = importlib.util.spec_from_file_location("k03", a["mod"])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
from triton.testing import do_bench, do_bench_cudagraph
out = []
for dt, configs in a["configs"].items():
    for n in a["sizes"]:
        M = N = K = n
        torch.manual_seed(0)
        A = torch.randn((M, K), device="cuda", dtype=torch.float16)
        B = torch.randn((K, N), device="cuda", dtype=torch.float16)
        if dt == "fp8":
            A = A.to(torch.float8_e5m2)
            B = B.T.to(torch.float8_e5m2)
            ref = torch.matmul(A.to(torch.float16), B.to(torch.float16))
        else:
            ref = torch.matmul(A, B)
        C = torch.empty((M, N), device="cuda", dtype=torch.float16)
        for (bm, bn, bk, s, w) in configs:
            grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
            fn = lambda: mod.matmul_kernel[grid](A, B, C, M, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1),
                                                 C.stride(0), C.stride(1), BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn,
                                                 BLOCK_SIZE_K=bk, GROUP_SIZE_M=8, ACTIVATION="", num_stages=s,
                                                 num_warps=w)
            rec = {"impl": a["label"], "dtype": dt, "size": n, "config": [bm, bn, bk, s, w]}
            try:
                C.zero_()
                t0 = time.perf_counter(); fn(); torch.cuda.synchronize(); rec["first_s"] = time.perf_counter() - t0
                rec["max_err"] = (C.float() - ref.float()).abs().max().item()
                rec["ok"] = bool(torch.allclose(C.float(), ref.float(), atol=1e-1 if dt == "fp16" else 0.5, rtol=1e-2))
                flops = 2.0 * M * N * K
                rec["ms"] = do_bench(fn, warmup=25, rep=100)
                rec["tflops"] = flops / rec["ms"] * 1e-9
                rec["ms_graph"] = do_bench_cudagraph(fn, rep=100)
                rec["tflops_graph"] = flops / rec["ms_graph"] * 1e-9
            except Exception as e:  # a config that does not fit: recorded, the others go on
                rec["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            print(json.dumps(rec), flush=True)
            out.append(rec)
json.dump(out, open(a["out"], "w"), indent=1)
"""

RUNS = {"kernelc": ("kernelc", {}), "kernelc_sync": ("kernelc", {"KERNELC_WGMMA_ASYNC": "0"}),
        # main before branch mm09: the epilogue stored from the accumulator's layout in 4-byte pieces, the wgmma
        # descriptors rebuilt per k step
        "kernelc_main": ("kernelc", {"KERNELC_STORE_SMEM_DISCOUNT": "1", "KERNELC_WGMMA_DESC_STEPPED": "0"}),
        # main before branch pp09: each cp.async copy's K mask compared on its own (passes/mask_blocks.py off)
        "kernelc_nomask": ("kernelc", {"KERNELC_UNIFORM_MASKS": "0"}),
        "triton": ("triton", {})}


def run(label: str, mod: str, triton_site: str, timeout: int, configs=None):
    impl, extra = RUNS[label]
    work = tempfile.mkdtemp(prefix=f"t03_{label}_")
    out = os.path.join(work, "out.json")
    env = dict(os.environ, **extra, TRITON_CACHE_DIR=os.path.join(work, "tc"), KERNELC_CACHE_DIR=os.path.join(work, "kc"))
    if impl == "triton" and triton_site:
        env["PYTHONPATH"] = triton_site + os.pathsep + env.get("PYTHONPATH", "")
    payload = dict(impl=impl, label=label, mod=mod, sizes=SIZES, configs=configs or CONFIGS, out=out)
    try:
        r = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(payload)], env=env, cwd=work, timeout=timeout,
                           capture_output=True, text=True)
        text, err = r.stdout, r.stderr
    except subprocess.TimeoutExpired as e:
        text = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = f"timeout after {timeout} s"
    sys.stdout.write(text)
    recs = [json.loads(x) for x in text.splitlines() if x.startswith("{")]
    if not recs:
        sys.stderr.write(err[-3000:])
        return {"error": err.strip().splitlines()[-5:] if err.strip() else "no output"}
    return recs


def main(argv=None) -> int:
    sys.path.insert(0, HERE)
    from tutorial_sweep import kernel_module
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tutorials", default=os.path.join(ROOT, ".ext", "tutorials"))
    ap.add_argument("--triton-site", default="")
    ap.add_argument("--runs", default="kernelc,kernelc_sync,triton")
    ap.add_argument("--timeout", type=int, default=60, help="seconds per run")
    ap.add_argument("--dtypes", default=",".join(CONFIGS), help="which of fp16, fp8")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "t03_configs.json"))
    a = ap.parse_args(argv)
    mod = os.path.join(tempfile.mkdtemp(prefix="t03_"), "k03.py")
    with open(mod, "w") as f:
        f.write(kernel_module(os.path.join(a.tutorials, "03-matrix-multiplication.py")))
    res = {}
    for label in a.runs.split(","):
        print(f"== {label}", flush=True)
        res[label] = run(label, mod, a.triton_site, a.timeout, {d: CONFIGS[d] for d in a.dtypes.split(",")})
    rows = {}
    for label, recs in res.items():
        if isinstance(recs, dict):
            print(f"{label}: {recs['error']}")
            continue
        for r in recs:
            key = (r["dtype"], r["size"], "x".join(map(str, r["config"])))
            rows.setdefault(key, {})[label] = (f"{r['tflops']:.1f}/{r['tflops_graph']:.1f}" if r.get("ok") else
                                               "FAIL" if "ok" in r else "err")
    labels = list(res)
    print("dtype size BMxBNxBKxSxW | " + " | ".join(f"{x} (do_bench/graph TFLOP/s)" for x in labels))
    for key, v in rows.items():
        print(" ".join(map(str, key)) + " | " + " | ".join(str(v.get(x)) for x in labels))
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    json.dump(res, open(a.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
