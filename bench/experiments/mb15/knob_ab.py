"""A compile-time knob's two values timed against each other in ONE process: cubins of both, launches alternated.

    python3 bench/experiments/mb15/knob_ab.py --knob KERNELC_UNIFORM_MASKS --a onepass --b all \\
        --cases attn,attn_causal,attn_tma_causal,layernorm,matmul --budget 70 --out DIR

Why one process: a process per value (kernels_abba.py) pays torch's import and every compile four times and
reads its figure against the Triton control of that process; here each case is compiled once per value and the
two cubins run alternately, rounds A B B A, until the time budget is spent (all cases get the same number of
rounds). The launcher's in-memory cache has no compile knobs in its key, so each value's loaded kernels are
kept in a snapshot and put back into the same dict (the fast launch path holds that dict) before timing.

Per case: B/A = median over rounds of (B1+B2)/(A1+A2), and B2/A2 (the adjacent pair: in call R2 A1, which follows
another case's kernel, came out slower in four cases of five, which biases (B1+B2)/(A1+A2) towards B), and each value's own spread (median |A2/A1-1|, |B2/B1-1|),
which a B/A difference must exceed to count; whether the PTX differs at all; max |out_A - out_B|.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)


def make_cases(names):
    import torch
    from examples.kernels import attention, attention_tma, layernorm, matmul
    out = {}
    Z, H, N, D = 4, 32, 4096, 128
    if any(n.startswith("attn") for n in names):
        q, k, v = (torch.randn(Z, H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
    # bench_kernels.py's rows, at the configs it runs (attention: the wrapper's default; attention_tma: the best
    # of its four configs in bench/results/kernels.json; matmul fp16 8192: the autotuner's pick there)
    out["attn"] = lambda: (lambda: attention.attention(q, k, v, causal=False))
    out["attn_causal"] = lambda: (lambda: attention.attention(q, k, v, causal=True))
    out["attn_tma_causal"] = lambda: (lambda: attention_tma.attention(q, k, v, causal=True, BLOCK_M=128, BLOCK_N=128,
                                                                       num_warps=8, num_stages=2))
    out["attn_tma_causal_w4"] = lambda: (lambda: attention_tma.attention(q, k, v, causal=True, BLOCK_M=128,
                                                                          BLOCK_N=64, num_warps=4, num_stages=2))

    def ln():
        M, Nc = 4096, 8192
        x = torch.randn(M, Nc, device="cuda", dtype=torch.float16)
        w, b = (torch.rand(Nc, device="cuda", dtype=torch.float16) for _ in range(2))
        return lambda: layernorm.layer_norm(x, w, b)[0]
    out["layernorm"] = ln

    def mm():
        a, b = (torch.randn(8192, 8192, device="cuda", dtype=torch.float16) for _ in range(2))
        return lambda: matmul.matmul(a, b, BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64, GROUP_SIZE_M=8,
                                     num_warps=4, num_stages=3)
    out["matmul"] = mm
    return {n: out[n] for n in names}


def summarise(res, a, show=False):
    for n, c in res["cases"].items():
        rs = c.get("rounds") or []
        if not rs:
            if show:
                print(f"  {n:22s} {c.get('error', 'no rounds')}")
            continue
        ba = [(x["b1"] + x["b2"]) / (x["a1"] + x["a2"]) for x in rs]
        sa = [abs(x["a2"] / x["a1"] - 1) for x in rs]
        sb = [abs(x["b2"] / x["b1"] - 1) for x in rs]
        adj = [x["b2"] / x["a2"] for x in rs]   # adjacent timings: A1 follows another row's kernel (R2: slower)
        c.update(b_over_a_time=statistics.median(ba), b_over_a_per_round=ba, b2_over_a2=statistics.median(adj), spread_a=statistics.median(sa),
                 spread_b=statistics.median(sb), a_ms=statistics.median([(x["a1"] + x["a2"]) / 2 for x in rs]))
        if show:
            print(f"  {n:22s} time {a.b}/{a.a} {c['b_over_a_time']:.4f} B2/A2 {c['b2_over_a2']:.4f} (rounds {', '.join(f'{v:.4f}' for v in ba)}) "
                  f"own spread {a.a} {c['spread_a']:.4f} {a.b} {c['spread_b']:.4f}  {a.a} {c['a_ms']:.3f} ms "
                  f"ptx {'differs' if c['ptx_a'] != c['ptx_b'] else 'SAME'}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--knob", required=True)
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    ap.add_argument("--cases", required=True)
    ap.add_argument("--budget", type=float, default=60.0, help="seconds, compiles included")
    ap.add_argument("--rep", type=float, default=60.0, help="do_bench rep (ms) per timing")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    t0 = time.time()
    import torch
    from kernelc.runtime.launcher import _with_state, get_state
    from kernelc.testing import do_bench

    def snapshot():
        return {id(fn): (fn, dict(get_state(fn)["cache"])) for fn in list(_with_state)}

    def restore(snap):
        for fn in list(_with_state):
            c = get_state(fn)["cache"]
            c.clear()
            c.update(snap.get(id(fn), (fn, {}))[1])

    def ptx_hash(snap):
        h = hashlib.sha1()
        for _, (fn, c) in sorted(snap.items(), key=lambda kv: kv[1][0].__name__):
            for ent in c.values():
                h.update(ent.compiled.asm["ptx"].encode())
        return h.hexdigest()[:12]

    os.makedirs(a.out, exist_ok=True)
    names = a.cases.split(",")
    res = {"knob": a.knob, "a": a.a, "b": a.b, "device": torch.cuda.get_device_name(), "cases": {}}
    prepared = {}
    for n, make in make_cases(names).items():
        c0 = time.time()
        try:
            fn = make()
            snaps, outs = {}, {}
            for tag, val in (("a", a.a), ("b", a.b)):
                os.environ[a.knob] = val
                restore({})
                outs[tag] = fn().float()
                fn()
                torch.cuda.synchronize()
                snaps[tag] = snapshot()
            diff = (outs["a"] - outs["b"]).abs().max().item()
            prepared[n] = (fn, snaps)
            res["cases"][n] = {"ptx_a": ptx_hash(snaps["a"]), "ptx_b": ptx_hash(snaps["b"]),
                               "max_abs_diff_a_b": diff, "prepare_s": round(time.time() - c0, 1), "rounds": []}
            print(f"{n}: prepared in {time.time() - c0:.1f}s, ptx {'differs' if res['cases'][n]['ptx_a'] != res['cases'][n]['ptx_b'] else 'SAME'}"
                  f", max|A-B| {diff:.3g}", flush=True)
        except Exception as e:
            traceback.print_exc()
            res["cases"][n] = {"error": f"{type(e).__name__}: {e}"[:500]}
    # rounds: A B B A per case, all cases once per round, while the last round's pace fits the time left
    path = os.path.join(a.out, "knob_ab.json")
    pace, r = None, 0
    while prepared:
        left = a.budget - (time.time() - t0)
        if r >= 1 and (left <= 0 or (pace is not None and left < pace * 1.1)):
            break
        p0 = time.time()
        for n, (fn, snaps) in prepared.items():
            t = {}
            for tag, i in (("a", 1), ("b", 1), ("b", 2), ("a", 2)):
                restore(snaps[tag])
                t[f"{tag}{i}"] = do_bench(fn, warmup=10, rep=a.rep, return_mode="median")
            res["cases"][n]["rounds"].append(t)
        pace = time.time() - p0
        r += 1
        summarise(res, a)
        json.dump(res, open(path, "w"), indent=1)  # after every round: a run cut short keeps what it timed
    restore({})
    print(f"{r} rounds, {time.time() - t0:.0f}s")
    summarise(res, a, show=True)
    json.dump(res, open(path, "w"), indent=1)


if __name__ == "__main__":
    main()
