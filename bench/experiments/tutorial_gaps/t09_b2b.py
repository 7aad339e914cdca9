"""Tutorial 09's TMA and descriptor kernels back to back, as its benchmark runs them, against L2-flushed single calls
(one process per runtime; run kernelc, Triton, Triton, kernelc):

    python3 bench/experiments/tutorial_gaps/t09_b2b.py --impl kernelc --tutorials DIR --cases ... --out k.json

A case is ``KERNEL:BN:STAGES:WARPS:SUBTILE`` (BM 128, BK 64, M = N = 8192, K = 512 fp16, the tutorial's sizes):
``tma``, ``tma_persistent`` (host TensorDescriptors, made once), ``descriptor_persistent`` and
``descriptor_persistent_ws`` (descriptors made in the kernel), launched through the tutorial's ``@triton.jit``
function at that one config (no autotuner), its output checked against torch; ``persistent`` (pointers) and
``cublas`` (``torch.matmul``) as references. Per case and repeat:

- ``b2b_us``: ``--calls`` launches issued while the GPU sleeps, then run back to back between two events (the
  tutorial's ``bench_fn`` loop: no L2 flush, no host time in it), per launch;
- ``flush_us``: ``do_bench`` (L2 flushed before each launch), the autotuner's view;
- ``host_us``: the host's time to issue one launch.
Session 23's R1 read 09's profile (the tutorial's back-to-back loop, kprof / Proton kernel times) at 0.879 for
``tma_persistent`` where both autotuners had timed that config level (Triton 124.1 us, kernelc 122.0 us, flushed).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def build(mod, case, A, B, ref, num_sms):
    import torch
    import triton
    from triton.tools.tensor_descriptor import TensorDescriptor
    kern, bn, s, w, st = case.split(":")
    bn, s, w, st = int(bn), int(s), int(w), bool(int(st))
    M, K = A.shape
    N = B.shape[0]
    bm, bk = 128, 64
    C = torch.empty((M, N), device=A.device, dtype=torch.float16)
    if kern == "cublas":
        return (lambda: torch.matmul(A, B.T, out=C)), C
    grid_p = (min(num_sms, triton.cdiv(M, bm) * triton.cdiv(N, bn)),)
    grid_t = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    if kern == "tma_persistent":
        ad, bd = TensorDescriptor.from_tensor(A, [bm, bk]), TensorDescriptor.from_tensor(B, [bn, bk])
        cd = TensorDescriptor.from_tensor(C, [bm, bn // 2 if st else bn])
        fn = lambda: mod.matmul_kernel_tma_persistent[grid_p](  # noqa: E731
            ad, bd, cd, M, N, K, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8,
            FP8_OUTPUT=False, EPILOGUE_SUBTILE=st, NUM_SMS=num_sms, WARP_SPECIALIZE=False, num_stages=s, num_warps=w)
    elif kern == "tma":
        ad, bd = TensorDescriptor.from_tensor(A, [bm, bk]), TensorDescriptor.from_tensor(B, [bn, bk])
        cd = TensorDescriptor.from_tensor(C, [bm, bn])
        fn = lambda: mod.matmul_kernel_tma[grid_t](  # noqa: E731
            ad, bd, cd, M, N, K, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8,
            FP8_OUTPUT=False, WARP_SPECIALIZE=False, num_stages=s, num_warps=w)
    elif kern.startswith("descriptor_persistent"):
        ws = kern.endswith("_ws")
        fn = lambda: mod.matmul_kernel_descriptor_persistent[grid_p](  # noqa: E731
            A, B, C, M, N, K, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8,
            EPILOGUE_SUBTILE=st, NUM_SMS=num_sms, WARP_SPECIALIZE=ws, FLATTEN=not ws, num_stages=s, num_warps=w)
    elif kern == "persistent":
        fn = lambda: mod.matmul_kernel_persistent[grid_p](  # noqa: E731
            A, B.T, C, M, N, K, A.stride(0), A.stride(1), B.T.stride(0), B.T.stride(1), C.stride(0), C.stride(1),
            BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8, NUM_SMS=num_sms,
            num_stages=s, num_warps=w)
    else:
        raise ValueError(kern)
    return fn, C


def b2b(fn, calls):
    """Per launch: GPU time of ``calls`` launches run back to back (issued behind a GPU sleep), and the host's time
    to issue one."""
    import torch
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(int(calls * 200e-6 * 2e9))  # ~200 us of sleep a launch: more than a launch takes to issue
    s.record()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    host = (time.perf_counter() - t0) / calls * 1e6
    e.record()
    covered = not s.query()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / calls * 1e3, host, covered


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", choices=("kernelc", "triton"), required=True)
    ap.add_argument("--tutorials", required=True)
    ap.add_argument("--cases", nargs="+", required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--budget-s", type=float, default=1e9)
    ap.add_argument("--warm-only", action="store_true")
    ap.add_argument("--size", type=int, default=8192, help="M = N (8192, the tutorial's; else K = 128: a CPU test)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    t_start = time.perf_counter()
    if a.impl == "kernelc":
        sys.path.insert(0, ROOT)
        from kernelc.compat import install
        install()
    import torch
    import triton
    from triton.testing import do_bench
    # the tutorial's @triton.jit functions alone (its autotune decorators dropped: each case is one config)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from tutorial_sweep import kernel_module
    path = os.path.join(tempfile.mkdtemp(prefix="t09b2b_"), "k09.py")
    with open(path, "w") as f:
        f.write(kernel_module(os.path.join(a.tutorials, "09-persistent-matmul.py")))
    spec = importlib.util.spec_from_file_location("t09b2b", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    dev = "cuda" if torch.cuda.is_available() else "cpu"  # (cpu: kernelc's interpreter, --warm-only, a smoke test)
    num_sms = torch.cuda.get_device_properties("cuda").multi_processor_count if dev == "cuda" else 132
    triton.set_allocator(lambda size, align, stream: torch.empty(size, device=dev, dtype=torch.int8))
    torch.manual_seed(0)
    M = N = a.size
    K = 512 if a.size == 8192 else 128
    A = torch.randn((M, K), device=dev, dtype=torch.float16)
    B = torch.randn((N, K), device=dev, dtype=torch.float16)
    ref = torch.matmul(A, B.T)
    out = {"impl": a.impl, "rows": [], "first": {}, "triton_version": getattr(triton, "__version__", None)}
    built = {}

    def dump():
        out["seconds"] = time.perf_counter() - t_start
        with open(a.out, "w") as f:
            json.dump(out, f, indent=1)

    for case in a.cases:
        try:
            fn, C = build(mod, case, A, B, ref, num_sms)
            C.fill_(float("nan"))
            t0 = time.perf_counter()
            fn()
            if A.is_cuda:
                torch.cuda.synchronize()
            err = (C.float() - ref.float()).abs().max().item()
            out["first"][case] = {"s": time.perf_counter() - t0, "max_err": err,
                                  "ok": bool(torch.allclose(C.float(), ref.float(), atol=1e-1, rtol=1e-2))}
            built[case] = fn
        except Exception as e:  # noqa: BLE001
            out["first"][case] = {"error": f"{type(e).__name__}: {e}"[:300]}
        print(json.dumps({"case": case, **out["first"][case]}), flush=True)
        dump()
    if a.warm_only:
        return 0
    for rep in range(a.repeats):
        for case, fn in built.items():
            if time.perf_counter() - t_start > a.budget_s:
                out["stopped"] = f"budget at repeat {rep}"
                dump()
                return 0
            row = {"case": case, "repeat": rep}
            try:
                row["b2b_us"], row["host_us"], row["covered"] = b2b(fn, a.calls)
                row["flush_us"] = do_bench(fn, warmup=10, rep=40) * 1e3
            except Exception as e:  # noqa: BLE001
                row["error"] = f"{type(e).__name__}: {e}"[:300]
            print(json.dumps(row), flush=True)
            out["rows"].append(row)
            dump()
    return 0


def summary(paths):
    """Per case: the median over processes of each process's best b2b/flush reading, per runtime, and T/k."""
    per = {}
    for p in paths:
        d = json.load(open(p))
        by = {}
        for r in d.get("rows", []):
            if "error" not in r:
                by.setdefault(r["case"], []).append(r)
        for case, rows in by.items():
            slot = per.setdefault((case, d["impl"]), {"b2b": [], "flush": [], "host": []})
            slot["b2b"].append(min(r["b2b_us"] for r in rows))
            slot["flush"].append(min(r["flush_us"] for r in rows))
            slot["host"].append(statistics.median(r["host_us"] for r in rows))
    lines = []
    for case in sorted({c for c, _ in per}):
        k, t = per.get((case, "kernelc")), per.get((case, "triton"))
        f = lambda s, m: statistics.median(s[m]) if s else float("nan")  # noqa: E731
        lines.append(f"{case:36s} b2b us k {f(k, 'b2b'):7.1f} T {f(t, 'b2b'):7.1f} T/k {f(t, 'b2b') / f(k, 'b2b'):.3f}   "
                     f"flushed k {f(k, 'flush'):7.1f} T {f(t, 'flush'):7.1f} T/k {f(t, 'flush') / f(k, 'flush'):.3f}   "
                     f"host us k {f(k, 'host'):5.1f} T {f(t, 'host'):5.1f}")
    return lines


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--summary":
        print("\n".join(summary(sys.argv[2:])))
        sys.exit(0)
    sys.exit(main())
