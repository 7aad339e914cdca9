"""Tutorial 09's three persistent TMA kernels at the configs the H100 autotuners picked, under kernelc with
main's schedule and with this branch's (flattened TMA loops, TMA stores waited for at the buffer's next write),
and under Triton 3.6, side by side on one GPU (docs/triton-tutorials.md, "09 persistent TMA kernels"):

    python3 bench/experiments/tutorial_gaps/t09_persistent_gpu.py --tutorials DIR [--triton-site DIR] [--out FILE]

One process per variant (``flatten_09.run``): the tutorial's ``@triton.jit`` functions (autotune dropped),
M = N = 8192, K = 512 fp16 (the tutorial's default), each result checked against torch, timed with
``triton.testing.do_bench``. The tutorial files are not part of this repository.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)

# (kernel, BN, stages, warps, EPILOGUE_SUBTILE), BM = 128, BK = 64: C1's picks (Triton s4 subtiled, kernelc s3 not)
CONFIGS = [("tma_persistent", 256, 3, 8, False), ("tma_persistent", 256, 4, 8, True),
           ("descriptor_persistent", 256, 3, 8, False), ("descriptor_persistent", 256, 4, 8, True),
           ("descriptor_persistent_ws", 256, 3, 4, False), ("descriptor_persistent_ws", 256, 3, 8, False)]
SHAPES = [(8192, 8192, 512)]
VARIANTS = {
    "kernelc_main": ("kernelc", {"KERNELC_FLATTEN_LOOPS": "0", "KERNELC_TMA_STORE_WAIT": "eager"}),
    "kernelc_flatten": ("kernelc", {"KERNELC_FLATTEN_LOOPS": "tma", "KERNELC_TMA_STORE_WAIT": "eager"}),
    "kernelc_branch": ("kernelc", {"KERNELC_FLATTEN_LOOPS": "tma", "KERNELC_TMA_STORE_WAIT": "deferred"}),
    "triton": ("triton", {}),
}

_CHILD = r"""
import importlib.util, json, sys, time
a = json.loads(sys.argv[1])
if a["impl"] == "kernelc":
    from kernelc.compat import install
    install()
import torch, triton
from triton.tools.tensor_descriptor import TensorDescriptor
spec = importlib.util.spec_from_file_location("k09", a["mod"])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
from triton.testing import do_bench
NUM_SMS = torch.cuda.get_device_properties("cuda").multi_processor_count
triton.set_allocator(lambda size, align, stream: torch.empty(size, device="cuda", dtype=torch.int8))
out = []
for (M, N, K) in a["shapes"]:
    torch.manual_seed(0)
    A = torch.randn((M, K), device="cuda", dtype=torch.float16)
    B = torch.randn((N, K), device="cuda", dtype=torch.float16)
    ref = torch.matmul(A, B.T)
    for (kern, bn, s, w, st) in a["configs"]:
        bm, bk = 128, 64
        grid = (min(NUM_SMS, triton.cdiv(M, bm) * triton.cdiv(N, bn)),)
        C = torch.empty((M, N), device="cuda", dtype=torch.float16)
        if kern == "tma_persistent":
            ad = TensorDescriptor.from_tensor(A, [bm, bk]); bd = TensorDescriptor.from_tensor(B, [bn, bk])
            cd = TensorDescriptor.from_tensor(C, [bm, bn // 2 if st else bn])
            fn = lambda: mod.matmul_kernel_tma_persistent[grid](ad, bd, cd, M, N, K, BLOCK_SIZE_M=bm,
                BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8, FP8_OUTPUT=False, EPILOGUE_SUBTILE=st,
                NUM_SMS=NUM_SMS, WARP_SPECIALIZE=False, num_stages=s, num_warps=w)
        else:
            ws = kern.endswith("_ws")
            fn = lambda: mod.matmul_kernel_descriptor_persistent[grid](A, B, C, M, N, K, BLOCK_SIZE_M=bm,
                BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8, EPILOGUE_SUBTILE=st, NUM_SMS=NUM_SMS,
                WARP_SPECIALIZE=ws, FLATTEN=not ws, num_stages=s, num_warps=w)
        rec = {"kernel": "matmul_kernel_" + kern, "M": M, "N": N, "K": K, "config": [bm, bn, bk, s, w, st]}
        try:
            C.fill_(float("nan"))
            t0 = time.perf_counter(); fn(); torch.cuda.synchronize(); rec["first_s"] = time.perf_counter() - t0
            rec["max_err"] = (C.float() - ref.float()).abs().max().item()
            rec["ok"] = bool(torch.allclose(C.float(), ref.float(), atol=1e-1, rtol=1e-2))
            ms = [do_bench(fn, warmup=25, rep=100) for _ in range(3)]
            rec["ms_all"] = ms
            rec["ms"] = min(ms)
            rec["tflops"] = 2.0 * M * N * K / rec["ms"] * 1e-9
        except Exception as e:
            rec["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        print(json.dumps(rec), flush=True)
        out.append(rec)
json.dump(out, open(a["out"], "w"), indent=1)
"""


def main(argv=None) -> int:
    import flatten_09
    from tutorial_sweep import kernel_module
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tutorials", default=os.path.join(ROOT, ".ext", "tutorials"))
    ap.add_argument("--triton-site", default="")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--timeout", type=int, default=100, help="seconds per variant")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "t09_persistent_gpu.json"))
    a = ap.parse_args(argv)
    mod = os.path.join(tempfile.mkdtemp(prefix="t09g_"), "k09.py")
    with open(mod, "w") as f:
        f.write(kernel_module(os.path.join(a.tutorials, "09-persistent-matmul.py")))
    flatten_09._CHILD = _CHILD   # flatten_09.run launches _CHILD with the payload below
    res = {}
    for label in a.variants.split(","):
        impl, env = VARIANTS[label]
        print(f"== {label} {env}", flush=True)
        res[label] = flatten_09.run(impl, env, mod, a.triton_site, SHAPES, CONFIGS, a.timeout)
    labels = list(res)
    rows = {}
    for label, recs in res.items():
        if isinstance(recs, dict):
            print(f"{label}: {recs['error']}")
            continue
        for r in recs:
            key = (r["kernel"], r["K"], tuple(r["config"]))
            rows.setdefault(key, {})[label] = r.get("tflops") if r.get("ok") else ("FAIL" if "ok" in r else "err")
    print("kernel K config (BM BN BK stages warps subtile) | TFLOP/s: " + " | ".join(labels))
    for key, v in rows.items():
        cells = [f"{v[x]:.1f}" if isinstance(v.get(x), float) else str(v.get(x)) for x in labels]
        print(" ".join(str(k) for k in key) + " | " + " | ".join(cells))
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    json.dump({"configs": CONFIGS, "variants": {k: v[1] for k, v in VARIANTS.items()}, "results": res},
              open(a.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
