"""fp8 attention forward at head dim 64 (issue 27): launch configs of the pointer forward (``attention.py``) and the
FA3-order forward (``attention_fa3.py``) against the current defaults and our fp16 forwards, in ONE process on a GPU.

    python3 bench/experiments/fp813/d64_ab.py --out OUT.jsonl [--seq 4096] [--causal 0 1] [--rounds 3]
        [--budget-s 88] [--compile-budget-s 60] [--only SUBSTRING ...] [--device cpu]
    python3 bench/experiments/fp813/d64_ab.py --summarize OUT.jsonl

B=4, H=32, D=64. Every variant is compiled and its output checked once first (fp16 against SDPA on the same inputs,
fp8 against SDPA on the dequantised inputs: max and mean error, and the bound of tests/language/
test_attention_interpreter.py, ``2^-4 max|V| + 1e-2``), then timed as a CUDA graph of its calls (GPU time), the
variants' order rotating each round. Each JSON line: round, causal, N, variant, graph_ms, tflops (or err/err_mean/ok,
or error). The summary prints per point the median TFLOP/s over rounds, max/min over rounds, and best fp8 / best fp16.
Nothing here is a test (docs/attention.md, "fp8 at head dim 64: 64-row programs of 128 keys").
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "fp8x"))

D = 64


def variants(causal):
    """name -> (kind, kwargs): kind 'ptr16', 'fa3_16', 'tma16', 'ptr8', 'fa3_8'; kwargs go to the launcher."""
    cfg = lambda bm, bn, w, s: dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=w, num_stages=s)  # noqa: E731
    v = {
        "fp16_ptr": ("ptr16", {}),  # default 128x64 w4 s3
        "fp16_fa3": ("fa3_16", {}),  # default 128x128 w8 s2
        "fp16_tma": ("tma16", {}),
        "fp16_ptr_64x128_s2": ("ptr16", cfg(64, 128, 4, 2)),
        "fp8_ptr": ("ptr8", {}),  # the default (128x64 w4 s3 until fp813, causal unfolded; then 64x128 w4 s3)
        "fp8_fa3": ("fa3_8", {}),  # default: 64x128 w4 s2 non-causal, 128x128 w8 s2 causal
        "fp8_ptr_64x128_s3": ("ptr8", dict(cfg(64, 128, 4, 3), fold_scale=True)),
        "fp8_ptr_64x128_s2": ("ptr8", dict(cfg(64, 128, 4, 2), fold_scale=True)),
        "fp8_ptr_64x256_s2": ("ptr8", dict(cfg(64, 256, 4, 2), fold_scale=True)),
        "fp8_ptr_128x128_w4_s2": ("ptr8", dict(cfg(128, 128, 4, 2), fold_scale=True)),
        "fp8_ptr_128x128_w8_s3": ("ptr8", dict(cfg(128, 128, 8, 3), fold_scale=True)),
    }
    if causal:
        v["fp8_ptr_fold"] = ("ptr8", dict(fold_scale=True))
        v["fp8_ptr_64x128_s3_nofold"] = ("ptr8", dict(cfg(64, 128, 4, 3), fold_scale=False))
        v["fp8_ptr_64x128_s3_lpt"] = ("ptr8", dict(cfg(64, 128, 4, 3), fold_scale=True, lpt=True))
        v["fp16_ptr_64x128_s2_lpt"] = ("ptr16", dict(cfg(64, 128, 4, 2), lpt=True))
    else:
        v["fp8_fa3_128x256_w8_s3"] = ("fa3_8", cfg(128, 256, 8, 3))
    return v


def summarize(path: str) -> str:
    rows = [json.loads(ln) for ln in open(path) if ln.strip()]
    pts, checks = {}, {}
    for r in rows:
        key = (r["causal"], r["N"])
        if "graph_ms" in r:
            pts.setdefault(key, {}).setdefault(r["variant"], []).append(r["graph_ms"])
        if "err" in r:
            checks.setdefault(key, {})[r["variant"]] = (r["err"], r["ok"])
        if "error" in r:
            checks.setdefault(key, {})[r["variant"]] = (r["error"][:80], False)
    out = []
    for (causal, N), vs in sorted(pts.items()):
        flops = 4.0 * 4 * 32 * N * N * D * (0.5 if causal else 1.0)
        med = {v: statistics.median(ms) for v, ms in vs.items()}
        out.append(f"D={D} N={N} causal={int(causal)}  (TFLOP/s, median over rounds; max/min time over rounds)")
        for v, m in sorted(med.items(), key=lambda kv: kv[1]):
            err, ok = checks.get((causal, N), {}).get(v, ("?", "?"))
            out.append(f"  {v:28s} {flops * 1e-9 / m:7.1f}  spread {max(vs[v]) / min(vs[v]):.3f}  err {err} ok {ok}")
        f16 = {v: m for v, m in med.items() if v.startswith("fp16")}
        f8 = {v: m for v, m in med.items() if v.startswith("fp8")}
        if f16 and f8:
            b16, b8 = min(f16, key=f16.get), min(f8, key=f8.get)
            out.append(f"  best fp8 {b8} / best fp16 {b16}: {f16[b16] / f8[b8]:.3f}; "
                       f"best fp8 / fp16 defaults' best: "
                       f"{min(f16[v] for v in ('fp16_ptr', 'fp16_fa3', 'fp16_tma') if v in f16) / f8[b8]:.3f}")
        bad = [v for v, (e, ok) in checks.get((causal, N), {}).items() if ok is not True]
        if bad:
            out.append(f"  FAILED checks or errors: {bad}")
    return "\n".join(out)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--summarize"]:
        print(summarize(argv[1]))
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--causal", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=88.0)
    ap.add_argument("--compile-budget-s", type=float, default=60.0)
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--device", default="cuda", help="cpu: a dry run of the script in the interpreter")
    args = ap.parse_args(argv)
    import torch
    from examples.kernels import attention as A
    from examples.kernels import attention_fa3 as AF
    from examples.kernels import attention_tma as AT
    from l2_promotion_ab import graph_ms
    t0 = time.time()
    out = open(args.out, "a")
    N = args.seq

    def emit(row):
        line = json.dumps(row)
        out.write(line + "\n")
        out.flush()
        if "graph_ms" not in row:  # the timings go to the file and the summary
            print(line, flush=True)

    torch.manual_seed(0)
    q, k, v = (torch.randn(4, 32, N, D, device=args.device, dtype=torch.float16) for _ in range(3))
    (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in (q, k, v))
    v8t = v8.transpose(-1, -2).contiguous()
    deq = [t.float().mul(s).to(torch.float16) for t, s in ((q8, qs), (k8, ks), (v8, vs))]
    vmax = float(deq[2].abs().max())
    scale = D ** -0.5

    def make(kind, kw, causal):
        if kind == "ptr16":
            return lambda: A.attention_fwd(q, k, v, causal, scale, **kw)
        if kind == "fa3_16":
            return lambda: AF.attention(q, k, v, causal, scale, **kw)
        if kind == "tma16":
            return lambda: AT.attention(q, k, v, causal, scale, **kw)
        if kind == "ptr8":
            return lambda: A.attention_fp8(q8, k8, v8t, qs, ks, vs, causal, scale, **kw)
        return lambda: AF.attention_fp8(q8, k8, v8t, qs, ks, vs, causal, scale, **kw)

    fns = {}  # (causal, name) -> fn; every variant compiled and checked before any timing
    refs = {}
    for causal in map(bool, args.causal):
        refs[causal] = (
            torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale).float(),
            torch.nn.functional.scaled_dot_product_attention(*deq, is_causal=causal, scale=scale).float())
    # the causal modes' variants alternate, in each mode's order of importance, so that a compile budget running
    # out costs both modes their least important variants
    lists = [[(c, n, kk) for n, kk in variants(c).items()] for c in map(bool, args.causal)]
    order = [x for tier in itertools.zip_longest(*lists) for x in tier if x is not None]
    for causal, name, (kind, kw) in order:
        ref16, ref8 = refs[causal]
        if args.only and not any(s in name for s in args.only):
            continue
        row = dict(round=-1, causal=causal, N=N, variant=name)
        if time.time() - t0 > args.compile_budget_s:
            row["error"] = "budget: not compiled"
            emit(row)
            continue
        try:
            fn = make(kind, kw, causal)
            o = fn().float()
            torch.cuda.synchronize()
            fp8 = name.startswith("fp8")
            e = (o - (ref8 if fp8 else ref16)).abs()
            row["err"], row["err_mean"] = float(e.max()), float(e.mean())
            row["ok"] = bool(row["err"] <= (2 ** -4 * vmax + 1e-2 if fp8 else 1e-2)
                             and row["err_mean"] <= (2 ** -8 * vmax if fp8 else 1e-3))
            row["at_s"] = round(time.time() - t0, 1)
            fns[(causal, name)] = fn
        except Exception as ex:  # noqa: BLE001 -- one failing variant must not hide the rest
            row["error"] = f"{type(ex).__name__}: {ex}"[:300]
        emit(row)
    del refs
    keys = list(fns)
    for rnd in range(args.rounds):
        if time.time() - t0 > args.budget_s:
            print("budget: stopped", flush=True)
            break
        r = (rnd * 7) % max(len(keys), 1)
        for causal, name in keys[r:] + keys[:r]:
            if time.time() - t0 > args.budget_s + 10:
                break
            row = dict(round=rnd, causal=causal, N=N, variant=name)
            try:
                row["graph_ms"] = graph_ms(torch, fns[(causal, name)], target_ms=20.0)
                row["tflops"] = 4.0 * 4 * 32 * N * N * D * (0.5 if causal else 1.0) * 1e-9 / row["graph_ms"]
            except Exception as ex:  # noqa: BLE001
                row["error"] = f"{type(ex).__name__}: {ex}"[:300]
            emit(row)
    out.close()
    print(f"done in {time.time() - t0:.1f} s", flush=True)
    print(summarize(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
