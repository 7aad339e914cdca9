"""Tutorial 06's forward under Triton 3.6 and under kernelc (several compile-knob variants) in ONE process,
each held to one autotune config, timed the same way, rounds interleaved (issue #20; a GPU is needed).

    python3 bench/experiments/tutorial_gaps/fwd06_side_by_side.py TUTORIAL_06.py --out OUT.jsonl \\
        --variants triton kernelc kernelc:KERNELC_EXP2_POLY=0 \\
        --case 64:0:fp8:64x64x3x4:2048,8192 --case 64:1:fp16:64x64x3x4:1024,2048 --rounds 3

``--case D:CAUSAL:DTYPE:BMxBNxSxW:N[,N...][:I,J...]`` (the optional last field: the indices of the ``--variants``
that run the case, default all; DTYPE fp16 or fp8: e5m2 inputs, V transposed in memory, as the
tutorial's benchmark prepares them; ``+ws`` after it: ``warp_specialize=True``, which on Hopper takes the
tutorial's device-descriptor path; else host tensor descriptors). A variant is ``triton``,
or ``kernelc`` with optional ``NAME=VALUE`` knobs after a colon (comma-separated), set in the environment while
that variant compiles and runs. Each variant has its own copy of the tutorial module (its own JIT functions and
autotuner), and the ``triton`` modules of its implementation are swapped into ``sys.modules`` around its calls
(both implementations answer ``import triton``; a lazy import inside either must find its own).

Per point and round, written as one JSON line as soon as measured (a cut run keeps what it did):
- ``graph_ms``: the call's GPU time with no host in it (CUDA graph of ``--graph-calls`` calls, replayed);
- ``flush_ms``: the tutorial's way (256 MB L2 flush, then events around one call; median of ``--flush-calls``),
  which also sees the host's time to issue a call when that is longer than the kernel;
- ``host_us``: host time to issue one call (20 back to back, GPU idle at the start);
- ``err``: largest |out - torch SDPA| of the (rounded) inputs, checked once per variant and case at N <= 4096.
The order of the variants rotates every point. ``--summarize OUT.jsonl`` prints each point's medians and
Triton / variant time ratios. Nothing here is a test (docs/triton-tutorials.md, "06 forward at
d64: fp8's exponentials").
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))


def _triton_names():
    return [n for n in sys.modules if n == "triton" or n.startswith("triton.")]


class Impl:
    """One implementation's ``triton`` modules (a snapshot of ``sys.modules``) and, for kernelc, its finder."""

    def __init__(self, name, finder=None):
        self.name, self.finder, self.mods = name, finder, {}

    def enter(self):
        for n in _triton_names():
            del sys.modules[n]
        sys.modules.update(self.mods)
        if self.finder is not None and self.finder not in sys.meta_path:
            sys.meta_path.insert(0, self.finder)

    def leave(self):
        self.mods = {n: sys.modules[n] for n in _triton_names()}  # keeps what a lazy import added
        if self.finder is not None and self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)


class Variant:
    def __init__(self, spec, impl, module, env):
        self.spec, self.impl, self.mod, self.env = spec, impl, module, env

    def __enter__(self):
        self.impl.enter()
        self._saved = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)
        return self

    def __exit__(self, *exc):
        for k, v in self._saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        self.impl.leave()
        return False


