"""Our attention forwards (fp16: pointer, descriptor, FA3 order; fp8: pointer, FA3 order) with the host
descriptors' L2 promotion switched in ONE process (issue 27; a GPU is needed): kernelc encoded every host
``TensorDescriptor`` with ``CU_TENSOR_MAP_L2_PROMOTION_L2_256B`` until 2026-11-28 and ``L2_128B`` since
(KERNELC_TMA_L2_PROMOTION, runtime/tensor_map.py), as Triton 3.6 does. Per (head dim, causal) point, each setting's tensor maps are re-encoded (the caches cleared), each
forward timed as a CUDA graph of its calls (GPU time, no host), the settings' order rotating each round.

    python3 bench/experiments/fp8x/l2_promotion_ab.py --out OUT.jsonl [--seq 4096] [--head-dim 128 64]
        [--causal 0 1] [--promotion 256 128 0] [--rounds 3]
    python3 bench/experiments/fp8x/l2_promotion_ab.py --summarize OUT.jsonl
    (``--gemm 8192x8192x8192:128x256x64x3x8 ...`` also times examples/kernels/matmul_tma.py the same way)

Each JSON line: round, D, causal, N, promotion (bytes, 0 = none), variant, graph_ms, tflops. The summary prints
per point and setting the median over rounds, the best fp16 and fp8 and their ratio (issue 27 wants >= 1.3).
Nothing here is a test (docs/attention.md, "fp8 against our fp16").
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)

PROMOTION = {0: 0, 64: 1, 128: 2, 256: 3}  # bytes -> CUtensorMapL2promotion


def set_promotion(nbytes: int) -> None:
    """Every host descriptor encoded from here on gets ``nbytes`` L2 promotion (KERNELC_TMA_L2_PROMOTION, read
    when a map is encoded; the caches are emptied so that every map is encoded again)."""
    from kernelc.runtime import tensor_map
    os.environ["KERNELC_TMA_L2_PROMOTION"] = "none" if nbytes == 0 else str(nbytes)
    tensor_map.clear_cache()


def graph_ms(torch, fn, target_ms=40.0):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record(); fn(); b.record(); torch.cuda.synchronize()  # noqa: E702
    calls = max(1, min(8, int(target_ms / max(a.elapsed_time(b), 1e-3))))
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    g.replay()
    torch.cuda.synchronize()
    reps = max(1, int(target_ms / max(a.elapsed_time(b) * calls, 1e-3)))
    a.record()
    for _ in range(reps):
        g.replay()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / (calls * reps)


def summarize(path: str) -> str:
    rows = [json.loads(ln) for ln in open(path) if ln.strip()]
    pts = {}
    for r in rows:
        if "graph_ms" in r:
            pts.setdefault((r["D"], r["causal"], r["N"]), {}).setdefault(r["promotion"], {}).setdefault(
                r["variant"], []).append(r["graph_ms"])
    out = []
    for (D, causal, N), by in pts.items():
        for p, vs in by.items():
            med = {v: statistics.median(ms) for v, ms in vs.items()}
            spread = max(max(ms) / min(ms) for ms in vs.values())
            f16 = {v: m for v, m in med.items() if v.startswith("fp16")}
            f8 = {v: m for v, m in med.items() if v.startswith("fp8")}
            if D == 0:  # GEMM points: the time itself
                cells = " ".join(f"{v} {m:.4f} ms" for v, m in med.items())
                out.append(f"GEMM L2 {p:>3}B: {cells} (max/min over rounds {spread:.3f})")
                continue
            flops = 4.0 * 4 * 32 * N * N * D * (0.5 if causal else 1.0)
            tf = lambda ms: flops * 1e-9 / ms  # noqa: E731
            cells = " ".join(f"{v} {tf(m):.1f}" for v, m in med.items())
            ratio = min(f16.values()) / min(f8.values()) if f16 and f8 else None
            out.append(f"D={D} causal={int(causal)} N={N} L2 {p:>3}B: {cells} | fp8/fp16 "
                       f"{'-' if ratio is None else f'{ratio:.3f}'} (max/min over rounds {spread:.3f})")
    return "\n".join(out)


def _gemms(torch, args, out, t0) -> int:
    """matmul_tma at each ``--gemm`` point, the promotions rotating as for attention; lines with D=0, causal=False,
    N=M, variant 'gemm_BMxBNxBKxSxW@MxNxK' (the summary prints them as their own points)."""
    from examples.kernels import matmul_tma as MT
    k = 0
    for spec in args.gemm:
        size, cfg = spec.split(":")
        M, N, K = (int(x) for x in size.split("x"))
        bm, bn, bk, st, w = (int(x) for x in cfg.split("x"))
        torch.manual_seed(0)
        a = torch.randn(M, K, device="cuda", dtype=torch.float16)
        b = torch.randn(K, N, device="cuda", dtype=torch.float16)
        fn = lambda: MT.matmul_tma(a, b, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk,  # noqa: E731
                                   num_stages=st, num_warps=w)
        ref = a @ b
        for rnd in range(args.rounds):
            if time.time() - t0 > args.budget_s:
                break
            order = args.promotion[k % len(args.promotion):] + args.promotion[:k % len(args.promotion)]
            k += 1
            for p in order:
                set_promotion(p)
                row = dict(round=rnd, D=0, causal=False, N=M, promotion=p, variant=f"gemm_{cfg}@{size}")
                try:
                    if rnd == 0:
                        row["err"] = float((fn().float() - ref.float()).abs().max())
                    row["graph_ms"] = graph_ms(torch, fn)
                    row["tflops"] = 2.0 * M * N * K * 1e-9 / row["graph_ms"]
                except Exception as e:  # noqa: BLE001
                    row["error"] = f"{type(e).__name__}: {e}"[:300]
                out.write(json.dumps(row) + "\n")
                out.flush()
                print(json.dumps(row), flush=True)
        set_promotion(128)
        del a, b, ref
    return k


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--summarize"]:
        print(summarize(argv[1]))
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seq", type=int, nargs="+", default=[4096])
    ap.add_argument("--head-dim", type=int, nargs="+", default=[128, 64])
    ap.add_argument("--causal", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--promotion", type=int, nargs="+", default=[256, 128, 0], choices=sorted(PROMOTION))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=1e9)
    ap.add_argument("--gemm", nargs="*", default=[], metavar="MxNxK:BMxBNxBKxSxW",
                    help="also examples/kernels/matmul_tma.py (fp16, host descriptors) at these sizes and configs")
    ap.add_argument("--no-attention", action="store_true")
    args = ap.parse_args(argv)
    import torch
    from examples.kernels import attention as A
    from examples.kernels import attention_fa3 as AF
    from examples.kernels import attention_tma as AT
    t0 = time.time()
    out = open(args.out, "a")
    k = 0
    if args.gemm:
        k = _gemms(torch, args, out, t0)
    for N in ([] if args.no_attention else args.seq):
        for D in args.head_dim:
            for causal in map(bool, args.causal):
                if time.time() - t0 > args.budget_s:
                    print("budget: stopped", flush=True)
                    break
                torch.manual_seed(0)
                q, kk, v = (torch.randn(4, 32, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
                (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in (q, kk, v))
                v8t = v8.transpose(-1, -2).contiguous()
                scale = D ** -0.5
                fns = {
                    "fp16_ptr": lambda: A.attention_fwd(q, kk, v, causal, scale),
                    "fp16_tma": lambda: AT.attention(q, kk, v, causal, scale),
                    "fp16_fa3": lambda: AF.attention(q, kk, v, causal, scale),
                    "fp8_ptr": lambda: A.attention_fp8(q8, k8, v8t, qs, ks, vs, causal, scale),
                    "fp8_fa3": lambda: AF.attention_fp8(q8, k8, v8t, qs, ks, vs, causal, scale),
                }
                ref = torch.nn.functional.scaled_dot_product_attention(q, kk, v, is_causal=causal, scale=scale)
                for rnd in range(args.rounds):
                    order = args.promotion[k % len(args.promotion):] + args.promotion[:k % len(args.promotion)]
                    k += 1
                    for p in order:
                        set_promotion(p)
                        for name, fn in fns.items():
                            row = dict(round=rnd, D=D, causal=causal, N=N, promotion=p, variant=name)
                            try:
                                if rnd == 0:  # each setting's output against SDPA once
                                    o = fn().float()
                                    row["err"] = float((o - ref.float()).abs().max())
                                row["graph_ms"] = graph_ms(torch, fn)
                                flops = 4.0 * 4 * 32 * N * N * D * (0.5 if causal else 1.0)
                                row["tflops"] = flops * 1e-9 / row["graph_ms"]
                            except Exception as e:  # noqa: BLE001 -- one failing variant must not hide the rest
                                row["error"] = f"{type(e).__name__}: {e}"[:300]
                            line = json.dumps(row)
                            out.write(line + "\n")
                            out.flush()
                            print(line, flush=True)
                set_promotion(128)
                del q, kk, v, q8, k8, v8, v8t, ref
    out.close()
    print(f"done in {time.time() - t0:.1f} s", flush=True)
    print(summarize(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
