"""Tutorial 05's layer-norm forward (``_layer_norm_fwd_fused``, read from Triton's tutorial text) under real Triton
and under kernelc, with torch's layer_norm as the control column in every process (issue #20).

Each implementation runs in its own processes (kernelc through its ``triton`` alias), rounds interleaved in
alternating order. Per process and N (M = 4096 rows, fp16, the tutorial's BLOCK_SIZE and num_warps):

- ``fwd_ms``: the tutorial's ``LayerNorm.forward`` body (three allocations and the launch), CUDA events around
  one call after an L2 flush, median of 40 (as ``do_bench``);
- ``graph_us``: the kernel alone, a CUDA graph of 20 launches replayed, per launch (no host, no flush: x stays in
  L2 at these sizes, so this is the kernel's issue rate);
- the same two for ``torch.nn.functional.layer_norm`` (``ctl_*``): the control, the same code in every process;
- registers and the output's largest error against torch.

    python3 bench/experiments/tutorial_gaps/layernorm_fwd.py [--tutorials DIR] [--rounds 3] [--n 1024,2048,4096]
        [--impls triton,kernelc,kernelc:KERNELC_X=1] [--other-tree DIR] [--budget-s S]
    # writes $OUT/layernorm_fwd.json when OUT is set
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
M = 4096


def _kernel(tutorial: str):
    src = open(tutorial).read()
    keep = [ast.get_source_segment(src, n) for n in ast.parse(src).body
            if isinstance(n, ast.FunctionDef) and n.name == "_layer_norm_fwd_fused"]
    d = tempfile.mkdtemp(prefix="ln_fwd_")
    with open(os.path.join(d, "tutorial_ln_fwd.py"), "w") as f:
        f.write("import triton\nimport triton.language as tl\n\n\n@triton.jit\n" + keep[0] + "\n")
    sys.path.insert(0, d)
    import tutorial_ln_fwd
    return tutorial_ln_fwd._layer_norm_fwd_fused


def _events_ms(torch, fn, flush, reps=40):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        flush.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        ts.append((s, e))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in ts)


def _graph_us(torch, fn, calls=20, reps=15):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    g.replay()
    torch.cuda.synchronize()
    v = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        torch.cuda.synchronize()
        v.append(a.elapsed_time(b) * 1e3 / calls)
    return statistics.median(v)


def child(tutorial: str, impl: str, ns) -> dict:
    if impl.startswith("kernelc"):
        sys.path.insert(0, os.environ.get("LN_FWD_KERNELC_TREE") or ROOT)
        import kernelc.compat
        kernelc.compat.install()
    import torch
    import triton
    k = _kernel(tutorial)
    flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    out = {"impl": impl, "points": {}}
    for n in ns:
        torch.manual_seed(0)
        x = -2.3 + 0.5 * torch.randn(M, n, dtype=torch.float16, device="cuda")
        w = torch.rand(n, dtype=torch.float16, device="cuda")
        b = torch.rand(n, dtype=torch.float16, device="cuda")
        block = min(65536 // x.element_size(), triton.next_power_of_2(n))
        warps = min(max(block // 256, 1), 8)
        y0 = torch.empty_like(x)
        mean0 = torch.empty((M,), dtype=torch.float32, device="cuda")
        rstd0 = torch.empty((M,), dtype=torch.float32, device="cuda")

        def fwd():  # LayerNorm.forward of the tutorial: what it allocates and launches
            y = torch.empty_like(x)
            mean = torch.empty((M,), dtype=torch.float32, device=x.device)
            rstd = torch.empty((M,), dtype=torch.float32, device=x.device)
            k[(M,)](x, y, w, b, mean, rstd, x.stride(0), n, 1e-5, BLOCK_SIZE=block, num_warps=warps, num_ctas=1)
            return y

        def kern():
            k[(M,)](x, y0, w, b, mean0, rstd0, x.stride(0), n, 1e-5, BLOCK_SIZE=block, num_warps=warps,
                    num_ctas=1)

        def ctl():
            return torch.nn.functional.layer_norm(x, (n,), w, b, 1e-5)

        ref = ctl()
        err = (fwd().float() - ref.float()).abs().max().item()
        row = {"block": block, "num_warps": warps, "max_err": err,
               "fwd_ms": _events_ms(torch, fwd, flush), "ctl_ms": _events_ms(torch, ctl, flush),
               "graph_us": _graph_us(torch, kern), "ctl_graph_us": _graph_us(torch, ctl)}
        try:
            ck = k.warmup(x, y0, w, b, mean0, rstd0, x.stride(0), n, 1e-5, BLOCK_SIZE=block, num_warps=warps,
                          num_ctas=1, grid=(1,))
            ck._init_handles()
            row["regs"], row["spills"] = ck.n_regs, ck.n_spills
        except Exception as e:  # the timings stand without it
            row["regs"] = f"{type(e).__name__}: {e}"[:200]
        out["points"][str(n)] = row
        print(impl, n, json.dumps(row), flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tutorials", default=os.path.join(ROOT, ".ext", "tutorials"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", default="1024,2048,4096")
    ap.add_argument("--impls", default="triton,kernelc",
                    help="comma-separated: triton, kernelc, or kernelc:KEY=VALUE[:KEY=VALUE] (kernelc under knobs)")
    ap.add_argument("--other-tree", help="another checkout's kernelc as one more implementation, kernelc_other")
    ap.add_argument("--triton-site")
    ap.add_argument("--budget-s", type=float, default=1e9, help="start no process after this many seconds")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    tut = os.path.join(os.path.abspath(a.tutorials), "05-layer-norm.py")
    ns = [int(v) for v in a.n.split(",")]
    if a.child:
        print("RESULT " + json.dumps(child(tut, a.child.split(":")[0], ns)))
        return 0
    impls = a.impls.split(",") + (["kernelc_other"] if a.other_tree else [])
    runs: dict = {i: [] for i in impls}
    t0 = time.perf_counter()
    for rnd in range(a.rounds):
        for impl in (impls if rnd % 2 == 0 else impls[::-1]):
            if time.perf_counter() - t0 > a.budget_s:
                print(f"--budget-s {a.budget_s:g} passed: {impl} round {rnd + 1} not started", flush=True)
                continue
            env = dict(os.environ, KERNELC_CACHE_DIR=tempfile.mkdtemp(prefix="kc_ln_fwd_"))
            for kv in impl.split(":")[1:]:
                key, val = kv.split("=", 1)
                env[key] = val
            if impl == "kernelc_other":
                env["LN_FWD_KERNELC_TREE"] = os.path.abspath(a.other_tree)
            if impl == "triton" and a.triton_site:
                env["PYTHONPATH"] = a.triton_site + os.pathsep + env.get("PYTHONPATH", "")
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--tutorials", a.tutorials, "--n", a.n,
                                "--child", impl], env=env, capture_output=True, text=True, timeout=120)
            res = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
            if p.returncode or not res:
                print(f"{impl}: failed\n{p.stderr[-2000:]}", flush=True)
                continue
            runs[impl].append(json.loads(res[-1][7:])["points"])
            _write(runs)
    # per point: median over rounds; x / Triton for the kernel (graph) and the tutorial's call (events),
    # and each process's control against the Triton process's
    print(f"{'N':>6s} {'impl':36s} {'graph_us':>9s} {'/triton':>8s} {'ctl/tri':>8s} {'fwd_ms':>9s} {'/triton':>8s} "
          f"{'ctl/tri':>8s} regs err")
    for n in ns:
        med = {}
        for impl, rr in runs.items():
            rows = [r[str(n)] for r in rr if str(n) in r]
            if rows:
                med[impl] = {c: statistics.median(r[c] for r in rows)
                             for c in ("graph_us", "ctl_graph_us", "fwd_ms", "ctl_ms")}
                med[impl]["regs"], med[impl]["err"] = rows[-1].get("regs"), max(r["max_err"] for r in rows)
                med[impl]["spread"] = max(r["graph_us"] for r in rows) / min(r["graph_us"] for r in rows)
        t = med.get("triton")
        for impl, m in med.items():
            rel = (lambda c: t[c] / m[c]) if t else (lambda c: float("nan"))
            print(f"{n:6d} {impl:36s} {m['graph_us']:9.2f} {rel('graph_us'):8.3f} {rel('ctl_graph_us'):8.3f} "
                  f"{m['fwd_ms']:9.4f} {rel('fwd_ms'):8.3f} {rel('ctl_ms'):8.3f} {m['regs']} {m['err']:.3g} "
                  f"(graph spread x{m['spread']:.3f})", flush=True)
    return 0


def _write(runs) -> None:
    d = os.environ.get("OUT")
    if d:
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "layernorm_fwd.json"), "w") as f:
            json.dump(runs, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
