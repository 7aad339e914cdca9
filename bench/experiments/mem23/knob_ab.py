"""A compile knob's effect on descriptor GEMMs and attention forwards, both builds in ONE process, launches interleaved.

Each workload's example module (examples/kernels/) is loaded four times as separate modules (own JIT functions, own
loaded cubins): ``base#1``, ``base#2`` (compiled under the process's environment) and ``var#1``, ``var#2`` (compiled
under ``--env K=V``: the first call of each copy runs inside that environment; the knob is part of the cache key).
A round times every copy (``rep`` calls between two CUDA events, a GPU spin first), in an order rotated every two
rounds and reversed every other round (mem22/ab_one_process.py's scheme); speed var over base is the mean of per-round
log ratios (sum of the two copies each) with a 95% t interval, and each build's A/A (copy 1 over copy 2) the same way.
Outputs of every copy are checked against the first base copy's.

    python3 bench/experiments/mem23/knob_ab.py --env KERNELC_TMA_ELECT=tid --work mm_tma attn_tma --rounds 30 --out X.json
    python3 bench/experiments/mem23/knob_ab.py --env KERNELC_TMA_ELECT=tid --check    # CPU: PTX of both builds, no GPU
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import math
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "mem22"))

MM = dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64, GROUP_SIZE_M=8, num_warps=4, num_stages=3)
FP8 = dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=128, GROUP_SIZE_M=8, num_warps=8, num_stages=3)
# name -> (module, kernel names in it, operands(torch) -> args, call(mod, *args), rep, CPU signature for --check)
WORKS = {
    "mm_tma": ("matmul_tma", "mm", lambda m, a, b: m.matmul_tma(a, b, **MM), 20),
    "mm_pers": ("matmul_persistent", "mm", lambda m, a, b: m.matmul_persistent(a, b, **MM), 20),
    # the same persistent GEMM on descriptors made in the kernel (bench_kernels' matmul_device_desc; session 24)
    "mm_ddesc": ("matmul_persistent", "mm", lambda m, a, b: m.matmul_descriptor_persistent(a, b, **MM), 20),
    # examples' masked pointer GEMM at its default config (128x256x64 w8 s3): on sm_90a its loads become TMA copies on
    # descriptors the compiler makes in the kernel (session 24)
    "mm_masked": ("matmul", "mm", lambda m, a, b: m.matmul_masked(a, b), 20),
    # bench_kernels' fp8 row: the descriptor kernel (maps made in the kernel), bf16 out, 4096^3 (session 24)
    "mm_fp8_tma": ("matmul_fp8", "fp8", lambda m, a, b, sa, sb: m.matmul_fp8(a, b, sa, sb, **FP8), 20),
    "attn_tma": ("attention_tma", "attn", lambda m, q, k, v: m.attention(q, k, v, causal=False), 4),
    "attn_tma_causal": ("attention_tma", "attn", lambda m, q, k, v: m.attention(q, k, v, causal=True), 6),
    "attn": ("attention", "attn", lambda m, q, k, v: m.attention(q, k, v, causal=False), 4),
    "attn_causal": ("attention", "attn", lambda m, q, k, v: m.attention(q, k, v, causal=True), 6),
    # bench_kernels' softmax and layernorm rows (loops with block reductions: KERNELC_REDUCE_SCRATCH=loops)
    "softmax_4096": ("softmax", "sm4096", lambda m, x: m.softmax(x), 20),
    "softmax_8192x1024": ("softmax", "sm8192", lambda m, x: m.softmax(x), 20),
    "layernorm": ("layernorm", "ln", lambda m, x, w, b: m.layer_norm(x, w, b), 20),
    # attention_bwd's D=128 default (ds: dK/dV writing dS^T, then the dQ GEMM, whose TMA loop holds one dot and so
    # takes thread 0 under KERNELC_TMA_ELECT=auto; added after session 23, dq_ds_sass.py): the whole backward
    "bwd128_ds": ("attention_bwd", "bwd", lambda m, *a: m.attention_bwd(*a, False, 128 ** -0.5, dq_mode="ds"), 2),
    "bwd128_ds_causal": ("attention_bwd", "bwd_causal",
                         lambda m, *a: m.attention_bwd(*a, True, 128 ** -0.5, dq_mode="ds"), 3),
}


class _Environ:
    def __init__(self, env):
        self.env, self.old = env, {}

    def __enter__(self):
        for k, v in self.env.items():
            self.old[k] = os.environ.get(k)
            os.environ[k] = v

    def __exit__(self, *exc):
        for k, v in self.old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def load_copy(module: str, tag: str):
    from examples.kernels import __file__ as pkg
    path = os.path.join(os.path.dirname(pkg), module + ".py")
    spec = importlib.util.spec_from_file_location(f"examples.kernels.{module}_{tag}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def operands(kind, torch, seq, device="cuda"):
    torch.manual_seed(0)
    if kind == "mm":
        return [torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
    if kind == "fp8":   # a [M, K] row-major, b [K, N] column-major (as bench_kernels' matmul_fp8), scalar scales
        a = torch.randn(4096, 4096, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(4096, 4096, device="cuda").to(torch.float8_e4m3fn).t()
        return [a, b, torch.tensor(0.75, device="cuda"), torch.tensor(1.25, device="cuda")]
    if kind == "sm4096":
        return [torch.randn(4096, 4096, device="cuda")]
    if kind == "sm8192":
        return [torch.randn(8192, 1024, device="cuda")]
    if kind == "ln":
        return [torch.randn(4096, 8192, device="cuda", dtype=torch.float16),
                torch.rand(8192, device="cuda", dtype=torch.float16), torch.rand(8192, device="cuda", dtype=torch.float16)]
    if kind in ("bwd", "bwd_causal"):   # do, q, k, v, then o and lse of the forward on q, k, v
        # o and lse from attention_fwd, not random: with a random lse, P = exp2(qk * scale - lse) reaches ~1e3 and
        # dQ ~1e5 at N 4096 (fp32, bench/experiments/mem24/bwd_operands.py), past fp16's 65504: an inf in dq, a NaN
        # in the check below (call P24, session 24)
        from examples.kernels.attention import attention_fwd
        do, q, k, v = [torch.randn(1, 32, seq, 128, device=device, dtype=torch.float16) for _ in range(4)]
        o, lse = attention_fwd(q, k, v, kind == "bwd_causal", 128 ** -0.5, return_lse=True)
        return [do, q, k, v, o, lse]
    return [torch.randn(1, 32, seq, 128, device="cuda", dtype=torch.float16) for _ in range(3)]


def _ci(logs):
    n, m = len(logs), statistics.fmean(logs)
    if n < 2:
        return [math.exp(m)] * 3
    t = 1.96 if n > 60 else {2: 12.71, 3: 4.30, 4: 3.18, 5: 2.78, 6: 2.57, 8: 2.36, 10: 2.26, 15: 2.14,
                             20: 2.09, 30: 2.05, 40: 2.02}.get(n, 2.0)
    h = t * statistics.stdev(logs) / math.sqrt(n)
    return [math.exp(m), math.exp(m - h), math.exp(m + h)]


def speed(rounds, a, b):
    """time(a) / time(b) per round: geomean and 95% interval (> 1: b faster)."""
    g, lo, hi = _ci([math.log(sum(r[x] for x in a) / sum(r[x] for x in b)) for r in rounds])
    return {"geomean": round(g, 5), "ci95": [round(lo, 5), round(hi, 5)], "n": len(rounds)}


def run_work(name, env, rounds, torch, seq, sleep_ms=2.0):
    module, kind, call, rep = WORKS[name]
    slots = [(f"{b}#{i}", load_copy(module, f"{b}{i}"), env if b == "var" else {}) for i in (1, 2)
             for b in ("base", "var")]
    args = operands(kind, torch, seq)
    want = None
    errs = {}
    for tag, mod, e in slots:   # first call: compiles under the slot's environment
        with _Environ(e):
            out = call(mod, *args)
        torch.cuda.synchronize()
        out = out[0] if isinstance(out, tuple) else out
        if want is None:
            want = out.float()
            if not torch.isfinite(want).all():
                raise RuntimeError(f"{name} {tag}: {(~torch.isfinite(want)).sum().item()} of the output's "
                                   f"{want.numel()} values are not finite")
        errs[tag] = ((out.float() - want).abs().max() / (want.abs().max() + 1e-6)).item()
        if not errs[tag] < 0.02:
            raise RuntimeError(f"{name} {tag}: max |out - base#1| / max |base#1| = {errs[tag]}")
    ev = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731
    per_round = []
    for r in range(rounds):
        k = (r // 2) % len(slots)
        order = slots[k:] + slots[:k]
        order = order if r % 2 == 0 else order[::-1]
        torch.cuda._sleep(int(sleep_ms * 2e6))
        marks = []
        for tag, mod, _ in order:
            s, e = ev(), ev()
            s.record()
            for _ in range(rep):
                call(mod, *args)
            e.record()
            marks.append((tag, s, e))
        torch.cuda.synchronize()
        per_round.append({t: s.elapsed_time(e) / rep for t, s, e in marks})
    return {"work": name, "env": env, "rep": rep, "rel_err_vs_base1": errs,
            "ms_median": {t: round(statistics.median(r[t] for r in per_round), 5) for t, _, _ in slots},
            "var_over_base": speed(per_round, ["base#1", "base#2"], ["var#1", "var#2"]),
            "base_aa": speed(per_round, ["base#2"], ["base#1"]), "var_aa": speed(per_round, ["var#2"], ["var#1"]),
            "rounds_ms": per_round}


def check(env, works):
    """CPU: each workload's kernel compiled for sm_90a under both environments; PTX hashes and registers."""
    from kernelc.compiler.compiler import compile as kcompile
    sigs = {
        "mm": ("matmul_tma_kernel", {"a_desc": "tensordesc<bf16[128, 64]>", "b_desc": "tensordesc<bf16[64, 128]>",
                                     "c_desc": "tensordesc<bf16[128, 128]>", "M": "i32", "N": "i32", "K": "i32"},
               {k: v for k, v in MM.items() if k.isupper()}, 4, 3),
    }
    for name in works:
        module, kind, _, _ = WORKS[name]
        if module not in ("matmul_tma",):
            print(f"{name}: no CPU signature here (GPU only)")
            continue
        kname, sig, cx, nw, ns = sigs[kind]
        out = []
        for e in ({}, env):
            with _Environ(e):
                mod = load_copy(module, "chk" + str(len(out)))
                ck = kcompile(getattr(mod, kname), sig, cx, "sm_90a", nw, ns, divisibility={n: 16 for n in sig})
            out.append((ck.n_regs, hashlib.sha1(ck.asm["ptx"].encode()).hexdigest()[:12]))
        print(f"{name}: base {out[0]} var {out[1]}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", action="append", default=[], help="K=V, the variant's compile knobs")
    ap.add_argument("--work", nargs="+", default=["mm_tma"], choices=sorted(WORKS))
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--seq", type=int, default=4096, help="attention's N_CTX (batch 1, 32 heads, head dim 128)")
    ap.add_argument("--out")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    env = dict(kv.split("=", 1) for kv in a.env)
    if a.check:
        from kernelc.compat import install
        install()
        check(env, a.work)
        return 0
    import torch
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "env": env, "results": []}
    t0 = time.time()
    for w in a.work:
        try:
            r = run_work(w, env, a.rounds, torch, a.seq)
        except Exception as e:   # one failing workload must not hide the others
            import traceback
            traceback.print_exc()
            r = {"work": w, "error": f"{type(e).__name__}: {str(e)[:300]}"}
        res["results"].append(r)
        if a.out:
            with open(a.out, "w") as f:
                json.dump(res, f, indent=1)
        if "error" not in r:
            v, b, x = r["var_over_base"], r["base_aa"], r["var_aa"]
            print(f"{w} ({time.time() - t0:.0f} s): ms {r['ms_median']}; var/base speed {v['geomean']:.4f} "
                  f"[{v['ci95'][0]:.4f}, {v['ci95'][1]:.4f}]; A/A base {b['geomean']:.4f} [{b['ci95'][0]:.4f}, "
                  f"{b['ci95'][1]:.4f}] var {x['geomean']:.4f} [{x['ci95'][0]:.4f}, {x['ci95'][1]:.4f}]", flush=True)
        else:
            print(f"{w}: {r['error']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
