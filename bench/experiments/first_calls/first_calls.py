"""First calls on a GPU, kernelc against Triton 3.6: the wall time of the first launch of a tutorial kernel in
a fresh process (compile or cache load, module load, launch, synchronise), with an empty cache (cold) and then
with the cache the cold run left (warm). Issue #20's three kernels that were slower than Triton's:

- ``04``: ``_seeded_dropout`` as tutorial 04 first calls it (10 fp32 elements, p 0.5, seed 123, BLOCK_SIZE 1024);
- ``06``: ``_attn_bwd_preprocess`` then ``_attn_bwd`` as tutorial 06's backward launches them (batch 4, 32 heads,
  1024 tokens, HEAD_DIM 64, causal: the benchmark's first backward point), on random inputs (the timing does not
  depend on the values; nothing is checked here).

    python3 bench/experiments/first_calls/first_calls.py --tutorials DIR [--cases 04,06] [--repeats 2]
        [--out FILE.json]

Each measurement is its own process; ``import_s`` is the process's import of torch and the compiler,
``cuda_init_s`` the first CUDA context, both before the timed call. kernelc runs under the ``triton`` alias
(``kernelc.compat``). The printed ``hit`` says whether kernelc's first call read its disk cache.

kernelc also gets ``dry`` and ``after_dry``: a dry-run process (``bench/tutorial_dryrun.py``, as
``triton_tutorials.py --warm`` fills caches: meta tensors, nothing launched) compiles into an empty cache, then
a GPU process makes the same first calls with that cache: whether the tutorial runs' warm caches are hit.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)

from bench.bench_compile import _kernel_module  # noqa: E402

FILES = {"04": "04-low-memory-dropout.py", "06": "06-fused-attention.py"}

CHILD = r"""
import json, os, sys, time
a = json.loads(sys.argv[1])
t0 = time.perf_counter()
import torch
if a["impl"] == "kernelc":
    sys.path.insert(0, a["root"])
    from kernelc.compat import install
    install()
import triton
dev = "cuda"
if a.get("dry"):
    from bench import tutorial_dryrun
    tutorial_dryrun.install_kernelc(None)
    dev = "meta"
import importlib.util
spec = importlib.util.spec_from_file_location("first_call_kernels", a["mod"])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
import_s = time.perf_counter() - t0
t0 = time.perf_counter()
torch.zeros(1, device=dev); torch.cuda.synchronize()
cuda_init_s = time.perf_counter() - t0
out = {"import_s": import_s, "cuda_init_s": cuda_init_s, "calls": []}
def timed(name, launch):
    torch.cuda.synchronize()
    t = time.perf_counter()
    launch()
    torch.cuda.synchronize()
    out["calls"].append({"kernel": name, "first_s": time.perf_counter() - t})
    t = time.perf_counter()
    launch()
    torch.cuda.synchronize()
    out["calls"][-1]["second_s"] = time.perf_counter() - t
if a["case"] == "04":
    x = torch.randn(10, device=dev); o = torch.empty_like(x)
    n = x.numel()
    timed("_seeded_dropout", lambda: mod._seeded_dropout[(triton.cdiv(n, 1024),)](x, o, n, 0.5, 123, BLOCK_SIZE=1024))