def _load_tutorial(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load_variants(tutorial, specs):
    """Variants in ``specs`` order; kernelc's modules are loaded first (its alias refuses a process that already
    imported a real Triton), then the real Triton's."""
    out = {}
    kc = Impl("kernelc")
    if any(s.split(":")[0] == "kernelc" for s in specs):
        sys.path.insert(0, ROOT)
        from kernelc.compat import alias
        alias.install()
        kc.finder = alias._finder
        try:
            import triton  # noqa: F401  (kernelc's)
            for i, s in enumerate(specs):
                if s.split(":")[0] == "kernelc":  # the knobs matter when it compiles, at its first call
                    env = dict(kv.split("=", 1) for kv in s.split(":", 1)[1].split(",")) if ":" in s else {}
                    out[s] = Variant(s, kc, _load_tutorial(tutorial, f"tut06_k{i}"), env)
        finally:  # a real Triton must not find kernelc's finder or modules
            kc.leave()
            for n in _triton_names():
                del sys.modules[n]
    if "triton" in specs:
        tr = Impl("triton")
        importlib.import_module("triton")
        assert not getattr(sys.modules["triton"], "__kernelc__", False), "kernelc's alias answered the real import"
        out["triton"] = Variant("triton", tr, _load_tutorial(tutorial, "tut06_t"), {})
        tr.leave()
    return [out[s] for s in specs]


def _pin(mod, bm, bn, s, w, pool_cache):
    tuner = mod._attn_fwd
    pool = pool_cache.setdefault(id(mod), list(tuner.configs))
    cfg = next((c for c in pool if c.kwargs.get("BLOCK_M") == bm and c.kwargs.get("BLOCK_N") == bn
                and c.num_stages == s and c.num_warps == w), None)
    if cfg is None:
        raise ValueError(f"{bm}x{bn}x{s}x{w} is not in the tutorial's config list")
    tuner.configs = [cfg]
    tuner.cache.clear()


def _inputs(torch, D, N, fp8, seed=0):
    torch.manual_seed(seed)
    q, k, v = (torch.randn((4, 32, N, D), dtype=torch.float16, device="cuda") for _ in range(3))
    if fp8:  # as the tutorial's benchmark prepares its fp8 provider
        q, k = q.to(torch.float8_e5m2), k.to(torch.float8_e5m2)
        v = v.permute(0, 1, 3, 2).contiguous().permute(0, 1, 3, 2).to(torch.float8_e5m2)
    return q, k, v


def _graph_ms(torch, fn, calls, replays):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    g.replay()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(replays):
        g.replay()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / (calls * replays)


def _flush_ms(torch, fn, cache, n):
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    torch.cuda.synchronize()
    for a, b in ev:
        cache.zero_()
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in ev)


def _host_us(torch, fn, n=20):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6


def summarize(path: str) -> str:
    """A table of a run's JSON lines: per point, each variant's median over rounds (graph_ms, flush_ms, host_us),
    and kernelc / Triton as speed (Triton's time over kernelc's) for the first two."""
    rows = [json.loads(ln) for ln in open(path) if ln.strip()]
    pts = {}
    for r in rows:
        if "error" in r:
            continue
        key = (r["head_dim"], r["causal"], r["fp8"], r.get("ws", False), r["config"], r["n_ctx"])
        pts.setdefault(key, {}).setdefault(r["variant"], []).append(r)
    med = lambda rs, m: statistics.median(x[m] for x in rs if m in x) if any(m in x for x in rs) else None  # noqa: E731
    out = []
    for key, vs in pts.items():
        D, causal, fp8, ws, cfg, N = key
        name = f"d{D} {'causal' if causal else 'non-causal'} {'fp8' if fp8 else 'fp16'}{' ws' if ws else ''} {cfg} N={N}"
        t = vs.get("triton", [])
        for v, rs in vs.items():
            g, f, h = med(rs, "graph_ms"), med(rs, "flush_ms"), med(rs, "host_us")
            tg, tf = (med(t, "graph_ms"), med(t, "flush_ms")) if t else (None, None)
            spread = (max(x["graph_ms"] for x in rs if "graph_ms" in x) / min(x["graph_ms"] for x in rs if "graph_ms" in x)
                      if g else None)
            fmt = lambda x, p=4: "-" if x is None else f"{x:.{p}f}"  # noqa: E731
            out.append(f"{name:44s} {v:28s} n={len(rs)} graph {fmt(g)} ms (max/min {fmt(spread, 3)}) "
                       f"flush {fmt(f)} ms host {fmt(h, 1)} us  T/x graph {fmt(tg / g if tg and g else None, 3)} "
                       f"flush {fmt(tf / f if tf and f else None, 3)}  err {fmt(next((x['err'] for x in rs if 'err' in x), None), 3)}")
    return "\n".join(out)


