"""``KERNELC_UNIFORM_WARPGROUP`` on and off in one process, against Triton 3.6 (docs/triton-tutorials.md, "09
persistent pointer GEMM: the warpgroup index on the uniform datapath").

    python3 bench/experiments/tutorial_gaps/uniform_wg_ab.py --tutorials DIR [--triton-site DIR] [--rounds 5]
        [--ks 512,4096] [--no-examples] [--out FILE.json]

Kernels: tutorial 09's ``matmul_kernel_persistent`` and ``matmul_kernel`` at the tuners' two configs
(128x256x64 s4 w8, where the knob changes the code, and 128x128x64 s3 w4, where it does not: a control), M = N =
8192 fp16 at each K of ``--ks``, ``b`` as ``B.T`` as the tutorial passes it; and the 8-warp wgmma GEMMs of
``bench/bench_kernels.py`` at fixed 8-warp configs, 8192 x 8192 x 4096 (``--no-examples`` leaves them out).

kernelc's process compiles each kernel twice, as two ``@jit`` objects of the same function, the knob set before
each one's first launch (compile knobs are read at compile time), checks both against torch, then times them with
``do_bench`` (warmup 25 ms, rep 100 ms) in ``--rounds`` rounds, the two variants alternating which goes first.
Triton's process times the 09 kernels the same way. Per point: the median TFLOP/s over the rounds, and every
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

CONFIGS_09 = [(128, 256, 64, 4, 8), (128, 128, 64, 3, 4)]   # (BM, BN, BK, stages, warps)

_CHILD = r"""
import importlib.util, json, os, statistics, sys, time
a = json.loads(sys.argv[1])
kc = a["impl"] == "kernelc"
if kc:
    from kernelc.compat import install
    install()
import torch, triton
from triton.testing import do_bench
NUM_SMS = torch.cuda.get_device_properties("cuda").multi_processor_count
variants = ["on", "off"] if kc else ["triton"]

def load(name):
    spec = importlib.util.spec_from_file_location(name, a["mod"])
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    return m

def setknob(v):
    if kc:
        os.environ["KERNELC_UNIFORM_WARPGROUP"] = "1" if v == "on" else "0"

mods = {}
for v in variants:   # each variant's own @jit objects: the first launch compiles under the knob set here
    setknob(v)
    mods[v] = load("tut09_" + v)
cases = []   # (label, {variant: fn}, flop, check)

def close(got, ref):
    err = (got.float() - ref).abs().max().item()
    return err, bool(torch.allclose(got.float(), ref, atol=1e-1, rtol=1e-2))

M = N = 8192
torch.manual_seed(0)
for K in a["ks"]:
    A = torch.randn((M, K), device="cuda", dtype=torch.float16)
    B = torch.randn((N, K), device="cuda", dtype=torch.float16)
    Bt = B.T
    ref = torch.matmul(A, Bt).float()
    for (bm, bn, bk, s, w) in a["configs09"]:
        cfg = dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8, num_stages=s, num_warps=w)
        tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
        for kern in ("matmul_kernel_persistent", "matmul_kernel"):
            fns, C = {}, torch.empty((M, N), device="cuda", dtype=torch.float16)
            for v in variants:
                k = getattr(mods[v], kern)
                if kern == "matmul_kernel":
                    fns[v] = lambda k=k, C=C, cfg=cfg, A=A, Bt=Bt, K=K, tiles=tiles: k[(tiles,)](
                        A, Bt, C, M, N, K, A.stride(0), A.stride(1), Bt.stride(0), Bt.stride(1), C.stride(0),
                        C.stride(1), **cfg)
                else:
                    fns[v] = lambda k=k, C=C, cfg=cfg, A=A, Bt=Bt, K=K, tiles=tiles: k[(min(NUM_SMS, tiles),)](
                        A, Bt, C, M, N, K, A.stride(0), A.stride(1), Bt.stride(0), Bt.stride(1), C.stride(0),
                        C.stride(1), NUM_SMS=NUM_SMS, **cfg)
            cases.append((f"09 {kern} {bm}x{bn}x{bk} s{s} w{w} K={K}", fns, 2.0 * M * N * K,
                          lambda C=C, ref=ref: close(C, ref), C))

