"""Tutorial 09's persistent kernels with ``KERNELC_FLATTEN_LOOPS`` off and on, and under Triton 3.6, side by side
(one process per implementation; docs/triton-tutorials.md, "09: flattened loops").

    python3 bench/experiments/tutorial_gaps/flatten_09.py --tutorials DIR [--triton-site DIR] [--out FILE.json]

Each process loads the tutorial's ``@triton.jit`` functions (autotune dropped, ``tutorial_sweep.kernel_module``),
launches each kernel at fixed configs (M = N = 8192, K = 512 fp16 as the tutorial's default, and a ragged shape
for the check), compares with torch and times it with ``triton.testing.do_bench``. kernelc runs twice, with the
knob off and on; Triton once. The tutorial files are not part of this repository.
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

# (BM, BN, BK, stages, warps): the tutorial's configs the H100 autotuner tends to pick, and the 4-warp one of
# the CPU comparison
CONFIGS = [(128, 128, 64, 3, 4), (128, 256, 64, 3, 8)]
SHAPES = [(8192, 8192, 512), (8192, 8192, 4096)]   # one specialisation: one compile per kernel and config

_CHILD = r"""
import importlib.util, json, sys, time
a = json.loads(sys.argv[1])
if a["impl"] == "kernelc":
    from kernelc.compat import install
    install()
import torch, triton
spec = importlib.util.spec_from_file_location("k09", a["mod"])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
from triton.testing import do_bench
NUM_SMS = torch.cuda.get_device_properties("cuda").multi_processor_count
def alloc(size, align, stream):
    return torch.empty(size, device="cuda", dtype=torch.int8)
triton.set_allocator(alloc)
out = []
for (M, N, K) in a["shapes"]:
    torch.manual_seed(0)
    A = torch.randn((M, K), device="cuda", dtype=torch.float16)
    B = torch.randn((N, K), device="cuda", dtype=torch.float16)   # b is transposed, as the tutorial's
    ref = torch.matmul(A, B.T)
    for (bm, bn, bk, s, w) in a["configs"]:
        grid = (min(NUM_SMS, triton.cdiv(M, bm) * triton.cdiv(N, bn)),)
        runs = {}
        C1 = torch.empty((M, N), device="cuda", dtype=torch.float16)
        runs["matmul_kernel_descriptor_persistent"] = lambda C=C1: mod.matmul_kernel_descriptor_persistent[grid](
            A, B, C, M, N, K, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8,
            EPILOGUE_SUBTILE=False, NUM_SMS=NUM_SMS, WARP_SPECIALIZE=False, FLATTEN=True, num_stages=s, num_warps=w)
        C3 = torch.empty((M, N), device="cuda", dtype=torch.float16)
        # not a combination the tutorial runs on Hopper (it pairs warp specialisation with FLATTEN=False)
        runs["descriptor_persistent_ws_flatten"] = lambda C=C3: mod.matmul_kernel_descriptor_persistent[grid](
            A, B, C, M, N, K, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8,
            EPILOGUE_SUBTILE=False, NUM_SMS=NUM_SMS, WARP_SPECIALIZE=True, FLATTEN=True, num_stages=s, num_warps=w)
        C2 = torch.empty((M, N), device="cuda", dtype=torch.float16)
        Bt = B.T
        runs["matmul_kernel_persistent"] = lambda C=C2: mod.matmul_kernel_persistent[grid](
            A, Bt, C, M, N, K, A.stride(0), A.stride(1), Bt.stride(0), Bt.stride(1), C.stride(0), C.stride(1),
            BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8, NUM_SMS=NUM_SMS,
            num_stages=s, num_warps=w)
        for (name, fn), C in zip(runs.items(), (C1, C3, C2)):
            rec = {"kernel": name, "M": M, "N": N, "K": K, "config": [bm, bn, bk, s, w]}
            try:
                C.zero_()
                t0 = time.perf_counter(); fn(); torch.cuda.synchronize(); rec["first_s"] = time.perf_counter() - t0
                err = (C.float() - ref.float()).abs().max().item()
                rec["max_err"] = err
                rec["ok"] = bool(torch.allclose(C.float(), ref.float(), atol=1e-1, rtol=1e-2))
                ms = do_bench(fn, warmup=25, rep=100)
                rec["ms"] = ms
                rec["tflops"] = 2.0 * M * N * K / ms * 1e-9
            except Exception as e:  # a config that does not fit: recorded, the others go on
                rec["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            print(json.dumps(rec), flush=True)
            out.append(rec)
json.dump(out, open(a["out"], "w"), indent=1)
"""


def run(impl: str, env_extra: dict, mod: str, triton_site: str, shapes, configs, timeout: int):
    work = tempfile.mkdtemp(prefix=f"flat09_{impl}_")
    out = os.path.join(work, "out.json")
    env = dict(os.environ, **env_extra)
    env["TRITON_CACHE_DIR"] = os.path.join(work, "tc")
    env["KERNELC_CACHE_DIR"] = os.path.join(work, "kc")
    if impl == "triton":
        env["PYTHONPATH"] = triton_site + os.pathsep + env.get("PYTHONPATH", "") if triton_site else env.get(
            "PYTHONPATH", "")
    payload = dict(impl=impl, mod=mod, shapes=shapes, configs=configs, out=out)
    try:
        r = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(payload)], env=env, cwd=work, timeout=timeout,
                           capture_output=True, text=True)
    except subprocess.TimeoutExpired as e:
        part = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
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
    ap.add_argument("--timeout", type=int, default=100, help="seconds per implementation")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "flatten_09.json"))
    a = ap.parse_args(argv)
    mod = os.path.join(tempfile.mkdtemp(prefix="flat09_"), "k09.py")
    with open(mod, "w") as f:
        f.write(kernel_module(os.path.join(a.tutorials, "09-persistent-matmul.py")))
    runs = {"kernelc_flatten_off": ("kernelc", {"KERNELC_FLATTEN_LOOPS": "0"}),
            "kernelc_flatten_on": ("kernelc", {"KERNELC_FLATTEN_LOOPS": "1"})}
    if not a.no_triton:
        runs["triton"] = ("triton", {})
    res = {}
    for label, (impl, env) in runs.items():
        print(f"== {label}", flush=True)
        res[label] = run(impl, env, mod, a.triton_site, SHAPES, CONFIGS, a.timeout)
    # the table: TFLOP/s per kernel, shape and config
    rows = {}
    for label, recs in res.items():
        if isinstance(recs, dict):
            print(f"{label}: {recs['error']}")
            continue
        for r in recs:
            key = (r["kernel"], r["M"], r["N"], r["K"], tuple(r["config"]))
            rows.setdefault(key, {})[label] = r.get("tflops") if r.get("ok") else ("FAIL" if "ok" in r else "err")
    labels = list(res)
    print("kernel M N K config | " + " | ".join(labels))
    for key, v in rows.items():
        cells = [f"{v[x]:.1f}" if isinstance(v.get(x), float) else str(v.get(x)) for x in labels]
        print(" ".join(str(k) for k in key) + " | " + " | ".join(cells))
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    json.dump({k: v for k, v in res.items()}, open(a.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
