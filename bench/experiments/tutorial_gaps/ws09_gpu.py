"""Tutorial 09's ``matmul_kernel_descriptor_persistent`` with a warp-specialised nested tile loop (``_ws``) at
fixed configs, kernelc against Triton 3.6 on one GPU, one after the other in one call
(docs/triton-tutorials.md, "09 `_ws`: the nested loop specialised"):

    python3 bench/experiments/tutorial_gaps/ws09_gpu.py --tutorials DIR [--triton-site DIR] [--out FILE]

Rows: ``_ws`` (``WARP_SPECIALIZE=True, FLATTEN=False``, what the tutorial launches on Hopper) at Triton's pick
128x256x64 s3 w4, at 8 warps, and at 128x128x64; for reference the same kernel not specialised, nested (what
kernelc ran for ``_ws`` at 8 warps before) and flattened (the tutorial's non-ws launch). One process per
implementation (``flatten_09.run``; kernelc's is its own: it installs ``kernelc.compat``), M = N = 8192,
K = 512 (the tutorial's) and 4096, fp16, each result checked against torch, ``triton.testing.do_bench``
best of three. The tutorial file is not part of this repository.
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

# (kind, BN, stages, warps), BM = 128 (64 where named), BK = 64; kind: ws (WARP_SPECIALIZE, nested), nested, flat
CONFIGS = [("ws", 256, 3, 4), ("ws", 256, 3, 8), ("ws", 128, 3, 4), ("ws", 128, 4, 4),
           ("nested", 256, 3, 8), ("flat", 256, 3, 8)]
SHAPES = [(8192, 8192, 512), (8192, 8192, 4096)]
VARIANTS = {"kernelc": ("kernelc", {}), "kernelc_nosplit": ("kernelc", {"KERNELC_WS_SPLIT_M": "0"}),
            "triton": ("triton", {})}

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
triton.set_allocator(lambda size, align, stream: torch.empty(size, device="cuda", dtype=torch.int8))
out = []
for (M, N, K) in a["shapes"]:
    torch.manual_seed(0)
    A = torch.randn((M, K), device="cuda", dtype=torch.float16)
    B = torch.randn((N, K), device="cuda", dtype=torch.float16)
    ref = torch.matmul(A, B.T)
    for (kind, bn, s, w) in a["configs"]:
        bm, bk = 128, 64
        grid = (min(NUM_SMS, triton.cdiv(M, bm) * triton.cdiv(N, bn)),)
        C = torch.empty((M, N), device="cuda", dtype=torch.float16)
        fn = lambda: mod.matmul_kernel_descriptor_persistent[grid](A, B, C, M, N, K, BLOCK_SIZE_M=bm,
            BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8, EPILOGUE_SUBTILE=False, NUM_SMS=NUM_SMS,
            WARP_SPECIALIZE=kind == "ws", FLATTEN=kind == "flat", num_stages=s, num_warps=w)
        rec = {"kind": kind, "M": M, "N": N, "K": K, "config": [bm, bn, bk, s, w]}
        try:
            C.fill_(float("nan"))
            t0 = time.perf_counter(); k = fn(); torch.cuda.synchronize(); rec["first_s"] = time.perf_counter() - t0
            rec["max_err"] = (C.float() - ref.float()).abs().max().item()
            rec["ok"] = bool(torch.allclose(C.float(), ref.float(), atol=1e-1, rtol=1e-2))
            for attr in ("n_regs", "n_spills"):
                if hasattr(k, attr):
                    rec[attr] = getattr(k, attr)
            if hasattr(k, "launch_warps"):
                rec["launch_warps"] = k.launch_warps
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
    ap.add_argument("--variants", default="kernelc,triton")
    ap.add_argument("--timeout", type=int, default=60, help="seconds per variant")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "ws09_gpu.json"))
    ap.add_argument("--only", default="", help="configs as kind:BN:stages:warps[,...] (default: all)")
    ap.add_argument("--shapes", default="", help="MxNxK[,...] (default: both)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="processes per variant; the variants' order alternates from round to round")
    a = ap.parse_args(argv)
    configs = [c for c in CONFIGS if not a.only or f"{c[0]}:{c[1]}:{c[2]}:{c[3]}" in a.only.split(",")]
    shapes = [tuple(int(x) for x in sh.split("x")) for sh in a.shapes.split(",") if sh] or SHAPES
    mod = os.path.join(tempfile.mkdtemp(prefix="ws09g_"), "k09.py")
    with open(mod, "w") as f:
        f.write(kernel_module(os.path.join(a.tutorials, "09-persistent-matmul.py")))
    flatten_09._CHILD = _CHILD   # flatten_09.run launches _CHILD with its payload
    res = {}
    order = a.variants.split(",")
    for rnd in range(a.rounds):
        for label in (order if rnd % 2 == 0 else order[::-1]):
            impl, env = VARIANTS[label]
            name = label if a.rounds == 1 else f"{label}#{rnd}"
            print(f"== {name} {env}", flush=True)
            res[name] = flatten_09.run(impl, env, mod, a.triton_site, shapes, configs, a.timeout)
    labels = list(res)
    rows = {}
    for label, recs in res.items():
        if isinstance(recs, dict):
            print(f"{label}: {recs['error']}")
            continue
        for r in recs:
            key = (r["kind"], r["K"], tuple(r["config"]))
            rows.setdefault(key, {})[label] = r.get("tflops") if r.get("ok") else ("FAIL" if "ok" in r else "err")
    print("kind K config (BM BN BK stages warps) | TFLOP/s: " + " | ".join(labels))
    for key, v in rows.items():
        cells = [f"{v[x]:.1f}" if isinstance(v.get(x), float) else str(v.get(x)) for x in labels]
        print(" ".join(str(k) for k in key) + " | " + " | ".join(cells))
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    json.dump({"configs": configs, "shapes": shapes, "variants": {k: VARIANTS[k.split("#")[0]][1] for k in labels},
               "results": res}, open(a.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