else:
    Z, H, N, D = 4, 32, 1024, 64
    q, k, v, o, do = (torch.randn((Z, H, N, D), device=dev, dtype=torch.float16) for _ in range(5))
    M = torch.randn((Z, H, N), device=dev, dtype=torch.float32)
    delta = torch.empty_like(M)
    dq, dk, dv = (torch.empty_like(q) for _ in range(3))
    timed("_attn_bwd_preprocess", lambda: mod._attn_bwd_preprocess[(N // 128, Z * H)](
        o, do, delta, Z, H, N, BLOCK_M=128, HEAD_DIM=D))
    timed("_attn_bwd", lambda: mod._attn_bwd[(N // 128, 1, Z * H)](
        q, k, v, 0.5, do, dq, dk, dv, M, delta, q.stride(0), q.stride(1), q.stride(2), q.stride(3), H, N,
        BLOCK_M1=32, BLOCK_N1=128, BLOCK_M2=128, BLOCK_N2=32, BLK_SLICE_FACTOR=2, HEAD_DIM=D,
        num_warps=4, num_stages=5, CAUSAL=True))
if a["impl"] == "kernelc" and not a.get("dry"):
    for c, k in zip(out["calls"], ([mod._seeded_dropout] if a["case"] == "04" else
                                   [mod._attn_bwd_preprocess, mod._attn_bwd])):
        ents = list(getattr(k, "_cuda_state", {}).get("cache", {}).values())
        c["hit"] = bool(ents) and "disk_cache_load" in ents[0].compiled.timings
        c["timings"] = {s: round(t, 4) for s, t in ents[0].compiled.timings.items()
                        if not s.startswith("pass.")} if ents else None
print(json.dumps(out))
"""


def run(impl, case, mod_path, cache, triton_site, timeout, dry=False):
    env = dict(os.environ, KERNELC_CACHE_DIR=cache, TRITON_CACHE_DIR=cache)
    env.pop("KERNELC_INTERPRET", None)
    if impl == "triton" and triton_site:
        env["PYTHONPATH"] = triton_site + os.pathsep + env.get("PYTHONPATH", "")
    payload = json.dumps(dict(impl=impl, case=case, mod=mod_path, root=ROOT, dry=dry))
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")   # bench.tutorial_dryrun for dry runs
    p = subprocess.run([sys.executable, "-c", CHILD, payload], env=env, capture_output=True, text=True,
                       timeout=timeout, cwd=tempfile.gettempdir())
    if p.returncode:
        return {"error": p.stderr.strip()[-1500:]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tutorials", required=True)
    ap.add_argument("--cases", default="04,06")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--triton-site", default=None)
    ap.add_argument("--no-dry", action="store_true", help="leave out kernelc's dry-run cache check")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    mods = tempfile.mkdtemp(prefix="first_calls_")
    rows = []
    for case in a.cases.split(","):
        mod_path = os.path.join(mods, f"k{case}.py")
        with open(mod_path, "w") as f:
            f.write(_kernel_module(os.path.join(a.tutorials, FILES[case])))
        for rnd in range(a.repeats):
            for impl in (("triton", "kernelc") if rnd % 2 == 0 else ("kernelc", "triton")):
                cache = tempfile.mkdtemp(prefix=f"fc_{impl}_")
                temps = ("cold", "warm") + (("dry", "after_dry") if impl == "kernelc" and not a.no_dry else ())
                for temp in temps:
                    if temp == "dry":
                        shutil.rmtree(cache, ignore_errors=True)
                        os.makedirs(cache)
                    res = run(impl, case, mod_path, cache, a.triton_site, a.timeout, dry=temp == "dry")
                    if "error" in res:
                        print(f"{case} {impl} {temp}: {res['error']}", file=sys.stderr)
                        continue
                    for c in res["calls"]:
                        rows.append(dict(case=case, impl=impl, cache=temp, round=rnd, import_s=res["import_s"],
                                         cuda_init_s=res["cuda_init_s"], **c))
                        print(f"{case} {impl:8s} {temp} {c['kernel']:22s} first {c['first_s']:.3f} s  "
                              f"second {c['second_s'] * 1e3:.2f} ms  hit {c.get('hit')}  "
                              f"import {res['import_s']:.2f} s", flush=True)
                shutil.rmtree(cache, ignore_errors=True)
    summary = {}
    for r in rows:
        summary.setdefault(f"{r['case']} {r['kernel']} {r['cache']}", {}).setdefault(r["impl"], []).append(r["first_s"])
    print("median first call (s):")
    for k, v in summary.items():
        print(f"  {k:40s} " + "  ".join(f"{i} {statistics.median(x):.3f}" for i, x in sorted(v.items())))
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"rows": rows, "median_first_s": {k: {i: statistics.median(x) for i, x in v.items()}
                                                        for k, v in summary.items()}}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
