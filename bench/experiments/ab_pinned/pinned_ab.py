"""Time example kernels at pinned launch configs in one source tree, so two trees (e.g. main and the commit
before a change) can be compared config by config, without autotuning picking differently between runs.

    cd TREE && PYTHONPATH=$PWD python3 /path/to/pinned_ab.py --out TREE.json [--rounds 5]
    python3 pinned_ab.py --compare A.json B.json [C.json ...]   # ratios B/A per entry, medians over files

Each entry: the example's wrapper called with an explicit config (no autotuning), timed with CUDA events
(median of ``--rounds`` rounds of ``rep`` launches after a warm-up); the torch reference (cuBLAS / SDPA) is
timed in the same process as the control. Used for issue 21's "no bench_kernels regression" A/B.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys


def _time(fn, rep, rounds):
    import torch
    fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(rounds):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(rep):
            fn()
        e.record()
        torch.cuda.synchronize()
        out.append(s.elapsed_time(e) / rep)
    return statistics.median(out)


def entries():
    import importlib
    import torch
    mm = [(bm, bn, w, s) for bm, bn, w, s in ((128, 128, 8, 4), (128, 256, 8, 3), (256, 128, 8, 3), (128, 128, 4, 4))]
    for n in (8192, 4096):   # 4096: the fp16 rows two-pair A/Bs left unresolved (s15 R1, s17 R2b)
        for mod, fn_name in (("matmul_persistent", "matmul_persistent"),
                             ("matmul_persistent", "matmul_descriptor_persistent")):
            for dt in (torch.float16, torch.bfloat16):
                for bm, bn, w, s in mm:
                    cfg = dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=64, GROUP_SIZE_M=8, num_warps=w,
                               num_stages=s)
                    yield (f"{fn_name} {str(dt)[6:]} {n} {bm}x{bn} w{w} s{s}", mod, fn_name, cfg, ("mm", n, dt))
    for dt in (torch.bfloat16, torch.float16):
        for bm, bn, w in ((128, 128, 4), (128, 128, 8), (128, 256, 8), (256, 128, 8)):
            for s in (3, 4):
                cfg = dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=64, GROUP_SIZE_M=8, num_warps=w, num_stages=s)
                yield (f"matmul_tma {str(dt)[6:]} 4096 {bm}x{bn} w{w} s{s}", "matmul_tma", "matmul_tma", cfg,
                       ("mm", 4096, dt))
    # bench_kernels' fp8 row (the descriptor kernel: its wrapper takes it for these aligned operands); the
    # autotuner picked 128x256x128 w8 s3 in all four processes of s17's R1h
    for n in (8192, 4096):
        for bm, bn, w, s in ((128, 256, 8, 3), (128, 256, 8, 4)):
            cfg = dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=128, GROUP_SIZE_M=8, num_warps=w, num_stages=s)
            yield (f"matmul_fp8 e4m3 {n} {bm}x{bn}x128 w{w} s{s}", "matmul_fp8", "matmul_fp8", cfg, ("fp8", n))
    for causal in (False, True):
        for c in ((128, 128, 8, 2), (128, 64, 8, 3), (128, 128, 8, 3)):
            cfg = dict(BLOCK_M=c[0], BLOCK_N=c[1], num_warps=c[2], num_stages=c[3])
            yield (f"attention_tma fp16 4x32x4096x128 causal={int(causal)} {c}", "attention_tma", "attention", cfg,
                   ("attn", causal))


def run(out, rounds, only=()):
    import importlib
    import torch
    torch.manual_seed(0)
    res, inputs = {}, {}
    for name, mod, fn_name, cfg, kind in entries():
        if only and not any(o in name for o in only):
            continue
        try:
            f = getattr(importlib.import_module(f"examples.kernels.{mod}"), fn_name)
            if kind[0] == "mm":
                n, dt = kind[1], kind[2]
                a, b = inputs.setdefault(("mm", n, dt), (torch.randn(n, n, device="cuda", dtype=dt),
                                                          torch.randn(n, n, device="cuda", dtype=dt)))
                call, ref = (lambda: f(a, b, **cfg)), (lambda: torch.matmul(a, b))
                rep = 20 if n == 8192 else 60
            elif kind[0] == "fp8":   # as bench_kernels: B column-major, per-tensor scales, bf16 out
                n = kind[1]
                a, b, sa, sb = inputs.setdefault(kind, (
                    torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn),
                    torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t(),
                    torch.tensor(0.75, device="cuda"), torch.tensor(1.25, device="cuda")))
                call = lambda: f(a, b, sa, sb, torch.bfloat16, **cfg)  # noqa: E731
                ref = lambda: torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16, use_fast_accum=True)  # noqa
                rep = 20 if n == 8192 else 60
            else:
                q, k, v = inputs.setdefault("attn", tuple(torch.randn(4, 32, 4096, 128, device="cuda",
                                                                      dtype=torch.float16) for _ in range(3)))
                causal = kind[1]
                call = lambda: f(q, k, v, causal=causal, **cfg)  # noqa: E731
                ref = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
                rep = 20
            res[name] = {"ms": _time(call, rep, rounds), "ref_ms": _time(ref, rep, rounds)}
        except Exception as e:  # one failing entry must not hide the others
            res[name] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
        print(name, res[name], flush=True)
    json.dump({"device": torch.cuda.get_device_name(), "tree": os.getcwd(), "rounds": rounds, "rows": res},
              open(out, "w"), indent=1)


def compare(a_files, b_files):
    """Per entry: median over files of B's ms / A's ms, and the same for the torch control."""
    def load(fs):
        return [json.load(open(f))["rows"] for f in fs]
    A, B = load(a_files), load(b_files)
    # normalised: each process's time over its own control's, B over A (a process's clock state cancels)
    print(f"{'entry':58s} {'B/A time':>9s} {'control':>8s} {'normalised':>10s}")
    for name in A[0]:
        try:
            ta = statistics.median(r[name]["ms"] for r in A)
            tb = statistics.median(r[name]["ms"] for r in B)
            ca = statistics.median(r[name]["ref_ms"] for r in A)
            cb = statistics.median(r[name]["ref_ms"] for r in B)
            na = statistics.median(r[name]["ms"] / r[name]["ref_ms"] for r in A)
            nb = statistics.median(r[name]["ms"] / r[name]["ref_ms"] for r in B)
            print(f"{name:58s} {tb / ta:9.3f} {cb / ca:8.3f} {nb / na:10.3f}")
        except (KeyError, TypeError):
            print(f"{name:58s} error")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--compare", nargs="+", help="A files, then --b B files")
    ap.add_argument("--b", nargs="+")
    ap.add_argument("--only", default="", help="run only the entries whose name contains one of these (comma-separated)")
    args = ap.parse_args()
    if args.compare:
        compare(args.compare, args.b)
    else:
        sys.path.insert(0, os.getcwd())
        run(args.out, args.rounds, [o for o in args.only.split(",") if o])