if kc and a["examples"]:
    import kernelc
    from examples.kernels import matmul as KM, matmul_tma as KT, matmul_persistent as KP, matmul_fp8 as KF
    K = 4096
    A = torch.randn((M, K), device="cuda", dtype=torch.float16)
    B = torch.randn((K, N), device="cuda", dtype=torch.float16)
    ref = torch.matmul(A, B).float()
    cfg8 = lambda bm, bn, bk, s: dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8,
                                      num_stages=s, num_warps=8)
    out = {}
    ex = [("matmul 128x256x64 s3 w8", KM.matmul, KM.matmul_kernel, cfg8(128, 256, 64, 3)),
          ("matmul 256x128x64 s3 w8", KM.matmul, KM.matmul_kernel, cfg8(256, 128, 64, 3)),
          ("matmul_tma 128x256x64 s3 w8", KT.matmul_tma, KT.matmul_tma_kernel, cfg8(128, 256, 64, 3)),
          ("matmul_persistent 128x256x64 s3 w8", KP.matmul_persistent, KP.matmul_persistent_kernel,
           cfg8(128, 256, 64, 3)),
          ("matmul_descriptor_persistent 128x256x64 s3 w8", KP.matmul_descriptor_persistent,
           KP.matmul_descriptor_persistent_kernel, cfg8(128, 256, 64, 3))]
    for label, host, kern, cfg in ex:
        fns = {}
        for v in variants:
            twin = kernelc.jit(kern.fn)
            fns[v] = lambda host=host, twin=twin, cfg=cfg, label=label, A=A, B=B: out.__setitem__(
                label, host(A, B, kernel=twin, **cfg))
        cases.append((label + " 8192x8192x4096", fns, 2.0 * M * N * K,
                      lambda label=label: close(out[label], ref), None))
    fa, fb = A.to(torch.float8_e4m3fn), B.to(torch.float8_e4m3fn)
    sa = torch.ones(1, device="cuda", dtype=torch.float32)
    sb = torch.ones(1, device="cuda", dtype=torch.float32)
    ref8 = torch.matmul(fa.float(), fb.float())
    fns = {}
    for v in variants:
        twin = kernelc.jit(KF.matmul_fp8_kernel.fn)
        fns[v] = lambda twin=twin: out.__setitem__("fp8", KF.matmul_fp8(fa, fb, sa, sb, kernel=twin,
                                                                         **cfg8(128, 256, 128, 3)))
    def close8():
        err = (out["fp8"].float() - ref8).abs().max().item()
        return err, bool(torch.allclose(out["fp8"].float(), ref8, atol=1.0, rtol=2e-2))
    cases.append(("matmul_fp8 (pointers) 128x256x128 s3 w8 8192x8192x4096", fns, 2.0 * M * N * K, close8, None))

recs = {}
for label, fns, flop, check, C in cases:   # first launches (compiles) and checks
    for v in variants:
        setknob(v)
        r = recs.setdefault((label, v), {"case": label, "variant": v, "flop": flop, "tflops": []})
        try:
            if C is not None:
                C.zero_()
            t0 = time.perf_counter(); fns[v](); torch.cuda.synchronize()
            r["first_s"] = round(time.perf_counter() - t0, 3)
            r["max_err"], r["ok"] = check()
        except Exception as e:
            r["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        print(json.dumps({k: r[k] for k in r if k != "tflops"}), flush=True)
json.dump(list(recs.values()), open(a["out"], "w"), indent=1)
for rnd in range(a["rounds"]):
    order = variants if rnd % 2 == 0 else variants[::-1]
    for label, fns, flop, check, C in cases:
        for v in order:
            r = recs[(label, v)]
            if r.get("ok"):
                r["tflops"].append(flop / do_bench(fns[v], warmup=25, rep=100) * 1e-9)
                r["median"] = statistics.median(r["tflops"])
    json.dump(list(recs.values()), open(a["out"], "w"), indent=1)   # every round: a cut run keeps the rounds done
    print(f"round {rnd} done", flush=True)
"""


def run(impl, mod, triton_site, args):
    work = tempfile.mkdtemp(prefix=f"uwg_{impl}_")
    out = os.path.join(work, "out.json")
    env = dict(os.environ)
    env["TRITON_CACHE_DIR"] = os.path.join(work, "tc")
    env["KERNELC_CACHE_DIR"] = os.path.join(work, "kc")
    env["PYTHONPATH"] = (triton_site if impl == "triton" else ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    payload = dict(impl=impl, mod=mod, out=out, configs09=CONFIGS_09, ks=[int(k) for k in args.ks.split(",")],
                   rounds=args.rounds, examples=not args.no_examples)
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
    ap.add_argument("--no-examples", action="store_true")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ks", default="512,4096")
    ap.add_argument("--timeout", type=int, default=240, help="seconds per process (kernelc's, then Triton's)")
    ap.add_argument("--triton-timeout", type=int, default=0, help="Triton's process (0: --timeout)")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "uniform_wg_ab.json"))
    a = ap.parse_args(argv)
    mod = os.path.join(tempfile.mkdtemp(prefix="uwg_"), "k09.py")
    with open(mod, "w") as f:
        f.write(kernel_module(os.path.join(a.tutorials, "09-persistent-matmul.py")))
    recs = run("kernelc", mod, a.triton_site, a)
    if not a.no_triton:
        if a.triton_timeout:
            a.timeout = a.triton_timeout
        recs += run("triton", mod, a.triton_site, a)
    table = {}
    for r in recs:
        table.setdefault(r["case"], {})[r["variant"]] = r
    print("case | on | off | triton (median TFLOP/s over rounds; on/off, on/triton)")
    for case, vs in table.items():
        cell = lambda v: (f"{vs[v]['median']:.1f}" if "median" in vs.get(v, {}) else  # noqa: E731
                          vs.get(v, {}).get("error", "FAIL" if v in vs else "-")[:40])
        ratio = lambda x, y: (f"{vs[x]['median'] / vs[y]['median']:.3f}"  # noqa: E731
                              if "median" in vs.get(x, {}) and "median" in vs.get(y, {}) else "-")
        print(f"{case} | {cell('on')} | {cell('off')} | {cell('triton')} | {ratio('on', 'off')} | "
              f"{ratio('on', 'triton')}")
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    json.dump(recs, open(a.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