def main(argv=None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--summarize"]:
        print(summarize(argv[1]))
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("tutorial")
    ap.add_argument("--out", required=True, help="JSON lines, one per point and round")
    ap.add_argument("--variants", nargs="+", default=["triton", "kernelc"])
    ap.add_argument("--case", action="append", required=True, help="D:CAUSAL:DTYPE:BMxBNxSxW:N[,N...][:VARIANT_INDICES]")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--graph-calls", type=int, default=4)
    ap.add_argument("--graph-ms", type=float, default=60.0, help="about this much GPU time per graph_ms reading")
    ap.add_argument("--flush-calls", type=int, default=15)
    ap.add_argument("--budget-s", type=float, default=1e9, help="stop starting new rounds after this many seconds")
    args = ap.parse_args(argv)
    t_start = time.time()
    variants = load_variants(os.path.abspath(args.tutorial), args.variants)
    import torch
    cache = torch.empty(256 * 1024 * 1024, dtype=torch.int8, device="cuda")
    cases = []
    for c in args.case:
        d, causal, dt, cfg, ns, *sel = c.split(":")
        which = [variants[int(i)] for i in sel[0].split(",")] if sel else variants
        cases.append((int(d), bool(int(causal)), dt.split("+")[0] == "fp8", dt.endswith("+ws"),
                      tuple(int(x) for x in cfg.split("x")), [int(n) for n in ns.split(",")], which))
    out = open(args.out, "a")
    pools, checked, est = {}, set(), {}
    sm_scale = 1.3
    k = 0
    for rnd in range(args.rounds):
        if time.time() - t_start > args.budget_s:
            print(f"budget: stopped before round {rnd}", flush=True)
            break
        for (D, causal, fp8, ws, (bm, bn, s, w), ns, which) in cases:
            for N in ns:
                q, kk, v = _inputs(torch, D, N, fp8)
                order = which[k % len(which):] + which[:k % len(which)]
                k += 1
                for var in order:
                    row = {"round": rnd, "variant": var.spec, "head_dim": D, "causal": causal, "fp8": fp8,
                           "ws": ws, "config": f"{bm}x{bn}x{s}x{w}", "n_ctx": N}
                    try:
                        with var:
                            _pin(var.mod, bm, bn, s, w, pools)
                            fn = lambda: var.mod.attention(q, kk, v, causal, sm_scale, ws)  # noqa: E731
                            t0 = time.time()
                            o = fn()
                            torch.cuda.synchronize()
                            row["first_call_s"] = round(time.time() - t0, 3)
                            key = (var.spec, D, causal, fp8, ws, N)
                            if key not in checked and N <= 4096:  # SDPA's reference of these views materialises N x N
                                ref = torch.nn.functional.scaled_dot_product_attention(
                                    q.half(), kk.half(), v.half(), is_causal=causal, scale=sm_scale)
                                row["err"] = float((o.float() - ref.float()).abs().max())
                                checked.add(key)
                            guess = est.get((D, causal, fp8, ws, N, f"{bm}x{bn}"), None)
                            if guess is None:
                                torch.cuda.synchronize()
                                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                                a.record(); fn(); fn(); b.record(); torch.cuda.synchronize()  # noqa: E702
                                guess = est[(D, causal, fp8, ws, N, f"{bm}x{bn}")] = a.elapsed_time(b) / 2
                            calls = max(1, min(args.graph_calls, int(args.graph_ms / max(guess, 1e-3))))
                            replays = max(1, int(args.graph_ms / max(guess * calls, 1e-3)))
                            try:
                                row["graph_ms"] = _graph_ms(torch, fn, calls, min(replays, 50))
                            except Exception as e:  # noqa: BLE001 -- a capture failure is a result too
                                row["graph_error"] = f"{type(e).__name__}: {e}"[:200]
                            row["flush_ms"] = _flush_ms(torch, fn, cache, args.flush_calls)
                            row["host_us"] = _host_us(torch, fn)
                    except Exception as e:  # noqa: BLE001
                        row["error"] = f"{type(e).__name__}: {e}"[:400]
                        torch.cuda.empty_cache()
                    flops = 4.0 * 4 * 32 * N * N * D * (0.5 if causal else 1.0)
                    for m in ("graph_ms", "flush_ms"):
                        if m in row:
                            row[m.replace("_ms", "_tflops")] = flops * 1e-12 / (row[m] * 1e-3)
                    line = json.dumps(row)
                    out.write(line + "\n")
                    out.flush()
                    print(line, flush=True)
                del q, kk, v
    out.close()
    print(f"done in {time.time() - t_start:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
